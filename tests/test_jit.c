#include <dirent.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "jit.h"

/* Tiny kernels: NVRTC takes ~0.1 s each, and these tests compile a few dozen. */
#define KERNEL(body) "extern \"C\" __global__ void k(float *o, const float *a, int n) {" body "}\n"

static const char *const busy_kernel = KERNEL(
    "float s = 0.f, t = 1.f;"
    "for (int i = threadIdx.x; i < n; i += blockDim.x) { s += a[i] * t; t = t * a[i] + s; }"
    "o[threadIdx.x] = s + t;");

/* A fresh cache directory per test. */
static const char *cache_dir(const char *name)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/jit-%s", bt_test_tmpdir(), name);
    return path;
}

static bt_jit *open_jit(bt_t *t, const char *dir, const char *arch)
{
    bt_target tg;
    bt_err err = {{0}};
    bt_jit *j = NULL;
    CHECK_EQ(bt_target_from_arch(arch, &tg), 0);
    if (bt_jit_open(dir, &tg, BT_JIT_STORE_REQUIRED, &j, &err) != 0)
        bt_check_fail(t, __FILE__, __LINE__, "bt_jit_open: %s", err.msg);
    return j;
}

static int run1(bt_jit *j, bt_jit_job *jobs, size_t n, int threads)
{
    bt_err err = {{0}};
    int rc = bt_jit_run(j, jobs, n, threads, NULL, NULL, &err);
    if (rc)
        printf("    bt_jit_run: %s\n", err.msg);
    return rc;
}

static int is_elf(bt_t *t, const bt_jit_job *job)
{
    void *data = NULL;
    size_t len = 0;
    bt_err err = {{0}};
    if (bt_jit_read_cubin(job, &data, &len, &err) != 0) {
        bt_check_fail(t, __FILE__, __LINE__, "bt_jit_read_cubin: %s", err.msg);
        return 0;
    }
    int ok = len > 4 && memcmp(data, "\177ELF", 4) == 0;
    free(data);
    return ok;
}

TEST(jit_source_is_defines_extra_then_entry)
{
    bt_cand c = {{64, 128, 128, 32, 4, 3}};
    bt_variant v = {BT_IN_FP8, BT_OUT_BF16, 128, 128};
    char *s = bt_jit_source(&bt_family_classic, &c, &v, "#define BT_TEST_HOOK 1\n");
    CHECK(s != NULL);
    const char *bm = strstr(s, "#define BT_BM 64\n");
    const char *hook = strstr(s, "#define BT_TEST_HOOK 1\n");
    const char *inc = strstr(s, "#include \"classic.cuh\"\n");
    CHECK(bm && hook && inc && bm < hook && hook < inc);
    CHECK_STREQ(inc, "#include \"classic.cuh\"\n");
    free(s);

    s = bt_jit_source(&bt_family_classic, &c, &v, NULL);
    CHECK_CONTAINS(s, "#define BT_STAGES 3\n#define BT_QBN 128\n");
    CHECK(s && strstr(s, "BT_TEST_HOOK") == NULL);
    free(s);
}

TEST(jit_nvrtc_version_is_major_dot_minor)
{
    int major = 0, minor = -1, used = 0;
    const char *v = bt_jit_nvrtc_version();
    CHECK_EQ(sscanf(v, "%d.%d%n", &major, &minor, &used), 2);
    CHECK_EQ(used, (long)strlen(v));
    CHECK(major >= 12 && minor >= 0);
}

TEST(jit_compiles_then_hits_the_cache)
{
    bt_jit *j = open_jit(t, cache_dir("hit"), "sm_90a");
    if (!j)
        return;
    bt_jit_job job = {.name = "busy", .source = busy_kernel};
    CHECK_EQ(run1(j, &job, 1, 1), 0);
    CHECK_EQ(job.status, BT_JIT_COMPILED);
    CHECK(job.log == NULL);
    CHECK(job.regs > 0);
    CHECK_EQ(job.spill_bytes, 0);
    CHECK(job.seconds > 0);
    CHECK(is_elf(t, &job));
    CHECK_EQ(strlen(job.key), 64);
    char want[8192];
    snprintf(want, sizeof want, "%s/sm_90a/%.2s/%s.cubin", cache_dir("hit"), job.key, job.key);
    CHECK_STREQ(job.path, want);
    struct stat st;
    CHECK_EQ(stat(job.path, &st), 0);
    time_t mtime = st.st_mtime;
    char key[65];
    memcpy(key, job.key, sizeof key);
    int regs = job.regs;

    /* A second run, and a second process's worth of state: nothing compiles. */
    bt_jit_close(j);
    j = open_jit(t, cache_dir("hit"), "sm_90a");
    CHECK_EQ(run1(j, &job, 1, 1), 0);
    CHECK_EQ(job.status, BT_JIT_CACHED);
    CHECK_STREQ(job.key, key);
    CHECK_EQ(job.regs, regs);
    CHECK_EQ(job.spill_bytes, 0);
    CHECK(job.seconds == 0);
    CHECK(is_elf(t, &job));
    CHECK_EQ(stat(job.path, &st), 0);
    CHECK_EQ(st.st_mtime, mtime);
    bt_jit_job_clear(&job);
    bt_jit_close(j);
}

