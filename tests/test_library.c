/* The library through its public header: configs picked from a directory (native before
 * classic, nearest batch size), the heuristic without one, results checked against the
 * reference, a launch captured in a CUDA graph, and calls from a thread without the handle's
 * context. Skipped without a GPU. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blocktune.h"
#include "configio.h"
#include "gpu.h"
#include "harness.h"
#include "jit.h"
#include "util.h"

/* vals: the first nvals of the family's parameters; the rest (optional ones) take their defaults. */
static void write_config(bt_t *t, const char *dir, const bt_family *f, const char *device, long N, long K,
                         long batch, const int *vals, int nvals)
{
    char name[1024], path[2048];
    bt_err err = {{0}};
    bt_config c = {0};
    bt_cand cand = {{0}};
    for (int i = 0; i < f->nparams; i++)
        cand.v[i] = i < nvals ? vals[i] : f->params[i].dflt;
    bt_config_set(&c, batch, &cand);
    CHECK(bt_config_filename(name, sizeof name, f, N, K, device, BT_IN_FP8, 128, 128, BT_FMT_SGLANG) == 0);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (bt_config_merge_write(path, f, &c, NULL, &err))
        bt_check_fail(t, __FILE__, __LINE__, "%s", err.msg);
    bt_config_free(&c);
}

/* Runs g through the library and checks C against the reference, for quantization blocks of
 * block_n x block_k. A and the scales are written again by the kernel just before (the one a
 * programmatic launch overlaps). */
static void check_gemm_block(bt_t *t, bt_gpu *g, blocktune *bt, long M, long N, long K, bt_out_type out,
                             int block_n, int block_k, const char *expect_desc)
{
    bt_err err = {{0}};
    bt_variant v = {BT_IN_FP8, out, block_n, block_k};
    bt_problem p;
    CUdeviceptr ref = 0;
    char msg[512], desc[512];
    if (bt_problem_alloc(g, M, N, K, &v, &p, &err) || g->cu.cuMemAlloc(&ref, (size_t)(M * N) * 4) != CUDA_SUCCESS ||
        bt_problem_fill(g, &p, &v, 98, &err) || bt_problem_poison(g, &p, g->stream, &err) ||
        bt_problem_fill(g, &p, &v, 99, &err)) {
        bt_check_fail(t, __FILE__, __LINE__, "setup: %s", err.msg);
        goto out;
    }
    blocktune_gemm_args a = {p.args.A, p.args.B, p.args.As, p.args.Bs, p.args.C, M, N, K,
                             BLOCKTUNE_FP8, (blocktune_output)out, block_n, block_k};
    CHECK(blocktune_describe(bt, &a, desc, sizeof desc) == 0);
    CHECK_CONTAINS(desc, expect_desc);
    if (blocktune_gemm(bt, &a, g->stream, msg, sizeof msg)) {
        bt_check_fail(t, __FILE__, __LINE__, "blocktune_gemm: %s", msg);
        goto out;
    }
    if (bt_reference(g, &p, &v, ref, &err)) {
        bt_check_fail(t, __FILE__, __LINE__, "reference: %s", err.msg);
        goto out;
    }
    bt_check chk;
    CHECK(bt_compare(g, &p, &v, ref, &chk, &err) == 0);
    if (!bt_check_passed(&chk, out))
        bt_check_fail(t, __FILE__, __LINE__, "%s M=%ld: rel_err %.3g, %llu unwritten, %llu guard", desc, M,
                      chk.rel_err, chk.nonfinite, chk.guard);
out:
    if (ref)
        g->cu.cuMemFree(ref);
    bt_problem_free(g, &p);
}

static void check_gemm(bt_t *t, bt_gpu *g, blocktune *bt, long M, long N, long K, bt_out_type out,
                       const char *expect_desc)
{
    check_gemm_block(t, g, bt, M, N, K, out, 128, 128, expect_desc);
}

/* The arguments' check refuses, in one line, what the kernels could not index. */
TEST(library_gemm_check_refuses_what_the_kernels_cannot_index)
{
    bt_err err = {{0}};
    bt_gemm_args a = {0x1000, 0x2000, 0, 0, 0, 16, 7168, 2048};
    CHECK_EQ(bt_gemm_check(&a, &err), 0);
    a.K = 100;
    CHECK_EQ(bt_gemm_check(&a, &err), -1);
    CHECK_CONTAINS(err.msg, "K must be a multiple of 16");
    a.K = 2048, a.N = 1L << 25; /* a group of 1024 rows of 8-column tiles passes 2^31 */
    CHECK_EQ(bt_gemm_check(&a, &err), -1);
    CHECK_STREQ(err.msg, "M = 16, N = 33554432: too many tiles for the kernels' 32-bit tile numbers");
    a.N = 1L << 20, a.M = 1L << 20; /* 2^16 x 2^17 tiles */
    CHECK_EQ(bt_gemm_check(&a, &err), -1);
    a.M = 0;
    CHECK_EQ(bt_gemm_check(&a, &err), -1);
    CHECK_CONTAINS(err.msg, "must be positive");
}

/* prepare and describe refuse what gemm refuses, and NULL pointers are refused in one line
 * rather than followed (the call's arguments are checked before the handle, so no GPU is needed
 * here). */
