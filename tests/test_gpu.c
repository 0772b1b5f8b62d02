/* GPU tests: the reference against a CPU float64 GEMM, and candidates of both spaces verified on
 * random data. They report themselves skipped where no CUDA driver or device is found. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu.h"
#include "harness.h"
#include "searchspace.h"

typedef struct {
    bt_gpu g;
    bt_jit *jit;
} gpu_fixture;

static int open_gpu(bt_t *t, gpu_fixture *fx)
{
    bt_err err = {{0}};
    char cache[4200];
    const char *env = getenv("BT_TEST_CACHE");
    snprintf(cache, sizeof cache, "%s", env ? env : bt_test_tmpdir());
    if (env == NULL)
        strncat(cache, "/cache", sizeof cache - strlen(cache) - 1);
    if (bt_gpu_open(&fx->g, 0, cache, BT_JIT_STORE_REQUIRED, 1, &fx->jit, &err)) {
        t->skipped = 1;
        snprintf(t->skip_why, sizeof t->skip_why, "%s", err.msg);
        return -1;
    }
    return 0;
}

static void close_gpu(gpu_fixture *fx)
{
    bt_gpu_close(&fx->g);
    bt_jit_close(fx->jit);
}

/* e4m3 by its definition, independently of the device code. */
static double cpu_e4m3(unsigned char v)
{
    int s = v >> 7, e = (v >> 3) & 15, m = v & 7;
    double mag = e == 0 ? m / 512.0 : ldexp(1.0 + m / 8.0, e - 7);
    return s ? -mag : mag;
}

/* The reference GEMM against a CPU float64 one of the same codes, at rows m0 .. M - 1. */
static void reference_case(bt_t *t, gpu_fixture *fx, bt_in_type in, long M, long N, long K, long m0)
{
    bt_err err = {{0}};
    bt_variant v = {.in = in, .out = BT_OUT_F32, .block_n = 128, .block_k = 128};
    bt_problem p;
    CUdeviceptr ref = 0;
    unsigned char *a = NULL, *b = NULL;
    float *as = NULL, *bs = NULL, *r = NULL;
    bt_cuda *cu = &fx->g.cu;
    if (bt_problem_alloc(&fx->g, M, N, K, &v, &p, &err)) {
        bt_check_fail(t, __FILE__, __LINE__, "%s", err.msg);
        return;
    }
    CHECK(cu->cuMemAlloc(&ref, (size_t)(M * N) * 4) == CUDA_SUCCESS);
    CHECK(bt_problem_fill(&fx->g, &p, &v, 1234, &err) == 0);
    CHECK(bt_reference(&fx->g, &p, &v, ref, &err) == 0);
    CHECK(cu->cuStreamSynchronize(fx->g.stream) == CUDA_SUCCESS);
    a = malloc(p.a_bytes), b = malloc(p.b_bytes), as = malloc(p.as_bytes), bs = malloc(p.bs_bytes);
    r = malloc((size_t)(M * N) * 4);
    CHECK(cu->cuMemcpyDtoH(a, p.args.A, p.a_bytes) == CUDA_SUCCESS);
    CHECK(cu->cuMemcpyDtoH(b, p.args.B, p.b_bytes) == CUDA_SUCCESS);
    CHECK(cu->cuMemcpyDtoH(as, p.args.As, p.as_bytes) == CUDA_SUCCESS);
    CHECK(cu->cuMemcpyDtoH(bs, p.args.Bs, p.bs_bytes) == CUDA_SUCCESS);
    CHECK(cu->cuMemcpyDtoH(r, ref, (size_t)(M * N) * 4) == CUDA_SUCCESS);
    long ksc = (K + 127) / 128, nonzero = 0;
    double worst = 0;
    for (long i = 0; i < M * N && i < (long)p.a_bytes; i++)
        nonzero += a[i] != 0;
    CHECK(nonzero > M * N / 2 || nonzero > (long)p.a_bytes / 2); /* never zeros */
    for (long m = m0; m < M; m++)
        for (long n = 0; n < N; n++) {
            double acc = 0;
            for (long k = 0; k < K; k++) {
                double x = in == BT_IN_INT8 ? (signed char)a[m * K + k] : cpu_e4m3(a[m * K + k]);
                double y = in == BT_IN_INT8 ? (signed char)b[n * K + k] : cpu_e4m3(b[n * K + k]);
                acc += x * as[m * ksc + k / 128] * y * bs[(n / 128) * ksc + k / 128];
            }
            double d = fabs(r[m * N + n] - acc) / (fabs(acc) + 1e-30);
            if (d > worst)
                worst = d;
        }
    if (worst > 1e-6)
        bt_check_fail(t, __FILE__, __LINE__, "reference differs from CPU float64 by %.3g (%s)",
                      worst, bt_in_name(in));
    free(a), free(b), free(as), free(bs), free(r);
    cu->cuMemFree(ref);
    bt_problem_free(&fx->g, &p);
}

