#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "journal.h"

static const bt_family *classic = &bt_family_classic;

static bt_journal_header header(void)
{
    bt_journal_header h = {
        .device = "NVIDIA H100 80GB HBM3",
        .family = "classic",
        .N = 7168,
        .K = 2304,
        .in = "fp8",
        .out = "float16",
        .block_n = 128,
        .block_k = 128,
        .arch = "sm_90a",
        .space_digest = "5f2b0c8e4d7a9b1c3e5f7a9b1d3f5a7c9e1b3d5f7a9c1e3b5d7f9a1c3e5b7d9f",
        .launch = "stream",
    };
    return h;
}

static const char *path_for(const char *name)
{
    static char paths[4][4096];
    static int next;
    char *p = paths[next++ % 4];
    snprintf(p, 4096, "%s/%s", bt_test_tmpdir(), name);
    unlink(p);
    return p;
}

static bt_result result(long M, int is_default, bt_res_status s, double us, double rel_err,
                        const char *note)
{
    bt_result r = {.M = M, .is_default = is_default, .status = s, .us = us, .rel_err = rel_err};
    const int v[6] = {64, 128, 128, 32, 4, 3};
    memcpy(r.cand.v, v, sizeof v);
    r.cand.v[0] = (int)(16 * (M % 4 + 1));
    snprintf(r.note, sizeof r.note, "%s", note);
    return r;
}

/* A journal at path holding the header and n sample results. */
static void write_journal(const char *path, int n, bt_result *written)
{
    bt_journal_header h = header();
    bt_journal *j;
    bt_err err;
    if (bt_journal_open(path, &h, 0, &j, NULL, NULL, classic, &err))
        return;
    for (int i = 0; i < n; i++) {
        bt_result r = result(1L << i, i == 0, (bt_res_status)(i % BT_RES_COUNT),
                             i == 1 ? NAN : 10.0 / 3 + i, i == 1 ? NAN : 1e-3 / (i + 1),
                             i == 1 ? "illegal memory access at \"x\"\nline two" : "");
        bt_journal_append(j, &r, &err);
        if (written)
            written[i] = r;
    }
    bt_journal_close(j, 0);
}

static void append_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "ab");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static int count_lines(const char *path)
{
    char *text = NULL;
    bt_err err;
    int n = 0;
    if (bt_read_file(path, &text, NULL, &err))
        return -1;
    for (const char *p = text; *p; p++)
        n += *p == '\n';
    free(text);
    return n;
}

static int same_double(double a, double b) { return (isnan(a) && isnan(b)) || a == b; }

TEST(journal_roundtrip)
{
    const char *path = path_for("roundtrip.journal");
    bt_result written[4];
    write_journal(path, 4, written);
    CHECK_EQ(count_lines(path), 5);

    char *text = NULL;
    bt_err err;
    CHECK_EQ(bt_read_file(path, &text, NULL, &err), 0);
    const char *head = "{\"journal\":\"blocktune\",\"version\":2,\"device\":\"NVIDIA H100 80GB "
                       "HBM3\",\"family\":\"classic\",\"N\":7168,\"K\":2304,\"in\":\"fp8\","
                       "\"out\":\"float16\",\"block_n\":128,\"block_k\":128,\"arch\":\"sm_90a\","
                       "\"space_digest\":\"5f2b0c8e";
    CHECK(text && strncmp(text, head, strlen(head)) == 0);
    CHECK_CONTAINS(text, "\n{\"M\":1,\"default\":1,\"cand\":[32,128,128,32,4,3],\"status\":\"ok\","
                         "\"us\":3.3333333333333335,\"rel_err\":0.001,\"note\":\"\"}\n");
    CHECK_CONTAINS(text, "\"status\":\"wrong\",\"us\":null,\"rel_err\":null,"
                         "\"note\":\"illegal memory access at \\\"x\\\"\\nline two\"}\n");
    free(text);

    bt_journal_header h = header();
    bt_journal *j = NULL;
    bt_result *prior = NULL;
    size_t n = 0;
    CHECK_EQ(bt_journal_open(path, &h, 1, &j, &prior, &n, classic, &err), 0);
    CHECK_EQ(n, 4);
    for (size_t i = 0; i < n && i < 4; i++) {
        CHECK_EQ(prior[i].M, written[i].M);
        CHECK_EQ(prior[i].is_default, written[i].is_default);
        CHECK(memcmp(prior[i].cand.v, written[i].cand.v, 6 * sizeof(int)) == 0);
        CHECK_EQ(prior[i].status, written[i].status);
        CHECK(same_double(prior[i].us, written[i].us));
        CHECK(same_double(prior[i].rel_err, written[i].rel_err));
        CHECK_STREQ(prior[i].note, written[i].note);
    }
    free(prior);
    /* Resuming appends after the old results. */
    bt_result r = result(4096, 0, BT_RES_TIMEOUT, NAN, NAN, "killed after 60 s");
    CHECK_EQ(bt_journal_append(j, &r, &err), 0);
    bt_journal_close(j, 0);
    CHECK_EQ(count_lines(path), 6);

    CHECK_EQ(bt_journal_open(path, &h, 1, &j, &prior, &n, classic, &err), 0);
    CHECK_EQ(n, 5);
    if (n == 5) {
        CHECK_EQ(prior[4].M, 4096);
        CHECK_EQ(prior[4].status, BT_RES_TIMEOUT);
        CHECK_STREQ(prior[4].note, "killed after 60 s");
    }
    free(prior);
    bt_journal_close(j, 1);
    CHECK(access(path, F_OK) != 0);
}

