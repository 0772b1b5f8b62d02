#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "searchspace.h"

/* Lines 3-9 of most test files: a valid classic parameter block. */
#define PARAMS                                                                                 \
    "parameters:\n"                                                                            \
    "  BLOCK_SIZE_M: [16, 32]\n"                                                               \
    "  BLOCK_SIZE_N: [64]\n"                                                                   \
    "  BLOCK_SIZE_K: [64, 128]\n"                                                              \
    "  GROUP_SIZE_M: [1]\n"                                                                    \
    "  num_warps: [4]\n"                                                                       \
    "  num_stages: [3]\n"

#define HEAD "name: t\nbatch_sizes: [1, 16]\n"

static int load_text(const char *name, const char *text, bt_space *s, bt_err *err)
{
    return bt_space_load(bt_scratch_file(name, text), s, err);
}

/* The load must fail with exactly "<path>:<expect>". */
static void expect_error(bt_t *t, const char *text, const char *expect)
{
    bt_space s;
    bt_err err = {{0}};
    char want[8192];
    const char *path = bt_scratch_file("bad.yaml", text);
    snprintf(want, sizeof want, "%s:%s", path, expect);
    CHECK_EQ(bt_space_load(path, &s, &err), -1);
    CHECK_STREQ(err.msg, want);
}

static void space_path(char *buf, size_t n, const char *file)
{
    snprintf(buf, n, "%s/search_spaces/%s", bt_test_root(), file);
}

static int find_cand(const bt_cand *c, size_t n, const bt_cand *want)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(c[i].v, want->v, sizeof want->v) == 0)
            return 1;
    return 0;
}

TEST(searchspace_default_is_sglangs)
{
    char path[4096];
    bt_space s;
    bt_err err = {{0}};
    bt_cand *c = NULL;
    size_t n = 0;
    static const long batch[] = {1,  2,   4,   8,   16,   24,   32,   48,   64,
                                 96, 128, 256, 512, 1024, 1536, 2048, 3072, 4096};
    space_path(path, sizeof path, "default.yaml");
    if (bt_space_load(path, &s, &err)) {
        CHECK_STREQ(err.msg, "");
        return;
    }
    CHECK_STREQ(s.name, "default");
    CHECK(s.family == &bt_family_classic);
    CHECK_EQ(bt_space_size(&s), 1280);
    CHECK_EQ(s.nbatch, 18);
    for (int i = 0; i < s.nbatch && i < 18; i++)
        CHECK_EQ(s.batch[i], batch[i]);
    CHECK_EQ(s.nconstraints, 1);
    CHECK_STREQ(s.constraints[0].text, "divides: [BLOCK_SIZE_K, block_k]");
    CHECK_EQ(bt_space_enumerate(&s, 128, 128, &c, &n, &err), 0);
    CHECK_EQ(n, 1280);
    if (n == 1280) {
        bt_cand first = {{16, 32, 64, 1, 4, 2}}, last = {{256, 256, 128, 64, 8, 5}};
        CHECK(memcmp(&c[0], &first, sizeof first) == 0);
        CHECK(memcmp(&c[n - 1], &last, sizeof last) == 0);
    }
    free(c);
    c = NULL;
    /* With a 64-wide quantization block SGLang drops BLOCK_SIZE_K 128, as the constraint does. */
    CHECK_EQ(bt_space_enumerate(&s, 128, 64, &c, &n, &err), 0);
    CHECK_EQ(n, 640);
    for (size_t i = 0; i < n; i++)
        CHECK_EQ(c[i].v[2], 64);
    free(c);
    bt_space_free(&s);
}

TEST(searchspace_small_loads)
{
    char path[4096];
    bt_space s;
    bt_err err = {{0}};
    bt_cand *c = NULL, dflt;
    size_t n = 0;
    space_path(path, sizeof path, "small.yaml");
    if (bt_space_load(path, &s, &err)) {
        CHECK_STREQ(err.msg, "");
        return;
    }
    CHECK_STREQ(s.name, "small");
    CHECK_EQ(bt_space_enumerate(&s, 128, 128, &c, &n, &err), 0);
    CHECK_EQ(n, 24);
    s.family->fallback(1, 4096, 7168, &(bt_variant){BT_IN_FP8, BT_OUT_F16, 128, 128}, NULL, &dflt);
    CHECK(find_cand(c, n, &dflt));
    free(c);
    c = NULL;
    /* Its only BLOCK_SIZE_K is 128, which a 64-wide quantization block excludes. */
    CHECK_EQ(bt_space_enumerate(&s, 128, 64, &c, &n, &err), -1);
    CHECK_CONTAINS(err.msg, "none of the 64 candidates satisfies the constraints");
    CHECK(c == NULL);
    bt_space_free(&s);
}