TEST(gpu_reference_matches_cpu_float64)
{
    gpu_fixture fx;
    if (open_gpu(t, &fx))
        return;
    reference_case(t, &fx, BT_IN_FP8, 37, 200, 384, 0);
    reference_case(t, &fx, BT_IN_INT8, 5, 130, 256, 0);
    /* 2^20 rows (the largest --batch-sizes takes) are 65536 row blocks, one past the grid's
     * y extent: the last ones are checked */
    reference_case(t, &fx, BT_IN_FP8, 1L << 20, 16, 128, (1L << 20) - 40);
    close_gpu(&fx);
}

/* Compiles cands for variant v and verifies each at every (shape, M): fresh random inputs per
 * (shape, M), output poisoned before each run, relative error under the output's tolerance,
 * no unwritten element, no byte written past C. A nonzero `extreme` then sets every code of A
 * to its low byte and every code of B to its high byte (the scales stay random): the largest
 * K-block sums an 8-bit type allows. With `pdl` instead (not both: the refill writes the
 * random codes), each run is checked as tune --pdl checks it: the inputs written again late by
 * the kernel before (bt_problem_refill), the candidate launched programmatically. */
static void verify_set(bt_t *t, gpu_fixture *fx, const bt_family *f, const bt_cand *cands, size_t n,
                       const bt_variant *v, const long (*shapes)[2], int nshapes, const long *Ms, int nM,
                       unsigned extreme, int pdl, int *runs)
{
    bt_err err = {{0}};
    if (pdl && extreme) {
        bt_check_fail(t, __FILE__, __LINE__, "verify_set: pdl and extreme exclude each other");
        return;
    }
    bt_jit_job *jobs = bt_xcalloc(n, sizeof *jobs);
    bt_kernel *ks = bt_xcalloc(n, sizeof *ks);
    char **srcs = bt_xcalloc(n, sizeof *srcs);
    for (size_t i = 0; i < n; i++) {
        srcs[i] = bt_jit_source(f, &cands[i], v, NULL);
        jobs[i].name = "candidate";
        jobs[i].source = srcs[i];
    }
    if (bt_jit_run(fx->jit, jobs, n, 0, NULL, NULL, &err)) {
        bt_check_fail(t, __FILE__, __LINE__, "%s", err.msg);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        char desc[256];
        bt_cand_format(f, &cands[i], desc, sizeof desc);
        if (jobs[i].status == BT_JIT_FAILED) {
            bt_check_fail(t, __FILE__, __LINE__, "%s failed to compile: %.300s", desc, jobs[i].log);
            continue;
        }
        char *cubin = NULL;
        if (bt_read_file(jobs[i].path, &cubin, NULL, &err) ||
            bt_kernel_load(&fx->g, cubin, f, &cands[i], v, &ks[i], &err))
            bt_check_fail(t, __FILE__, __LINE__, "%s: %s", desc, err.msg);
        free(cubin);
    }
    for (int s = 0; s < nshapes; s++)
        for (int mi = 0; mi < nM; mi++) {
            bt_problem p;
            CUdeviceptr ref = 0;
            long M = Ms[mi], N = shapes[s][0], K = shapes[s][1];
            if (bt_problem_alloc(&fx->g, M, N, K, v, &p, &err)) {
                bt_check_fail(t, __FILE__, __LINE__, "%s", err.msg);
                continue;
            }
            const unsigned long long seed = (unsigned long long)(s * 100 + mi + 7 * n);
            if (fx->g.cu.cuMemAlloc(&ref, (size_t)(M * N) * 4) != CUDA_SUCCESS ||
                bt_problem_fill(&fx->g, &p, v, seed, &err) ||
                /* on the problem's stream: a plain cuMemsetD8 is not ordered after the fill in
                 * that non-blocking stream, and raced it */
                (extreme &&
                 (fx->g.cu.cuMemsetD8Async(p.args.A, extreme & 0xff, p.a_bytes, fx->g.stream) != CUDA_SUCCESS ||
                  fx->g.cu.cuMemsetD8Async(p.args.B, extreme >> 8, p.b_bytes, fx->g.stream) != CUDA_SUCCESS)) ||
                bt_reference(&fx->g, &p, v, ref, &err)) {
                bt_check_fail(t, __FILE__, __LINE__, "problem setup: %s", err.msg);
            } else {
                for (size_t i = 0; i < n; i++) {
                    if (!ks[i].mod)
                        continue;
                    bt_check chk;
                    char desc[256];
                    bt_cand_format(f, &cands[i], desc, sizeof desc);
                    if (bt_problem_poison(&fx->g, &p, fx->g.stream, &err) ||
                        (pdl && bt_problem_refill(&fx->g, &p, v, seed, fx->g.stream, &err)) ||
                        bt_kernel_launch(&fx->g, &ks[i], &p.args, fx->g.stream, pdl, &err) ||
                        bt_compare(&fx->g, &p, v, ref, &chk, &err)) {
                        bt_check_fail(t, __FILE__, __LINE__, "%s M=%ld N=%ld K=%ld: %s", desc, M, N, K, err.msg);
                        goto next_shape;
                    }
                    (*runs)++;
                    if (!bt_check_passed(&chk, v->out))
                        bt_check_fail(t, __FILE__, __LINE__,
                                      "%s %s->%s M=%ld N=%ld K=%ld: rel_err %.3g, %llu unwritten/non-finite, "
                                      "%llu guard bytes",
                                      desc, bt_in_name(v->in), bt_out_name(v->out), M, N, K, chk.rel_err,
                                      chk.nonfinite, chk.guard);
                    else if (getenv("BT_TEST_VERBOSE"))
                        printf("    %s %s->%s M=%ld N=%ld K=%ld rel_err %.3g\n", desc, bt_in_name(v->in),
                               bt_out_name(v->out), M, N, K, chk.rel_err);
                }
            }
        next_shape:
            if (ref)
                fx->g.cu.cuMemFree(ref);
            bt_problem_free(&fx->g, &p);
        }
out:
    for (size_t i = 0; i < n; i++) {
        bt_kernel_unload(&fx->g, &ks[i]);
        bt_jit_job_clear(&jobs[i]);
        free(srcs[i]);
    }
    free(jobs), free(ks), free(srcs);
}

