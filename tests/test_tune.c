/* The tune command end to end: dry runs (compile, cache, rejections by architecture), usage
 * errors of a whole run, and on a GPU a run that survives a planted fault and hang. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "configio.h"
#include "cuda.h"
#include "harness.h"

static const char *cache_dir(void)
{
    static char buf[4200];
    snprintf(buf, sizeof buf, "%s/tune-cache", bt_test_tmpdir());
    return buf;
}

/* The number after `label` in out, or -1. */
static long number_after(const char *out, const char *label)
{
    const char *p = out ? strstr(out, label) : NULL;
    return p ? strtol(p + strlen(label), NULL, 10) : -1;
}

TEST(tune_dry_run_compiles_then_caches)
{
    char *out = NULL;
    const char *args[] = {"--space", "search_spaces/small.yaml", "--N", "7168", "--K", "2304", "--dry-run",
                          "--arch", "sm_90a", "--cache-dir", cache_dir(), "--quiet", NULL};
    CHECK_EQ(bt_run_tune(&out, args), 0);
    CHECK_CONTAINS(out, "(7168, 2304)");
    CHECK_CONTAINS(out, "target sm_90a (opt-in shared memory 232448 bytes)");
    long compiled = number_after(out, "\ncompiled "), cached = number_after(out, ", cached ");
    CHECK(compiled > 0);
    CHECK_EQ(cached, 0);
    free(out);
    /* The second identical run compiles nothing. */
    CHECK_EQ(bt_run_tune(&out, args), 0);
    CHECK_EQ(number_after(out, "\ncompiled "), 0);
    CHECK_EQ(number_after(out, ", cached "), compiled);
    free(out);
}

TEST(tune_dry_run_sm89_rejects_more_for_shared_memory)
{
    char *out90 = NULL, *out89 = NULL;
    const char *a90[] = {"--space", "search_spaces/small.yaml", "--N", "576", "--K", "7168", "--dry-run",
                         "--arch", "sm_90a", "--cache-dir", cache_dir(), "--quiet", NULL};
    const char *a89[] = {"--space", "search_spaces/small.yaml", "--N", "576", "--K", "7168", "--dry-run",
                         "--arch", "sm_89", "--cache-dir", cache_dir(), "--quiet", NULL};
    CHECK_EQ(bt_run_tune(&out90, a90), 0);
    CHECK_EQ(bt_run_tune(&out89, a89), 0);
    /* The table row: cands, rej:smem, rej:regs, ... */
    long smem90 = number_after(out90, "(576, 7168)                      24 ");
    long smem89 = number_after(out89, "(576, 7168)                      24 ");
    CHECK(smem90 >= 0);
    CHECK(smem89 > smem90);
    CHECK_CONTAINS(out89, "target sm_89 (opt-in shared memory 101376 bytes)");
    free(out90);
    free(out89);
}

TEST(tune_dry_run_lists_deepseek_shapes)
{
    char *out = NULL;
    const char *args[] = {"--space", "search_spaces/small.yaml", "--tp-size", "8", "--dry-run", "--arch",
                          "sm_90a", "--cache-dir", cache_dir(), "--quiet", NULL};
    CHECK_EQ(bt_run_tune(&out, args), 0);
    static const char *shapes[] = {"(576, 7168)", "(24576, 7168)", "(32768, 512)", "(7168, 16384)",
                                   "(7168, 18432)", "(4608, 7168)", "(3072, 7168)", "(4096, 512)",
                                   "(3072, 1536)", "(512, 7168)", "(7168, 2304)", "(7168, 2048)", "(7168, 256)"};
    const char *prev = out;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const char *p = prev ? strstr(prev, shapes[i]) : NULL;
        if (!p)
            bt_check_fail(t, __FILE__, __LINE__, "shape %s missing or out of order", shapes[i]);
        prev = p;
    }
    free(out);
}

/* At tp = 1 DeepSeek-V3's list, as SGLang's, holds four shapes twice: each is tuned once, and
 * the run says so. */
TEST(tune_tp1_tunes_each_shape_once)
{
    char *out = NULL;
    const char *args[] = {"--space", "search_spaces/small.yaml", "--tp-size", "1", "--dry-run", "--arch",
                          "sm_90a", "--cache-dir", cache_dir(), "--quiet", NULL};
    CHECK_EQ(bt_run_tune(&out, args), 0);
    CHECK_CONTAINS(out, "(24576, 7168), q_proj without q LoRA (N/tp), is the shape of q_proj without q LoRA too: "
                        "tuned once\n");
    int rows = 0; /* of the table, after the notes and before its closing "(kernels take ..." */
    const char *end = out ? strstr(out, "\n(kernels") : NULL;
    for (const char *p = out ? strstr(out, "shape (N, K)") : NULL; p && (p = strstr(p, "\n(")) && p < end; p++)
        rows++;
    CHECK_EQ(rows, 9); /* 13 listed, 4 of them twice */
    free(out);
}

/* The cubins in a compile cache: each finished compile leaves one .meta (written last). */
static long count_metas(const char *dir)
{
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "find '%s' -name '*.meta' 2>/dev/null | wc -l", dir);
    FILE *p = popen(cmd, "r");
    long n = -1;
    if (p) {
        if (fscanf(p, "%ld", &n) != 1)
            n = -1;
        pclose(p);
    }
    return n;
}

/* Ctrl-C while compiling stops the compiles within about one compile, and the run says it was
 * interrupted (exit 130) instead of printing a partial table. The signal is sent once the first
 * compile is in the cache, not after a fixed sleep: a loaded machine can still be starting the
 * process then (a SIGINT before its handler is lost: the shell ignores it for a background job)
 * or hashing the sources, which is not compiling. "Promptly" is counted in compiles, not seconds:
 * with -j 1 at most 3 finish after the count taken before the kill (one finishing between the
 * count and the kill, the one in flight, and one the thread may start before the pool sees the
 * stop), where an ignored Ctrl-C would compile all 992. (The wait for the first compile gives up
 * after 10 minutes, or when the run has exited.) */
TEST(tune_ctrl_c_stops_the_compiles)
{
    char dir[4200], cache[4300], cmd[16384];
    snprintf(dir, sizeof dir, "%s/ctrl-c", bt_test_tmpdir());
    snprintf(cache, sizeof cache, "%s/cache", dir);
    snprintf(cmd, sizeof cmd,
             "cd '%s' && mkdir -p '%s' && { '%s' --dry-run --arch sm_90a --N 7168 --K 2304 --cache-dir '%s' "
             "-j 1 > '%s/out' 2>&1 & pid=$!; "
             "for i in $(seq 6000); do [ -n \"$(find '%s' -name '*.meta' 2>/dev/null | head -n 1)\" ] && break; "
             "kill -0 $pid 2>/dev/null || break; sleep 0.1; done; "
             "find '%s' -name '*.meta' 2>/dev/null | wc -l > '%s/before'; kill -INT $pid; wait $pid; "
             "echo $? > '%s/rc'; }",
             bt_test_root(), dir, bt_test_tune(), cache, dir, cache, cache, dir, dir);
    CHECK(system(cmd) == 0);
    char path[4300], *rc = NULL, *before = NULL, *out = NULL;
    bt_err err;
    snprintf(path, sizeof path, "%s/rc", dir);
    CHECK_EQ(bt_read_file(path, &rc, NULL, &err), 0);
    CHECK_EQ(rc ? atoi(rc) : -1, 130);
    snprintf(path, sizeof path, "%s/before", dir);
    CHECK_EQ(bt_read_file(path, &before, NULL, &err), 0);
    long n0 = before ? atol(before) : -1, n1 = count_metas(cache);
    CHECK(n0 >= 1);
    if (n1 < n0 || n1 - n0 > 3)
        bt_check_fail(t, __FILE__, __LINE__, "%ld compiles before Ctrl-C, %ld after", n0, n1 - n0);
    snprintf(path, sizeof path, "%s/out", dir);
    CHECK_EQ(bt_read_file(path, &out, NULL, &err), 0);
    CHECK_CONTAINS(out, "tune: interrupted while compiling");
    CHECK(out && !strstr(out, "runnable"));
    free(rc);
    free(before);
    free(out);
}