TEST(searchspace_fields_and_positions)
{
    bt_space s;
    bt_err err = {{0}};
    const char *text = "# leading comment\n"
                       "name: t\n"
                       "description: a test space\n"
                       "family: classic\n"
                       "batch_sizes: [64, 1, 16]\n"
                       "parameters:\n"
                       "  num_stages: [3]\n"
                       "  BLOCK_SIZE_M: [32, 16]\n"
                       "  BLOCK_SIZE_N: [64]\n"
                       "  BLOCK_SIZE_K:\n"
                       "    - 128\n"
                       "    - 64\n"
                       "  GROUP_SIZE_M: [1]\n"
                       "  num_warps: [4]\n"
                       "constraints: []\n";
    if (load_text("fields.yaml", text, &s, &err)) {
        CHECK_STREQ(err.msg, "");
        return;
    }
    CHECK_STREQ(s.description, "a test space");
    CHECK_EQ(s.nbatch, 3);
    CHECK_EQ(s.batch[0], 1);
    CHECK_EQ(s.batch[1], 16);
    CHECK_EQ(s.batch[2], 64);
    /* Stored in family order, values in file order, with where each was written. */
    CHECK_EQ(s.nvalues[0], 2);
    CHECK_EQ(s.values[0][0], 32);
    CHECK_EQ(s.pos[0][1].line, 8);
    CHECK_EQ(s.pos[0][1].col, 22);
    CHECK_EQ(s.values[2][1], 64);
    CHECK_EQ(s.pos[2][1].line, 12);
    CHECK_EQ(s.pos[2][1].col, 7);
    CHECK_EQ(s.values[5][0], 3);
    CHECK_EQ(s.nconstraints, 0);
    CHECK(s.description != NULL);
    bt_space_free(&s);
    CHECK(s.name == NULL);
}

TEST(searchspace_enumeration_order)
{
    bt_space s;
    bt_err err = {{0}};
    bt_cand *c = NULL;
    size_t n = 0;
    const char *text = HEAD "parameters:\n"
                            "  BLOCK_SIZE_M: [64, 16]\n"
                            "  BLOCK_SIZE_N: [128]\n"
                            "  BLOCK_SIZE_K: [128]\n"
                            "  GROUP_SIZE_M: [1, 8]\n"
                            "  num_warps: [4]\n"
                            "  num_stages: [2, 3]\n";
    if (load_text("order.yaml", text, &s, &err)) {
        CHECK_STREQ(err.msg, "");
        return;
    }
    CHECK_EQ(bt_space_size(&s), 8);
    CHECK_EQ(bt_space_enumerate(&s, 128, 128, &c, &n, &err), 0);
    static const int want[8][3] = {{64, 1, 2}, {64, 1, 3}, {64, 8, 2}, {64, 8, 3},
                                   {16, 1, 2}, {16, 1, 3}, {16, 8, 2}, {16, 8, 3}};
    CHECK_EQ(n, 8);
    for (size_t i = 0; i < n && i < 8; i++) {
        CHECK_EQ(c[i].v[0], want[i][0]);
        CHECK_EQ(c[i].v[1], 128);
        CHECK_EQ(c[i].v[2], 128);
        CHECK_EQ(c[i].v[3], want[i][1]);
        CHECK_EQ(c[i].v[4], 4);
        CHECK_EQ(c[i].v[5], want[i][2]);
    }
    free(c);
    bt_space_free(&s);
}

/* Enumerates text at block_n x block_k; returns the count or -1. */
static long count_cands(bt_t *t, const char *text, int block_n, int block_k, bt_cand **out)
{
    bt_space s;
    bt_err err = {{0}};
    bt_cand *c = NULL;
    size_t n = 0;
    if (load_text("cons.yaml", text, &s, &err)) {
        CHECK_STREQ(err.msg, "");
        return -1;
    }
    int rc = bt_space_enumerate(&s, block_n, block_k, &c, &n, &err);
    bt_space_free(&s);
    if (rc) {
        CHECK_STREQ(err.msg, "");
        return -1;
    }
    if (out)
        *out = c;
    else
        free(c);
    return (long)n;
}

#define TILES                                                                                  \
    HEAD "parameters:\n"                                                                       \
         "  BLOCK_SIZE_M: [16, 32, 64, 128]\n"                                                 \
         "  BLOCK_SIZE_N: [32, 64, 128]\n"                                                     \
         "  BLOCK_SIZE_K: [32, 64, 128]\n"                                                     \
         "  GROUP_SIZE_M: [1, 8, 24]\n"                                                        \
         "  num_warps: [4, 8]\n"                                                               \
         "  num_stages: [3]\n"                                                                 \
         "constraints:\n" /* left empty: no constraints */

