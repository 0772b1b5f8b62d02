#include "gpu.h"
#include "native_layout.h"

#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* The guard regions before and after C: as large as C, at least 4 KiB, at most 1 MiB each, so a
 * kernel writing up to a tile or so out of bounds writes into them, not into other buffers
 * (where it would spoil later checks). */
#define GUARD_MIN (4L << 10)
#define GUARD_MAX (1L << 20)
#define GUARD_PATTERN 0xA5

int bt_target_from_device(const bt_device_info *info, bt_target *t, bt_err *err)
{
    char arch[16];
    int cc = info->cc_major * 10 + info->cc_minor;
    /* Hopper's wgmma and setmaxnreg exist only in the architecture-specific sm_90a target. */
    snprintf(arch, sizeof arch, cc == 90 ? "sm_90a" : "sm_%d", cc);
    if (bt_target_from_arch(arch, t))
        return bt_fail(err, "%s: compute capability %d.%d (%s) is not supported", info->name,
                       info->cc_major, info->cc_minor, arch);
    t->smem_optin = info->smem_optin;
    t->sm_count = info->sm_count;
    return 0;
}

static int load_support(bt_gpu *g, bt_jit *jit, bt_err *err)
{
    int rc = -1;
    void *cubin = NULL;
    size_t len;
    bt_jit_job job = {.name = "support kernels", .source = "#include \"support.cuh\"\n"};
    if (bt_jit_run(jit, &job, 1, 1, NULL, NULL, err))
        goto out;
    if (job.status == BT_JIT_FAILED) {
        bt_fail(err, "support kernels failed to compile: %s", job.log ? job.log : "(no log)");
        goto out;
    }
    if (bt_jit_read_cubin(&job, &cubin, &len, err))
        goto out;
    BT_CU(&g->cu, cuModuleLoadData(&g->support, cubin), err, "loading the support kernels");
    static const struct {
        size_t off;
        const char *name;
    } fns[] = {
        {offsetof(bt_gpu, fill_inputs), "bt_fill_inputs"}, {offsetof(bt_gpu, ref_gemm), "bt_ref_gemm"},
        {offsetof(bt_gpu, compare), "bt_compare"},         {offsetof(bt_gpu, guard_check), "bt_guard_check"},
    };
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
        BT_CU(&g->cu, cuModuleGetFunction((CUfunction *)((char *)g + fns[i].off), g->support, fns[i].name),
              err, fns[i].name);
    rc = 0;
out:
    free(cubin);
    bt_jit_job_clear(&job);
    return rc;
}

int bt_gpu_open(bt_gpu *g, int ordinal, const char *cache_dir, int jit_mode, int with_support, bt_jit **jit,
                bt_err *err)
{
    int rc = -1;
    memset(g, 0, sizeof *g);
    *jit = NULL;
    if (bt_cuda_open(&g->cu, err))
        return -1;
    if (ordinal < 0) {
        BT_CU(&g->cu, cuCtxGetCurrent(&g->ctx), err, "cuCtxGetCurrent");
        if (!g->ctx) {
            bt_fail(err, "no CUDA context is current on this thread (make one current first)");
            goto out;
        }
        BT_CU(&g->cu, cuCtxGetDevice(&g->dev), err, "cuCtxGetDevice");
        ordinal = (int)g->dev;
    }
    if (bt_cuda_device_info(&g->cu, ordinal, &g->info, err) ||
        bt_target_from_device(&g->info, &g->target, err))
        goto out;
    if (!g->ctx) {
        BT_CU(&g->cu, cuDeviceGet(&g->dev, ordinal), err, "cuDeviceGet");
        BT_CU(&g->cu, cuDevicePrimaryCtxRetain(&g->ctx, g->dev), err, "retaining the primary context");
        g->retained = 1;
        BT_CU(&g->cu, cuCtxSetCurrent(g->ctx), err, "cuCtxSetCurrent");
    }
    /* The library launches on its callers' streams: only the tuner and tests need one of ours
     * (and the library would otherwise destroy it at close outside its context). */
    if (with_support)
        BT_CU(&g->cu, cuStreamCreate(&g->stream, CU_STREAM_NON_BLOCKING), err, "cuStreamCreate");
    if (bt_jit_open(cache_dir, &g->target, jit_mode, jit, err) || (with_support && load_support(g, *jit, err)))
        goto out;
    rc = 0;
out:
    if (rc) {
        bt_jit_close(*jit);
        *jit = NULL;
        bt_gpu_close(g);
    }
    return rc;
}