TEST(tune_run_errors_are_one_line_with_exit_codes)
{
    char *out = NULL;
    const char *space = bt_scratch_file("bad.yaml", "name: x\nbatch_sizes: [1]\nparameters:\n  BLOCK_SIZE_M: [48]\n");
    const char *bad_space[] = {"--space", space, "--dry-run", "--arch", "sm_90a", NULL};
    CHECK_EQ(bt_run_tune(&out, bad_space), 2);
    CHECK_CONTAINS(out, "bad.yaml:4:");
    CHECK_CONTAINS(out, "BLOCK_SIZE_M");
    free(out);

    /* not a file: refused at once instead of read until memory runs out */
    const char *zero_space[] = {"--space", "/dev/zero", "--dry-run", "--arch", "sm_90a", NULL};
    CHECK_EQ(bt_run_tune(&out, zero_space), 2);
    CHECK_CONTAINS(out, "tune: /dev/zero: not a regular file\n");
    free(out);
    const char *zero_model[] = {"--model", "/dev/zero", "--space", "search_spaces/small.yaml", "--dry-run",
                                "--arch", "sm_90a", NULL};
    CHECK_EQ(bt_run_tune(&out, zero_model), 2);
    CHECK_CONTAINS(out, "tune: /dev/zero: not a regular file\n");
    free(out);

    const char *wrong_family[] = {"--space", "search_spaces/native.yaml", "--dry-run", "--arch", "sm_90a", NULL};
    CHECK_EQ(bt_run_tune(&out, wrong_family), 2);
    CHECK_CONTAINS(out, "tune: search_spaces/native.yaml is a search space for the native family; pass --family native");
    free(out);

    const char *k100[] = {"--N", "100", "--K", "100", "--dry-run", "--arch", "sm_90a", NULL};
    CHECK_EQ(bt_run_tune(&out, k100), 2);
    CHECK_CONTAINS(out, "tune: --N/--K: K = 100 is not a multiple of 16");
    free(out);

    const char *tp256[] = {"--tp-size", "256", "--dry-run", "--arch", "sm_90a", NULL};
    CHECK_EQ(bt_run_tune(&out, tp256), 2);
    CHECK_CONTAINS(out, "tune: --tp-size 256: shape (7168, 72) of DeepSeek-V3's dense down_proj (K/tp): "
                        "K = 72 is not a multiple of 16");
    CHECK(out && !strstr(out, "runnable"));
    free(out);

    const char *bk[] = {"--space", "search_spaces/small.yaml", "--block-k", "64", "--N", "64", "--K", "256",
                        "--dry-run", "--arch", "sm_90a", NULL};
    CHECK_EQ(bt_run_tune(&out, bk), 2);
    CHECK_CONTAINS(out, "small.yaml: none of the 64 candidates satisfies the constraints with block_n 128, block_k 64");
    free(out);

    /* Without a driver a real run says so and how to compile without one. */
    bt_cuda cu;
    bt_err err;
    if (bt_cuda_open(&cu, &err) == 0) {
        bt_cuda_close(&cu);
    } else {
        /* and creates neither directory it was given */
        char newdir[4200], newcache[4200];
        snprintf(newdir, sizeof newdir, "%s/nogpu-out/sub", bt_test_tmpdir());
        snprintf(newcache, sizeof newcache, "%s/nogpu-cache", bt_test_tmpdir());
        const char *nogpu[] = {"--N", "64", "--K", "256", "--out-dir", newdir, "--cache-dir", newcache, NULL};
        CHECK_EQ(bt_run_tune(&out, nogpu), 1);
        CHECK_CONTAINS(out, "tune: no CUDA driver");
        CHECK_CONTAINS(out, "--dry-run --arch");
        free(out);
        struct stat st;
        *strrchr(newdir, '/') = '\0';
        CHECK(stat(newdir, &st) != 0 && errno == ENOENT);
        CHECK(stat(newcache, &st) != 0 && errno == ENOENT);
    }

    /* A cache that cannot be written is one error, not a compile failure per candidate. */
    char cache[4200], cmd[8600];
    snprintf(cache, sizeof cache, "%s/blocked-cache", bt_test_tmpdir());
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/sm_90a' && cd '%s/sm_90a' && for i in $(seq 0 255); do : > $(printf %%02x $i); done",
             cache, cache);
    CHECK(system(cmd) == 0);
    const char *blocked[] = {"--space", "search_spaces/small.yaml", "--N", "256", "--K", "256", "--dry-run", "--arch",
                             "sm_90a", "--cache-dir", cache, NULL};
    CHECK_EQ(bt_run_tune(&out, blocked), 1);
    CHECK_CONTAINS(out, "tune: compile cache: ");
    CHECK_CONTAINS(out, "not a directory");
    CHECK(!strstr(out, "compile failed, skipped"));
    free(out);

    char ro[4200];
    snprintf(ro, sizeof ro, "%s/not-a-dir", bt_test_tmpdir());
    FILE *f = fopen(ro, "w");
    if (f)
        fclose(f);
    const char *outdir[] = {"--N", "64", "--K", "256", "--out-dir", ro, NULL};
    CHECK_EQ(bt_run_tune(&out, outdir), 2);
    CHECK_CONTAINS(out, "tune: --out-dir");
    free(out);
    /* a directory to be made under a file, or under one that cannot be written, likewise */
    char under[4300], underr[4400];
    snprintf(under, sizeof under, "%s/sub/dir/", ro);
    const char *underfile[] = {"--N", "64", "--K", "256", "--out-dir", under, NULL};
    CHECK_EQ(bt_run_tune(&out, underfile), 2);
    snprintf(underr, sizeof underr, "tune: --out-dir: %s/sub/dir: ", ro);
    CHECK_CONTAINS(out, underr);
    free(out);
    const char *unwritable[] = {"--N", "64", "--K", "256", "--out-dir", "/proc/blocktune/new", NULL}; /* even for root */
    CHECK_EQ(bt_run_tune(&out, unwritable), 2);
    CHECK_CONTAINS(out, "tune: --out-dir: /proc: directory is not writable");
    free(out);
    /* the same file as --cache-dir is a usage error too, even in a dry run */
    const char *cachefile[] = {"--N", "64", "--K", "256", "--dry-run", "--arch", "sm_90a", "--cache-dir", ro, NULL};
    CHECK_EQ(bt_run_tune(&out, cachefile), 2);
    char want[4300];
    snprintf(want, sizeof want, "tune: --cache-dir: %s: not a directory\n", ro);
    CHECK_CONTAINS(out, want);
    free(out);
}

static int have_gpu(void)
{
    bt_cuda cu;
    bt_err err;
    if (!getenv("BT_GPU_TESTS") || bt_cuda_open(&cu, &err))
        return 0;
    bt_cuda_close(&cu);
    return 1;
}

TEST(gpu_tune_survives_planted_fault_and_hang)
{
    if (!have_gpu())
        SKIP("GPU test: needs a CUDA driver and BT_GPU_TESTS=1 (make test-gpu)");
    char *out = NULL, outdir[4200];
    snprintf(outdir, sizeof outdir, "%s/fault-configs", bt_test_tmpdir());
    /* Candidates 0 and 1 fault and hang; the rest must still be measured and written. */
    const char *args[] = {"--space", "search_spaces/small.yaml", "--N", "3072", "--K", "1536",
                          "--batch-sizes", "16,256", "--inject", "fault:0,hang:1", "--timeout", "10",
                          "--out-dir", outdir, "--cache-dir", cache_dir(), "--quiet", NULL};
    double t0 = bt_now();
    CHECK_EQ(bt_run_tune(&out, args), 0);
    CHECK_CONTAINS(out, ": fault, skipped");
    CHECK_CONTAINS(out, ": timeout, skipped");
    CHECK_CONTAINS(out, "wrote ");
    CHECK(bt_now() - t0 < 120);
    if (getenv("BT_TEST_VERBOSE"))
        printf("%s\n", out);
    free(out);
}