/* The candidates of a space that the device can run. */
static bt_cand *runnable(bt_t *t, gpu_fixture *fx, const char *space, size_t *n)
{
    bt_err err = {{0}};
    bt_space s;
    bt_cand *all = NULL;
    size_t total = 0;
    char path[4200];
    snprintf(path, sizeof path, "%s/search_spaces/%s", bt_test_root(), space);
    if (bt_space_load(path, &s, &err) || bt_space_enumerate(&s, 128, 128, &all, &total, &err)) {
        bt_check_fail(t, __FILE__, __LINE__, "%s", err.msg);
        *n = 0;
        return NULL;
    }
    size_t keep = 0;
    bt_variant v = {BT_IN_FP8, BT_OUT_BF16, 128, 128};
    for (size_t i = 0; i < total; i++)
        if (s.family->check(&all[i], &v, &fx->g.target, NULL, 0) == BT_REJ_NONE)
            all[keep++] = all[i];
    bt_space_free(&s);
    *n = keep;
    return all;
}

static const long issue_shapes[][2] = {{576, 7168}, {7168, 2304}, {3072, 1536}};
static const long issue_Ms[] = {1, 24, 100, 4096};

TEST(gpu_small_space_every_candidate_verified)
{
    gpu_fixture fx;
    if (open_gpu(t, &fx))
        return;
    size_t n;
    bt_cand *c = runnable(t, &fx, "small.yaml", &n);
    int runs = 0;
    CHECK(n > 0);
    for (int in = 0; in < 2; in++)
        for (int out = 0; out < 3; out++) {
            bt_variant v = {(bt_in_type)in, (bt_out_type)out, 128, 128};
            verify_set(t, &fx, &bt_family_classic, c, n, &v, issue_shapes, 3, issue_Ms, 4, 0, 0, &runs);
        }
    printf("    %zu candidates, %d verified runs\n", n, runs);
    free(c);
    close_gpu(&fx);
}