TEST(library_refuses_bad_calls_without_a_handle)
{
    char msg[512];
    blocktune *bt = NULL;
    const long Ms[] = {16, 64}, zero[] = {0};
    blocktune_gemm_args ok = {0, 0, 0, 0, 0, 16, 7168, 2048, BLOCKTUNE_FP8, BLOCKTUNE_BF16, 128, 128};
    blocktune_gemm_args odd_k = ok;
    odd_k.K = 100;
    CHECK_EQ(blocktune_open(NULL, NULL, msg, sizeof msg), -1);
    CHECK_STREQ(msg, "the handle's address is NULL");
    CHECK_EQ(blocktune_prepare(bt, &odd_k, Ms, 2, msg, sizeof msg), -1);
    CHECK_CONTAINS(msg, "K must be a multiple of 16");
    CHECK_EQ(blocktune_prepare(bt, &ok, zero, 1, msg, sizeof msg), -1);
    CHECK_CONTAINS(msg, "M, N and K must be positive (got 0,");
    CHECK_EQ(blocktune_prepare(bt, &ok, NULL, 2, msg, sizeof msg), -1);
    CHECK_STREQ(msg, "nM = 2 with Ms NULL: want a list of nM batch sizes");
    CHECK_EQ(blocktune_prepare(bt, NULL, Ms, 2, msg, sizeof msg), -1);
    CHECK_STREQ(msg, "the shape is NULL");
    CHECK_EQ(blocktune_prepare(bt, &ok, Ms, 2, msg, sizeof msg), -1);
    CHECK_STREQ(msg, "the handle is NULL");
    CHECK_EQ(blocktune_prepare(bt, &ok, Ms, 2, NULL, 0), -1);
    CHECK_EQ(blocktune_gemm(bt, NULL, NULL, msg, sizeof msg), -1);
    CHECK_STREQ(msg, "the arguments are NULL");
    CHECK_EQ(blocktune_gemm(bt, &odd_k, NULL, msg, sizeof msg), -1);
    CHECK_CONTAINS(msg, "K must be a multiple of 16");
    CHECK_EQ(blocktune_gemm(bt, &ok, NULL, msg, sizeof msg), -1);
    CHECK_STREQ(msg, "A, B, As, Bs and C must all be device pointers (one is 0)");
    blocktune_gemm_args bufs = ok; /* (never followed: the handle is NULL) */
    bufs.A = 0x10000, bufs.B = 0x20000, bufs.As = 0x30004, bufs.Bs = 0x40000, bufs.C = 0x50001;
    CHECK_EQ(blocktune_gemm(bt, &bufs, NULL, msg, sizeof msg), -1);
    CHECK_STREQ(msg, "C must be aligned to its 2-byte elements");
    bufs.C = 0x50002, bufs.Bs = 0x40002;
    CHECK_EQ(blocktune_gemm(bt, &bufs, NULL, msg, sizeof msg), -1);
    CHECK_STREQ(msg, "As and Bs must be 4-byte aligned (float scales)");
    bufs.Bs = 0x40000, bufs.A = 0x10008;
    CHECK_EQ(blocktune_gemm(bt, &bufs, NULL, msg, sizeof msg), -1);
    CHECK_STREQ(msg, "A and B must be 16-byte aligned");
    bufs.A = 0x10000;
    CHECK_EQ(blocktune_gemm(bt, &bufs, NULL, msg, sizeof msg), -1);
    CHECK_STREQ(msg, "the handle is NULL");
    /* prepare reads the shape and types even with no batch size */
    CHECK_EQ(blocktune_prepare(bt, &odd_k, Ms, 0, msg, sizeof msg), -1);
    CHECK_CONTAINS(msg, "K must be a multiple of 16");
    CHECK_EQ(blocktune_describe(bt, &odd_k, msg, sizeof msg), -1);
    CHECK_CONTAINS(msg, "K must be a multiple of 16");
    ok.M = 0;
    CHECK_EQ(blocktune_describe(bt, &ok, msg, sizeof msg), -1);
    CHECK_CONTAINS(msg, "must be positive");
    ok.M = 16;
    CHECK_EQ(blocktune_describe(bt, &ok, msg, sizeof msg), -1);
    CHECK_STREQ(msg, "the handle is NULL");
    CHECK_EQ(blocktune_describe(bt, NULL, msg, sizeof msg), -1);
    CHECK_STREQ(msg, "the arguments are NULL");
    CHECK_EQ(blocktune_describe(bt, &ok, NULL, 64), -1);
    blocktune_close(NULL);
}

/* A failed compile's NVRTC log spans lines; the message quoting it stays one line. */
TEST(library_compile_log_quoted_on_one_line)
{
    const char *log = "classic.cuh(78): error: static assertion failed with \"chunk plan\"\n"
                      "      static_assert(THREADS % CH == 0,\r\n\t^\n\n"
                      "1 error detected in the compilation of \"candidate.cu\".\n";
    char line[512], tiny[12];
    bt_one_line(line, sizeof line, log);
    CHECK_STREQ(line, "classic.cuh(78): error: static assertion failed with \"chunk plan\" static_assert(THREADS % "
                      "CH == 0, ^ 1 error detected in the compilation of \"candidate.cu\".");
    bt_one_line(tiny, sizeof tiny, "\n  one\n\ntwo three");
    CHECK_STREQ(tiny, "one two thr"); /* cut to fit, no trailing space */
    bt_one_line(tiny, 9, "one two  three");
    CHECK_STREQ(tiny, "one two");
    bt_one_line(tiny, sizeof tiny, "");
    CHECK_STREQ(tiny, "");
}