TEST(gpu_tune_ctrl_c_then_resume)
{
    if (!have_gpu())
        SKIP("GPU test: needs a CUDA driver and BT_GPU_TESTS=1 (make test-gpu)");
    char outdir[4200], cmd[16384];
    snprintf(outdir, sizeof outdir, "%s/resume-configs", bt_test_tmpdir());
    /* Interrupt once the journal holds a few results, as a user's Ctrl-C would. */
    snprintf(cmd, sizeof cmd,
             "cd '%s' && mkdir -p '%s' && { '%s' --space search_spaces/small.yaml --N 3072 --K 1536 "
             "--batch-sizes 16,64,256,1024 --out-dir '%s' --cache-dir '%s' --quiet >/dev/null 2>&1 & pid=$!; "
             "for i in $(seq 600); do n=$(cat %s/*.journal 2>/dev/null | wc -l); [ \"$n\" -ge 30 ] && break; "
             "sleep 0.1; done; kill -INT $pid; wait $pid; echo $? > '%s/rc'; }",
             bt_test_root(), outdir, bt_test_tune(), outdir, cache_dir(), outdir, outdir);
    CHECK(system(cmd) == 0);
    char rcpath[4300];
    snprintf(rcpath, sizeof rcpath, "%s/rc", outdir);
    FILE *f = fopen(rcpath, "r");
    int rc = -1;
    if (f) {
        if (fscanf(f, "%d", &rc) != 1)
            rc = -1;
        fclose(f);
    }
    CHECK_EQ(rc, 130);
    char pattern[8500];
    snprintf(pattern, sizeof pattern, "ls %s/*.journal >/dev/null 2>&1", outdir);
    CHECK(system(pattern) == 0); /* kept for --resume */

    char *out = NULL;
    const char *args[] = {"--space", "search_spaces/small.yaml", "--N", "3072", "--K", "1536",
                          "--batch-sizes", "16,64,256,1024", "--out-dir", outdir, "--cache-dir", cache_dir(),
                          "--resume", "--quiet", NULL};
    CHECK_EQ(bt_run_tune(&out, args), 0);
    CHECK_CONTAINS(out, "resuming ");
    CHECK_CONTAINS(out, "results from the journal");
    CHECK_CONTAINS(out, "wrote ");
    free(out);
    CHECK(system(pattern) != 0); /* finished: the journal is gone */
}

/* --pdl: the native candidates are checked and timed with programmatic dependent launch (none
 * fails the check, whose kernel before writes the inputs late) and the sidecar says so. */
TEST(gpu_tune_pdl)
{
    if (!have_gpu())
        SKIP("GPU test: needs a CUDA driver and BT_GPU_TESTS=1 (make test-gpu)");
    char *out = NULL, *side = NULL, outdir[4200], sidecar[8400];
    snprintf(outdir, sizeof outdir, "%s/pdl-configs", bt_test_tmpdir());
    const char *space = bt_scratch_file("pdl.yaml", "name: pdl\nfamily: native\nbatch_sizes: [16]\n"
                                                    "parameters:\n  BLOCK_SIZE_M: [64]\n  BLOCK_SIZE_N: [32, 64]\n"
                                                    "  num_stages: [8]\n  GROUP_SIZE_M: [8]\n"
                                                    "  CLUSTER_M: [1]\n  SPLIT_K: [1]\n");
    const char *args[] = {"--family", "native", "--space", space, "--N", "3072", "--K", "1536", "--pdl",
                          "--out-dtype", "bfloat16", "--out-dir", outdir, "--cache-dir", cache_dir(), "--quiet",
                          NULL};
    CHECK_EQ(bt_run_tune(&out, args), 0);
    CHECK_CONTAINS(out, "wrote ");
    CHECK(!strstr(out, "skipped"));
    free(out);
    bt_err err;
    snprintf(sidecar, sizeof sidecar,
             "%s/N=3072,K=1536,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8,block_shape=[128, 128],"
             "kernel=native.provenance.json",
             outdir);
    if (access(sidecar, R_OK) == 0) { /* the name holds the device's; checked where it is an H100 */
        CHECK_EQ(bt_read_file(sidecar, &side, NULL, &err), 0);
        CHECK_CONTAINS(side, "\"launch\":\t\"programmatic dependent launch\"");
        free(side);
    }
}

/* A cache directory with a space in its name: the worker reads each cubin's path to the end of
 * its request line, so every candidate is still measured. */
TEST(gpu_tune_cache_dir_with_space)
{
    if (!have_gpu())
        SKIP("GPU test: needs a CUDA driver and BT_GPU_TESTS=1 (make test-gpu)");
    char *out = NULL, outdir[4200], cache[4200];
    snprintf(outdir, sizeof outdir, "%s/space-configs", bt_test_tmpdir());
    snprintf(cache, sizeof cache, "%s/a cache dir", bt_test_tmpdir());
    const char *space = bt_scratch_file("one.yaml", "name: one\nbatch_sizes: [16]\nparameters:\n"
                                                    "  BLOCK_SIZE_M: [64]\n  BLOCK_SIZE_N: [64]\n"
                                                    "  BLOCK_SIZE_K: [128]\n  GROUP_SIZE_M: [8]\n"
                                                    "  num_warps: [4]\n  num_stages: [3]\n");
    const char *args[] = {"--space", space, "--N", "3072", "--K", "1536", "--out-dir", outdir,
                          "--cache-dir", cache, "--quiet", NULL};
    CHECK_EQ(bt_run_tune(&out, args), 0);
    CHECK_CONTAINS(out, "wrote ");
    CHECK(!strstr(out, "skipped"));
    free(out);
}

/* With --block-k 64 the classic runtime default (BLOCK_SIZE_K 128) cannot run and is not
 * compiled: the run measures the space's candidates alone, with no default among them. */
TEST(gpu_tune_without_a_runnable_default)
{
    if (!have_gpu())
        SKIP("GPU test: needs a CUDA driver and BT_GPU_TESTS=1 (make test-gpu)");
    char *out = NULL, outdir[4200];
    snprintf(outdir, sizeof outdir, "%s/bk64-configs", bt_test_tmpdir());
    const char *space = bt_scratch_file("bk64.yaml", "name: bk64\nbatch_sizes: [16]\nparameters:\n"
                                                     "  BLOCK_SIZE_M: [64]\n  BLOCK_SIZE_N: [64]\n"
                                                     "  BLOCK_SIZE_K: [64]\n  GROUP_SIZE_M: [8]\n"
                                                     "  num_warps: [4]\n  num_stages: [3]\n");
    const char *args[] = {"--space", space, "--block-k", "64", "--N", "256", "--K", "256", "--out-dir", outdir,
                          "--cache-dir", cache_dir(), "--quiet", NULL};
    CHECK_EQ(bt_run_tune(&out, args), 0);
    CHECK_CONTAINS(out, "wrote ");
    CHECK(!strstr(out, "skipped"));
    free(out);
}

/* Output that cannot be written is a failure, named on stderr: `tune --help > /dev/full` used to
 * exit 0. */
TEST(tune_help_to_a_full_stdout_fails)
{
    if (access("/dev/full", W_OK) != 0)
        SKIP("no /dev/full");
    char err_path[4200], cmd[12800];
    snprintf(err_path, sizeof err_path, "%s/full-stdout.err", bt_test_tmpdir());
    snprintf(cmd, sizeof cmd, "'%s' --help > /dev/full 2> '%s'", bt_test_tune(), err_path);
    int status = system(cmd);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 1);
    char *msg = NULL;
    bt_err err;
    CHECK_EQ(bt_read_file(err_path, &msg, NULL, &err), 0);
    CHECK_STREQ(msg ? msg : "", "tune: cannot write to standard output: No space left on device\n");
    free(msg);
    unlink(err_path);
}

/* The tiny space of the stand-in driver's runs: four candidates of the small space, not the
 * runtime's default config, which the runs time beside them; all five are finalists. */
static const char *tiny_space(void)
{
    return bt_scratch_file("tiny.yaml", "name: tiny\ndescription: four\nfamily: classic\n"
                                        "batch_sizes: [1]\nparameters:\n  BLOCK_SIZE_M: [16, 32]\n"
                                        "  BLOCK_SIZE_N: [64]\n  BLOCK_SIZE_K: [128]\n"
                                        "  GROUP_SIZE_M: [1]\n  num_warps: [4]\n  num_stages: [3, 4]\n");
}

/* A kernel right the first time and wrong when timed again (a race shows only sometimes) is
 * skipped like one wrong at once: here every finalist is so, and nothing may be written. On a
 * stand-in driver (tests/fakecuda), whose kernels are right until BT_FAKE_CUDA_FLAKY. */