TEST(gpu_default_space_sample_verified)
{
    gpu_fixture fx;
    if (open_gpu(t, &fx))
        return;
    size_t n;
    bt_cand *c = runnable(t, &fx, "default.yaml", &n);
    /* A reproducible random sample of 100 (Fisher-Yates with a fixed LCG). */
    unsigned long long x = 88172645463325252ull;
    size_t take = n < 100 ? n : 100;
    for (size_t i = 0; i < take; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        size_t j = i + (size_t)((x >> 33) % (n - i));
        bt_cand tmp = c[i];
        c[i] = c[j], c[j] = tmp;
    }
    static const long shapes[][2] = {{7168, 2304}, {576, 7168}};
    static const long Ms[] = {24, 100};
    int runs = 0;
    for (int in = 0; in < 2; in++)
        for (int out = 0; out < 3; out++) {
            bt_variant v = {(bt_in_type)in, (bt_out_type)out, 128, 128};
            verify_set(t, &fx, &bt_family_classic, c, take, &v, shapes, 2, Ms, 2, 0, 0, &runs);
        }
    printf("    %zu sampled of %zu runnable, %d verified runs\n", take, n, runs);
    free(c);
    close_gpu(&fx);
}

/* open_gpu, skipping too where the device cannot run the native family (it needs sm_90a). */
static int open_native_gpu(bt_t *t, gpu_fixture *fx)
{
    if (open_gpu(t, fx))
        return -1;
    if (bt_family_native.check(&(bt_cand){{64, 64, 4, 8, 1, 1}}, &(bt_variant){BT_IN_FP8, BT_OUT_BF16, 128, 128},
                               &fx->g.target, NULL, 0) == BT_REJ_ARCH) {
        t->skipped = 1;
        snprintf(t->skip_why, sizeof t->skip_why, "the native family needs sm_90a; this device is %s",
                 fx->g.target.arch);
        close_gpu(fx);
        return -1;
    }
    return 0;
}

TEST(gpu_native_space_verified)
{
    static const long odd_k_shapes[][2] = {{3072, 1664}, {576, 400}, {1536, 112}}, window_shapes[][2] = {{256, 4096}};
    /* INT8_CONVERT 1 where its offset sums differ: two partials carrying 8 K blocks' offsets
     * (also multicast), one partial (144 and 160 columns), a tile over two weight-scale blocks
     * (112 columns, multicast), split-K 2 and 4 */
    static const int offset_cands[][7] = {{128, 128, 5, 8, 1, 1, 1}, {128, 128, 5, 8, 2, 1, 1}, {128, 144, 4, 8, 1, 1, 1},
                                          {128, 160, 4, 4, 1, 1, 1}, {128, 112, 6, 8, 2, 1, 1}, {64, 64, 8, 8, 1, 2, 1},
                                          {64, 32, 12, 8, 1, 4, 1}};
    enum { NOFFSET = sizeof offset_cands / sizeof offset_cands[0] };
    gpu_fixture fx;
    if (open_native_gpu(t, &fx))
        return;
    size_t n;
    bt_cand *c = runnable(t, &fx, "native.yaml", &n);
    int runs = 0;
    CHECK(n > 0);
    const int cvt = bt_family_param_index(&bt_family_native, "INT8_CONVERT");
    CHECK(cvt >= 0);
    if (cvt < 0) {
        free(c);
        close_gpu(&fx);
        return;
    }
    /* Every candidate on FP8 -> bf16 (the serving path), a spread of them on the other five. */
    for (int in = 0; in < 2; in++)
        for (int out = 0; out < 3; out++) {
            bt_variant v = {(bt_in_type)in, (bt_out_type)out, 128, 128};
            int all = in == BT_IN_FP8 && out == BT_OUT_BF16;
            size_t ok = 0; /* the candidates this variant can run (INT8 wgmma takes fewer widths) */
            bt_cand *fit = bt_xcalloc(n, sizeof *fit);
            for (size_t i = 0; i < n; i++)
                if (bt_family_native.check(&c[i], &v, &fx.g.target, NULL, 0) == BT_REJ_NONE)
                    fit[ok++] = c[i];
            size_t take = all ? ok : (ok < 8 ? ok : 8);
            /* INT8: each of the spread once more with INT8_CONVERT 1 (the offset sums), and the
             * offset_cands the device can run */
            bt_cand *sub = bt_xcalloc(2 * take + NOFFSET, sizeof *sub);
            for (size_t i = 0; i < take; i++)
                sub[i] = fit[all ? i : i * ok / take];
            if (in == BT_IN_INT8) {
                for (size_t i = 0; i < take; i++) {
                    sub[take + i] = sub[i];
                    sub[take + i].v[cvt] = 1;
                }
                take *= 2;
                for (int i = 0; i < NOFFSET; i++) {
                    bt_cand o = {{0}};
                    memcpy(o.v, offset_cands[i], sizeof offset_cands[i]);
                    if (bt_family_native.check(&o, &v, &fx.g.target, NULL, 0) == BT_REJ_NONE)
                        sub[take++] = o;
                }
            }
            free(fit);
            verify_set(t, &fx, &bt_family_native, sub, take, &v, issue_shapes, 3, issue_Ms, 4, 0, 0, &runs);
            /* K blocks: 13 (an odd count for the two in-flight partials, and for the offset sums
             * of INT8_CONVERT 1), 4 with a partial last one, 1 */
            if (all || in == BT_IN_INT8)
                verify_set(t, &fx, &bt_family_native, sub, take, &v, odd_k_shapes, 3, issue_Ms, 4, 0, 0, &runs);
            /* INT8 partials at their extremes, +2^21 (-128 x -128) and -128 x 127 x 128: two of
             * them summed are still exact on the offset (see native.cuh, partial_f32) */
            if (in == BT_IN_INT8)
                for (int e = 0; e < 2; e++)
                    verify_set(t, &fx, &bt_family_native, sub, take, &v, odd_k_shapes, 3, issue_Ms, 4,
                               e ? 0x7f80u : 0x8080u, 0, &runs);
            if (all) /* 32 K blocks: 128-row tiles load the scales four K blocks at a time */
                verify_set(t, &fx, &bt_family_native, sub, take, &v, window_shapes, 1, issue_Ms, 4, 0, 0, &runs);
            /* as tune --pdl checks them */
            verify_set(t, &fx, &bt_family_native, sub, take, &v, issue_shapes, 3, issue_Ms, 4, 0, 1, &runs);
            free(sub);
        }
    printf("    %zu native candidates, %d verified runs\n", n, runs);
    free(c);
    close_gpu(&fx);
}