TEST(jit_key_depends_on_arch_and_source)
{
    bt_jit *j90 = open_jit(t, cache_dir("arch"), "sm_90a");
    bt_jit *j89 = open_jit(t, cache_dir("arch"), "sm_89");
    if (!j90 || !j89) {
        bt_jit_close(j90);
        bt_jit_close(j89);
        return;
    }
    bt_jit_job a = {.source = KERNEL("o[0] = 1.f;")}, b = a;
    bt_jit_job c = {.source = KERNEL("o[0] = 2.f;")};
    CHECK_EQ(run1(j90, &a, 1, 1), 0);
    CHECK_EQ(run1(j89, &b, 1, 1), 0);
    CHECK_EQ(run1(j90, &c, 1, 1), 0);
    CHECK_EQ(a.status, BT_JIT_COMPILED);
    CHECK_EQ(b.status, BT_JIT_COMPILED);
    CHECK_EQ(c.status, BT_JIT_COMPILED);
    CHECK(strcmp(a.key, b.key) != 0);
    CHECK(strcmp(a.key, c.key) != 0);
    CHECK_CONTAINS(a.path, "/sm_90a/");
    CHECK_CONTAINS(b.path, "/sm_89/");
    CHECK(is_elf(t, &a) && is_elf(t, &b));
    bt_jit_close(j90);
    bt_jit_close(j89);
}

/* Registers come from the cubin, so they are exact even where NVRTC drops ptxas's report;
 * spills need that report, and are -1 (unknown) without it. */
TEST(jit_reports_registers_and_spills)
{
    bt_jit *j = open_jit(t, cache_dir("spill"), "sm_90a");
    if (!j)
        return;
    bt_jit_job job = {
        .source = "extern \"C\" __global__ void __maxnreg__(32) k(float *o, const float *a) {"
                  "float r[64]; for (int i = 0; i < 64; i++) r[i] = a[i * threadIdx.x];"
                  "float s = 0.f; for (int j = 0; j < 64; j++) for (int i = 0; i < 64; i++)"
                  "s += r[i] * r[(i + j) % 64]; o[threadIdx.x] = s; }\n",
    };
    for (int pass = 0; pass < 2; pass++) {
        CHECK_EQ(run1(j, &job, 1, 1), 0);
        CHECK_EQ(job.status, pass ? BT_JIT_CACHED : BT_JIT_COMPILED);
        CHECK_EQ(job.regs, 32);
        CHECK(job.spill_bytes > 0 || job.spill_bytes == -1);
    }
    bt_jit_close(j);
}

TEST(jit_log_problem_is_serialized_or_waited_wgmma)
{
    CHECK(bt_jit_log_problem(NULL) == NULL);
    CHECK(bt_jit_log_problem("ptxas info    : Used 168 registers, used 16 barriers\n") == NULL);
    const char *log = "ptxas info    : (C7514) Potential Performance Loss: wgmma.mma_async instructions are "
                      "serialized due to non wgmma instructions reading accumulator registers\n";
    const char *why = bt_jit_log_problem(log);
    CHECK(why != NULL);
    if (why)
        CHECK(strncmp(why, "wgmma.mma_async instructions are serialized", 43) == 0);
    why = bt_jit_log_problem("ptxas info    : (C7517) warpgroup.wait is injected in around line 0 by compiler to "
                             "allow use of registers defined by GMMA in function 'bt_native_gemm'\n");
    CHECK(why != NULL);
    if (why)
        CHECK(strncmp(why, "warpgroup.wait is injected", 26) == 0);
}