TEST(tune_finalist_wrong_when_timed_again_is_skipped)
{
    char fake[4200], out_ok[4200], out_flaky[4200];
    if (bt_test_fake_driver(fake, sizeof fake) != 0)
        SKIP("no stand-in driver at %.200s", fake);
    snprintf(out_ok, sizeof out_ok, "%s/fake-ok", bt_test_tmpdir());
    snprintf(out_flaky, sizeof out_flaky, "%s/fake-flaky", bt_test_tmpdir());
    const char *space = tiny_space();
    char *saved = bt_test_set_env("BT_LIBCUDA", fake);
    char *out = NULL;
    const char *a_ok[] = {"--space", space, "--N", "7168", "--K", "2304", "--rest", "0", "--cache-dir", cache_dir(),
                          "--out-dir", out_ok, "--quiet", "--top", "2", NULL};
    CHECK_EQ(bt_run_tune(&out, a_ok), 0); /* the stand-in's kernels are right */
    CHECK_CONTAINS(out, "wrote ");
    CHECK_CONTAINS(out, "  M=1, fastest 2 of 5 verified");
    CHECK_CONTAINS(out, " us  1.000x the best  (finalist)\n");
    free(out);
    setenv("BT_FAKE_CUDA_FLAKY", "1", 1);
    const char *a_flaky[] = {"--space", space, "--N", "7168", "--K", "2304", "--rest", "0", "--cache-dir", cache_dir(),
                             "--out-dir", out_flaky, "--quiet", "--top", "2", NULL};
    CHECK_EQ(bt_run_tune(&out, a_flaky), 1);
    CHECK_CONTAINS(out, "wrong when timed again, skipped (rel_err 0 (tolerance 2e-03), 1 unwritten/non-finite");
    CHECK_CONTAINS(out, "tune: N=7168 K=2304: no candidate was verified at any batch size; nothing written\n");
    CHECK_CONTAINS(out, "  M=1, fastest 0 of 0 verified");
    free(out);
    /* Every second kernel 10x slower: those timed after a fast one are pruned, not finalists, and
     * outlast the skipped finalists; --top lists them without a ratio to a best there is none of. */
    setenv("BT_FAKE_CUDA_SLOW", "1", 1);
    CHECK_EQ(bt_run_tune(&out, a_flaky), 1);
    CHECK_CONTAINS(out, "  (one replay: pruned)\n");
    CHECK(!strstr(out, "the best"));
    unsetenv("BT_FAKE_CUDA_SLOW");
    free(out);
    unsetenv("BT_FAKE_CUDA_FLAKY");
    bt_test_restore_env("BT_LIBCUDA", saved);
}

/* Tunes (7168, 2304) over space on the stand-in driver fake into dir, and returns the sidecar's
 * results at M = 1 (in *prov, which the caller deletes), or NULL. */
static const cJSON *fake_tune_results(bt_t *t, const char *fake, const char *space, const char *dir, cJSON **prov)
{
    char side[8400];
    char *saved = bt_test_set_env("BT_LIBCUDA", fake);
    char *out = NULL;
    const char *args[] = {"--space", space, "--N", "7168", "--K", "2304", "--rest", "0", "--cache-dir",
                          cache_dir(), "--out-dir", dir, "--quiet", NULL};
    CHECK_EQ(bt_run_tune(&out, args), 0);
    free(out);
    bt_test_restore_env("BT_LIBCUDA", saved);
    snprintf(side, sizeof side, "%s/N=7168,K=2304,device_name=Fake_GPU,dtype=fp8_w8a8,block_shape=[128, 128]"
             ".provenance.json", dir);
    bt_err err = {{0}};
    *prov = bt_json_read(side, &err);
    CHECK(*prov != NULL);
    return cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(*prov, "runs"), 0),
                                         "results"),
        "1");
}

/* The sidecar lists each batch size's finalists as timed again, the pick first, so that a
 * kernel the port stands in for (SGLang's Triton one) can be asked to rank them. On the stand-in
 * driver: the tiny space's four and the default are all finalists. */
TEST(tune_sidecar_lists_the_finalists)
{
    char fake[4200], dir[4200];
    if (bt_test_fake_driver(fake, sizeof fake) != 0)
        SKIP("no stand-in driver at %.200s", fake);
    snprintf(dir, sizeof dir, "%s/finalists", bt_test_tmpdir());
    cJSON *prov = NULL;
    const cJSON *res = fake_tune_results(t, fake, tiny_space(), dir, &prov);
    const cJSON *fin = cJSON_GetObjectItemCaseSensitive(res, "finalists");
    CHECK_EQ(cJSON_GetArraySize(fin), 5);
    const char *pick = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(res, "config"));
    const char *first = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(fin, 0), "config"));
    CHECK(pick && first && strcmp(pick, first) == 0);
    double last = 0;
    const cJSON *f;
    cJSON_ArrayForEach(f, fin)
    {
        double us = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(f, "us"));
        CHECK(us > 0 && (f == cJSON_GetArrayItem(fin, 0) || us >= last));
        last = us;
    }
    cJSON_Delete(prov);
}

/* Beside the 8 fastest and the default, the finalists hold the fastest candidate of each
 * num_warps (the classic family's finalist key). The stand-in driver times the kernels of one
 * block size 1.2x slower than the rest. With 8 warps slow: the 8 fastest (SGLang's default, 64 x
 * 128 of 4 warps, among them) and one of 8 warps. With 4 warps slow: 8 of 8 warps and the
 * default, which is as fast as any other of 4 warps, so it stands for them. */
TEST(tune_finalists_hold_each_num_warps)
{
    char fake[4200];
    if (bt_test_fake_driver(fake, sizeof fake) != 0)
        SKIP("no stand-in driver at %.200s", fake);
    const char *space = bt_scratch_file("warps.yaml", "name: warps\ndescription: warps\nfamily: classic\n"
                                                      "batch_sizes: [1]\nparameters:\n  BLOCK_SIZE_M: [16]\n"
                                                      "  BLOCK_SIZE_N: [64]\n  BLOCK_SIZE_K: [128]\n"
                                                      "  GROUP_SIZE_M: [1, 2, 4, 8, 16, 32]\n  num_warps: [4, 8]\n"
                                                      "  num_stages: [2, 3]\n");
    static const struct {
        const char *slow_block;
        int slow_warps, finalists, of_slow_warps;
    } cases[] = {{"256", 8, 9, 1}, {"128", 4, 9, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/finalists-warps-%zu", bt_test_tmpdir(), i);
        char *slow = bt_test_set_env("BT_FAKE_CUDA_SLOW_BLOCK", cases[i].slow_block);
        cJSON *prov = NULL;
        const cJSON *fin = cJSON_GetObjectItemCaseSensitive(fake_tune_results(t, fake, space, dir, &prov), "finalists");
        bt_test_restore_env("BT_FAKE_CUDA_SLOW_BLOCK", slow);
        int n = 0;
        const cJSON *f;
        cJSON_ArrayForEach(f, fin)
        {
            const char *c = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(f, "config"));
            int warps = 0;
            CHECK(c && sscanf(c, "%*d,%*d,%*d,%*d,%d", &warps) == 1);
            n += warps == cases[i].slow_warps;
        }
        CHECK_EQ(cJSON_GetArraySize(fin), cases[i].finalists);
        CHECK_EQ(n, cases[i].of_slow_warps);
        cJSON_Delete(prov);
    }
}

/* A config that cannot be written in full (here: past the file size limit, which would
 * otherwise kill the process with SIGXFSZ) fails the shape with one line naming the file; the
 * old one stays as it was and no temporary file is left. On the stand-in driver. */