TEST(journal_fresh_replaces_old)
{
    const char *path = path_for("fresh.journal");
    write_journal(path, 3, NULL);
    bt_journal_header h = header();
    bt_journal *j;
    bt_result *prior = (bt_result *)1;
    size_t n = 99;
    bt_err err;
    CHECK_EQ(bt_journal_open(path, &h, 0, &j, &prior, &n, classic, &err), 0);
    CHECK(prior == NULL);
    CHECK_EQ(n, 0);
    bt_journal_close(j, 0);
    CHECK_EQ(count_lines(path), 1);
}

TEST(journal_resume_missing_starts_fresh)
{
    const char *path = path_for("missing.journal");
    bt_journal_header h = header();
    bt_journal *j;
    bt_result *prior = NULL;
    size_t n = 99;
    bt_err err;
    CHECK_EQ(bt_journal_open(path, &h, 1, &j, &prior, &n, classic, &err), 0);
    CHECK_EQ(n, 0);
    free(prior);
    bt_journal_close(j, 0);
    CHECK_EQ(count_lines(path), 1);
}

TEST(journal_header_mismatch)
{
    const char *path = path_for("mismatch.journal");
    write_journal(path, 2, NULL);
    long size = file_size(path);
    static const char *expect[] = {
        "journal is for device 'NVIDIA H100 80GB HBM3', this run is on 'NVIDIA H200' (remove it "
        "or run without --resume)",
        "journal is for family 'classic', this run uses 'native'",
        "journal is for N=7168, this run is for N=4096",
        "journal is for K=2304, this run is for K=7168",
        "journal is for input type 'fp8', this run uses 'int8'",
        "journal is for output type 'float16', this run uses 'bfloat16'",
        "journal is for block_n=128, this run is for block_n=64",
        "journal is for block_k=128, this run is for block_k=256",
        "journal is for arch 'sm_90a', this run uses 'sm_90'",
        "journal is for search space digest '5f2b0c8e",
        "journal is for launch 'stream', this run uses 'programmatic'",
    };
    for (int field = 0; field < (int)(sizeof expect / sizeof expect[0]); field++) {
        bt_journal_header h = header();
        switch (field) {
        case 0: snprintf(h.device, sizeof h.device, "NVIDIA H200"); break;
        case 1: snprintf(h.family, sizeof h.family, "native"); break;
        case 2: h.N = 4096; break;
        case 3: h.K = 7168; break;
        case 4: snprintf(h.in, sizeof h.in, "int8"); break;
        case 5: snprintf(h.out, sizeof h.out, "bfloat16"); break;
        case 6: h.block_n = 64; break;
        case 7: h.block_k = 256; break;
        case 8: snprintf(h.arch, sizeof h.arch, "sm_90"); break;
        case 9: h.space_digest[0] = '0'; break;
        case 10: snprintf(h.launch, sizeof h.launch, "programmatic"); break;
        }
        bt_journal *j = (bt_journal *)1;
        bt_result *prior = (bt_result *)1;
        size_t n = 99;
        bt_err err;
        CHECK_EQ(bt_journal_open(path, &h, 1, &j, &prior, &n, classic, &err), -1);
        CHECK(j == NULL);
        CHECK(prior == NULL);
        CHECK_EQ(n, 0);
        char want[1024];
        snprintf(want, sizeof want, "%s: %s", path, expect[field]);
        CHECK_CONTAINS(err.msg, want);
        CHECK(strchr(err.msg, '\n') == NULL);
    }
    CHECK_EQ(file_size(path), size); /* a refused journal is left alone */
}