/* The library's heuristic (no config): each config it picks, verified at the point it picks it
 * for: 64- and 128-row tiles, 16 to 128 columns, split-K 2 and 4, rings of 5 to 12 stages, INT8
 * by the conversion and by adds, and every output type for FP8. */
TEST(gpu_native_heuristic_verified)
{
    static const long shapes[][2] = {{256, 7168}, {576, 7168}, {1536, 7168}, {1024, 4096}, {4608, 7168}, {512, 16384}};
    static const long Ms[] = {1, 24, 100, 200, 600, 2048};
    gpu_fixture fx;
    if (open_native_gpu(t, &fx))
        return;
    int runs = 0, split = 0;
    for (int in = 0; in < 2; in++)
        for (int out = 0; out < 3; out++) {
            if (in == BT_IN_INT8 && out != BT_OUT_BF16)
                continue;
            const bt_variant v = {(bt_in_type)in, (bt_out_type)out, 128, 128};
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                for (size_t m = 0; m < sizeof Ms / sizeof Ms[0]; m++) {
                    bt_cand c;
                    char why[200];
                    bt_family_native.fallback(Ms[m], shapes[s][0], shapes[s][1], &v, &fx.g.target, &c);
                    if (bt_family_native.check(&c, &v, &fx.g.target, why, sizeof why) != BT_REJ_NONE) {
                        bt_check_fail(t, __FILE__, __LINE__, "heuristic config at M=%ld N=%ld K=%ld: %s", Ms[m],
                                      shapes[s][0], shapes[s][1], why);
                        continue;
                    }
                    split += c.v[bt_family_param_index(&bt_family_native, "SPLIT_K")] > 1;
                    verify_set(t, &fx, &bt_family_native, &c, 1, &v, &shapes[s], 1, &Ms[m], 1, 0, 0, &runs);
                }
        }
    CHECK(split > 0);
    printf("    %d verified runs; %d of the configs split K\n", runs, split);
    close_gpu(&fx);
}