TEST(tune_write_past_the_file_size_limit_fails_cleanly)
{
    char fake[4200], dir[4200], cmd[16384], path[4400], name[1024];
    if (bt_test_fake_driver(fake, sizeof fake) != 0)
        SKIP("no stand-in driver at %.200s", fake);
    snprintf(dir, sizeof dir, "%s/fsize", bt_test_tmpdir());
    bt_err err = {{0}};
    CHECK(bt_mkdirs(dir, &err) == 0);
    CHECK(bt_config_filename(name, sizeof name, &bt_family_classic, 7168, 2304, "Fake GPU", BT_IN_FP8, 128, 128,
                             BT_FMT_SGLANG) == 0);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    /* an existing file of 98 entries, about 17 KB: the merged one will not fit 8 KB (the
     * kernels are compiled before the limit is set) */
    char *old = bt_xmalloc(64 * 1024);
    size_t n = (size_t)snprintf(old, 64 * 1024, "{");
    for (int m = 2; m < 100; m++)
        n += (size_t)snprintf(old + n, 64 * 1024 - n,
                              "%s\n    \"%d\": {\n        \"BLOCK_SIZE_M\": 16,\n        \"BLOCK_SIZE_N\": 64,\n"
                              "        \"BLOCK_SIZE_K\": 128,\n        \"GROUP_SIZE_M\": 1,\n        \"num_warps\": 4,\n"
                              "        \"num_stages\": 3\n    }",
                              m > 2 ? "," : "", m);
    n += (size_t)snprintf(old + n, 64 * 1024 - n, "\n}\n");
    CHECK(bt_write_file_atomic(path, old, n, &err) == 0);
    snprintf(cmd, sizeof cmd,
             "cd '%s' && '%s' --space '%s' --N 7168 --K 2304 --dry-run --arch sm_90a --quiet --cache-dir '%s' > /dev/null "
             "&& (ulimit -f 8; BT_LIBCUDA='%s' '%s' --space '%s' --N 7168 --K 2304 --rest 0 --quiet "
             "--cache-dir '%s' --out-dir . > log 2>&1; echo $? > rc); ls | grep -c '\\.tmp\\.' > tmps; true",
             dir, bt_test_tune(), tiny_space(), cache_dir(), fake, bt_test_tune(), tiny_space(), cache_dir());
    CHECK(system(cmd) == 0);
    char p2[4400], *rc = NULL, *log = NULL, *tmps = NULL, *now = NULL;
    snprintf(p2, sizeof p2, "%s/rc", dir);
    CHECK_EQ(bt_read_file(p2, &rc, NULL, &err), 0);
    CHECK_EQ(rc ? atoi(rc) : -1, 1);
    snprintf(p2, sizeof p2, "%s/log", dir);
    CHECK_EQ(bt_read_file(p2, &log, NULL, &err), 0);
    CHECK_CONTAINS(log, ": write failed: File too large");
    CHECK_CONTAINS(log, name);
    snprintf(p2, sizeof p2, "%s/tmps", dir);
    CHECK_EQ(bt_read_file(p2, &tmps, NULL, &err), 0);
    CHECK_STREQ(tmps ? tmps : "", "0\n");
    CHECK_EQ(bt_read_file(path, &now, NULL, &err), 0);
    CHECK_STREQ(now ? now : "", old);
    free(rc), free(log), free(tmps), free(now), free(old);
}

/* --devices: on a stand-in driver with two GPUs, the 13 shapes are tuned by two processes that
 * take them in turn, each table naming its GPU, and every config is written; GPUs of another
 * model or that do not exist are refused before anything runs. */
TEST(tune_on_two_gpus_on_the_stand_in_driver)
{
    char fake[4200], out_dir[4200];
    if (bt_test_fake_driver(fake, sizeof fake) != 0)
        SKIP("no stand-in driver at %.200s", fake);
    snprintf(out_dir, sizeof out_dir, "%s/two-gpus", bt_test_tmpdir());
    char *saved = bt_test_set_env("BT_LIBCUDA", fake);
    setenv("BT_FAKE_CUDA_DEVICES", "Fake GPU,Fake GPU", 1);
    char *out = NULL;
    const char *args[] = {"--space", tiny_space(), "--tp-size", "8", "--devices", "1,0", "--rest", "0",
                          "--cache-dir", cache_dir(), "--out-dir", out_dir, "--quiet", NULL};
    CHECK_EQ(bt_run_tune(&out, args), 0);
    CHECK_CONTAINS(out, "tuning 13 shape(s) x 1 batch sizes x 4 candidates (+ the default config) on 2 x Fake GPU");
    int wrote = 0, tables = 0;
    for (const char *p = out; p && (p = strstr(p, "\nwrote ")); p++)
        wrote++;
    for (const char *p = out; p && (p = strstr(p, "(sm_90a, device ")); p++)
        tables++;
    CHECK_EQ(wrote, 13);
    CHECK_EQ(tables, 13);
    CHECK_CONTAINS(out, "N=7168 K=2304 fp8 -> float16 on Fake GPU (sm_90a, device ");
    free(out);
    const char *again[] = {"--space", tiny_space(), "--N", "7168", "--K", "2304", "--devices", "0,1", "--rest", "0",
                           "--cache-dir", cache_dir(), "--out-dir", out_dir, "--quiet", NULL};
    setenv("BT_FAKE_CUDA_DEVICES", "Fake GPU,Other GPU", 1);
    CHECK_EQ(bt_run_tune(&out, again), 1);
    CHECK_CONTAINS(out, "tune: --devices: device 1 (Other GPU) is not the model of device 0 (Fake GPU): configs are "
                        "named for one model, so tune each in a run of its own\n");
    free(out);
    setenv("BT_FAKE_CUDA_DEVICES", "Fake GPU", 1);
    CHECK_EQ(bt_run_tune(&out, again), 1);
    CHECK_CONTAINS(out, "tune: --devices: CUDA device 1 does not exist (the driver sees 1)\n");
    free(out);
    unsetenv("BT_FAKE_CUDA_DEVICES");
    bt_test_restore_env("BT_LIBCUDA", saved);
}

/* Runs `tune <shapes> --devices 0,1` on the stand-in driver, every GEMM of which hangs (until
 * --timeout 2), in dir; once `journals` journals are open, runs `action` (a shell command; $pid
 * is the parent). Returns the exit code; *log gets the output and *left how many journals are
 * left. */
static int two_gpus_then(bt_t *t, const char *fake, const char *dir, const char *shapes, int journals,
                         const char *action, char **log, int *left)
{
    char cmd[16384], path[4300], *rc = NULL, *nj = NULL;
    bt_err err;
    snprintf(cmd, sizeof cmd,
             "rm -rf '%s' && mkdir -p '%s' && cd '%s' && { BT_LIBCUDA='%s' BT_FAKE_CUDA_HANG=1 "
             "BT_FAKE_CUDA_DEVICES='Fake GPU,Fake GPU' '%s' --space '%s' %s --devices 0,1 --timeout 2 --rest 0 "
             "--cache-dir '%s' --out-dir configs > log 2>&1 & pid=$!; "
             "for i in $(seq 600); do [ $(ls configs/*.journal 2>/dev/null | wc -l) -ge %d ] && break; sleep 0.05; done; "
             "sleep 0.5; %s; wait $pid; echo $? > rc; ls configs/*.journal | wc -l > journals; }",
             dir, dir, dir, fake, bt_test_tune(), tiny_space(), shapes, cache_dir(), journals, action);
    CHECK(system(cmd) == 0);
    snprintf(path, sizeof path, "%s/rc", dir);
    CHECK_EQ(bt_read_file(path, &rc, NULL, &err), 0);
    snprintf(path, sizeof path, "%s/journals", dir);
    CHECK_EQ(bt_read_file(path, &nj, NULL, &err), 0);
    snprintf(path, sizeof path, "%s/log", dir);
    *log = NULL;
    CHECK_EQ(bt_read_file(path, log, NULL, &err), 0);
    int code = rc ? atoi(rc) : -1;
    *left = nj ? atoi(nj) : -1;
    free(rc), free(nj);
    return code;
}

/* A stop on a run over two GPUs, whether it reaches the parent alone (SIGTERM from `timeout`)
 * or every process, in either order (Ctrl-C on a terminal, a job scheduler's SIGTERM): each GPU
 * process finishes the candidate in flight (hung here, until --timeout), keeps its journal, and
 * the run exits 130. A GPU process killed outright fails the shape it held, named. */
TEST(tune_on_two_gpus_stops_on_ctrl_c)
{
    char fake[4200], dir[4200], *log = NULL;
    int left;
    if (bt_test_fake_driver(fake, sizeof fake) != 0)
        SKIP("no stand-in driver at %.200s", fake);
    snprintf(dir, sizeof dir, "%s/two-gpus-stop", bt_test_tmpdir());
    static const char *const stops[] = {"kill -TERM $pid", "kill -INT $pid $(pgrep -P $pid)",
                                        "kill -TERM $(pgrep -P $pid) $pid"};
    for (size_t i = 0; i < sizeof stops / sizeof stops[0]; i++) {
        CHECK_EQ(two_gpus_then(t, fake, dir, "--tp-size 8", 2, stops[i], &log, &left), 130);
        CHECK_EQ(left, 2);
        CHECK_CONTAINS(log, "tune: interrupted\n");
        CHECK_CONTAINS(log, "resumes the rest (--resume)");
        free(log);
    }
    CHECK_EQ(two_gpus_then(t, fake, dir, "--N 7168 --K 2304", 1, "kill -KILL $(pgrep -P $pid)", &log, &left), 1);
    CHECK_CONTAINS(log, " ended with status 137 while tuning N=7168 K=2304 (--resume goes on from its journal)\n");
    CHECK_CONTAINS(log, "tune: 1 of 1 shapes failed, and ");
    CHECK_EQ(left, 1);
    free(log);
}