TEST(journal_torn_last_line_ignored)
{
    const char *path = path_for("torn.journal");
    write_journal(path, 2, NULL);
    long size = file_size(path);
    append_text(path, "{\"M\":64,\"default\":0,\"ca");
    bt_journal_header h = header();
    bt_journal *j;
    bt_result *prior = NULL;
    size_t n = 0;
    bt_err err;
    CHECK_EQ(bt_journal_open(path, &h, 1, &j, &prior, &n, classic, &err), 0);
    CHECK_EQ(n, 2);
    free(prior);
    CHECK_EQ(file_size(path), size); /* the fragment is cut so the next line starts clean */
    bt_result r = result(64, 0, BT_RES_OK, 7.5, 1e-4, "");
    CHECK_EQ(bt_journal_append(j, &r, &err), 0);
    bt_journal_close(j, 0);
    CHECK_EQ(bt_journal_open(path, &h, 1, &j, &prior, &n, classic, &err), 0);
    CHECK_EQ(n, 3);
    if (n == 3)
        CHECK(prior[2].M == 64 && prior[2].us == 7.5);
    free(prior);
    bt_journal_close(j, 1);

    /* An unparsable last line, newline or not, is torn too. */
    path = path_for("torn2.journal");
    write_journal(path, 1, NULL);
    append_text(path, "{\"M\":64,\"defa\n");
    CHECK_EQ(bt_journal_open(path, &h, 1, &j, &prior, &n, classic, &err), 0);
    CHECK_EQ(n, 1);
    free(prior);
    bt_journal_close(j, 1);

    /* Only part of the header made it: nothing to resume. */
    path = path_for("torn3.journal");
    append_text(path, "{\"journal\":\"blockt");
    CHECK_EQ(bt_journal_open(path, &h, 1, &j, &prior, &n, classic, &err), 0);
    CHECK_EQ(n, 0);
    free(prior);
    bt_journal_close(j, 0);
    CHECK_EQ(count_lines(path), 1);
}