TEST(searchspace_constraints)
{
    bt_cand *c = NULL;
    /* 4 * 3 * 3 * 3 * 2 = 216 before constraints. */
    CHECK_EQ(count_cands(t, TILES, 128, 128, NULL), 216);
    CHECK_EQ(count_cands(t, TILES "  - divides: [BLOCK_SIZE_K, block_k]\n", 128, 64, NULL), 144);
    CHECK_EQ(count_cands(t, TILES "  - divides: [BLOCK_SIZE_K, block_k]\n", 128, 32, NULL), 72);
    CHECK_EQ(count_cands(t, TILES "  - divides: [BLOCK_SIZE_N, block_n]\n", 64, 128, NULL), 144);
    /* GROUP_SIZE_M 8 divides 16..128, 24 divides none. */
    CHECK_EQ(count_cands(t, TILES "  - divides: [GROUP_SIZE_M, BLOCK_SIZE_M]\n", 128, 128, NULL),
             144);
    CHECK_EQ(count_cands(t, TILES "  - at_most: [BLOCK_SIZE_M, 32]\n", 128, 128, NULL), 108);
    CHECK_EQ(count_cands(t, TILES "  - at_most: [BLOCK_SIZE_N, BLOCK_SIZE_M]\n", 128, 128, NULL),
             (0 + 1 + 2 + 3) * 3 * 3 * 2);
    /* BM * BN <= 4096: (16,32) (16,64) (16,128) (32,32) (32,64) (32,128) (64,32) (64,64)
     * (128,32). */
    long n = count_cands(
        t, TILES "  - product_at_most: [BLOCK_SIZE_M, BLOCK_SIZE_N, 4096]\n", 128, 128, &c);
    CHECK_EQ(n, 9 * 3 * 3 * 2);
    for (long i = 0; i < n; i++)
        CHECK(c[i].v[0] * c[i].v[1] <= 4096);
    free(c);
    /* Literals and the quantization block as factors; the bound as a parameter. */
    CHECK_EQ(count_cands(t, TILES "  - product_at_most: [num_warps, 8, BLOCK_SIZE_M]\n", 128, 128,
                         NULL),
             (3 + 2) * 3 * 3 * 3);
    CHECK_EQ(count_cands(t, TILES "  - product_at_most: [BLOCK_SIZE_K, block_n, 1, 4096]\n", 128,
                         128, NULL),
             4 * 3 * 1 * 3 * 2);
    /* Constraints combine with "and". */
    CHECK_EQ(count_cands(t,
                         TILES "  - at_most: [BLOCK_SIZE_M, 32]\n"
                               "  - at_most: [num_warps, 4]\n",
                         128, 128, NULL),
             54);
}

TEST(searchspace_block_k_not_divided)
{
    bt_space s;
    bt_err err = {{0}};
    bt_cand *c = NULL;
    size_t n = 0;
    const char *path = bt_scratch_file("bk.yaml", HEAD PARAMS);
    char want[8192];
    if (bt_space_load(path, &s, &err)) {
        CHECK_STREQ(err.msg, "");
        return;
    }
    snprintf(want, sizeof want,
             "%s:6:22: BLOCK_SIZE_K: 128 does not divide the quantization block_k 64 (add the "
             "constraint \"divides: [BLOCK_SIZE_K, block_k]\" to skip such values)",
             path);
    CHECK_EQ(bt_space_enumerate(&s, 128, 64, &c, &n, &err), -1);
    CHECK_STREQ(err.msg, want);
    CHECK_EQ(bt_space_enumerate(&s, 128, 128, &c, &n, &err), 0);
    CHECK_EQ(n, 4);
    free(c);
    bt_space_free(&s);

    /* A value the constraints already removed is not reported. */
    path = bt_scratch_file("bk2.yaml", HEAD PARAMS "constraints:\n"
                                                  "  - at_most: [BLOCK_SIZE_K, 64]\n");
    if (bt_space_load(path, &s, &err)) {
        CHECK_STREQ(err.msg, "");
        return;
    }
    CHECK_EQ(bt_space_enumerate(&s, 128, 64, &c, &n, &err), 0);
    CHECK_EQ(n, 2);
    free(c);
    bt_space_free(&s);
}

TEST(searchspace_nothing_left)
{
    bt_space s;
    bt_err err = {{0}};
    bt_cand *c = NULL;
    size_t n = 0;
    char want[8192];
    const char *path = bt_scratch_file("empty.yaml",
                                       HEAD PARAMS "constraints:\n"
                                                   "  - divides: [BLOCK_SIZE_K, block_k]\n"
                                                   "  - at_most: [block_n, BLOCK_SIZE_M]\n");
    if (bt_space_load(path, &s, &err)) {
        CHECK_STREQ(err.msg, "");
        return;
    }
    snprintf(want, sizeof want,
             "%s: none of the 4 candidates satisfies the constraints with block_n 128, "
             "block_k 128: \"divides: [BLOCK_SIZE_K, block_k]\" (11:5), "
             "\"at_most: [block_n, BLOCK_SIZE_M]\" (12:5)",
             path);
    CHECK_EQ(bt_space_enumerate(&s, 128, 128, &c, &n, &err), -1);
    CHECK_STREQ(err.msg, want);
    CHECK(c == NULL);
    CHECK_EQ(bt_space_enumerate(&s, 16, 128, &c, &n, &err), 0);
    CHECK_EQ(n, 4);
    free(c);
    bt_space_free(&s);
}