/* A second Ctrl-C stops the run at once, even while it waits on a hung kernel (a first one
 * waits for the candidate in flight, here up to the --timeout of 30 s), and the worker, deaf to
 * Ctrl-C, dies with it. On the stand-in driver, every GEMM of which hangs. */
TEST(tune_second_ctrl_c_stops_at_once)
{
    char fake[4200], dir[4200], cmd[16384];
    if (bt_test_fake_driver(fake, sizeof fake) != 0)
        SKIP("no stand-in driver at %.200s", fake);
    snprintf(dir, sizeof dir, "%s/ctrl-c-twice", bt_test_tmpdir());
    const char *space = bt_scratch_file("one.yaml", "name: one\ndescription: one\nfamily: classic\n"
                                                    "batch_sizes: [1]\nparameters:\n  BLOCK_SIZE_M: [16]\n"
                                                    "  BLOCK_SIZE_N: [64]\n  BLOCK_SIZE_K: [128]\n"
                                                    "  GROUP_SIZE_M: [1]\n  num_warps: [4]\n  num_stages: [3]\n");
    /* wait for the worker process, give it a moment to launch, then two Ctrl-C 0.2 s apart */
    snprintf(cmd, sizeof cmd,
             "mkdir -p '%s' && cd '%s' && { BT_LIBCUDA='%s' BT_FAKE_CUDA_HANG=1 '%s' --space '%s' --N 7168 --K 2304 "
             "--timeout 30 --rest 0 --cache-dir '%s' --out-dir '%s/configs' > log 2>&1 & pid=$!; "
             "for i in $(seq 600); do w=$(pgrep -P $pid); [ -n \"$w\" ] && break; sleep 0.05; done; sleep 1; "
             "t0=$(date +%%s); kill -INT $pid; sleep 0.2; kill -INT $pid; wait $pid; echo $? > rc; "
             "echo $(( $(date +%%s) - t0 )) > secs; sleep 0.5; "
             "st=$(awk '{print $3}' /proc/$w/stat 2>/dev/null); " /* a zombie (Z) has died */
             "if [ -n \"$w\" ] && [ -n \"$st\" ] && [ \"$st\" != Z ]; then echo alive > worker; kill -9 $w; "
             "else echo gone > worker; fi; }",
             dir, dir, fake, bt_test_tune(), space, cache_dir(), dir);
    CHECK(system(cmd) == 0);
    char path[4300], *rc = NULL, *secs = NULL, *worker = NULL;
    bt_err err;
    snprintf(path, sizeof path, "%s/rc", dir);
    CHECK_EQ(bt_read_file(path, &rc, NULL, &err), 0);
    CHECK_EQ(rc ? atoi(rc) : -1, 130); /* killed by SIGINT */
    snprintf(path, sizeof path, "%s/secs", dir);
    CHECK_EQ(bt_read_file(path, &secs, NULL, &err), 0);
    CHECK(secs && atoi(secs) <= 5);
    snprintf(path, sizeof path, "%s/worker", dir);
    CHECK_EQ(bt_read_file(path, &worker, NULL, &err), 0);
    CHECK_STREQ(worker ? worker : "", "gone\n");
    free(rc), free(secs), free(worker);
}

/* Runs tune on the stand-in driver with env (assignments, may be "") and args (one shell word
 * each) in dir, with its stderr on a terminal (script(1)) when tty; *out: what it printed.
 * Returns 0, or -1 when the command could not run. */
static int run_fake(const char *fake, const char *dir, int tty, const char *env, const char *args,
                    char **out)
{
    char cmd[16384], path[4300];
    bt_err err;
    if (tty)
        snprintf(cmd, sizeof cmd,
                 "mkdir -p '%s' && cd '%s' && %s BT_LIBCUDA='%s' script -qc \"'%s' %s\" /dev/null "
                 "< /dev/null > log 2>&1; true",
                 dir, dir, env, fake, bt_test_tune(), args);
    else
        snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cd '%s' && %s BT_LIBCUDA='%s' '%s' %s > log 2>&1; true",
                 dir, dir, env, fake, bt_test_tune(), args);
    if (system(cmd) != 0)
        return -1;
    snprintf(path, sizeof path, "%s/log", dir);
    return bt_read_file(path, out, NULL, &err);
}

/* On a terminal, a shape that fails (here its second batch size cannot get the GPU memory it
 * needs) has its progress line cleared before its error, which was written onto the end of the
 * line: "...50%  ETA 0s\e[Ktune: N=7168 K=2304: M=4096: setting up ...". The batch size before
 * it is written, as an interruption writes it, and the journal kept for --resume. */
TEST(tune_shape_error_clears_the_progress_line)
{
    char fake[4200], dir[4200], args[8192];
    if (bt_test_fake_driver(fake, sizeof fake) != 0)
        SKIP("no stand-in driver at %.200s", fake);
    if (system("command -v script > /dev/null 2>&1") != 0)
        SKIP("no script(1) to run tune on a terminal");
    snprintf(dir, sizeof dir, "%s/shape-error-tty", bt_test_tmpdir());
    snprintf(args, sizeof args,
             "--space '%s' --N 7168 --K 2304 --batch-sizes 1,4096 --rest 0 --cache-dir '%s' --out-dir configs",
             tiny_space(), cache_dir());
    char *out = NULL;
    /* 32 MB: enough for M = 1, not for the 58 MB of C at M = 4096 */
    CHECK_EQ(run_fake(fake, dir, 1, "BT_FAKE_CUDA_MEM=32000000", args, &out), 0);
    CHECK_CONTAINS(out, "[N=7168 K=2304 1/1] M=4096 (2/2)");
    CHECK(!strstr(out, "ETA 0s\x1b[Ktune:") && !strstr(out, "ETA 0stune:"));
    CHECK_CONTAINS(out, "\ntune: N=7168 K=2304: M=4096: setting up the problem on the GPU: allocating C: ");
    CHECK_CONTAINS(out, "; the batch sizes before it are written, the journal configs/N=7168,K=2304,");
    CHECK_CONTAINS(out, "wrote configs/N=7168,K=2304,");
    free(out);
    char cfg[4600], *text = NULL;
    bt_err err;
    snprintf(cfg, sizeof cfg, "%s/configs/N=7168,K=2304,device_name=Fake_GPU,dtype=fp8_w8a8,block_shape=[128, 128].json",
             dir);
    CHECK_EQ(bt_read_file(cfg, &text, NULL, &err), 0);
    CHECK(text && strstr(text, "\"1\"") && !strstr(text, "\"4096\""));
    free(text);
    strcat(cfg, ".journal");
    CHECK(access(cfg, F_OK) == 0);
}

/* With its output in a log (tune > log 2>&1, as CI runs it) each shape's table arrives when the
 * shape is done, between the progress lines, not all of them at exit after every progress line
 * (and not lost when the run is killed). */
TEST(tune_tables_reach_a_log_as_shapes_finish)
{
    char fake[4200], dir[4200], args[8192];
    if (bt_test_fake_driver(fake, sizeof fake) != 0)
        SKIP("no stand-in driver at %.200s", fake);
    snprintf(dir, sizeof dir, "%s/log-order", bt_test_tmpdir());
    /* four shapes: (768, 256), (256, 256), (384, 256), (256, 192) */
    const char *model = bt_scratch_file("small-model.json", "{\"hidden_size\": 256, \"intermediate_size\": 192, "
                                                            "\"num_attention_heads\": 2, \"head_dim\": 128}\n");
    snprintf(args, sizeof args,
             "--space '%s' --model '%s' --batch-sizes 1 --rest 0 --cache-dir '%s' --out-dir configs",
             tiny_space(), model, cache_dir());
    char *out = NULL;
    CHECK_EQ(run_fake(fake, dir, 0, "", args, &out), 0);
    const char *header = out ? strstr(out, "tuning 4 shape(s)") : NULL;
    const char *first = out ? strstr(out, "[N=768 K=256 1/4] M=1 (1/1)") : NULL;
    const char *table = out ? strstr(out, "\nN=768 K=256 fp8 -> float16") : NULL;
    const char *second = out ? strstr(out, "[N=256 K=256 2/4] M=1 (1/1)") : NULL;
    CHECK(header && first && table && second);
    CHECK(header < first);
    CHECK(first < table && table < second);
    free(out);
}

/* --resume: the results in the journal are not work this run does. They counted as done at
 * once, so a run resumed at its second batch size showed "50%  ETA 0s" with half the work
 * ahead of it; they leave the total instead. The journal is that of a run whose second batch
 * size could not get its memory (the shape failed, its journal kept). */