/* Compiles and loads one candidate as family f (the caller unloads it). */
static int load_one(bt_t *t, gpu_fixture *fx, const bt_family *f, const bt_cand *c, const bt_variant *v,
                    bt_kernel *k)
{
    bt_err err = {{0}};
    char *src = bt_jit_source(f, c, v, NULL), *cubin = NULL;
    bt_jit_job job = {.name = "candidate", .source = src};
    int rc = -1;
    if (bt_jit_run(fx->jit, &job, 1, 0, NULL, NULL, &err))
        bt_check_fail(t, __FILE__, __LINE__, "%s", err.msg);
    else if (job.status == BT_JIT_FAILED)
        bt_check_fail(t, __FILE__, __LINE__, "%s failed to compile: %.300s", f->name, job.log);
    else if (bt_read_file(job.path, &cubin, NULL, &err) || bt_kernel_load(&fx->g, cubin, f, c, v, k, &err))
        bt_check_fail(t, __FILE__, __LINE__, "%s", err.msg);
    else
        rc = 0;
    free(cubin);
    bt_jit_job_clear(&job);
    free(src);
    return rc;
}

/* The check under programmatic launch (tune --pdl checks its candidates so): after
 * bt_problem_refill a native kernel launched programmatically passes, since it touches its
 * inputs only once the kernel before it is complete; a classic kernel, which does not wait for
 * it, launched so fails; launched plainly after the refill, it passes (the refill writes the
 * same inputs again). */
TEST(gpu_check_under_programmatic_launch)
{
    gpu_fixture fx;
    if (open_gpu(t, &fx))
        return;
    const bt_variant v = {BT_IN_FP8, BT_OUT_BF16, 128, 128};
    const bt_cand nat = {{128, 128, 5, 4, 1, 1, 0, 1}}, cla = {{64, 128, 128, 32, 4, 3}};
    if (bt_family_native.check(&nat, &v, &fx.g.target, NULL, 0) == BT_REJ_ARCH) {
        close_gpu(&fx);
        SKIP("the native family needs sm_90a; this device is %s", fx.g.target.arch);
    }
    bt_family classic_pdl = bt_family_classic;
    classic_pdl.programmatic = 1; /* launched programmatically, as it never is */
    bt_kernel kn = {0}, kc = {0};
    bt_problem p = {0};
    CUdeviceptr ref = 0;
    bt_err err = {{0}};
    const long M = 256, N = 7168, K = 7168;
    const unsigned long long seed = 4242;
    if (load_one(t, &fx, &bt_family_native, &nat, &v, &kn) || load_one(t, &fx, &classic_pdl, &cla, &v, &kc))
        goto out;
    if (bt_problem_alloc(&fx.g, M, N, K, &v, &p, &err) ||
        (fx.g.cu.cuMemAlloc(&ref, (size_t)(M * N) * 4) != CUDA_SUCCESS && bt_fail(&err, "allocating the reference")) ||
        bt_problem_fill(&fx.g, &p, &v, seed, &err) || bt_reference(&fx.g, &p, &v, ref, &err)) {
        bt_check_fail(t, __FILE__, __LINE__, "problem setup: %s", err.msg);
        goto out;
    }
    struct {
        const bt_kernel *k;
        int programmatic, pass;
    } runs[] = {{&kn, 1, 1}, {&kc, 1, 0}, {&kc, 0, 1}, {&kn, 0, 1}};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        bt_check chk;
        if (bt_problem_poison(&fx.g, &p, fx.g.stream, &err) ||
            bt_problem_refill(&fx.g, &p, &v, seed, fx.g.stream, &err) ||
            bt_kernel_launch(&fx.g, runs[i].k, &p.args, fx.g.stream, runs[i].programmatic, &err) ||
            bt_compare(&fx.g, &p, &v, ref, &chk, &err)) {
            bt_check_fail(t, __FILE__, __LINE__, "run %zu: %s", i, err.msg);
            break;
        }
        printf("    %s, %s launch: rel_err %.3g, %llu non-finite\n", runs[i].k->family->name,
               runs[i].programmatic ? "programmatic" : "plain", chk.rel_err, chk.nonfinite);
        CHECK_EQ(bt_check_passed(&chk, v.out), runs[i].pass);
    }
out:
    bt_kernel_unload(&fx.g, &kn);
    bt_kernel_unload(&fx.g, &kc);
    if (ref)
        fx.g.cu.cuMemFree(ref);
    bt_problem_free(&fx.g, &p);
    close_gpu(&fx);
}