static void digest_of(bt_t *t, const char *text, char out[65])
{
    bt_space s;
    bt_err err = {{0}};
    out[0] = '\0';
    if (load_text("digest.yaml", text, &s, &err)) {
        CHECK_STREQ(err.msg, "");
        return;
    }
    bt_space_digest(&s, out);
    bt_space_free(&s);
}

TEST(searchspace_digest)
{
    char base[65], d[65];
    digest_of(t, HEAD PARAMS "constraints:\n  - divides: [BLOCK_SIZE_K, block_k]\n", base);
    CHECK_EQ(strlen(base), 64);
    /* Comments, layout, key order, name and description do not count. */
    digest_of(t,
              "# a comment\n"
              "name: other\n"
              "description: renamed\n"
              "family: classic\n"
              "constraints:\n"
              "- divides: [ BLOCK_SIZE_K , block_k ]   # why\n" PARAMS
              "batch_sizes:\n"
              "  - 16\n"
              "  - 1\n",
              d);
    CHECK_STREQ(d, base);
    /* A byte-order mark and CRLF line ends (a file saved on Windows) load the same. */
    digest_of(t,
              "\xef\xbb\xbfname: t\r\nbatch_sizes: [1, 16]\r\nparameters:\r\n"
              "  BLOCK_SIZE_M: [16, 32]\r\n  BLOCK_SIZE_N: [64]\r\n  BLOCK_SIZE_K: [64, 128]\r\n"
              "  GROUP_SIZE_M: [1]\r\n  num_warps: [4]\r\n  num_stages: [3]\r\n"
              "constraints:\r\n  - divides: [BLOCK_SIZE_K, block_k]\r\n",
              d);
    CHECK_STREQ(d, base);
    /* Contents do. */
    digest_of(t, HEAD PARAMS, d);
    CHECK(strcmp(d, base) != 0);
    digest_of(t, "name: t\nbatch_sizes: [1, 32]\n" PARAMS
                 "constraints:\n  - divides: [BLOCK_SIZE_K, block_k]\n",
              d);
    CHECK(strcmp(d, base) != 0);
    digest_of(t,
              HEAD "parameters:\n"
                   "  BLOCK_SIZE_M: [16, 32]\n"
                   "  BLOCK_SIZE_N: [64]\n"
                   "  BLOCK_SIZE_K: [64, 128]\n"
                   "  GROUP_SIZE_M: [1]\n"
                   "  num_warps: [4]\n"
                   "  num_stages: [4]\n"
                   "constraints:\n  - divides: [BLOCK_SIZE_K, block_k]\n",
              d);
    CHECK(strcmp(d, base) != 0);
    digest_of(t, HEAD PARAMS "constraints:\n  - divides: [BLOCK_SIZE_K, block_n]\n", d);
    CHECK(strcmp(d, base) != 0);
}

TEST(searchspace_missing_file)
{
    bt_space s;
    bt_err err = {{0}};
    char path[4096], want[8192];
    snprintf(path, sizeof path, "%s/none.yaml", bt_test_tmpdir());
    snprintf(want, sizeof want, "%s: cannot open: No such file or directory", path);
    CHECK_EQ(bt_space_load(path, &s, &err), -1);
    CHECK_STREQ(err.msg, want);
}

/* Only a regular file of sane size is read: /dev/zero or a FIFO would be read until memory
 * runs out, or block. */
TEST(searchspace_refuses_what_is_not_a_file)
{
    bt_space s;
    bt_err err = {{0}};
    char path[4096], want[8192];
    CHECK_EQ(bt_space_load("/dev/zero", &s, &err), -1);
    CHECK_STREQ(err.msg, "/dev/zero: not a regular file");
    CHECK_EQ(bt_space_load(bt_test_tmpdir(), &s, &err), -1);
    snprintf(want, sizeof want, "%s: is a directory, not a file", bt_test_tmpdir());
    CHECK_STREQ(err.msg, want);
    snprintf(path, sizeof path, "%s/fifo.yaml", bt_test_tmpdir());
    unlink(path);
    CHECK_EQ(mkfifo(path, 0600), 0);
    CHECK_EQ(bt_space_load(path, &s, &err), -1);
    snprintf(want, sizeof want, "%s: not a regular file", path);
    CHECK_STREQ(err.msg, want);
    unlink(path);
    /* sparse: no disk is spent */
    snprintf(path, sizeof path, "%s/huge.yaml", bt_test_tmpdir());
    CHECK_EQ(truncate(bt_scratch_file("huge.yaml", "name: t\n"), BT_READ_MAX + 1), 0);
    CHECK_EQ(bt_space_load(path, &s, &err), -1);
    snprintf(want, sizeof want, "%s: too large (%ld bytes, at most 64 MiB)", path, BT_READ_MAX + 1);
    CHECK_STREQ(err.msg, want);
    unlink(path);
}