/* Representative native candidates compile for sm_90a without spills and without ptxas
 * serializing their wgmma: two K-block partials, one partial, a multicast cluster, split-K, and
 * the widest ones with a multicast cluster (which spilled once INT8_CONVERT 1 carried its offset
 * there). */
TEST(jit_native_candidates_compile_clean)
{
    bt_jit *j = open_jit(t, cache_dir("native"), "sm_90a");
    if (!j)
        return;
    static const int cands[][7] = {{128, 128, 6, 8, 1, 1}, {128, 144, 4, 8, 1, 1}, {128, 128, 4, 8, 2, 1},
                                   {64, 32, 12, 8, 1, 4},  {128, 112, 6, 8, 2, 1}, {128, 160, 4, 8, 2, 1}};
    /* FP8, INT8, and INT8 with INT8_CONVERT 1 (the offset sums) */
    static const bt_variant vars[] = {{BT_IN_FP8, BT_OUT_BF16, 128, 128}, {BT_IN_INT8, BT_OUT_F32, 128, 128},
                                      {BT_IN_INT8, BT_OUT_F32, 128, 128}};
    enum { NC = sizeof cands / sizeof cands[0], NV = sizeof vars / sizeof vars[0] };
    const int cvt = bt_family_param_index(&bt_family_native, "INT8_CONVERT");
    CHECK(cvt >= 0);
    bt_jit_job jobs[NC * NV];
    memset(jobs, 0, sizeof jobs);
    for (int v = 0; v < NV; v++)
        for (int c = 0; c < NC; c++) {
            bt_cand cand = {{0}};
            memcpy(cand.v, cands[c], sizeof cands[c]);
            if (cvt >= 0)
                cand.v[cvt] = v == 2;
            jobs[v * NC + c].source = bt_jit_source(&bt_family_native, &cand, &vars[v], NULL);
        }
    CHECK_EQ(run1(j, jobs, NC * NV, 2), 0);
    for (int i = 0; i < NC * NV; i++) {
        if (jobs[i].status != BT_JIT_COMPILED)
            bt_check_fail(t, __FILE__, __LINE__, "candidate %d: %.300s", i, jobs[i].log ? jobs[i].log : "");
        CHECK_EQ(jobs[i].spill_bytes, 0);
        free((char *)jobs[i].source);
        bt_jit_job_clear(&jobs[i]);
    }
    bt_jit_close(j);
}

/* The classic check and the kernel's loader assertions agree at their edges: 2 warps copy a
 * 128-row tile in 16 passes (accepted, compiles), a 256-row one in 32 (rejected, and the kernel
 * refuses it too rather than shifting its row masks past 32 bits); 1 warp is rejected and does
 * not compile either. */
TEST(jit_classic_check_matches_the_loader)
{
    bt_jit *j = open_jit(t, cache_dir("classic-loader"), "sm_90a");
    if (!j)
        return;
    bt_target tg;
    CHECK_EQ(bt_target_from_arch("sm_90a", &tg), 0);
    static const bt_cand cands[] = {{{128, 32, 128, 1, 2, 2}}, {{256, 16, 128, 1, 2, 2}}, {{64, 64, 64, 1, 1, 2}}};
    static const int runs[] = {1, 0, 0};
    const bt_variant v = {BT_IN_FP8, BT_OUT_BF16, 128, 128};
    enum { NC = sizeof cands / sizeof cands[0] };
    bt_jit_job jobs[NC];
    memset(jobs, 0, sizeof jobs);
    for (int i = 0; i < NC; i++) {
        CHECK_EQ(bt_family_classic.check(&cands[i], &v, &tg, NULL, 0) == BT_REJ_NONE, runs[i]);
        jobs[i].source = bt_jit_source(&bt_family_classic, &cands[i], &v, NULL);
    }
    CHECK_EQ(run1(j, jobs, NC, 2), 0);
    for (int i = 0; i < NC; i++) {
        if ((jobs[i].status == BT_JIT_COMPILED) != runs[i])
            bt_check_fail(t, __FILE__, __LINE__, "candidate %d: %s: %.300s", i,
                          runs[i] ? "failed to compile" : "compiled", jobs[i].log ? jobs[i].log : "");
        free((char *)jobs[i].source);
        bt_jit_job_clear(&jobs[i]);
    }
    bt_jit_close(j);
}

/* Replaces a cache file's contents (the cubin or its sidecar). */
static void clobber(const char *path, const char *text, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(text, 1, len, f);
        fclose(f);
    }
}