TEST(journal_corrupt_middle_line)
{
    bt_journal_header h = header();
    bt_journal *j;
    bt_result *prior = NULL;
    size_t n = 0;
    bt_err err;
    char want[4200];
    static const struct {
        const char *line, *msg;
    } bad[] = {
        {"garbage\n", "not valid JSON"},
        {"\n", "not valid JSON"},
        {"{\"M\":1}trailing\n", "not valid JSON"},
        {"{\"M\":1,\"default\":0,\"cand\":[1,2,3,4,5],\"status\":\"ok\",\"us\":1,\"rel_err\":0,"
         "\"note\":\"\"}\n",
         "\"cand\" is not an array of 6 integers"},
        {"{\"M\":1,\"default\":0,\"cand\":[1,2,3,4,5,6.5],\"status\":\"ok\",\"us\":1,\"rel_err\":0,"
         "\"note\":\"\"}\n",
         "\"cand\" is not an array of 6 integers"},
        {"{\"M\":0,\"default\":0,\"cand\":[1,2,3,4,5,6],\"status\":\"ok\",\"us\":1,\"rel_err\":0,"
         "\"note\":\"\"}\n",
         "\"M\" is missing or not a positive integer"},
        {"{\"M\":1,\"default\":2,\"cand\":[1,2,3,4,5,6],\"status\":\"ok\",\"us\":1,\"rel_err\":0,"
         "\"note\":\"\"}\n",
         "\"default\" is missing or not 0 or 1"},
        {"{\"M\":1,\"default\":0,\"cand\":[1,2,3,4,5,6],\"status\":\"great\",\"us\":1,"
         "\"rel_err\":0,\"note\":\"\"}\n",
         "\"status\" is missing or not a known status"},
        {"{\"M\":1,\"default\":0,\"cand\":[1,2,3,4,5,6],\"status\":\"ok\",\"us\":\"fast\","
         "\"rel_err\":0,\"note\":\"\"}\n",
         "\"us\" is not a number"},
        {"{\"M\":1,\"default\":0,\"cand\":[1,2,3,4,5,6],\"status\":\"ok\",\"us\":1,"
         "\"rel_err\":0}\n",
         "\"note\" is missing or not a string"},
        /* a result ranked by its time needs a real one */
        {"{\"M\":1,\"default\":0,\"cand\":[1,2,3,4,5,6],\"status\":\"ok\",\"us\":null,"
         "\"rel_err\":0,\"note\":\"\"}\n",
         "\"us\" is not a positive time for status \"ok\""},
        {"{\"M\":1,\"default\":0,\"cand\":[1,2,3,4,5,6],\"status\":\"ok\",\"us\":-2.5,"
         "\"rel_err\":0,\"note\":\"\"}\n",
         "\"us\" is not a positive time for status \"ok\""},
        {"{\"M\":1,\"default\":0,\"cand\":[1,2,3,4,5,6],\"status\":\"ok\",\"us\":0,"
         "\"rel_err\":0,\"note\":\"\"}\n",
         "\"us\" is not a positive time for status \"ok\""},
        {"{\"M\":1,\"default\":0,\"cand\":[1,2,3,4,5,6],\"status\":\"ok\",\"us\":1e999,"
         "\"rel_err\":0,\"note\":\"\"}\n",
         "\"us\" is not a positive time for status \"ok\""},
        {"{\"M\":1,\"default\":0,\"cand\":[1,2,3,4,5,6],\"status\":\"pruned\",\"us\":null,"
         "\"rel_err\":0,\"note\":\"\"}\n",
         "\"us\" is not a positive time for status \"pruned\""},
        {"{\"M\":1,\"default\":0,\"cand\":[1,2,3,4,5,6],\"status\":\"pruned\",\"us\":-1e999,"
         "\"rel_err\":0,\"note\":\"\"}\n",
         "\"us\" is not a positive time for status \"pruned\""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *path = path_for("corrupt.journal");
        write_journal(path, 1, NULL);
        append_text(path, bad[i].line);
        append_text(path, "{\"M\":2,\"default\":0,\"cand\":[1,2,3,4,5,6],\"status\":\"ok\","
                          "\"us\":1,\"rel_err\":0,\"note\":\"\"}\n");
        long size = file_size(path);
        CHECK_EQ(bt_journal_open(path, &h, 1, &j, &prior, &n, classic, &err), -1);
        snprintf(want, sizeof want, "%s:3: %s", path, bad[i].msg);
        CHECK_STREQ(err.msg, want);
        CHECK_EQ(file_size(path), size);
    }
}

TEST(journal_not_a_journal)
{
    const char *path = path_for("other.journal");
    append_text(path, "{\"foo\":1}\n{\"bar\":2}\n");
    bt_journal_header h = header();
    bt_journal *j;
    bt_result *prior = NULL;
    size_t n = 0;
    bt_err err;
    char want[4200];
    CHECK_EQ(bt_journal_open(path, &h, 1, &j, &prior, &n, classic, &err), -1);
    snprintf(want, sizeof want, "%s:1: not a blocktune journal (remove it or run without --resume)",
             path);
    CHECK_STREQ(err.msg, want);

    /* a later version, and one that is not a whole number: versions this blocktune does not read */
    static const char *const versions[][2] = {{"future.journal", "3"}, {"fractional.journal", "2.5"}};
    for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++) {
        char line[128];
        snprintf(line, sizeof line, "{\"journal\":\"blocktune\",\"version\":%s}\n", versions[i][1]);
        path = path_for(versions[i][0]);
        append_text(path, line);
        CHECK_EQ(bt_journal_open(path, &h, 1, &j, &prior, &n, classic, &err), -1);
        snprintf(want, sizeof want,
                 "%s: journal version %s, this blocktune reads version 2 (remove it or run without "
                 "--resume)",
                 path, versions[i][1]);
        CHECK_STREQ(err.msg, want);
    }

    path = path_for("no-version.journal");
    append_text(path, "{\"journal\":\"blocktune\",\"version\":\"2\"}\n");
    CHECK_EQ(bt_journal_open(path, &h, 1, &j, &prior, &n, classic, &err), -1);
    snprintf(want, sizeof want, "%s:1: journal header lacks \"version\"", path);
    CHECK_STREQ(err.msg, want);

    path = path_for("partial-header.journal");
    append_text(path, "{\"journal\":\"blocktune\",\"version\":2,\"device\":\"NVIDIA H100 80GB "
                      "HBM3\"}\n{}\n");
    CHECK_EQ(bt_journal_open(path, &h, 1, &j, &prior, &n, classic, &err), -1);
    snprintf(want, sizeof want, "%s:1: journal header lacks \"family\"", path);
    CHECK_STREQ(err.msg, want);
}