TEST(searchspace_bad_syntax)
{
    expect_error(t, "name: t\nbatch_sizes: [1, 2\n" PARAMS,
                 "3:11: YAML syntax: did not find expected ',' or ']' (while parsing a flow "
                 "sequence at 2:14)");
    expect_error(t, "name: t\n  batch_sizes: [1]\n",
                 "2:14: YAML syntax: mapping values are not allowed in this context");
    expect_error(t, "name: t\nbatch_sizes:\n\t- 1\n",
                 "3:1: YAML syntax: found character that cannot start any token (while "
                 "scanning for the next token at 3:1)");
    expect_error(t, "name: t\nfamily: *nope\n",
                 "2:9: YAML syntax: anchors and aliases (&name, *name) are not supported; write "
                 "the values out");
    /* The reader reports a byte offset; it becomes a line and column too. */
    expect_error(t, "name: t\ndescription: \"t\xff\"\n",
                 "2:16: YAML syntax: invalid leading UTF-8 octet");
    /* A syntax error is reported even after content errors earlier in the file. */
    expect_error(t, "name: [t]\nbatch_sizes: [1]\n" PARAMS "oops: [\n",
                 "11:1: YAML syntax: did not find expected node content (while parsing a flow "
                 "node at 11:1)");
    expect_error(t, HEAD PARAMS "\"name\\0x\": u\n",
                 "10:1: YAML syntax: a NUL character (\"\\0\") is not allowed");
    expect_error(t, HEAD PARAMS "---\nname: u\n",
                 "11:1: top level: a second YAML document (a search space is one)");
}

/* libyaml takes time quadratic in the nesting: 100000 "[" took minutes. The load stops at the
 * first level past 32, in well under a second. */
TEST(searchspace_deep_nesting)
{
    enum { DEPTH = 100000 };
    static char text[2 * DEPTH + 64];
    char want[128];
    int n = snprintf(text, sizeof text, "name: t\nbatch_sizes: ");
    memset(text + n, '[', DEPTH);
    memset(text + n + DEPTH, ']', DEPTH);
    strcpy(text + n + 2 * DEPTH, "\n");
    /* the root map is level 1, so the 32nd "[" is the 33rd level */
    snprintf(want, sizeof want, "2:%d: YAML syntax: lists and maps nested more than 32 deep",
             14 + 31);
    expect_error(t, text, want);
    /* block style and maps count too */
    expect_error(t, "a:\n  b:\n    c:\n      - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - 1\n",
                 "4:65: YAML syntax: lists and maps nested more than 32 deep");
    /* 32 levels are still read: the message is then about the content */
    expect_error(t, "a:\n  b:\n    c:\n      - - - - - - - - - - - - - - - - - - - - - - - - - - - - - 1\n",
                 "1:1: a: unknown key (expected name, description, family, batch_sizes, parameters "
                 "or constraints)");
}

TEST(searchspace_bad_document)
{
    expect_error(t, "", "1:1: top level: the file is empty (expected a map with name, "
                        "batch_sizes and parameters)");
    expect_error(t, "# only a comment\n\n", "1:1: top level: the file is empty (expected a map "
                                            "with name, batch_sizes and parameters)");
    expect_error(t, "- 1\n- 2\n", "1:1: top level: expected a map with name, batch_sizes and "
                                  "parameters, found a list");
    expect_error(t, "# c\nhello\n", "2:1: top level: expected a map with name, batch_sizes and "
                                    "parameters, found \"hello\"");
    expect_error(t, HEAD PARAMS "nmae: t\n", "10:1: nmae: unknown key (expected name, "
                                             "description, family, batch_sizes, parameters or "
                                             "constraints)");
    expect_error(t, HEAD PARAMS "name: u\n", "10:1: name: duplicate key (first at 1:1)");
    expect_error(t, HEAD PARAMS "[a]: 1\n", "10:1: top level: keys must be names, found a list");
    expect_error(t, HEAD PARAMS "\"a\\nb\": 1\n",
                 "10:1: a?b: unknown key (expected name, description, family, batch_sizes, "
                 "parameters or constraints)");
}

/* Duplicate keys and repeated values are found by comparing each with the ones before it, so
 * the number of keys and values is bounded: a file of a million took hours. */
TEST(searchspace_too_many_values)
{
    enum { NVALS = 5000 };
    size_t cap = (size_t)NVALS * 8 + 64, used = 0;
    char *text = malloc(cap);
    used += (size_t)snprintf(text, cap, "name: t\nbatch_sizes:\n");
    for (int i = 1; i <= NVALS; i++)
        used += (size_t)snprintf(text + used, cap - used, "- %d\n", i);
    /* name, t, batch_sizes and 4093 values: the 4097th scalar is the value on line 4096 */
    expect_error(t, text, "4096:3: more than 4096 keys and values; a search space needs far fewer");
    free(text);
}

/* libyaml looks each alias up among all the anchors (50000 of each took a minute), and an
 * aliased value keeps its anchor's position: a duplicate key through an alias was reported at
 * the anchor, "first at" itself. Both are refused where they are written. */