TEST(jit_damaged_cache_entries_recompile)
{
    bt_jit *j = open_jit(t, cache_dir("damage"), "sm_89");
    if (!j)
        return;
    bt_jit_job job = {.source = busy_kernel};
    CHECK_EQ(run1(j, &job, 1, 1), 0);
    CHECK_EQ(job.status, BT_JIT_COMPILED);
    char meta[4096];
    snprintf(meta, sizeof meta, "%.*s.meta", (int)(strlen(job.path) - 6), job.path);
    CHECK_EQ(access(meta, F_OK), 0);

    void *good = NULL;
    size_t len = 0;
    bt_err err;
    CHECK_EQ(bt_jit_read_cubin(&job, &good, &len, &err), 0);
    struct {
        const char *what, *path, *text;
        size_t len;
    } damage[] = {
        {"truncated cubin", job.path, good, len / 2},
        {"empty cubin", job.path, "", 0},
        {"garbage cubin", job.path, "\177ELF not really a cubin", 23},
        {"garbage meta", meta, "regs banana\n", 12},
        {"meta with a wrong hash", meta,
         "regs 1\nspill_bytes 0\ncubin_sha256 "
         "0000000000000000000000000000000000000000000000000000000000000000\n", 99},
    };
    for (size_t i = 0; i < sizeof damage / sizeof damage[0]; i++) {
        clobber(damage[i].path, damage[i].text, damage[i].len);
        CHECK_EQ(run1(j, &job, 1, 1), 0);
        if (job.status != BT_JIT_COMPILED)
            printf("    after %s: status %d\n", damage[i].what, job.status);
        CHECK_EQ(job.status, BT_JIT_COMPILED);
        CHECK(is_elf(t, &job));
    }
    CHECK_EQ(unlink(meta), 0);
    CHECK_EQ(run1(j, &job, 1, 1), 0);
    CHECK_EQ(job.status, BT_JIT_COMPILED);
    CHECK_EQ(unlink(job.path), 0);
    CHECK_EQ(run1(j, &job, 1, 1), 0);
    CHECK_EQ(job.status, BT_JIT_COMPILED);
    /* And the repaired entry is a hit again. */
    CHECK_EQ(run1(j, &job, 1, 1), 0);
    CHECK_EQ(job.status, BT_JIT_CACHED);
    CHECK(job.regs > 0);
    free(good);
    bt_jit_close(j);
}

TEST(jit_syntax_error_fails_one_job_only)
{
    bt_jit *j = open_jit(t, cache_dir("syntax"), "sm_90a");
    if (!j)
        return;
    bt_jit_job jobs[3] = {
        {.name = "good1", .source = KERNEL("o[0] = 3.f;")},
        {.name = "bad", .source = KERNEL("o[0] = undeclared_thing;")},
        {.name = "good2", .source = KERNEL("o[0] = 4.f;")},
    };
    CHECK_EQ(run1(j, jobs, 3, 2), 0);
    CHECK_EQ(jobs[0].status, BT_JIT_COMPILED);
    CHECK_EQ(jobs[1].status, BT_JIT_FAILED);
    CHECK_EQ(jobs[2].status, BT_JIT_COMPILED);
    CHECK_CONTAINS(jobs[1].log, "error: identifier \"undeclared_thing\" is undefined");
    CHECK(jobs[0].log == NULL && jobs[2].log == NULL);
    CHECK_EQ(access(jobs[1].path, F_OK), -1);
    bt_err err;
    void *data = NULL;
    size_t len;
    CHECK_EQ(bt_jit_read_cubin(&jobs[1], &data, &len, &err), -1);
    CHECK_STREQ(err.msg, "bad: no cubin (the compile failed or never ran)");

    /* Failures are not cached: the next run tries again and fails the same way. */
    CHECK_EQ(run1(j, jobs, 3, 2), 0);
    CHECK_EQ(jobs[0].status, BT_JIT_CACHED);
    CHECK_EQ(jobs[1].status, BT_JIT_FAILED);
    CHECK_CONTAINS(jobs[1].log, "undeclared_thing");
    for (int i = 0; i < 3; i++)
        bt_jit_job_clear(&jobs[i]);
    bt_jit_close(j);
}