TEST(journal_in_use)
{
    const char *path = path_for("locked.journal");
    bt_journal_header h = header();
    bt_journal *a, *b = (bt_journal *)1;
    bt_err err;
    CHECK_EQ(bt_journal_open(path, &h, 0, &a, NULL, NULL, classic, &err), 0);
    CHECK_EQ(bt_journal_open(path, &h, 1, &b, NULL, NULL, classic, &err), -1);
    CHECK(b == NULL);
    char want[4200];
    snprintf(want, sizeof want, "%s: journal is in use by another tune process", path);
    CHECK_STREQ(err.msg, want);
    bt_journal_close(a, 1);
    CHECK_EQ(bt_journal_open(path, &h, 1, &b, NULL, NULL, classic, &err), 0);
    bt_journal_close(b, 1);
}

/* The journal's flock, with a hook for the test below: when set, the next call first finishes
 * that run (its shape done: the journal unlinked, then closed), so that another run has opened
 * the file but not yet locked it. Other calls go to the C library's. */
static bt_journal *finish_first;

int flock(int fd, int op)
{
    static int (*real)(int, int);
    if (!real)
        real = (int (*)(int, int))dlsym(RTLD_NEXT, "flock");
    if (finish_first) {
        bt_journal *a = finish_first;
        finish_first = NULL;
        bt_journal_close(a, 1);
    }
    return real(fd, op);
}

/* A run that opened the journal just before another finished with it and removed it does not
 * lock the removed file (journaling where nothing would resume from it, while a third run on
 * the same shape is let in): it locks the one at the path. */
TEST(journal_lock_follows_the_path)
{
    const char *path = path_for("race.journal");
    bt_journal_header h = header();
    bt_journal *a, *b = NULL, *c = (bt_journal *)1;
    bt_err err;
    CHECK_EQ(bt_journal_open(path, &h, 0, &a, NULL, NULL, classic, &err), 0);
    finish_first = a;
    CHECK_EQ(bt_journal_open(path, &h, 0, &b, NULL, NULL, classic, &err), 0);
    CHECK(file_size(path) >= 0);
    CHECK_EQ(bt_journal_open(path, &h, 1, &c, NULL, NULL, classic, &err), -1);
    CHECK(c == NULL);
    CHECK_CONTAINS(err.msg, "journal is in use by another tune process");
    bt_journal_close(b, 1);
}

TEST(journal_unwritable)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/no-such-dir/x.journal", bt_test_tmpdir());
    bt_journal_header h = header();
    bt_journal *j;
    bt_err err;
    CHECK_EQ(bt_journal_open(path, &h, 0, &j, NULL, NULL, classic, &err), -1);
    char want[4300];
    snprintf(want, sizeof want, "%s: cannot open journal: No such file or directory", path);
    CHECK_STREQ(err.msg, want);
}

TEST(journal_status_names)
{
    static const char *names[BT_RES_COUNT] = {"ok", "wrong", "fault", "timeout", "compile",
                                              "launch", "pruned"};
    for (int s = 0; s < BT_RES_COUNT; s++)
        CHECK_STREQ(bt_res_name((bt_res_status)s), names[s]);
}