TEST(searchspace_anchors_and_aliases)
{
    const char *no = "YAML syntax: anchors and aliases (&name, *name) are not supported; write "
                     "the values out";
    char want[256];
    snprintf(want, sizeof want, "2:14: %s", no);
    expect_error(t, "name: t\nbatch_sizes: &b [1, 16]\n" PARAMS, want);
    snprintf(want, sizeof want, "3:1: %s", no);
    expect_error(t, HEAD "&p parameters:\n  BLOCK_SIZE_M: [16]\n", want);
    snprintf(want, sizeof want, "1:7: %s", no);
    expect_error(t, "name: &n t\ndescription: *n\nbatch_sizes: [1]\n" PARAMS, want);
    snprintf(want, sizeof want, "3:13: %s", no);
    expect_error(t, HEAD "parameters: &p {BLOCK_SIZE_M: [16]}\n", want);
    snprintf(want, sizeof want, "10:5: %s", no);
    expect_error(t, HEAD PARAMS "<<: *p\n", want);
}

/* "!!str 16" was read as the integer 16, though it is a string as "16" is. */
TEST(searchspace_tags)
{
    expect_error(t, "name: t\nbatch_sizes: [!!str 16]\n" PARAMS,
                 "2:15: YAML syntax: tags such as !!str are not supported");
    expect_error(t, "name: !foo t\nbatch_sizes: [1]\n" PARAMS,
                 "1:7: YAML syntax: tags such as !!str are not supported");
    expect_error(t, HEAD "parameters: !!map\n  BLOCK_SIZE_M: [16]\n",
                 "3:13: YAML syntax: tags such as !!str are not supported");
}

TEST(searchspace_bad_top_fields)
{
    expect_error(t, "# c\nbatch_sizes: [1]\n" PARAMS, "2:1: name: missing (it is required)");
    expect_error(t, "name: t\n" PARAMS, "1:1: batch_sizes: missing (it is required)");
    expect_error(t, HEAD, "1:1: parameters: missing (it is required)");
    expect_error(t, "name: [t]\nbatch_sizes: [1]\n" PARAMS,
                 "1:7: name: expected a non-empty string, found a list");
    expect_error(t, "name:\nbatch_sizes: [1]\n" PARAMS,
                 "1:6: name: expected a non-empty string, found an empty value");
    expect_error(t, "name: \"\"\nbatch_sizes: [1]\n" PARAMS,
                 "1:7: name: expected a non-empty string, found \"\"");
    expect_error(t, HEAD "description: {a: 1}\n" PARAMS,
                 "3:14: description: expected a non-empty string, found a map");
    expect_error(t, HEAD "family: turbo\n" PARAMS, "3:9: family: unknown family \"turbo\"");
    /* the name is printed in a run's header: one line, no escape sequences */
    expect_error(t, "name: |\n  a\n  b\nbatch_sizes: [1]\n" PARAMS,
                 "1:7: name: \"a?b?\" has a line break or control character");
    expect_error(t, "name: \"a\\e[2Jb\"\nbatch_sizes: [1]\n" PARAMS,
                 "1:7: name: \"a?[2Jb\" has a line break or control character");
    expect_error(t, HEAD "description: \"x\\ty\"\n" PARAMS,
                 "3:14: description: \"x?y\" has a line break or control character");
    expect_error(t, HEAD "family: [classic]\n" PARAMS,
                 "3:9: family: expected a non-empty string, found a list");
}

TEST(searchspace_bad_integers)
{
    expect_error(t, "name: t\nbatch_sizes: 16\n" PARAMS,
                 "2:14: batch_sizes: expected a list of integers, found \"16\"");
    expect_error(t, "name: t\nbatch_sizes: []\n" PARAMS, "2:14: batch_sizes: the list is empty");
    expect_error(t, "name: t\nbatch_sizes: [1, 0]\n" PARAMS,
                 "2:18: batch_sizes: 0 is not positive");
    expect_error(t, "name: t\nbatch_sizes: [-4]\n" PARAMS, "2:15: batch_sizes: -4 is not positive");
    expect_error(t, "name: t\nbatch_sizes: [1, 16, 1]\n" PARAMS,
                 "2:22: batch_sizes: 1 appears twice (first at 2:15)");
    expect_error(t, "name: t\nbatch_sizes: [1.5]\n" PARAMS,
                 "2:15: batch_sizes: \"1.5\" is not an integer");
    expect_error(t, "name: t\nbatch_sizes: [1e3]\n" PARAMS,
                 "2:15: batch_sizes: \"1e3\" is not an integer");
    expect_error(t, "name: t\nbatch_sizes: [0x10]\n" PARAMS,
                 "2:15: batch_sizes: \"0x10\" is not an integer");
    expect_error(t, "name: t\nbatch_sizes: [12abc]\n" PARAMS,
                 "2:15: batch_sizes: \"12abc\" is not an integer");
    expect_error(t, "name: t\nbatch_sizes: [+64]\n" PARAMS,
                 "2:15: batch_sizes: \"+64\" is not an integer");
    expect_error(t, "name: t\nbatch_sizes: [\"16\"]\n" PARAMS,
                 "2:15: batch_sizes: \"16\" is quoted, write integers without quotes");
    expect_error(t, "name: t\nbatch_sizes: [010]\n" PARAMS,
                 "2:15: batch_sizes: \"010\" has a leading zero (YAML 1.1 reads it as octal)");
    expect_error(t, "name: t\nbatch_sizes: [99999999999999999999]\n" PARAMS,
                 "2:15: batch_sizes: 99999999999999999999 is out of range");
    expect_error(t, "name: t\nbatch_sizes: [4294967296]\n" PARAMS,
                 "2:15: batch_sizes: 4294967296 is outside [1, 1048576]");
    expect_error(t, "name: t\nbatch_sizes: [[1]]\n" PARAMS,
                 "2:15: batch_sizes: expected an integer, found a list");
    expect_error(t, "name: t\nbatch_sizes: [1, ~]\n" PARAMS,
                 "2:18: batch_sizes: expected an integer, found an empty value");
}