TEST(jit_includes_embedded_templates)
{
    bt_jit *j = open_jit(t, cache_dir("embed"), "sm_89");
    if (!j)
        return;
    bt_jit_job job = {
        .source = "#include \"classic_layout.h\"\n" KERNEL("o[0] = bt_cl_bscales(128, 128);"),
    };
    CHECK_EQ(run1(j, &job, 1, 1), 0);
    if (job.status != BT_JIT_COMPILED)
        printf("    log: %s\n", job.log ? job.log : "(none)");
    CHECK_EQ(job.status, BT_JIT_COMPILED);
    bt_jit_job_clear(&job);
    bt_jit_close(j);
}

/* The support kernels (random inputs, the float64 reference, the checks) that every GPU run
 * loads compile for every target --arch takes: a GPU-less CI is where to find out (the FP8
 * conversion they used before sm_89 did not). */
TEST(jit_support_kernels_compile)
{
    static const char *arches[] = {"sm_90a", "sm_89", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"};
    for (int i = 0; i < (int)(sizeof arches / sizeof arches[0]); i++) {
        bt_jit *j = open_jit(t, cache_dir("support"), arches[i]);
        if (!j)
            return;
        bt_jit_job job = {.source = "#include \"support.cuh\"\n"};
        CHECK_EQ(run1(j, &job, 1, 1), 0);
        if (job.status == BT_JIT_FAILED)
            printf("    %s log: %.400s\n", arches[i], job.log ? job.log : "(none)");
        CHECK(job.status == BT_JIT_COMPILED || job.status == BT_JIT_CACHED);
        bt_jit_job_clear(&job);
        bt_jit_close(j);
    }
}

TEST(jit_unwritable_cache_fails_the_run)
{
    bt_jit *j = open_jit(t, cache_dir("unwritable"), "sm_89");
    if (!j)
        return;
    bt_jit_job job = {.name = "w", .source = KERNEL("o[0] = 5.f;")};
    CHECK_EQ(run1(j, &job, 1, 1), 0);
    CHECK_EQ(job.status, BT_JIT_COMPILED);
    /* Replace the entry's directory with a file: the compile succeeds, the store cannot. */
    char dir[4096], cmd[8300];
    snprintf(dir, sizeof dir, "%s", job.path);
    *strrchr(dir, '/') = '\0';
    snprintf(cmd, sizeof cmd, "rm -r '%s' && touch '%s'", dir, dir);
    CHECK_EQ(system(cmd), 0);
    bt_err err = {{0}};
    CHECK_EQ(bt_jit_run(j, &job, 1, 1, NULL, NULL, &err), -1);
    char want[4200];
    snprintf(want, sizeof want, "cubin cache: %s: not a directory", dir);
    CHECK_STREQ(err.msg, want);
    CHECK_EQ(job.status, BT_JIT_FAILED);
    CHECK_CONTAINS(job.log, "not a directory");
    bt_jit_job_clear(&job);
    bt_jit_close(j);
}

/* With BT_JIT_KEEP_UNSTORED (the library's mode) a cache that cannot be written is not an
 * error: whether it cannot be from the start or a store fails, the jobs keep their cubins
 * (duplicates a copy of their leader's), and bt_jit_unstored says why. */
TEST(jit_keeps_cubins_the_cache_cannot_take)
{
    const char *blocker = bt_scratch_file("jit-keep-blocker", "a file, not a directory\n");
    char dir[4096], want[4300];
    snprintf(dir, sizeof dir, "%s/cache", blocker);
    bt_target tg;
    bt_err err = {{0}};
    bt_jit *j = NULL;
    CHECK_EQ(bt_target_from_arch("sm_89", &tg), 0);
    if (bt_jit_open(dir, &tg, BT_JIT_KEEP_UNSTORED, &j, &err) != 0) {
        bt_check_fail(t, __FILE__, __LINE__, "bt_jit_open: %s", err.msg);
        return;
    }
    snprintf(want, sizeof want, "%s: not a directory", blocker);
    CHECK_STREQ(bt_jit_unstored(j), want);
    bt_jit_job jobs[3] = {{.name = "a", .source = KERNEL("o[0] = 1.f;")},
                          {.name = "a again", .source = KERNEL("o[0] = 1.f;")},
                          {.name = "b", .source = KERNEL("o[0] = 2.f;")}};
    CHECK_EQ(run1(j, jobs, 3, 2), 0);
    CHECK_EQ(jobs[0].status, BT_JIT_COMPILED);
    CHECK_EQ(jobs[1].status, BT_JIT_CACHED);
    CHECK_EQ(jobs[2].status, BT_JIT_COMPILED);
    for (int i = 0; i < 3; i++) {
        CHECK(jobs[i].cubin != NULL && is_elf(t, &jobs[i]));
        CHECK(access(jobs[i].path, F_OK) != 0);
    }
    CHECK(jobs[1].cubin != jobs[0].cubin && jobs[1].cubin_len == jobs[0].cubin_len &&
          memcmp(jobs[0].cubin, jobs[1].cubin, jobs[0].cubin_len) == 0);
    for (int i = 0; i < 3; i++) {
        bt_jit_job_clear(&jobs[i]);
        CHECK(jobs[i].cubin == NULL);
    }
    bt_jit_close(j);

    /* A writable cache whose store then fails: that job keeps its cubin, later ones are not
     * stored, and what the cache holds is still read. */
    j = NULL;
    if (bt_jit_open(cache_dir("keep"), &tg, BT_JIT_KEEP_UNSTORED, &j, &err) != 0) {
        bt_check_fail(t, __FILE__, __LINE__, "bt_jit_open: %s", err.msg);
        return;
    }
    CHECK(bt_jit_unstored(j) == NULL);
    static const char *const srcs[] = {KERNEL("o[0] = 3.f;"), KERNEL("o[0] = 5.f;"), KERNEL("o[0] = 6.f;")};
    bt_jit_job job = {.name = "c", .source = srcs[0]}, kept = {.name = "e"};
    char entry[4096], cmd[8300];
    CHECK_EQ(run1(j, &job, 1, 1), 0);
    CHECK(job.status == BT_JIT_COMPILED && job.cubin == NULL); /* stored */
    snprintf(entry, sizeof entry, "%s", job.path);
    *strrchr(entry, '/') = '\0';
    for (int i = 1; i < 3; i++) { /* one stored in another directory than c's */
        kept.source = srcs[i];
        CHECK_EQ(run1(j, &kept, 1, 1), 0);
        if (strncmp(kept.path, entry, strlen(entry)) != 0)
            break;
    }
    CHECK(kept.status == BT_JIT_COMPILED && kept.cubin == NULL && strncmp(kept.path, entry, strlen(entry)) != 0);
    snprintf(cmd, sizeof cmd, "rm -r '%s' && touch '%s'", entry, entry);
    CHECK_EQ(system(cmd), 0);
    CHECK_EQ(run1(j, &job, 1, 1), 0);
    CHECK(job.status == BT_JIT_COMPILED && job.cubin != NULL && is_elf(t, &job));
    snprintf(want, sizeof want, "%s: not a directory", entry);
    CHECK_STREQ(bt_jit_unstored(j), want);
    bt_jit_job later = {.name = "d", .source = KERNEL("o[0] = 4.f;")};
    CHECK_EQ(run1(j, &later, 1, 1), 0);
    CHECK(later.status == BT_JIT_COMPILED && later.cubin != NULL);
    CHECK(access(later.path, F_OK) != 0);
    CHECK_EQ(run1(j, &kept, 1, 1), 0);
    CHECK(kept.status == BT_JIT_CACHED && kept.cubin == NULL && is_elf(t, &kept));
    bt_jit_job_clear(&job);
    bt_jit_job_clear(&later);
    bt_jit_job_clear(&kept);
    bt_jit_close(j);
}

typedef struct {
    pthread_t caller;
    size_t calls, last, total;
    int off_thread, backwards;
} progress_log;

static int on_progress(void *ud, size_t done, size_t total)
{
    progress_log *p = ud;
    if (!pthread_equal(pthread_self(), p->caller))
        p->off_thread = 1;
    if (done < p->last) /* (the same count again: a call between jobs) */
        p->backwards = 1;
    p->calls++;
    p->last = done;
    p->total = total;
    return 0;
}

enum { NSMALL = 8 };

/* NSMALL small distinct kernels (o = a * (i + 1), or + with add) as jobs 0 .. NSMALL - 1. */
static void small_jobs(char (*src)[256], bt_jit_job *jobs, int add)
{
    for (int i = 0; i < NSMALL; i++) {
        if (add)
            snprintf(src[i], 256, KERNEL("o[threadIdx.x] = a[threadIdx.x] + %d.f;"), i + 1);
        else
            snprintf(src[i], 256, KERNEL("o[threadIdx.x] = a[threadIdx.x] * %d.f;"), i + 1);
        jobs[i].source = src[i];
    }
}

TEST(jit_parallel_run_reports_progress)
{
    bt_jit *j = open_jit(t, cache_dir("parallel"), "sm_90a");
    if (!j)
        return;
    enum { N = NSMALL };
    char src[N][256];
    bt_jit_job jobs[N + 1];
    memset(jobs, 0, sizeof jobs);
    small_jobs(src, jobs, 0);
    jobs[N].source = src[3]; /* a duplicate compiles once */
    progress_log p = {.caller = pthread_self()};
    bt_err err;
    CHECK_EQ(bt_jit_run(j, jobs, N + 1, 2, on_progress, &p, &err), 0);
    for (int i = 0; i < N; i++)
        CHECK_EQ(jobs[i].status, BT_JIT_COMPILED);
    CHECK_EQ(jobs[N].status, BT_JIT_CACHED);
    CHECK_STREQ(jobs[N].path, jobs[3].path);
    CHECK(p.calls >= 1);
    CHECK_EQ(p.last, N + 1);
    CHECK_EQ(p.total, N + 1);
    CHECK(!p.off_thread && !p.backwards);

    /* threads <= 0 means one per CPU; everything is cached now. */
    p = (progress_log){.caller = pthread_self()};
    CHECK_EQ(bt_jit_run(j, jobs, N + 1, 0, on_progress, &p, &err), 0);
    for (int i = 0; i <= N; i++)
        CHECK_EQ(jobs[i].status, BT_JIT_CACHED);
    CHECK_EQ(p.last, N + 1);
    CHECK(!p.off_thread && !p.backwards);
    bt_jit_close(j);
}

static int stop_at_once(void *ud, size_t done, size_t total)
{
    (void)done, (void)total;
    ++*(int *)ud;
    return 1;
}

static int stop_after_one(void *ud, size_t done, size_t total)
{
    (void)total;
    ++*(int *)ud;
    return done >= 1;
}

/* Runs NSMALL fresh jobs in cache dir name under progress callback stop, counting the jobs
 * that compiled and those left pending; -1 without NVRTC. */
static int run_stopped(bt_t *t, const char *name, int threads,
                       int (*stop)(void *, size_t, size_t), int *calls, int *compiled, int *pending)
{
    bt_jit *j = open_jit(t, cache_dir(name), "sm_90a");
    if (!j)
        return -1;
    char src[NSMALL][256];
    bt_jit_job jobs[NSMALL];
    memset(jobs, 0, sizeof jobs);
    small_jobs(src, jobs, 1);
    bt_err err;
    *calls = *compiled = *pending = 0;
    CHECK_EQ(bt_jit_run(j, jobs, NSMALL, threads, stop, calls, &err), 0);
    for (int i = 0; i < NSMALL; i++) {
        *compiled += jobs[i].status == BT_JIT_COMPILED;
        *pending += jobs[i].status == BT_JIT_PENDING;
    }
    bt_jit_close(j);
    return 0;
}

/* A progress callback that asks to stop (Ctrl-C in tune): no job starts after it, and those not
 * started stay pending; what finished is compiled and cached. Progress is also asked before
 * the first job, so a stop already requested starts none. */
TEST(jit_progress_can_stop_the_run)
{
    int calls, compiled, pending;
    if (run_stopped(t, "stopped", 1, stop_after_one, &calls, &compiled, &pending))
        return;
    CHECK_EQ(compiled + pending, NSMALL);
    /* The first, and the one the thread took before the stop was seen (more only if this thread
     * slept through whole compiles): not all. */
    CHECK(compiled >= 1 && pending >= 1);
    CHECK(calls >= 2);
    if (run_stopped(t, "stopped-early", 2, stop_at_once, &calls, &compiled, &pending))
        return;
    CHECK_EQ(pending, NSMALL);
    CHECK_EQ(calls, 1);
}

/* A stop asked while the sources are hashed (a thousand take seconds under a sanitizer) is
 * taken there: the rest are not hashed, and no job starts. */
TEST(jit_stop_while_hashing)
{
    bt_jit *j = open_jit(t, cache_dir("hashing"), "sm_90a");
    if (!j)
        return;
    enum { NH = 200 };
    static char src[NH][256];
    bt_jit_job jobs[NH];
    memset(jobs, 0, sizeof jobs);
    for (int i = 0; i < NH; i++) {
        snprintf(src[i], sizeof src[i], KERNEL("o[threadIdx.x] = a[threadIdx.x] - %d.f;"), i);
        jobs[i].source = src[i];
    }
    int calls = 0;
    bt_err err;
    CHECK_EQ(bt_jit_run(j, jobs, NH, 2, stop_at_once, &calls, &err), 0);
    CHECK_EQ(calls, 1);
    for (int i = 0; i < NH; i++)
        CHECK_EQ(jobs[i].status, BT_JIT_PENDING);
    CHECK(jobs[0].key[0] != '\0');
    CHECK(jobs[NH - 1].key[0] == '\0');
    bt_jit_close(j);
}

TEST(jit_unusable_cache_dir_is_one_line)
{
    const char *blocker = bt_scratch_file("jit-blocker", "a file, not a directory\n");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/cache", blocker);
    bt_target tg;
    bt_err err = {{0}};
    bt_jit *j = NULL;
    CHECK_EQ(bt_target_from_arch("sm_90a", &tg), 0);
    CHECK_EQ(bt_jit_open(dir, &tg, BT_JIT_STORE_REQUIRED, &j, &err), -1);
    CHECK(j == NULL);
    char want[4200];
    snprintf(want, sizeof want, "cubin cache: %s: not a directory", blocker);
    CHECK_STREQ(err.msg, want);
}

TEST(jit_default_cache_dir)
{
    char *xdg = bt_test_set_env("XDG_CACHE_HOME", NULL), *home = bt_test_set_env("HOME", NULL);
    static const struct {
        const char *xdg, *home, *want;
    } cases[] = {
        {"/x/cache", "/home/u", "/x/cache/blocktune"},
        {NULL, "/home/u", "/home/u/.cache/blocktune"},
        {"rel/cache", "/home/u", "/home/u/.cache/blocktune"}, /* XDG: relative is ignored */
        {"", "", ".blocktune-cache"},
        {NULL, NULL, ".blocktune-cache"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        free(bt_test_set_env("XDG_CACHE_HOME", cases[i].xdg));
        free(bt_test_set_env("HOME", cases[i].home));
        char *d = bt_jit_default_cache_dir();
        CHECK_STREQ(d, cases[i].want);
        free(d);
    }
    bt_test_restore_env("XDG_CACHE_HOME", xdg);
    bt_test_restore_env("HOME", home);
}

/* Two threads (two library handles) publishing the same cache entry at once: every write
 * succeeds, the file ends whole (one writer's bytes, never a mix or a truncation), and no
 * temporary file is left beside it. */
typedef struct {
    const char *path;
    char byte;
    int failed;
    char msg[256];
} racer;

enum { RACE_LEN = 64 * 1024, RACE_WRITES = 200 };

static void *race_writes(void *arg)
{
    racer *r = arg;
    char *data = malloc(RACE_LEN);
    memset(data, r->byte, RACE_LEN);
    for (int i = 0; i < RACE_WRITES; i++) {
        bt_err err = {{0}};
        if (bt_write_file_atomic(r->path, data, RACE_LEN, &err)) {
            if (!r->failed++)
                snprintf(r->msg, sizeof r->msg, "%s", err.msg);
        }
    }
    free(data);
    return NULL;
}

TEST(jit_atomic_write_races_between_threads)
{
    char dir[4096], path[4200];
    bt_err err = {{0}};
    snprintf(dir, sizeof dir, "%s/race", bt_test_tmpdir());
    CHECK_EQ(bt_mkdirs(dir, &err), 0);
    snprintf(path, sizeof path, "%s/entry.cubin", dir);
    racer r[2] = {{.path = path, .byte = 'a'}, {.path = path, .byte = 'b'}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        CHECK_EQ(pthread_create(&th[i], NULL, race_writes, &r[i]), 0);
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        if (r[i].failed)
            bt_check_fail(t, __FILE__, __LINE__, "%d of %d writes failed: %s", r[i].failed, RACE_WRITES, r[i].msg);
    }
    char *data = NULL;
    size_t len = 0;
    CHECK_EQ(bt_read_file(path, &data, &len, &err), 0);
    CHECK_EQ(len, RACE_LEN);
    int whole = data && (data[0] == 'a' || data[0] == 'b');
    for (size_t i = 0; whole && i < len; i++)
        whole = data[i] == data[0];
    CHECK(whole);
    free(data);
    DIR *d = opendir(dir);
    int others = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        others += strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, "entry.cubin");
    if (d)
        closedir(d);
    CHECK_EQ(others, 0);
}