TEST(tune_resume_eta_leaves_out_the_journal)
{
    char fake[4200], dir[4200], args[8192];
    if (bt_test_fake_driver(fake, sizeof fake) != 0)
        SKIP("no stand-in driver at %.200s", fake);
    snprintf(dir, sizeof dir, "%s/resume-eta", bt_test_tmpdir());
    char *out = NULL;
    snprintf(args, sizeof args,
             "--space '%s' --N 7168 --K 2304 --batch-sizes 1,4096 --rest 0 --cache-dir '%s' --out-dir configs",
             tiny_space(), cache_dir());
    CHECK_EQ(run_fake(fake, dir, 0, "BT_FAKE_CUDA_MEM=32000000", args, &out), 0);
    CHECK_CONTAINS(out, "M=4096: setting up the problem on the GPU: allocating C: ");
    free(out);
    snprintf(args, sizeof args,
             "--space '%s' --N 7168 --K 2304 --batch-sizes 1,16 --rest 0 --cache-dir '%s' --out-dir configs --resume",
             tiny_space(), cache_dir());
    CHECK_EQ(run_fake(fake, dir, 0, "", args, &out), 0);
    CHECK_CONTAINS(out, "results from the journal");
    CHECK_CONTAINS(out, "[N=7168 K=2304 1/1] M=1 (1/2)  0%  ETA --\n[N=7168 K=2304 1/1] M=16 (2/2)  0%  ETA --\n");
    CHECK_CONTAINS(out, "wrote ");
    free(out);
}

/* A space that holds the runtime's default config measures it once, first: its second share of
 * the total is counted with it, which was left undone, so the share lagged (33%, not 50%, at the
 * second of two batch sizes here) and never reached 100%. */
TEST(tune_progress_counts_a_default_in_the_space_once)
{
    char fake[4200], dir[4200], args[8192];
    if (bt_test_fake_driver(fake, sizeof fake) != 0)
        SKIP("no stand-in driver at %.200s", fake);
    snprintf(dir, sizeof dir, "%s/default-in-space", bt_test_tmpdir());
    /* 64 x 128 x 128, GROUP_SIZE_M 32, 4 warps, 3 stages: SGLang's default */
    const char *space = bt_scratch_file("with-default.yaml", "name: with-default\nfamily: classic\n"
                                                             "batch_sizes: [1]\nparameters:\n  BLOCK_SIZE_M: [16, 64]\n"
                                                             "  BLOCK_SIZE_N: [128]\n  BLOCK_SIZE_K: [128]\n"
                                                             "  GROUP_SIZE_M: [32]\n  num_warps: [4]\n  num_stages: [3]\n");
    snprintf(args, sizeof args,
             "--space '%s' --N 7168 --K 2304 --batch-sizes 1,16 --rest 0 --cache-dir '%s' --out-dir configs",
             space, cache_dir());
    char *out = NULL;
    CHECK_EQ(run_fake(fake, dir, 0, "", args, &out), 0);
    CHECK_CONTAINS(out, "tuning 1 shape(s) x 2 batch sizes x 2 candidates (+ the default config)");
    CHECK_CONTAINS(out, "[N=7168 K=2304 1/1] M=16 (2/2)  50%  ETA ");
    free(out);
}

/* A shape that fails leaves the rest of its work out of the run's total: it stayed there, so
 * the share lagged behind for the rest of the run (25%, not 33%, at the third of four shapes
 * after the first failed here), never reached 100%, and the ETA counted work never to be done.
 * The first shape's weight (768 x 256) is the one that does not fit the stand-in's memory. */
TEST(tune_progress_leaves_out_a_failed_shape)
{
    char fake[4200], dir[4200], args[8192];
    if (bt_test_fake_driver(fake, sizeof fake) != 0)
        SKIP("no stand-in driver at %.200s", fake);
    snprintf(dir, sizeof dir, "%s/failed-shape", bt_test_tmpdir());
    /* four shapes: (768, 256), (256, 256), (384, 256), (256, 192) */
    const char *model = bt_scratch_file("small-model.json", "{\"hidden_size\": 256, \"intermediate_size\": 192, "
                                                            "\"num_attention_heads\": 2, \"head_dim\": 128}\n");
    snprintf(args, sizeof args,
             "--space '%s' --model '%s' --batch-sizes 1 --rest 0 --cache-dir '%s' --out-dir configs",
             tiny_space(), model, cache_dir());
    char *out = NULL;
    CHECK_EQ(run_fake(fake, dir, 0, "BT_FAKE_CUDA_MEM=150000", args, &out), 0);
    CHECK_CONTAINS(out, "tune: N=768 K=256: M=1: setting up the problem on the GPU: allocating B: ");
    CHECK_CONTAINS(out, "[N=384 K=256 3/4] M=1 (1/1)  33%  ETA ");
    CHECK_CONTAINS(out, "[N=256 K=192 4/4] M=1 (1/1)  66%  ETA ");
    CHECK_CONTAINS(out, "tune: 1 of 4 shapes failed");
    free(out);
}

/* The column in its line of what s points at. */
static long column(const char *text, const char *s)
{
    const char *line = s;
    while (line > text && line[-1] != '\n')
        line--;
    return (long)(s - line);
}

/* The summary's M column holds every batch size up to 2^20: M = 1048576 pushed its row one
 * column right of the header and of the other rows. */
TEST(tune_summary_columns_hold_the_largest_batch_size)
{
    char fake[4200], dir[4200], args[8192];
    if (bt_test_fake_driver(fake, sizeof fake) != 0)
        SKIP("no stand-in driver at %.200s", fake);
    snprintf(dir, sizeof dir, "%s/large-m", bt_test_tmpdir());
    snprintf(args, sizeof args,
             "--space '%s' --N 128 --K 128 --batch-sizes 16,1048576 --rest 0 --cache-dir '%s' --out-dir configs",
             tiny_space(), cache_dir());
    char *out = NULL;
    CHECK_EQ(run_fake(fake, dir, 0, "", args, &out), 0);
    /* the header's "best config" and each row's config start in the same column */
    const char *head = out ? strstr(out, "best config") : NULL;
    const char *small = out ? strstr(out, " 16  64,128,128,32,4,3 ") : NULL;
    const char *large = out ? strstr(out, "\n1048576  64,128,128,32,4,3 ") : NULL;
    CHECK(head && small && large);
    if (head && small && large) {
        CHECK_EQ(column(out, small + 5), column(out, head));
        CHECK_EQ(column(out, large + 10), column(out, head));
    }
    free(out);
}

/* On a terminal the compiles show their count, share and an ETA, each kernel one unit of the
 * work, as the measuring does (a full space takes minutes on a few cores). */
TEST(tune_compile_progress_has_an_eta)
{
    char dir[4200], cmd[12000], path[4300], *out = NULL;
    bt_err err;
    if (system("command -v script > /dev/null 2>&1") != 0)
        SKIP("no script(1) to run tune on a terminal");
    char root[4096];
    if (!realpath(bt_test_root(), root))
        SKIP("no root directory");
    snprintf(dir, sizeof dir, "%s/compile-eta", bt_test_tmpdir());
    snprintf(cmd, sizeof cmd,
             "mkdir -p '%s' && cd '%s' && script -qc \"'%s' --dry-run --arch sm_90a --space '%s/search_spaces/small.yaml' "
             "--N 7168 --K 2304 --cache-dir '%s/cache' -j 1\" /dev/null < /dev/null > log 2>&1",
             dir, dir, bt_test_tune(), root, dir);
    CHECK(system(cmd) == 0);
    snprintf(path, sizeof path, "%s/log", dir);
    CHECK_EQ(bt_read_file(path, &out, NULL, &err), 0);
    CHECK_CONTAINS(out, "[compiling] sm_90a  candidates ");
    int eta = 0; /* an estimate once a kernel is done (then past 2% of the work) */
    for (const char *q = out; q && (q = strstr(q, "%  ETA ")); q++)
        eta |= q[7] >= '0' && q[7] <= '9';
    CHECK(eta);
    free(out);
}

/* --pdl on the stand-in driver: each candidate's check goes through the refill of the inputs
 * (bt_problem_refill) and a programmatic launch, and the run writes its configs. */