TEST(searchspace_bad_parameters)
{
    expect_error(t, HEAD "parameters: [BLOCK_SIZE_M]\n",
                 "3:13: parameters: expected a map of parameter lists, found a list");
    expect_error(t, HEAD PARAMS "  BLOCK_SIZE_X: [1]\n",
                 "10:3: BLOCK_SIZE_X: not a parameter of the classic family (expected "
                 "BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, GROUP_SIZE_M, num_warps, num_stages)");
    expect_error(t, HEAD "parameters:\n  BLOCK_SIZE_M: [16]\n  num_stages: [3]\n",
                 "4:3: parameters: BLOCK_SIZE_N is missing (the classic family needs "
                 "BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, GROUP_SIZE_M, num_warps, num_stages)");
    expect_error(t, HEAD PARAMS "  num_warps: [8]\n",
                 "10:3: num_warps: duplicate key (first at 8:3)");
    expect_error(t, HEAD PARAMS "  [1]: [8]\n",
                 "10:3: parameters: keys must be names, found a list");
    expect_error(t,
                 HEAD "parameters:\n"
                      "  BLOCK_SIZE_M: [16, 48]\n",
                 "4:22: BLOCK_SIZE_M: 48 is not a power of two");
    expect_error(t,
                 HEAD "parameters:\n"
                      "  BLOCK_SIZE_K: [64, 256]\n",
                 "4:22: BLOCK_SIZE_K: 256 is outside [32, 128]");
    expect_error(t,
                 HEAD "parameters:\n"
                      "  num_stages: [0]\n",
                 "4:16: num_stages: 0 is not positive");
    expect_error(t,
                 HEAD "parameters:\n"
                      "  GROUP_SIZE_M: []\n",
                 "4:17: GROUP_SIZE_M: the list is empty");
    expect_error(t,
                 HEAD "parameters:\n"
                      "  GROUP_SIZE_M:\n"
                      "    - 8\n"
                      "    - 16\n"
                      "    - 8\n",
                 "7:7: GROUP_SIZE_M: 8 appears twice (first at 5:7)");
    expect_error(t,
                 HEAD "parameters:\n"
                      "  num_warps: {a: 4}\n",
                 "4:14: num_warps: expected a list of integers, found a map");
    expect_error(t,
                 HEAD "parameters:\n"
                      "  num_warps: [four]\n",
                 "4:15: num_warps: \"four\" is not an integer");
}

TEST(searchspace_bad_constraints)
{
    expect_error(t, HEAD PARAMS "constraints: {divides: [BLOCK_SIZE_K, block_k]}\n",
                 "10:14: constraints: expected a list of constraints, found a map");
    expect_error(t, HEAD PARAMS "constraints:\n  - divides\n",
                 "11:5: constraints: expected a one-key map such as \"divides: [BLOCK_SIZE_K, "
                 "block_k]\", found \"divides\"");
    expect_error(t, HEAD PARAMS "constraints:\n  - {divides: [BLOCK_SIZE_K, block_k], at_most: "
                                "[num_warps, 4]}\n",
                 "11:5: constraints: expected a one-key map such as \"divides: [BLOCK_SIZE_K, "
                 "block_k]\", found 2 keys");
    expect_error(t, HEAD PARAMS "constraints:\n  - at_least: [num_warps, 4]\n",
                 "11:5: constraints: unknown constraint \"at_least\" (expected divides, at_most "
                 "or product_at_most)");
    expect_error(t, HEAD PARAMS "constraints:\n  - divides: [BLOCK_K, block_k]\n",
                 "11:15: divides: unknown operand \"BLOCK_K\" (expected a parameter of the "
                 "classic family, block_n, block_k or a positive integer)");
    expect_error(t, HEAD PARAMS "constraints:\n  - divides: [BLOCK_SIZE_K, block_k, 2]\n",
                 "11:14: divides: expected 2 operands, found 3");
    expect_error(t, HEAD PARAMS "constraints:\n  - at_most: [num_warps]\n",
                 "11:14: at_most: expected 2 operands, found 1");
    expect_error(t, HEAD PARAMS "constraints:\n  - product_at_most: [BLOCK_SIZE_M, 64]\n",
                 "11:22: product_at_most: expected 3 to 6 operands, found 2");
    expect_error(t, HEAD PARAMS "constraints:\n  - product_at_most: [1, 2, 3, 4, 5, 6, 7]\n",
                 "11:22: product_at_most: expected 3 to 6 operands, found 7");
    expect_error(t, HEAD PARAMS "constraints:\n  - at_most: num_warps\n",
                 "11:14: at_most: expected a list of operands, found \"num_warps\"");
    expect_error(t, HEAD PARAMS "constraints:\n  - at_most: [num_warps, [4]]\n",
                 "11:26: at_most: expected a parameter, block_n, block_k or an integer, found a "
                 "list");
    expect_error(t, HEAD PARAMS "constraints:\n  - at_most: [num_warps, 0]\n",
                 "11:26: at_most: 0 is not positive");
    expect_error(t, HEAD PARAMS "constraints:\n  - at_most: [num_warps, 4.5]\n",
                 "11:26: at_most: \"4.5\" is not an integer");
    expect_error(t, HEAD PARAMS "constraints:\n  - at_most: [num_warps, +8]\n",
                 "11:26: at_most: \"+8\" is not an integer");
    expect_error(t, HEAD PARAMS "constraints:\n  - divides: [64, block_k]\n",
                 "11:14: divides: names no parameter of the classic family");
}