TEST(gpu_library_dispatch_and_graph_capture)
{
    bt_gpu g;
    bt_jit *jit;
    bt_err err = {{0}};
    char dir[4200], cache[4200], msg[512];
    snprintf(cache, sizeof cache, "%s/libcache", bt_test_tmpdir());
    if (bt_gpu_open(&g, 0, cache, BT_JIT_STORE_REQUIRED, 1, &jit, &err))
        SKIP("%s", err.msg);
    snprintf(dir, sizeof dir, "%s/libconfigs", bt_test_tmpdir());
    CHECK(bt_mkdirs(dir, &err) == 0);
    const long N = 7168, K = 2304;
    int sm90a = strcmp(g.target.arch, "sm_90a") == 0;
    /* Classic configs for two batch sizes of (7168, 2304); a native one only for (3072, 1536). */
    write_config(t, dir, &bt_family_classic, g.info.name, N, K, 16, (int[]){16, 64, 128, 1, 4, 3}, 6);
    write_config(t, dir, &bt_family_classic, g.info.name, N, K, 256, (int[]){128, 64, 128, 8, 8, 3}, 6);
    if (sm90a)
        write_config(t, dir, &bt_family_native, g.info.name, 3072, 1536, 64, (int[]){64, 48, 6, 8, 1, 1}, 6);

    blocktune *bt = NULL;
    blocktune_options opt = {.config_dir = dir, .cache_dir = cache};
    if (blocktune_open(&bt, &opt, msg, sizeof msg)) {
        bt_check_fail(t, __FILE__, __LINE__, "blocktune_open: %s", msg);
        goto out;
    }
    check_gemm(t, &g, bt, 20, N, K, BT_OUT_BF16, "classic BLOCK_SIZE_M=16");  /* nearest 16 */
    check_gemm(t, &g, bt, 200, N, K, BT_OUT_F16, "classic BLOCK_SIZE_M=128"); /* nearest 256 */
    check_gemm(t, &g, bt, 136, N, K, BT_OUT_F32, "batch 16");                 /* tie: the smaller */
    if (sm90a) {
        check_gemm(t, &g, bt, 64, 3072, 1536, BT_OUT_BF16, "native BLOCK_SIZE_M=64 BLOCK_SIZE_N=48");
        /* heuristic: 128 x 128 tiles would leave 92 of 132 SMs idle */
        check_gemm(t, &g, bt, 1000, 576, 7168, BT_OUT_BF16, "native BLOCK_SIZE_M=64 BLOCK_SIZE_N=80");
        /* 64-deep quantization blocks: the heuristic's 5 stages, counted in 128-deep K blocks */
        check_gemm_block(t, &g, bt, 4096, 576, 7168, BT_OUT_BF16, 128, 64,
                         "native BLOCK_SIZE_M=128 BLOCK_SIZE_N=128 num_stages=5");
        check_gemm_block(t, &g, bt, 16, 7168, 2304, BT_OUT_BF16, 128, 64, "native BLOCK_SIZE_M=64");
    } else {
        check_gemm(t, &g, bt, 1000, 576, 7168, BT_OUT_BF16, "classic BLOCK_SIZE_M=64 BLOCK_SIZE_N=128");
    }

    /* Prepared, then captured: the launch allocates and synchronizes nothing. */
    {
        bt_variant v = {BT_IN_FP8, BT_OUT_BF16, 128, 128};
        bt_problem p;
        CUgraph graph = NULL;
        CUgraphExec exec = NULL;
        long Ms[] = {48};
        if (bt_problem_alloc(&g, 48, N, K, &v, &p, &err) || bt_problem_fill(&g, &p, &v, 5, &err)) {
            bt_check_fail(t, __FILE__, __LINE__, "%s", err.msg);
            goto out;
        }
        blocktune_gemm_args a = {p.args.A, p.args.B, p.args.As, p.args.Bs, p.args.C, 48, N, K,
                                 BLOCKTUNE_FP8, BLOCKTUNE_BF16, 128, 128};
        CHECK(blocktune_prepare(bt, &a, Ms, 1, msg, sizeof msg) == 0);
        CHECK(g.cu.cuStreamBeginCapture(g.stream, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
        int rc = blocktune_gemm(bt, &a, g.stream, msg, sizeof msg);
        CHECK(g.cu.cuStreamEndCapture(g.stream, &graph) == CUDA_SUCCESS);
        CHECK(rc == 0);
        CHECK(graph && g.cu.cuGraphInstantiateWithFlags(&exec, graph, 0) == CUDA_SUCCESS);
        CHECK(exec && g.cu.cuGraphLaunch(exec, g.stream) == CUDA_SUCCESS);
        CHECK(g.cu.cuStreamSynchronize(g.stream) == CUDA_SUCCESS);
        if (exec)
            g.cu.cuGraphExecDestroy(exec);
        if (graph)
            g.cu.cuGraphDestroy(graph);
        bt_problem_free(&g, &p);
    }

    /* Bad input: one line, no launch. */
    blocktune_gemm_args bad = {0, 0, 0, 0, 0, 4, 64, 100, BLOCKTUNE_FP8, BLOCKTUNE_BF16, 128, 128};
    CHECK(blocktune_gemm(bt, &bad, g.stream, msg, sizeof msg) == -1);
    CHECK_CONTAINS(msg, "K must be a multiple of 16");
    CHECK(blocktune_prepare(bt, &bad, (long[]){4}, 1, msg, sizeof msg) == -1);
    CHECK_CONTAINS(msg, "K must be a multiple of 16");
    CHECK(blocktune_describe(bt, &bad, msg, sizeof msg) == -1);
    CHECK_CONTAINS(msg, "K must be a multiple of 16");
    /* A quantization block no kernel takes is named as such, not as the input type or GPU. */
    blocktune_gemm_args odd_block = {0, 0, 0, 0, 0, 4, 256, 256, BLOCKTUNE_INT8, BLOCKTUNE_BF16, 128, 48};
    CHECK(blocktune_describe(bt, &odd_block, msg, sizeof msg) == -1);
    CHECK_CONTAINS(msg, "no kernel supports the quantization block shape [128, 48]");
    CHECK(blocktune_prepare(bt, &odd_block, (long[]){4}, 1, msg, sizeof msg) == -1);
    CHECK_CONTAINS(msg, "no kernel supports the quantization block shape [128, 48]");
    /* Without a config the classic heuristic takes the block's shape as its tile, as SGLang's default does. */
    blocktune_gemm_args narrow = {0, 0, 0, 0, 0, 4, 256, 256, BLOCKTUNE_INT8, BLOCKTUNE_BF16, 64, 64};
    CHECK(blocktune_describe(bt, &narrow, msg, sizeof msg) == 0);
    if (!sm90a)
        CHECK_CONTAINS(msg, "classic BLOCK_SIZE_M=64 BLOCK_SIZE_N=64 BLOCK_SIZE_K=64 GROUP_SIZE_M=32");
out:
    blocktune_close(bt);
    bt_jit_close(jit);
    bt_gpu_close(&g);
}

/* Programmatic dependent launch: native kernels that start while the kernel writing their A
 * and scales finishes still read what it wrote, with clusters and split-K too, and back to
 * back in a graph. */
TEST(gpu_library_programmatic_launch)
{
    bt_gpu g;
    bt_jit *jit;
    bt_err err = {{0}};
    char dir[4200], cache[4200], msg[512];
    blocktune *bt = NULL;
    bt_problem p[2];
    int np = 0;
    CUgraph graph = NULL;
    CUgraphExec exec = NULL;
    CUdeviceptr ref[2] = {0, 0};
    snprintf(cache, sizeof cache, "%s/libcache", bt_test_tmpdir());
    if (bt_gpu_open(&g, 0, cache, BT_JIT_STORE_REQUIRED, 1, &jit, &err))
        SKIP("%s", err.msg);
    if (strcmp(g.target.arch, "sm_90a") != 0) {
        bt_jit_close(jit);
        bt_gpu_close(&g);
        SKIP("the native kernels need sm_90a");
    }
    snprintf(dir, sizeof dir, "%s/pdlconfigs", bt_test_tmpdir());
    CHECK(bt_mkdirs(dir, &err) == 0);
    write_config(t, dir, &bt_family_native, g.info.name, 3072, 1536, 64, (int[]){64, 48, 6, 8, 1, 1}, 6);
    write_config(t, dir, &bt_family_native, g.info.name, 4096, 512, 512, (int[]){128, 128, 4, 8, 2, 1}, 6);
    write_config(t, dir, &bt_family_native, g.info.name, 512, 7168, 16, (int[]){64, 24, 12, 8, 1, 4}, 6);
    blocktune_options opt = {.config_dir = dir, .cache_dir = cache, .pdl = 1};
    if (blocktune_open(&bt, &opt, msg, sizeof msg)) {
        bt_check_fail(t, __FILE__, __LINE__, "blocktune_open: %s", msg);
        goto out;
    }
    check_gemm(t, &g, bt, 64, 3072, 1536, BT_OUT_BF16, "native BLOCK_SIZE_M=64 BLOCK_SIZE_N=48");
    check_gemm(t, &g, bt, 500, 4096, 512, BT_OUT_BF16, "CLUSTER_M=2");
    check_gemm(t, &g, bt, 16, 512, 7168, BT_OUT_F16, "SPLIT_K=4");
    check_gemm(t, &g, bt, 1000, 576, 7168, BT_OUT_BF16, "native BLOCK_SIZE_M=64 BLOCK_SIZE_N=80"); /* heuristic */

    /* Captured: a fill, then two GEMMs of different shapes back to back, each overlapping the
     * kernel before it. */
    {
        bt_variant v = {BT_IN_FP8, BT_OUT_BF16, 128, 128};
        const long shapes[2][3] = {{64, 3072, 1536}, {500, 4096, 512}};
        blocktune_gemm_args a[2];
        for (; np < 2; np++) {
            long M = shapes[np][0], N = shapes[np][1], K = shapes[np][2];
            if (bt_problem_alloc(&g, M, N, K, &v, &p[np], &err) ||
                g.cu.cuMemAlloc(&ref[np], (size_t)(M * N) * 4) != CUDA_SUCCESS ||
                bt_problem_fill(&g, &p[np], &v, 7, &err) || bt_problem_poison(&g, &p[np], g.stream, &err)) {
                bt_check_fail(t, __FILE__, __LINE__, "setup: %s", err.msg);
                np++;
                goto out;
            }
            a[np] = (blocktune_gemm_args){p[np].args.A, p[np].args.B, p[np].args.As, p[np].args.Bs, p[np].args.C,
                                          M, N, K, BLOCKTUNE_FP8, BLOCKTUNE_BF16, 128, 128};
            CHECK(blocktune_prepare(bt, &a[np], &M, 1, msg, sizeof msg) == 0);
        }
        CHECK(g.cu.cuStreamBeginCapture(g.stream, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
        int rc = bt_problem_fill(&g, &p[0], &v, 8, &err);
        rc = rc || blocktune_gemm(bt, &a[0], g.stream, msg, sizeof msg) || blocktune_gemm(bt, &a[1], g.stream, msg, sizeof msg);
        CHECK(g.cu.cuStreamEndCapture(g.stream, &graph) == CUDA_SUCCESS);
        CHECK(rc == 0);
        CHECK(graph && g.cu.cuGraphInstantiateWithFlags(&exec, graph, 0) == CUDA_SUCCESS);
        CHECK(exec && g.cu.cuGraphLaunch(exec, g.stream) == CUDA_SUCCESS);
        for (int i = 0; i < 2; i++) {
            bt_check chk = {0};
            if (bt_reference(&g, &p[i], &v, ref[i], &err) || bt_compare(&g, &p[i], &v, ref[i], &chk, &err)) {
                bt_check_fail(t, __FILE__, __LINE__, "%s", err.msg);
                continue;
            }
            if (!bt_check_passed(&chk, BT_OUT_BF16))
                bt_check_fail(t, __FILE__, __LINE__, "graph GEMM %d: rel_err %.3g, %llu unwritten, %llu guard", i,
                              chk.rel_err, chk.nonfinite, chk.guard);
        }
    }
out:
    if (exec)
        g.cu.cuGraphExecDestroy(exec);
    if (graph)
        g.cu.cuGraphDestroy(graph);
    for (int i = 0; i < np; i++)
        bt_problem_free(&g, &p[i]);
    for (int i = 0; i < 2; i++)
        if (ref[i])
            g.cu.cuMemFree(ref[i]);
    blocktune_close(bt);
    bt_jit_close(jit);
    bt_gpu_close(&g);
}

/* One blocktune_gemm on a thread of its own, and the contexts current there around it. */
typedef struct {
    blocktune *bt;
    const blocktune_gemm_args *a;
    const bt_cuda *cu;
    CUcontext before, after;
    int rc;
    char msg[512];
} thread_call;

static void *gemm_on_thread(void *arg)
{
    thread_call *c = arg;
    if (c->cu->cuCtxGetCurrent(&c->before) != CUDA_SUCCESS)
        c->before = (CUcontext)c; /* (a value no context has: the check below fails) */
    c->rc = blocktune_gemm(c->bt, c->a, NULL, c->msg, sizeof c->msg);
    if (c->cu->cuCtxGetCurrent(&c->after) != CUDA_SUCCESS)
        c->after = (CUcontext)c;
    return NULL;
}

/* A new thread has no CUDA context current: the handle's is made current for the call, which
 * loads the kernel and launches it (stream NULL: that context's default stream), and is taken
 * away again after; C matches, bit for bit, the same call's from the thread that opened it. */
TEST(gpu_library_gemm_from_a_thread_without_a_context)
{
    bt_gpu g;
    bt_jit *jit;
    bt_err err = {{0}};
    char cache[4200], msg[512];
    blocktune *bt = NULL;
    bt_problem p;
    CUdeviceptr ref = 0;
    unsigned char *from_thread = NULL, *from_main = NULL;
    const long M = 40, N = 7168, K = 2304;
    bt_variant v = {BT_IN_FP8, BT_OUT_BF16, 128, 128};
    memset(&p, 0, sizeof p);
    snprintf(cache, sizeof cache, "%s/libcache", bt_test_tmpdir());
    if (bt_gpu_open(&g, 0, cache, BT_JIT_STORE_REQUIRED, 1, &jit, &err))
        SKIP("%s", err.msg);
    blocktune_options opt = {.cache_dir = cache};
    if (blocktune_open(&bt, &opt, msg, sizeof msg)) {
        bt_check_fail(t, __FILE__, __LINE__, "blocktune_open: %s", msg);
        goto out;
    }
    if (bt_problem_alloc(&g, M, N, K, &v, &p, &err) || g.cu.cuMemAlloc(&ref, (size_t)(M * N) * 4) != CUDA_SUCCESS ||
        bt_problem_fill(&g, &p, &v, 11, &err) || bt_problem_poison(&g, &p, g.stream, &err) ||
        g.cu.cuStreamSynchronize(g.stream) != CUDA_SUCCESS) {
        bt_check_fail(t, __FILE__, __LINE__, "setup: %s", err.msg);
        goto out;
    }
    blocktune_gemm_args a = {p.args.A, p.args.B, p.args.As, p.args.Bs, p.args.C, M, N, K,
                             BLOCKTUNE_FP8, BLOCKTUNE_BF16, 128, 128};
    thread_call call = {.bt = bt, .a = &a, .cu = &g.cu, .rc = -1};
    pthread_t tid;
    if (pthread_create(&tid, NULL, gemm_on_thread, &call) != 0) {
        bt_check_fail(t, __FILE__, __LINE__, "cannot start a thread");
        goto out;
    }
    pthread_join(tid, NULL);
    CHECK(call.before == NULL);
    if (call.rc)
        bt_check_fail(t, __FILE__, __LINE__, "blocktune_gemm on a thread without a context: %s", call.msg);
    CHECK(call.after == NULL);
    CHECK(g.cu.cuCtxSynchronize() == CUDA_SUCCESS); /* (the kernel ran on the context's default stream) */
    bt_check chk;
    if (bt_reference(&g, &p, &v, ref, &err) || bt_compare(&g, &p, &v, ref, &chk, &err)) {
        bt_check_fail(t, __FILE__, __LINE__, "reference: %s", err.msg);
        goto out;
    }
    if (!bt_check_passed(&chk, BT_OUT_BF16))
        bt_check_fail(t, __FILE__, __LINE__, "from the thread: rel_err %.3g, %llu unwritten, %llu guard", chk.rel_err,
                      chk.nonfinite, chk.guard);

    from_thread = bt_xmalloc(p.c_bytes), from_main = bt_xmalloc(p.c_bytes);
    CHECK(g.cu.cuMemcpyDtoH(from_thread, p.args.C, p.c_bytes) == CUDA_SUCCESS);
    CHECK(bt_problem_poison(&g, &p, g.stream, &err) == 0);
    if (blocktune_gemm(bt, &a, g.stream, msg, sizeof msg)) {
        bt_check_fail(t, __FILE__, __LINE__, "blocktune_gemm: %s", msg);
        goto out;
    }
    CHECK(g.cu.cuStreamSynchronize(g.stream) == CUDA_SUCCESS);
    CHECK(g.cu.cuMemcpyDtoH(from_main, p.args.C, p.c_bytes) == CUDA_SUCCESS);
    CHECK(memcmp(from_thread, from_main, p.c_bytes) == 0);
out:
    free(from_thread);
    free(from_main);
    if (ref)
        g.cu.cuMemFree(ref);
    bt_problem_free(&g, &p);
    blocktune_close(bt);
    bt_jit_close(jit);
    bt_gpu_close(&g);
}

/* Replaces the cache entry of (f, cand) by one that reads as a hit (its sidecar names the hash
 * of what is there) but holds no kernel, so that loading it fails; its path into path. */
static int plant_broken_kernel(bt_t *t, bt_jit *jit, const bt_family *f, const bt_cand *cand, const bt_variant *v,
                               char path[4096])
{
    static const char junk[] = "// not a kernel: planted by the test\n";
    char *src = bt_jit_source(f, cand, v, NULL), meta[4200], sum[65], text[256];
    bt_jit_job job = {.name = "planted", .source = src};
    bt_err err = {{0}};
    bt_sha256 sha;
    int rc = -1;
    if (bt_jit_run(jit, &job, 1, 1, NULL, NULL, &err) || job.status == BT_JIT_FAILED) {
        bt_check_fail(t, __FILE__, __LINE__, "compiling %s: %s", f->name, job.log ? job.log : err.msg);
        goto out;
    }
    bt_sha256_init(&sha);
    bt_sha256_update(&sha, junk, strlen(junk));
    bt_sha256_hex(&sha, sum);
    snprintf(path, 4096, "%s", job.path);
    snprintf(meta, sizeof meta, "%.*s.meta", (int)(strlen(job.path) - strlen(".cubin")), job.path);
    snprintf(text, sizeof text, "regs 1\nspill_bytes 0\ncubin_sha256 %s\n", sum);
    if (bt_write_file_atomic(path, junk, strlen(junk), &err) || bt_write_file_atomic(meta, text, strlen(text), &err)) {
        bt_check_fail(t, __FILE__, __LINE__, "%s", err.msg);
        goto out;
    }
    rc = 0;
out:
    free(src);
    bt_jit_job_clear(&job);
    return rc;
}

/* A config entry whose kernel fails to load is remembered: the call runs the next choice (the
 * heuristic) and gets the right C, describe names the entry and why it failed, and the kernel
 * is not tried again. When every kernel fails, the call fails in one line, every time. */
TEST(gpu_library_failed_kernel_falls_back)
{
    bt_gpu g;
    bt_jit *jit;
    bt_err err = {{0}};
    char dir[4200], cache[4200], msg[512], again[512], broken[4096];
    blocktune *bt = NULL;
    bt_problem p2 = {0}; /* buffers for the calls whose kernels all fail */
    const long N = 7168, K = 2304;
    const int cfg[] = {16, 64, 128, 1, 4, 3};
    bt_variant v = {BT_IN_FP8, BT_OUT_BF16, 128, 128};
    /* Its own cache: the broken entries must not reach the other tests. */
    snprintf(cache, sizeof cache, "%s/failcache", bt_test_tmpdir());
    if (bt_gpu_open(&g, 0, cache, BT_JIT_STORE_REQUIRED, 1, &jit, &err))
        SKIP("%s", err.msg);
    snprintf(dir, sizeof dir, "%s/failconfigs", bt_test_tmpdir());
    CHECK(bt_mkdirs(dir, &err) == 0);
    write_config(t, dir, &bt_family_classic, g.info.name, N, K, 16, cfg, 6);
    bt_cand cand = {{0}};
    memcpy(cand.v, cfg, sizeof cfg);
    if (plant_broken_kernel(t, jit, &bt_family_classic, &cand, &v, broken))
        goto out;
    blocktune_options opt = {.config_dir = dir, .cache_dir = cache};
    if (blocktune_open(&bt, &opt, msg, sizeof msg)) {
        bt_check_fail(t, __FILE__, __LINE__, "blocktune_open: %s", msg);
        goto out;
    }
    blocktune_gemm_args shape = {0, 0, 0, 0, 0, 20, N, K, BLOCKTUNE_FP8, BLOCKTUNE_BF16, 128, 128};
    CHECK(blocktune_describe(bt, &shape, msg, sizeof msg) == 0);
    CHECK_CONTAINS(msg, "classic BLOCK_SIZE_M=16 BLOCK_SIZE_N=64"); /* (not tried yet) */
    if (blocktune_prepare(bt, &shape, (long[]){20}, 1, msg, sizeof msg))
        bt_check_fail(t, __FILE__, __LINE__, "blocktune_prepare: %s", msg);
    check_gemm(t, &g, bt, 20, N, K, BT_OUT_BF16, "(built-in heuristic), instead of classic BLOCK_SIZE_M=16 BLOCK_SIZE_N=64");
    CHECK(blocktune_describe(bt, &shape, msg, sizeof msg) == 0);
    CHECK_CONTAINS(msg, "batch 16), which failed: ");
    CHECK(strchr(msg, '\n') == NULL);
    /* Gone from the cache, the broken kernel would be compiled again if it were tried again. */
    char meta[4200];
    snprintf(meta, sizeof meta, "%.*s.meta", (int)(strlen(broken) - strlen(".cubin")), broken);
    CHECK(unlink(broken) == 0 && unlink(meta) == 0);
    check_gemm(t, &g, bt, 20, N, K, BT_OUT_BF16, "which failed: ");
    CHECK(access(broken, F_OK) != 0);

    /* Every kernel of another shape broken: the heuristics' (native, where it runs, then classic). */
    const long M2 = 8, N2 = 1024, K2 = 512;
    const bt_family *fams[] = {&bt_family_native, &bt_family_classic};
    for (size_t i = 0; i < sizeof fams / sizeof fams[0]; i++) {
        bt_cand h;
        fams[i]->fallback(M2, N2, K2, &v, &g.target, &h);
        if (fams[i]->check(&h, &v, &g.target, NULL, 0) == BT_REJ_NONE &&
            plant_broken_kernel(t, jit, fams[i], &h, &v, broken))
            goto out;
    }
    if (bt_problem_alloc(&g, M2, N2, K2, &v, &p2, &err)) {
        bt_check_fail(t, __FILE__, __LINE__, "%s", err.msg);
        goto out;
    }
    blocktune_gemm_args none = {p2.args.A, p2.args.B, p2.args.As, p2.args.Bs, p2.args.C, M2, N2, K2,
                                BLOCKTUNE_FP8, BLOCKTUNE_BF16, 128, 128};
    CHECK(blocktune_gemm(bt, &none, g.stream, msg, sizeof msg) == -1);
    CHECK(msg[0] != '\0' && strchr(msg, '\n') == NULL);
    CHECK(blocktune_gemm(bt, &none, g.stream, again, sizeof again) == -1);
    CHECK_STREQ(again, msg);
    CHECK(blocktune_describe(bt, &none, again, sizeof again) == -1);
    CHECK_STREQ(again, msg);
out:
    blocktune_close(bt);
    bt_problem_free(&g, &p2);
    bt_jit_close(jit);
    bt_gpu_close(&g);
}

/* On the stand-in driver (tests/fakecuda), with a context current as a caller has one: a
 * config_dir that is not a directory is refused at open; a config file that cannot be read is
 * named by describe; a kernel the GPU cannot load for want of memory is not remembered as
 * failed (the next call loads it), while one whose image the GPU refuses is, and the next
 * choice runs instead; inside a graph capture an unprepared M is refused. */
TEST(library_failures_on_the_stand_in_driver)
{
    char fake[4200], dir[4300], cache[4300], name[1024], path[5400], msg[2048];
    if (bt_test_fake_driver(fake, sizeof fake) != 0)
        SKIP("no stand-in driver at %.200s", fake);
    char *saved = bt_test_set_env("BT_LIBCUDA", fake);
    setenv("BT_FAKE_CUDA_CTX", "1", 1);
    blocktune *bt = NULL;
    bt_err err = {{0}};
    snprintf(dir, sizeof dir, "%s/fake-lib-configs", bt_test_tmpdir());
    snprintf(cache, sizeof cache, "%s/fake-lib-cache", bt_test_tmpdir());
    blocktune_options nodir = {.config_dir = "/nonexistent/configs", .cache_dir = cache};
    CHECK_EQ(blocktune_open(&bt, &nodir, msg, sizeof msg), -1);
    CHECK_STREQ(msg, "config_dir /nonexistent/configs: No such file or directory");
    CHECK(bt_mkdirs(dir, &err) == 0);
    /* the native file for (7168, 2304) is not JSON */
    CHECK(bt_config_filename(name, sizeof name, &bt_family_native, 7168, 2304, "Fake GPU", BT_IN_FP8, 128, 128,
                             BT_FMT_SGLANG) == 0);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs("{\"16\": {\"BLOCK_SIZE_M\": 64,\n", f);
        fclose(f);
    }
    blocktune_options opt = {.config_dir = dir, .cache_dir = cache};
    if (blocktune_open(&bt, &opt, msg, sizeof msg)) {
        bt_check_fail(t, __FILE__, __LINE__, "blocktune_open: %s", msg);
        goto out;
    }
    blocktune_gemm_args g = {0x100000, 0x200000, 0x300000, 0x400000, 0x500000, 16, 7168, 2304,
                             BLOCKTUNE_FP8, BLOCKTUNE_BF16, 128, 128};
    CHECK_EQ(blocktune_describe(bt, &g, msg, sizeof msg), 0);
    CHECK_CONTAINS(msg, "native BLOCK_SIZE_M=64");
    CHECK_CONTAINS(msg, " (built-in heuristic); config not read: ");
    CHECK_CONTAINS(msg, name);
    setenv("BT_FAKE_CUDA_LOAD", "oom", 1);
    CHECK_EQ(blocktune_gemm(bt, &g, NULL, msg, sizeof msg), -1);
    CHECK_CONTAINS(msg, "loading the kernel: ");
    CHECK_EQ(blocktune_describe(bt, &g, msg, sizeof msg), 0);
    CHECK(!strstr(msg, "which failed")); /* not remembered */
    unsetenv("BT_FAKE_CUDA_LOAD");
    CHECK_EQ(blocktune_gemm(bt, &g, NULL, msg, sizeof msg), 0);
    /* M = 4096 takes another native kernel; its image refused, the classic heuristic runs */
    g.M = 4096;
    setenv("BT_FAKE_CUDA_LOAD", "bad:1", 1);
    CHECK_EQ(blocktune_gemm(bt, &g, NULL, msg, sizeof msg), 0);
    unsetenv("BT_FAKE_CUDA_LOAD");
    CHECK_EQ(blocktune_describe(bt, &g, msg, sizeof msg), 0);
    CHECK_CONTAINS(msg, "classic BLOCK_SIZE_M=64 BLOCK_SIZE_N=128 BLOCK_SIZE_K=128 GROUP_SIZE_M=32");
    CHECK_CONTAINS(msg, "which failed: loading the kernel: ");
    /* In a graph capture a kernel not loaded yet is refused; prepared, it runs. */
    setenv("BT_FAKE_CUDA_CAPTURING", "1", 1);
    g.M = 16, g.output = BLOCKTUNE_F16; /* (kernels of their own: none loaded yet) */
    CHECK_EQ(blocktune_gemm(bt, &g, NULL, msg, sizeof msg), -1);
    CHECK_STREQ(msg, "M = 16: its kernel is not loaded and the stream is capturing a graph; call blocktune_prepare "
                     "with this M before the capture");
    CHECK_EQ(blocktune_prepare(bt, &g, (long[]){16}, 1, msg, sizeof msg), 0);
    CHECK_EQ(blocktune_gemm(bt, &g, NULL, msg, sizeof msg), 0);
    unsetenv("BT_FAKE_CUDA_CAPTURING");
out:
    blocktune_close(bt);
    unsetenv("BT_FAKE_CUDA_CTX");
    bt_test_restore_env("BT_LIBCUDA", saved);
}

/* A cache directory that cannot be written (here: under a file) does not stop the library: a
 * kernel compiles and loads from memory, and describe says why none is cached. */
TEST(library_runs_where_the_cache_cannot_be_written)
{
    char fake[4200], cache[4300], msg[8192];
    if (bt_test_fake_driver(fake, sizeof fake) != 0)
        SKIP("no stand-in driver at %.200s", fake);
    char *saved = bt_test_set_env("BT_LIBCUDA", fake);
    setenv("BT_FAKE_CUDA_CTX", "1", 1);
    const char *blocker = bt_scratch_file("lib-cache-blocker", "a file, not a directory\n");
    snprintf(cache, sizeof cache, "%s/cache", blocker);
    blocktune *bt = NULL;
    blocktune_options opt = {.cache_dir = cache};
    if (blocktune_open(&bt, &opt, msg, sizeof msg)) {
        bt_check_fail(t, __FILE__, __LINE__, "blocktune_open: %s", msg);
        goto out;
    }
    blocktune_gemm_args g = {0x100000, 0x200000, 0x300000, 0x400000, 0x500000, 16, 7168, 2304,
                             BLOCKTUNE_FP8, BLOCKTUNE_BF16, 128, 128};
    CHECK_EQ(blocktune_gemm(bt, &g, NULL, msg, sizeof msg), 0);
    CHECK_EQ(blocktune_describe(bt, &g, msg, sizeof msg), 0);
    CHECK_CONTAINS(msg, "(built-in heuristic); compiled kernels are not cached: ");
    CHECK_CONTAINS(msg, "not a directory");
    CHECK(access(cache, F_OK) != 0);
out:
    blocktune_close(bt);
    unsetenv("BT_FAKE_CUDA_CTX");
    bt_test_restore_env("BT_LIBCUDA", saved);
}

/* libblocktune.so exports blocktune_* only (tuner/blocktune.map): its 80-odd internal bt_*
 * functions would otherwise clash with a host program's own. */
TEST(library_exports_only_its_api)
{
    char exe[4096], cmd[8400];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0 || system("command -v nm > /dev/null 2>&1") != 0)
        SKIP("no /proc/self/exe or no nm");
    exe[n] = '\0';
    char *slash = strrchr(exe, '/'); /* .../BUILD/tests/unit: the library is .../BUILD/libblocktune.so */
    if (slash)
        *slash = '\0';
    strncat(exe, "/../libblocktune.so", sizeof exe - strlen(exe) - 1);
    if (access(exe, R_OK) != 0)
        SKIP("no %.200s (the sanitizer build makes no shared library)", exe);
    snprintf(cmd, sizeof cmd, "nm -D --defined-only '%s' | awk '{print $3}' | sort | tr '\\n' ' '", exe);
    FILE *p = popen(cmd, "r");
    char out[4096] = "";
    if (!p || !fgets(out, sizeof out, p))
        bt_check_fail(t, __FILE__, __LINE__, "could not run: %s", cmd);
    if (p)
        pclose(p);
    CHECK_STREQ(out, "blocktune_close blocktune_describe blocktune_gemm blocktune_open blocktune_prepare ");
}