void bt_gpu_close(bt_gpu *g)
{
    if (!g->cu.handle)
        return;
    if (g->support)
        g->cu.cuModuleUnload(g->support);
    if (g->stream)
        g->cu.cuStreamDestroy(g->stream);
    if (g->retained)
        g->cu.cuDevicePrimaryCtxRelease(g->dev);
    bt_cuda_close(&g->cu);
    memset(g, 0, sizeof *g);
}

/* A launch configuration of geo's grid, blocks and shared memory, with its cluster shape if
 * it has one and programmatic stream serialization if asked; attr (two) holds the attributes cfg
 * points at. */
static void launch_config(const bt_launch *geo, CUstream stream, int programmatic, CUlaunchConfig *cfg,
                          CUlaunchAttribute attr[2])
{
    memset(attr, 0, 2 * sizeof *attr);
    memset(cfg, 0, sizeof *cfg);
    unsigned n = 0;
    if (geo->cluster[0] * geo->cluster[1] * geo->cluster[2] > 1) {
        attr[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        attr[n].value.clusterDim.x = geo->cluster[0], attr[n].value.clusterDim.y = geo->cluster[1];
        attr[n++].value.clusterDim.z = geo->cluster[2];
    }
    if (programmatic) {
        attr[n].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr[n++].value.programmaticStreamSerializationAllowed = 1;
    }
    cfg->gridDimX = geo->grid[0], cfg->gridDimY = geo->grid[1], cfg->gridDimZ = geo->grid[2];
    cfg->blockDimX = geo->block[0], cfg->blockDimY = geo->block[1], cfg->blockDimZ = geo->block[2];
    cfg->sharedMemBytes = (unsigned)geo->smem, cfg->hStream = stream;
    cfg->attrs = attr, cfg->numAttrs = n;
}

/* Whether a failed step of loading a kernel is the kernel's own doing (an image, a symbol or a
 * limit this GPU refuses) rather than the GPU's state, such as no memory left, which may pass. */
static int kernel_at_fault(CUresult r)
{
    switch (r) {
    case CUDA_ERROR_INVALID_IMAGE:
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
    case CUDA_ERROR_INVALID_PTX:
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
    case CUDA_ERROR_INVALID_SOURCE:
    case CUDA_ERROR_NOT_FOUND:
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND:
    case CUDA_ERROR_SHARED_OBJECT_INIT_FAILED:
    case CUDA_ERROR_JIT_COMPILER_NOT_FOUND:
    case CUDA_ERROR_INVALID_CLUSTER_SIZE:
        return 1;
    default:
        return 0;
    }
}

/* One step of bt_kernel_load: on failure, err says what and rc whose fault (see gpu.h). */
#define LOAD_STEP(call, what)                                                                      \
    do {                                                                                           \
        CUresult r_ = g->cu.call;                                                                  \
        if (r_ != CUDA_SUCCESS) {                                                                  \
            bt_cuda_fail(&g->cu, r_, err, (what));                                                 \
            rc = kernel_at_fault(r_) ? -1 : -2;                                                    \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

int bt_kernel_load(bt_gpu *g, const void *cubin, const bt_family *f, const bt_cand *c,
                   const bt_variant *v, bt_kernel *k, bt_err *err)
{
    int rc = -1;
    bt_launch geo;
    memset(k, 0, sizeof *k);
    k->family = f, k->cand = *c, k->variant = *v;
    LOAD_STEP(cuModuleLoadData(&k->mod, cubin), "loading the kernel");
    LOAD_STEP(cuModuleGetFunction(&k->fn, k->mod, f->kernel), f->kernel);
    f->launch(c, v, &g->target, 1, 1, 16, &geo);
    LOAD_STEP(cuFuncSetAttribute(k->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)geo.smem),
              "raising the kernel's shared-memory limit");
    /* A grid sized for several CTAs per SM needs the L1 / shared-memory split that holds them. */
    if (geo.ctas_per_sm > 1)
        LOAD_STEP(cuFuncSetAttribute(k->fn, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, 100),
                  "asking for the largest shared-memory carveout");
    if (geo.cluster[0] > 1) {
        /* Clusters must sit inside one GPC, so fewer than SMs / size fit at once; a persistent
         * grid larger than that would run a second wave. */
        CUlaunchAttribute attr[2];
        CUlaunchConfig cfg;
        geo.grid[0] = geo.cluster[0], geo.grid[1] = geo.grid[2] = 1; /* one cluster's worth */
        launch_config(&geo, NULL, 0, &cfg, attr);
        LOAD_STEP(cuOccupancyMaxActiveClusters(&k->max_clusters, k->fn, &cfg), "querying how many clusters fit");
        if (k->max_clusters < 1) {
            bt_fail(err, "no cluster of %u CTAs with %zu bytes of shared memory fits on this GPU", geo.cluster[0],
                    geo.smem);
            goto out;
        }
    }
    rc = 0;
out:
    if (rc && k->mod) {
        g->cu.cuModuleUnload(k->mod);
        k->mod = NULL;
    }
    return rc;
}
#undef LOAD_STEP

void bt_kernel_unload(bt_gpu *g, bt_kernel *k)
{
    if (k->mod)
        g->cu.cuModuleUnload(k->mod);
    memset(k, 0, sizeof *k);
}

int bt_gemm_check(const bt_gemm_args *a, bt_err *err)
{
    if (a->M < 1 || a->N < 1 || a->K < 1)
        return bt_fail(err, "M, N and K must be positive (got %ld, %ld, %ld)", a->M, a->N, a->K);
    if (a->K % 16 != 0)
        return bt_fail(err, "K = %ld: the kernels copy rows in 16-byte pieces, so K must be a multiple of 16", a->K);
    if (a->M > (1L << 30) || a->N > (1L << 30) || a->K > (1L << 30))
        return bt_fail(err, "M, N and K must be at most 2^30");
    /* The kernels number tiles in 32-bit ints, down to 16 x 8 tiles, and a group of
     * GROUP_SIZE_M (at most 1024) rows of them. */
    if ((a->N + 7) / 8 * 1024 > INT_MAX || (a->M + 15) / 16 * ((a->N + 7) / 8) > INT_MAX)
        return bt_fail(err, "M = %ld, N = %ld: too many tiles for the kernels' 32-bit tile numbers", a->M, a->N);
    return 0;
}

int bt_gemm_check_pointers(const bt_gemm_args *a, bt_out_type out, bt_err *err)
{
    if (!a->A || !a->B || !a->As || !a->Bs || !a->C)
        return bt_fail(err, "A, B, As, Bs and C must all be device pointers (one is 0)");
    if ((a->A | a->B) % 16 != 0)
        return bt_fail(err, "A and B must be 16-byte aligned");
    if ((a->As | a->Bs) % 4 != 0)
        return bt_fail(err, "As and Bs must be 4-byte aligned (float scales)");
    if (a->C % (CUdeviceptr)bt_out_size(out) != 0)
        return bt_fail(err, "C must be aligned to its %d-byte elements", bt_out_size(out));
    return 0;
}

/* A tensor map over a row-major [rows, cols] matrix of 1- or 2-byte elements with box_rows x
 * box_cols boxes, swizzled to the width of a box row (128, 64 or 32 bytes; none for 16): the
 * layout the native kernel's wgmma descriptors read its A and B tiles in and its output slab
 * is written in. */
static int encode_map(bt_gpu *g, CUtensorMap *map, CUdeviceptr ptr, long rows, long cols, int elem_bytes,
                      int box_rows, int box_cols, CUtensorMapL2promotion l2, const char *what, bt_err *err)
{
    int rc = -1;
    int row_bytes = box_cols * elem_bytes;
    cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows}, strides[1] = {(cuuint64_t)cols * elem_bytes};
    cuuint32_t box[2] = {(cuuint32_t)box_cols, (cuuint32_t)box_rows}, elem[2] = {1, 1};
    CUtensorMapSwizzle swz = row_bytes == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                             : row_bytes == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                             : row_bytes == 32 ? CU_TENSOR_MAP_SWIZZLE_32B
                                               : CU_TENSOR_MAP_SWIZZLE_NONE;
    BT_CU(&g->cu,
          cuTensorMapEncodeTiled(map, elem_bytes == 1 ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : CU_TENSOR_MAP_DATA_TYPE_UINT16,
                                 2, (void *)ptr, dims, strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE, swz, l2,
                                 CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
          err, what);
    rc = 0;
out:
    return rc;
}

int bt_kernel_launch(bt_gpu *g, const bt_kernel *k, const bt_gemm_args *a, CUstream stream,
                     int programmatic, bt_err *err)
{
    int rc = -1;
    bt_launch geo;
    CUtensorMap ma, mb, mc;
    if (bt_gemm_check(a, err) || bt_gemm_check_pointers(a, k->variant.out, err))
        return -1;
    k->family->launch(&k->cand, &k->variant, &g->target, a->M, a->N, a->K, &geo);
    int M = (int)a->M, N = (int)a->N, K = (int)a->K;
    void *ptr_params[] = {(void *)&a->A, (void *)&a->B, (void *)&a->C, (void *)&a->As,
                          (void *)&a->Bs, &M, &N, &K};
    void *tma_params[] = {&ma, &mb, &mc, (void *)&a->C, (void *)&a->As, (void *)&a->Bs, &M, &N, &K};
    void **params = ptr_params;
    if (k->family->abi == BT_ABI_TMA) {
        memset(&mc, 0, sizeof mc);
        const CUtensorMapL2promotion load = CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
        if (encode_map(g, &ma, a->A, a->M, a->K, 1, geo.tile_m, geo.tile_k, load, "encoding a tensor map", err) ||
            encode_map(g, &mb, a->B, a->N, a->K, 1, geo.tile_n, geo.tile_k, load, "encoding a tensor map", err))
            goto out;
        if (geo.store_cols && bt_nv_tma_store(bt_out_size(k->variant.out), a->N, a->C) &&
            encode_map(g, &mc, a->C, a->M, a->N, 2, 64, geo.store_cols, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                       "encoding the output's tensor map", err))
            goto out;
        params = tma_params;
    }
    /* The family sized a persistent grid for all SMs; no more clusters than fit at once
     * (max_clusters is set for cluster kernels only). */
    if (k->max_clusters > 0 && geo.grid[0] / geo.cluster[0] > (unsigned)k->max_clusters)
        geo.grid[0] = (unsigned)k->max_clusters * geo.cluster[0];
    CUlaunchAttribute attr[2];
    CUlaunchConfig cfg;
    launch_config(&geo, stream, programmatic && k->family->programmatic, &cfg, attr);
    BT_CU(&g->cu, cuLaunchKernelEx(&cfg, k->fn, params, NULL), err, "launching the kernel");
    rc = 0;
out:
    return rc;
}

/* ---- problems, reference and checks ---- */

int bt_problem_alloc(bt_gpu *g, long M, long N, long K, const bt_variant *v, bt_problem *p,
                     bt_err *err)
{
    int rc = -1;
    memset(p, 0, sizeof *p);
    long ksc = (K + v->block_k - 1) / v->block_k, nsc = (N + v->block_n - 1) / v->block_n;
    p->args.M = M, p->args.N = N, p->args.K = K;
    p->a_bytes = (size_t)M * K, p->b_bytes = (size_t)N * K;
    p->as_bytes = (size_t)M * ksc * 4, p->bs_bytes = (size_t)nsc * ksc * 4;
    p->c_bytes = (size_t)M * N * bt_out_size(v->out);
    /* (a multiple of 256 bytes: C as aligned as the allocation, as a caller's would be) */
    p->guard_bytes = p->c_bytes < GUARD_MIN   ? GUARD_MIN
                     : p->c_bytes > GUARD_MAX ? GUARD_MAX
                                              : (p->c_bytes + 255) / 256 * 256;
    BT_CU(&g->cu, cuMemAlloc(&p->args.A, p->a_bytes), err, "allocating A");
    BT_CU(&g->cu, cuMemAlloc(&p->args.B, p->b_bytes), err, "allocating B");
    BT_CU(&g->cu, cuMemAlloc(&p->args.As, p->as_bytes), err, "allocating As");
    BT_CU(&g->cu, cuMemAlloc(&p->args.Bs, p->bs_bytes), err, "allocating Bs");
    BT_CU(&g->cu, cuMemAlloc(&p->c_alloc, p->guard_bytes + p->c_bytes + p->guard_bytes), err, "allocating C");
    p->args.C = p->c_alloc + p->guard_bytes;
    rc = 0;
out:
    if (rc)
        bt_problem_free(g, p);
    return rc;
}

void bt_problem_free(bt_gpu *g, bt_problem *p)
{
    CUdeviceptr *bufs[] = {&p->args.A, &p->args.B, &p->args.As, &p->args.Bs, &p->c_alloc};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (*bufs[i]) {
            g->cu.cuMemFree(*bufs[i]);
            *bufs[i] = 0;
        }
    p->args.C = 0;
}

static long sms(const bt_gpu *g) { return g->info.sm_count ? g->info.sm_count : 132; }

/* Blocks of 256 threads for a grid-stride loop over n elements. */
static long blocks_for(const bt_gpu *g, long n)
{
    long blocks = (n + 255) / 256;
    return blocks > 4096 * sms(g) ? 4096 * sms(g) : blocks < 1 ? 1 : blocks;
}

static int launch1d(bt_gpu *g, CUfunction f, long n, void **params, bt_err *err, const char *what)
{
    int rc = -1;
    BT_CU(&g->cu, cuLaunchKernel(f, (unsigned)blocks_for(g, n), 1, 1, 256, 1, 1, 0, g->stream, params, NULL), err,
          what);
    rc = 0;
out:
    return rc;
}

/* bt_fill_inputs over the problem's four inputs, in `blocks` blocks of `threads`. */
static int fill_inputs(bt_gpu *g, bt_problem *p, const bt_variant *v, unsigned long long seed, long blocks,
                       unsigned threads, unsigned long long hold_ns, CUstream stream, bt_err *err)
{
    int rc = -1;
    int int8 = v->in == BT_IN_INT8;
    long na = (long)p->a_bytes, nb = (long)p->b_bytes;
    long nas = (long)(p->as_bytes / 4), nbs = (long)(p->bs_bytes / 4);
    /* Realistic magnitudes: activation scales near amax/448 of N(0,1) data, weight scales
     * smaller; a decade of spread so a mixed-up scale index shows in the error. */
    float alo = 2e-3f, ahi = 2e-2f, blo = 2e-4f, bhi = 2e-3f;
    void *params[] = {&p->args.A, &na, &p->args.B, &nb, &p->args.As, &nas, &p->args.Bs, &nbs,
                      &int8,      &seed, &alo,     &ahi, &blo,        &bhi, &hold_ns};
    BT_CU(&g->cu, cuLaunchKernel(g->fill_inputs, (unsigned)blocks, 1, 1, threads, 1, 1, 0, stream, params, NULL), err,
          "filling the inputs");
    rc = 0;
out:
    return rc;
}

int bt_problem_fill(bt_gpu *g, bt_problem *p, const bt_variant *v, unsigned long long seed,
                    bt_err *err)
{
    long total = (long)(p->a_bytes + p->b_bytes + p->as_bytes / 4 + p->bs_bytes / 4);
    return fill_inputs(g, p, v, seed, blocks_for(g, total), 256, 0, g->stream, err);
}

/* How long the refill holds its writes back, from its own start: far longer than the host
 * takes to launch the successor after it, and the successor to start. (A host delayed past it
 * only weakens the check: a successor that reads early may then read the right data.) */
#define REFILL_HOLD_NS 200000ull

int bt_problem_refill(bt_gpu *g, bt_problem *p, const bt_variant *v, unsigned long long seed, CUstream stream,
                      bt_err *err)
{
    int rc = -1;
    /* 0xFF: NaN as e4m3 and as fp32 scales; -1 in every INT8 code, far from the random codes */
    BT_CU(&g->cu, cuMemsetD8Async(p->args.A, 0xFF, p->a_bytes, stream), err, "poisoning A");
    BT_CU(&g->cu, cuMemsetD8Async(p->args.B, 0xFF, p->b_bytes, stream), err, "poisoning B");
    BT_CU(&g->cu, cuMemsetD8Async(p->args.As, 0xFF, p->as_bytes, stream), err, "poisoning As");
    BT_CU(&g->cu, cuMemsetD8Async(p->args.Bs, 0xFF, p->bs_bytes, stream), err, "poisoning Bs");
    /* Blocks on half the SMs leave the other half free for the successor's first CTAs (one
     * native CTA takes an SM's whole register file, so it cannot share one with the fill). */
    rc = fill_inputs(g, p, v, seed, sms(g) / 2 > 0 ? sms(g) / 2 : 1, 1024, REFILL_HOLD_NS, stream, err);
out:
    return rc;
}

int bt_problem_poison(bt_gpu *g, bt_problem *p, CUstream stream, bt_err *err)
{
    int rc = -1;
    BT_CU(&g->cu, cuMemsetD8Async(p->args.C, 0xFF, p->c_bytes, stream), err, "poisoning C");
    BT_CU(&g->cu, cuMemsetD8Async(p->c_alloc, GUARD_PATTERN, p->guard_bytes, stream), err, "filling the guard");
    BT_CU(&g->cu, cuMemsetD8Async(p->args.C + p->c_bytes, GUARD_PATTERN, p->guard_bytes, stream), err,
          "filling the guard");
    rc = 0;
out:
    return rc;
}

int bt_reference(bt_gpu *g, const bt_problem *p, const bt_variant *v, CUdeviceptr ref, bt_err *err)
{
    int rc = -1;
    int M = (int)p->args.M, N = (int)p->args.N, K = (int)p->args.K;
    int qbn = v->block_n, qbk = v->block_k, int8 = v->in == BT_IN_INT8;
    void *params[] = {(void *)&p->args.A, (void *)&p->args.B, (void *)&p->args.As, (void *)&p->args.Bs,
                      &ref, &M, &N, &K, &qbn, &qbk, &int8};
    const int row_blocks = (M + 15) / 16;
    BT_CU(&g->cu,
          cuLaunchKernel(g->ref_gemm, (unsigned)((N + 15) / 16), (unsigned)(row_blocks < 65535 ? row_blocks : 65535),
                         1, 16, 16, 1, 0, g->stream, params, NULL),
          err, "launching the reference GEMM");
    rc = 0;
out:
    return rc;
}

int bt_compare(bt_gpu *g, const bt_problem *p, const bt_variant *v, CUdeviceptr ref, bt_check *out,
               bt_err *err)
{
    int rc = -1;
    CUdeviceptr scratch = 0;
    struct {
        double sums[2];
        unsigned long long bad[2];
    } h;
    memset(&h, 0, sizeof h);
    BT_CU(&g->cu, cuMemAlloc(&scratch, sizeof h), err, "allocating check counters");
    BT_CU(&g->cu, cuMemcpyHtoD(scratch, &h, sizeof h), err, "clearing check counters");
    long n = p->args.M * p->args.N, guard = (long)p->guard_bytes;
    int outt = (int)v->out, pattern = GUARD_PATTERN;
    CUdeviceptr sums = scratch, bad = scratch + 16, gbad = scratch + 24, before = p->c_alloc,
                after = p->args.C + p->c_bytes;
    void *pc[] = {(void *)&p->args.C, &ref, &n, &outt, &sums, &bad};
    void *pg_before[] = {&before, &guard, &pattern, &gbad}, *pg_after[] = {&after, &guard, &pattern, &gbad};
    if (launch1d(g, g->compare, n, pc, err, "comparing with the reference") ||
        launch1d(g, g->guard_check, guard, pg_before, err, "checking the guard") ||
        launch1d(g, g->guard_check, guard, pg_after, err, "checking the guard"))
        goto out;
    BT_CU(&g->cu, cuStreamSynchronize(g->stream), err, "running the check");
    BT_CU(&g->cu, cuMemcpyDtoH(&h, scratch, sizeof h), err, "reading check counters");
    out->rel_err = h.sums[1] > 0 ? sqrt(h.sums[0] / h.sums[1]) : (h.sums[0] > 0 ? 1.0 : 0.0);
    out->nonfinite = h.bad[0];
    out->guard = h.bad[1];
    rc = 0;
out:
    if (scratch)
        g->cu.cuMemFree(scratch);
    return rc;
}

/* Inputs are exact 8-bit codes and their products are exact in fp32; what remains is fp32
 * accumulation inside each 128-long K block (on Hopper's FP8 wgmma, with fewer mantissa bits:
 * relative ~1e-4 at worst) and the output rounding: f16 half-ulp 2^-11 (RMS ~3e-4 relative),
 * bf16 2^-8 (RMS ~1.5e-3). The bounds leave margin over those while a wrong tile, scale or
 * block (errors of 1e-2 and up) fails. Measured values are in BENCHMARKS.md. */
double bt_tolerance(bt_out_type out)
{
    switch (out) {
    case BT_OUT_F32: return 1e-3;
    case BT_OUT_F16: return 2e-3;
    default: return 1e-2;
    }
}

int bt_check_passed(const bt_check *c, bt_out_type out)
{
    return !c->nonfinite && !c->guard && c->rel_err <= bt_tolerance(out);
}