/* A native ring of one stage would deadlock (two partials wait on the next slot before
 * releasing theirs): refused where the space is read. */
TEST(searchspace_native_ring_needs_two_stages)
{
    expect_error(t,
                 "name: t\nfamily: native\nbatch_sizes: [1]\nparameters:\n  BLOCK_SIZE_M: [128]\n"
                 "  BLOCK_SIZE_N: [128]\n  num_stages: [1, 4]\n  GROUP_SIZE_M: [4]\n  CLUSTER_M: [1]\n"
                 "  SPLIT_K: [1]\n",
                 "7:16: num_stages: 1 is outside [2, 16]");
}

/* A parameter the family marks optional (the native INT8_CONVERT and CTAS_PER_SM) may be left
 * out, and then takes its default alone; one whose range starts at 0 takes 0 but no negative
 * value and no constraint, and CTAS_PER_SM nothing outside 1-2. */
TEST(searchspace_optional_parameter)
{
    const char *native = "name: t\nfamily: native\nbatch_sizes: [1]\nparameters:\n  BLOCK_SIZE_M: [128]\n"
                         "  BLOCK_SIZE_N: [128]\n  num_stages: [5]\n  GROUP_SIZE_M: [4]\n  CLUSTER_M: [1]\n"
                         "  SPLIT_K: [1]\n";
    char text[1024];
    bt_space s;
    bt_err err = {{0}};
    if (load_text("optional.yaml", native, &s, &err)) {
        bt_check_fail(t, __FILE__, __LINE__, "%s", err.msg);
        return;
    }
    int i = bt_family_param_index(s.family, "INT8_CONVERT"), o = bt_family_param_index(s.family, "CTAS_PER_SM");
    CHECK(i >= 0 && o >= 0);
    if (i >= 0 && o >= 0) {
        CHECK_EQ(s.nvalues[i], 1);
        CHECK_EQ(s.values[i][0], 0);
        CHECK_EQ(s.nvalues[o], 1);
        CHECK_EQ(s.values[o][0], 1);
    }
    bt_space_free(&s);
    snprintf(text, sizeof text, "%s  INT8_CONVERT: [0, 1]\n", native);
    if (load_text("both.yaml", text, &s, &err)) {
        bt_check_fail(t, __FILE__, __LINE__, "%s", err.msg);
        return;
    }
    CHECK_EQ(s.nvalues[i], 2);
    bt_space_free(&s);
    snprintf(text, sizeof text, "%s  INT8_CONVERT: [-1]\n", native);
    expect_error(t, text, "11:18: INT8_CONVERT: -1 is negative");
    /* a constraint on it would divide by zero */
    snprintf(text, sizeof text, "%s  INT8_CONVERT: [0, 1]\nconstraints:\n  - divides: [INT8_CONVERT, BLOCK_SIZE_N]\n",
             native);
    expect_error(t, text, "13:15: divides: INT8_CONVERT can be 0, and constraints take positive operands");
    snprintf(text, sizeof text, "%s  CTAS_PER_SM: [1, 3]\n", native);
    expect_error(t, text, "11:20: CTAS_PER_SM: 3 is outside [1, 2]");
    /* a required one missing: the message lists the required ones only */
    expect_error(t, "name: t\nfamily: native\nbatch_sizes: [1]\nparameters:\n  BLOCK_SIZE_M: [128]\n",
                 "5:3: parameters: BLOCK_SIZE_N is missing (the native family needs BLOCK_SIZE_M, BLOCK_SIZE_N, "
                 "num_stages, GROUP_SIZE_M, CLUSTER_M, SPLIT_K)");
}