TEST(tune_pdl_checks_on_the_stand_in)
{
    char fake[4200], dir[4200], args[8192];
    if (bt_test_fake_driver(fake, sizeof fake) != 0)
        SKIP("no stand-in driver at %.200s", fake);
    snprintf(dir, sizeof dir, "%s/fake-pdl", bt_test_tmpdir());
    const char *space = bt_scratch_file("pdl-one.yaml", "name: pdl-one\nfamily: native\nbatch_sizes: [16]\n"
                                                        "parameters:\n  BLOCK_SIZE_M: [64]\n  BLOCK_SIZE_N: [64]\n"
                                                        "  num_stages: [8]\n  GROUP_SIZE_M: [8]\n"
                                                        "  CLUSTER_M: [1]\n  SPLIT_K: [1]\n");
    snprintf(args, sizeof args,
             "--family native --pdl --space '%s' --N 7168 --K 2304 --rest 0 --out-dtype bfloat16 --cache-dir '%s' "
             "--out-dir configs --quiet",
             space, cache_dir());
    char *out = NULL;
    CHECK_EQ(run_fake(fake, dir, 0, "", args, &out), 0);
    CHECK_CONTAINS(out, "wrote configs/N=7168,K=2304,device_name=Fake_GPU,dtype=fp8_w8a8,block_shape=[128, 128],"
                        "kernel=native.json");
    CHECK(!strstr(out, "skipped"));
    free(out);
}

/* A config or sidecar in --out-dir that the run could not merge into fails the shape before
 * anything is measured, not after (hours of GPU time, on a real space), and is left as is. */
TEST(tune_unmergeable_outputs_found_before_measuring)
{
    char fake[4200], dir[4200], args[8192], path[4600];
    if (bt_test_fake_driver(fake, sizeof fake) != 0)
        SKIP("no stand-in driver at %.200s", fake);
    const char *names[] = {"N=128,K=128,device_name=Fake_GPU,dtype=fp8_w8a8,block_shape=[128, 128].json",
                           "N=128,K=128,device_name=Fake_GPU,dtype=fp8_w8a8,block_shape=[128, 128].provenance.json"};
    const char *texts[] = {"x", "{\"runs\": 5}\n"};
    const char *why[] = {".json:1:1: not valid JSON (existing file left as is); nothing measured\n",
                         ".provenance.json: expected an object with a \"runs\" list (existing file left as is); "
                         "nothing measured\n"};
    for (int i = 0; i < 2; i++) {
        snprintf(dir, sizeof dir, "%s/unmergeable-%d", bt_test_tmpdir(), i);
        snprintf(path, sizeof path, "%s/configs", dir);
        bt_err err;
        CHECK(bt_mkdirs(path, &err) == 0);
        snprintf(path, sizeof path, "%s/configs/%s", dir, names[i]);
        FILE *f = fopen(path, "w");
        CHECK(f != NULL);
        if (!f)
            return;
        fputs(texts[i], f);
        fclose(f);
        snprintf(args, sizeof args, "--space '%s' --N 128 --K 128 --rest 0 --cache-dir '%s' --out-dir configs",
                 tiny_space(), cache_dir());
        char *out = NULL;
        CHECK_EQ(run_fake(fake, dir, 0, "", args, &out), 0);
        CHECK_CONTAINS(out, why[i]);
        CHECK(!strstr(out, "] M=1 (1/1)")); /* no batch size started */
        CHECK_CONTAINS(out, "tune: 1 of 1 shapes failed\n");
        free(out);
        char *text = NULL;
        CHECK_EQ(bt_read_file(path, &text, NULL, &err), 0);
        CHECK_STREQ(text ? text : "", texts[i]);
        free(text);
    }
}

/* Tuning 2048 into a file with entries 1024 and 4096 moves M = 3072 onto the new entry: the run
 * says so under the file it wrote. */
TEST(tune_names_a_batch_size_its_new_entry_takes_over)
{
    char fake[4200], dir[4200], args[8192], path[4600];
    if (bt_test_fake_driver(fake, sizeof fake) != 0)
        SKIP("no stand-in driver at %.200s", fake);
    snprintf(dir, sizeof dir, "%s/moves", bt_test_tmpdir());
    snprintf(path, sizeof path, "%s/configs", dir);
    bt_err err;
    CHECK(bt_mkdirs(path, &err) == 0);
    snprintf(path, sizeof path, "%s/configs/N=128,K=128,device_name=Fake_GPU,dtype=fp8_w8a8,block_shape=[128, 128].json",
             dir);
    /* 128-row tiles: not in the tiny space, so the new entry's config differs from 4096's */
    const char *entry = "{\"BLOCK_SIZE_M\": 128, \"BLOCK_SIZE_N\": 128, \"BLOCK_SIZE_K\": 128, "
                        "\"GROUP_SIZE_M\": 1, \"num_warps\": 8, \"num_stages\": 3}";
    char text[1024];
    snprintf(text, sizeof text, "{\"1024\": %s, \"4096\": %s}\n", entry, entry);
    CHECK_EQ(bt_write_file_atomic(path, text, strlen(text), &err), 0);
    snprintf(args, sizeof args,
             "--space '%s' --N 128 --K 128 --batch-sizes 2048 --rest 0 --cache-dir '%s' --out-dir configs",
             tiny_space(), cache_dir());
    char *out = NULL;
    CHECK_EQ(run_fake(fake, dir, 0, "", args, &out), 0);
    CHECK_CONTAINS(out, "s measuring)\n  M=3072, not tuned in this run, now takes the 2048 entry instead of the "
                        "4096 one\n");
    CHECK(!strstr(out, "M=1536, not tuned"));
    free(out);
}

/* A batch size with no verified candidate left after the first pass is not re-timed (the
 * re-timing sorted a NULL list: undefined, and fatal under UBSan), and the summary lists the
 * batch sizes a failed setup left unstarted as such, not as a first candidate at 0 us. */
TEST(tune_batch_sizes_with_nothing_verified)
{
    char fake[4200], dir[4200], args[8192];
    if (bt_test_fake_driver(fake, sizeof fake) != 0)
        SKIP("no stand-in driver at %.200s", fake);
    snprintf(dir, sizeof dir, "%s/nothing-verified", bt_test_tmpdir());
    /* SGLang's default alone: at M = 1 it is right, from its second check on wrong */
    const char *space = bt_scratch_file("default-only.yaml", "name: default-only\nfamily: classic\nbatch_sizes: [1]\n"
                                                             "parameters:\n  BLOCK_SIZE_M: [64]\n  BLOCK_SIZE_N: [128]\n"
                                                             "  BLOCK_SIZE_K: [128]\n  GROUP_SIZE_M: [32]\n"
                                                             "  num_warps: [4]\n  num_stages: [3]\n");
    snprintf(args, sizeof args,
             "--space '%s' --N 7168 --K 2304 --batch-sizes 1,16 --rest 0 --cache-dir '%s' --out-dir configs", space,
             cache_dir());
    char *out = NULL;
    CHECK_EQ(run_fake(fake, dir, 0, "BT_FAKE_CUDA_FLAKY=1", args, &out), 0);
    CHECK_CONTAINS(out, "     16  no verified candidate ");
    CHECK_CONTAINS(out, "wrote configs/N=7168,K=2304,");
    CHECK(!strstr(out, "runtime error"));
    free(out);
    /* 32 MB: M = 1 fits, M = 4096 does not, and M = 8192 never starts */
    snprintf(args, sizeof args,
             "--space '%s' --N 7168 --K 2304 --batch-sizes 1,4096,8192 --rest 0 --cache-dir '%s' --out-dir configs2",
             space, cache_dir());
    CHECK_EQ(run_fake(fake, dir, 0, "BT_FAKE_CUDA_MEM=32000000", args, &out), 0);
    CHECK_CONTAINS(out, "   8192  no verified candidate ");
    CHECK(!strstr(out, " inf "));
    free(out);
}

/* A dry run where nothing can run on --arch prints its table of rejections and then fails as
 * the real run would, with exit 2: it used to exit 0. */
TEST(tune_dry_run_with_nothing_runnable_fails)
{
    char *out = NULL;
    const char *args[] = {"--family", "native", "--N", "128", "--K", "128", "--dry-run", "--arch", "sm_80",
                          "--cache-dir", cache_dir(), NULL};
    CHECK_EQ(bt_run_tune(&out, args), 2);
    CHECK_CONTAINS(out, "rej:arch");
    CHECK_CONTAINS(out, "native.yaml: none of the ");
    CHECK_CONTAINS(out, " candidates can run on sm_80\n");
    free(out);
}
