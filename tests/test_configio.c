#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "configio.h"
#include "harness.h"

/* Shipped SGLang and vLLM configs, copied with their names. The last vLLM one was committed
 * without the trailing newline every other file (and json.dump + "\n") has. */
static const struct {
    const char *name;
    long N, K;
    const char *device;
    bt_format fmt;
    int no_newline;
} fixtures[] = {
    {"N=1536,K=1536,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8,block_shape=[128, 128].json",
     1536, 1536, "NVIDIA H100 80GB HBM3", BT_FMT_SGLANG, 0},
    {"N=576,K=7168,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128, 128].json", 576,
     7168, "NVIDIA H200", BT_FMT_SGLANG, 0},
    {"N=7168,K=16384,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8,block_shape=[128, 128].json",
     7168, 16384, "NVIDIA H100 80GB HBM3", BT_FMT_SGLANG, 0},
    {"N=2304,K=7168,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json", 2304,
     7168, "NVIDIA H200", BT_FMT_VLLM, 0},
    {"N=256,K=7168,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8,block_shape=[128,128].json",
     256, 7168, "NVIDIA H100 80GB HBM3", BT_FMT_VLLM, 0},
    {"N=24576,K=7168,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json", 24576,
     7168, "NVIDIA H200", BT_FMT_VLLM, 1},
};

static const bt_family *classic = &bt_family_classic;

static char *slurp(const char *path)
{
    char *text = NULL;
    bt_err err;
    if (bt_read_file(path, &text, NULL, &err))
        return NULL;
    return text;
}

/* A fresh directory under the run's scratch directory. */
static const char *scratch_dir(const char *name)
{
    static char dir[4][4096];
    static int next;
    char *d = dir[next++ % 4];
    snprintf(d, 4096, "%s/%s", bt_test_tmpdir(), name);
    mkdir(d, 0755);
    return d;
}

static int count_dir_entries(const char *dir)
{
    int n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            n++;
    closedir(d);
    return n;
}

static bt_cand cand6(int bm, int bn, int bk, int gm, int w, int s)
{
    return (bt_cand){{bm, bn, bk, gm, w, s}};
}

TEST(configio_fixtures_round_trip_byte_for_byte)
{
    for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/tests/fixtures/%s", bt_test_root(), fixtures[i].name);
        bt_config c = {0};
        bt_err err = {{0}};
        char *orig = slurp(path);
        CHECK(orig != NULL);
        CHECK_EQ(bt_config_read(path, classic, &c, &err), 0);
        CHECK_STREQ(err.msg, "");
        CHECK_EQ(c.n, 18);
        char *out = bt_config_serialize(&c, classic);
        if (orig && out) {
            size_t len = strlen(orig);
            if (fixtures[i].no_newline) {
                /* The only difference: we always end with the newline. */
                CHECK(len > 0 && orig[len - 1] == '}');
                CHECK_EQ(strlen(out), len + 1);
                CHECK(strncmp(out, orig, len) == 0);
                CHECK_STREQ(out + len, "\n");
            } else {
                CHECK_STREQ(out, orig);
            }
        }
        char name[512];
        CHECK_EQ(bt_config_filename(name, sizeof name, classic, fixtures[i].N, fixtures[i].K,
                                    fixtures[i].device, BT_IN_FP8, 128, 128, fixtures[i].fmt),
                 0);
        CHECK_STREQ(name, fixtures[i].name);
        free(out);
        free(orig);
        bt_config_free(&c);
    }
}

/* A config with no entries ({}) reads as empty (the entries' sort is not handed a null array). */
TEST(configio_read_empty_object)
{
    const char *path = bt_scratch_file("empty-config.json", "{}\n");
    bt_config c = {0};
    bt_err err = {{0}};
    CHECK_EQ(bt_config_read(path, classic, &c, &err), 0);
    CHECK_EQ(c.n, 0);
    bt_config_free(&c);
}

/* A sidecar's list is "runs", spelled so: {"RUNS": [...]} is someone else's file, left as is. */
TEST(configio_sidecar_runs_key_is_case_sensitive)
{
    char cfg[4096], side[4200];
    snprintf(cfg, sizeof cfg, "%s/case.json", bt_test_tmpdir());
    bt_sidecar_path(side, sizeof side, cfg);
    FILE *f = fopen(side, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    fputs("{\"RUNS\": [], \"note\": \"not ours\"}\n", f);
    fclose(f);
    bt_err err = {{0}};
    CHECK(bt_outputs_check(cfg, classic, &err) != 0);
    CHECK_CONTAINS(err.msg, "expected an object with a \"runs\" list");
    cJSON *run = cJSON_CreateObject();
    CHECK(bt_sidecar_append(cfg, run, &err) != 0);
    char *text = NULL;
    CHECK_EQ(bt_read_file(side, &text, NULL, &err), 0);
    CHECK_STREQ(text, "{\"RUNS\": [], \"note\": \"not ours\"}\n");
    free(text);
}

TEST(configio_read_parses_values_in_family_order)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/fixtures/%s", bt_test_root(), fixtures[0].name);
    bt_config c = {0};
    bt_err err;
    CHECK_EQ(bt_config_read(path, classic, &c, &err), 0);
    if (c.n != 18)
        return;
    CHECK_EQ(c.e[0].batch, 1);
    const int first[6] = {64, 64, 128, 1, 4, 4};
    for (int i = 0; i < 6; i++)
        CHECK_EQ(c.e[0].cand.v[i], first[i]);
    CHECK_EQ(c.e[17].batch, 4096);
    const int last[6] = {64, 128, 128, 16, 4, 3};
    for (int i = 0; i < 6; i++)
        CHECK_EQ(c.e[17].cand.v[i], last[i]);
    for (int i = 1; i < c.n; i++)
        CHECK(c.e[i - 1].batch < c.e[i].batch);
    bt_config_free(&c);
}

TEST(configio_filename_formats)
{
    static const bt_param_def one = {.key = "BLOCK_SIZE_M", .pow2 = 1, .min = 16, .max = 256, .help = ""};
    const bt_family other = {.name = "native", .nparams = 1, .params = &one};
    char buf[512];
    CHECK_EQ(bt_config_filename(buf, sizeof buf, classic, 7168, 2304, "NVIDIA H100 80GB HBM3",
                                BT_IN_INT8, 128, 64, BT_FMT_SGLANG), 0);
    CHECK_STREQ(buf, "N=7168,K=2304,device_name=NVIDIA_H100_80GB_HBM3,dtype=int8_w8a8,"
                     "block_shape=[128, 64].json");
    /* vLLM's get_w8a8_block_int8_configs keeps SGLang's "[128, 64]". */
    CHECK_EQ(bt_config_filename(buf, sizeof buf, classic, 7168, 2304, "NVIDIA H100 80GB HBM3",
                                BT_IN_INT8, 128, 64, BT_FMT_VLLM), 0);
    CHECK_STREQ(buf, "N=7168,K=2304,device_name=NVIDIA_H100_80GB_HBM3,dtype=int8_w8a8,"
                     "block_shape=[128, 64].json");
    CHECK_EQ(bt_config_filename(buf, sizeof buf, &other, 7168, 2304, "NVIDIA H200", BT_IN_FP8,
                                128, 128, BT_FMT_SGLANG), 0);
    CHECK_STREQ(buf, "N=7168,K=2304,device_name=NVIDIA_H200,dtype=fp8_w8a8,"
                     "block_shape=[128, 128],kernel=native.json");
    CHECK_EQ(bt_config_filename(buf, sizeof buf, &other, 576, 7168, "NVIDIA H200", BT_IN_FP8,
                                128, 128, BT_FMT_VLLM), 0);
    CHECK_STREQ(buf, "N=576,K=7168,device_name=NVIDIA_H200,dtype=fp8_w8a8,"
                     "block_shape=[128,128],kernel=native.json");
    CHECK_EQ(bt_config_filename(buf, 40, classic, 576, 7168, "NVIDIA H200", BT_IN_FP8, 128, 128,
                                BT_FMT_VLLM), -1);
}

TEST(configio_serialize_matches_json_dumps_indent_4)
{
    bt_config c = {0};
    char *empty = bt_config_serialize(&c, classic);
    CHECK_STREQ(empty, "{}\n");
    free(empty);
    bt_cand a = cand6(16, 32, 64, 1, 4, 2), b = cand6(128, 256, 128, 64, 8, 5);
    bt_config_set(&c, 2048, &b);
    bt_config_set(&c, 3, &a);
    char *out = bt_config_serialize(&c, classic);
    CHECK_STREQ(out, "{\n"
                     "    \"3\": {\n"
                     "        \"BLOCK_SIZE_M\": 16,\n"
                     "        \"BLOCK_SIZE_N\": 32,\n"
                     "        \"BLOCK_SIZE_K\": 64,\n"
                     "        \"GROUP_SIZE_M\": 1,\n"
                     "        \"num_warps\": 4,\n"
                     "        \"num_stages\": 2\n"
                     "    },\n"
                     "    \"2048\": {\n"
                     "        \"BLOCK_SIZE_M\": 128,\n"
                     "        \"BLOCK_SIZE_N\": 256,\n"
                     "        \"BLOCK_SIZE_K\": 128,\n"
                     "        \"GROUP_SIZE_M\": 64,\n"
                     "        \"num_warps\": 8,\n"
                     "        \"num_stages\": 5\n"
                     "    }\n"
                     "}\n");
    free(out);
    bt_config_free(&c);
}

static const char *entry_text = "{\"BLOCK_SIZE_M\": 64, \"BLOCK_SIZE_N\": 128, "
                                "\"BLOCK_SIZE_K\": 128, \"GROUP_SIZE_M\": 32, "
                                "\"num_warps\": 4, \"num_stages\": 3}";

/* Reads text as a config file and returns the error message ("" on success). */
static const char *read_error(const char *name, const char *text, const char **path)
{
    static bt_err err;
    bt_config c = {0};
    *path = bt_scratch_file(name, text);
    err.msg[0] = '\0';
    if (bt_config_read(*path, classic, &c, &err) == 0)
        err.msg[0] = '\0';
    bt_config_free(&c);
    return err.msg;
}

TEST(configio_read_errors_name_file_and_key)
{
    static const struct {
        const char *text, *expect;
    } cases[] = {
        {"{\n    \"1\": {\n        \"BLOCK_SIZE_M\": 64,,\n", ":3:29: not valid JSON"},
        {"", ":1:1: not valid JSON"},
        {"{} trailing", ":1:4: not valid JSON"},
        {"[1, 2]", ": expected an object mapping batch sizes to kernel parameters"},
        {"{\"abc\": {}}", ": \"abc\": a key must be a batch size (a positive integer)"},
        {"{\"0\": {}}", ": \"0\": a key must be a batch size (a positive integer)"},
        {"{\"-4\": {}}", ": \"-4\": a key must be a batch size (a positive integer)"},
        /* keys quoted as JSON strings, so that the message stays one line */
        {"{\"1\\n6\": {}}", ": \"1\\n6\": a key must be a batch size (a positive integer)"},
        {"{\"\\\"\\t\": {}}", ": \"\\\"\\t\": a key must be a batch size (a positive integer)"},
        {"{\"16\": {\"BLOCK_SIZE_M\\r\\n\": 64}}",
         ": \"16\": unexpected key \"BLOCK_SIZE_M\\r\\n\" (not a classic kernel parameter)"},
        {"{\"16\": 5}", ": \"16\": expected an object of classic kernel parameters"},
        {"{\"16\": {\"BLOCK_SIZE_M\": 64, \"BLOCK_SIZE_N\": 128, \"BLOCK_SIZE_K\": 128, "
         "\"num_warps\": 4, \"num_stages\": 3}}",
         ": \"16\": missing GROUP_SIZE_M"},
        {"{\"16\": {\"BLOCK_SIZE_M\": 64, \"BLOCK_SIZE_N\": 128, \"BLOCK_SIZE_K\": 128, "
         "\"GROUP_SIZE_M\": 32, \"num_warps\": 4, \"num_stages\": 3, \"waves_per_eu\": 0}}",
         ": \"16\": unexpected key \"waves_per_eu\" (not a classic kernel parameter)"},
        {"{\"16\": {\"BLOCK_SIZE_M\": 64.5}}", ": \"16\": BLOCK_SIZE_M: 64.5 is not an integer"},
        {"{\"16\": {\"BLOCK_SIZE_M\": \"64\"}}",
         ": \"16\": BLOCK_SIZE_M: \"64\" is not an integer"},
        {"{\"16\": {\"num_warps\": true}}", ": \"16\": num_warps: true is not an integer"},
        {"{\"16\": {\"num_warps\": 4294967296}}",
         ": \"16\": num_warps: 4294967296 is not an integer"},
        {"{\"16\": {\"num_warps\": 4, \"num_warps\": 8}}", ": \"16\": num_warps appears twice"},
        /* values no tuner writes, which the library would divide by */
        {"{\"16\": {\"BLOCK_SIZE_K\": 0}}", ": \"16\": BLOCK_SIZE_K: 0 is not positive"},
        {"{\"16\": {\"BLOCK_SIZE_N\": 96}}", ": \"16\": BLOCK_SIZE_N: 96 is not a power of two"},
        {"{\"16\": {\"num_stages\": 9}}", ": \"16\": num_stages: 9 is outside [1, 8]"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *path;
        const char *msg = read_error("bad.json", cases[i].text, &path);
        char expect[4200];
        snprintf(expect, sizeof expect, "%s%s", path, cases[i].expect);
        CHECK_STREQ(msg, expect);
    }
    char text[1024];
    snprintf(text, sizeof text, "{\"16\": %s, \"016\": %s}", entry_text, entry_text);
    const char *path;
    const char *msg = read_error("dup.json", text, &path);
    char expect[4200];
    snprintf(expect, sizeof expect, "%s: \"016\": batch size 16 appears twice", path);
    CHECK_STREQ(msg, expect);

    bt_config c = {0};
    bt_err err;
    snprintf(expect, sizeof expect, "%s/missing.json", bt_test_tmpdir());
    CHECK_EQ(bt_config_read(expect, classic, &c, &err), -1);
    CHECK_CONTAINS(err.msg, "missing.json: cannot open: No such file or directory");
}

TEST(configio_read_accepts_any_key_order_and_sorts_batches)
{
    char text[1024];
    snprintf(text, sizeof text,
             "{\"64\": {\"num_stages\": 2, \"num_warps\": 8, \"GROUP_SIZE_M\": 1, "
             "\"BLOCK_SIZE_K\": 64, \"BLOCK_SIZE_N\": 32, \"BLOCK_SIZE_M\": 16}, \"8\": %s}",
             entry_text);
    const char *path = bt_scratch_file("order.json", text);
    bt_config c = {0};
    bt_err err;
    CHECK_EQ(bt_config_read(path, classic, &c, &err), 0);
    CHECK_EQ(c.n, 2);
    if (c.n == 2) {
        CHECK_EQ(c.e[0].batch, 8);
        CHECK_EQ(c.e[1].batch, 64);
        const int want[6] = {16, 32, 64, 1, 8, 2};
        for (int i = 0; i < 6; i++)
            CHECK_EQ(c.e[1].cand.v[i], want[i]);
    }
    bt_config_free(&c);
}

/* A large config (50000 entries, 7 MB; BT_READ_MAX allows 64) reads in under a second even
 * under the sanitizers: entries are sorted once. Inserted one at a time, each checked against
 * those before it, they took 56 s under ASan (100000: 9 s plainly, 246 s under ASan), and
 * minutes for a file near BT_READ_MAX. Repeats are still refused, naming the first repeat in
 * the file. */
TEST(configio_read_large_file_and_repeats)
{
    enum { N = 50000 };
    size_t cap = (size_t)N * 160 + 64, used = 0;
    char *text = bt_xmalloc(cap);
    used += (size_t)snprintf(text + used, cap - used, "{");
    for (int i = 1; i <= N; i++)
        used += (size_t)snprintf(text + used, cap - used, "%s\"%d\": %s", i == 1 ? "" : ", ", i, entry_text);
    snprintf(text + used, cap - used, "}");
    const char *path = bt_scratch_file("large.json", text);
    free(text);
    bt_config c = {0};
    bt_err err = {{0}};
    double t0 = bt_now();
    CHECK_EQ(bt_config_read(path, classic, &c, &err), 0);
    double took = bt_now() - t0;
    if (took > 30)
        bt_check_fail(t, __FILE__, __LINE__, "reading %d entries took %.1f s", N, took);
    CHECK_STREQ(err.msg, "");
    CHECK_EQ(c.n, N);
    for (int i = 0; i < c.n; i++)
        if (c.e[i].batch != i + 1) {
            bt_check_fail(t, __FILE__, __LINE__, "entry %d is batch %ld", i, c.e[i].batch);
            break;
        }
    bt_config_free(&c);

    /* 16 and 8 both repeat; "8" repeats first in the file. */
    char dup[2048];
    snprintf(dup, sizeof dup, "{\"16\": %s, \"8\": %s, \"008\": %s, \"16\": %s, \"4\": %s}", entry_text,
             entry_text, entry_text, entry_text, entry_text);
    const char *msg = read_error("dups.json", dup, &path);
    char expect[4200];
    snprintf(expect, sizeof expect, "%s: \"008\": batch size 8 appears twice", path);
    CHECK_STREQ(msg, expect);
}

/* A merged key takes over the SGLang batch sizes nearer to it, unless they were tuned too or
 * run the same config as before. */
TEST(configio_moves_name_the_batch_sizes_a_new_key_takes_over)
{
    bt_cand a = cand6(16, 32, 128, 1, 4, 3), b = cand6(64, 128, 128, 16, 4, 4), c = cand6(128, 128, 128, 16, 8, 3);
    bt_config before = {0}, update = {0};
    bt_config_move mv[BT_SGLANG_BATCHES];
    CHECK_EQ(bt_config_moves(&before, &update, mv), 0); /* a new file */
    bt_config_set(&before, 1024, &a);
    bt_config_set(&before, 4096, &b);
    bt_config_set(&update, 2048, &c);
    /* 1536 stays on 1024 (a tie goes to the smaller); 3072 moves from 4096 to 2048. */
    CHECK_EQ(bt_config_moves(&before, &update, mv), 1);
    CHECK(mv[0].M == 3072 && mv[0].was == 4096 && mv[0].now == 2048);
    /* The same config as before is no move; a tuned batch size is none either. */
    bt_config_set(&update, 2048, &b);
    CHECK_EQ(bt_config_moves(&before, &update, mv), 0);
    bt_config_set(&update, 2048, &c);
    bt_config_set(&update, 3072, &c);
    CHECK_EQ(bt_config_moves(&before, &update, mv), 0);
    bt_config_free(&before);
    bt_config_free(&update);
}

TEST(configio_merge_keeps_replaces_and_adds)
{
    const char *dir = scratch_dir("merge");
    char path[4200];
    snprintf(path, sizeof path, "%s/cfg.json", dir);
    bt_cand old1 = cand6(16, 32, 128, 1, 4, 3), old16 = cand6(32, 64, 128, 16, 4, 4),
            old64 = cand6(64, 64, 128, 32, 4, 3), new16 = cand6(64, 128, 128, 1, 8, 2),
            new32 = cand6(32, 128, 64, 64, 4, 5), new4096 = cand6(128, 128, 128, 16, 8, 3);
    bt_config first = {0}, update = {0}, got = {0};
    bt_err err = {{0}};
    bt_config_set(&first, 64, &old64);
    bt_config_set(&first, 1, &old1);
    bt_config_set(&first, 16, &old16);
    /* No file yet: the merge creates it. */
    CHECK_EQ(bt_config_merge_write(path, classic, &first, NULL, &err), 0);
    CHECK_STREQ(err.msg, "");

    bt_config_set(&update, 4096, &new4096);
    bt_config_set(&update, 16, &new16);
    bt_config_set(&update, 32, &new32);
    CHECK_EQ(bt_config_merge_write(path, classic, &update, NULL, &err), 0);
    CHECK_STREQ(err.msg, "");
    CHECK_EQ(bt_config_read(path, classic, &got, &err), 0);
    static const long batches[] = {1, 16, 32, 64, 4096};
    const bt_cand *want[] = {&old1, &new16, &new32, &old64, &new4096};
    CHECK_EQ(got.n, 5);
    for (int i = 0; i < got.n && i < 5; i++) {
        CHECK_EQ(got.e[i].batch, batches[i]);
        CHECK(memcmp(&got.e[i].cand, want[i], sizeof *want[i]) == 0);
    }
    /* The file is exactly what the serializer writes for the merged set. */
    char *text = slurp(path), *expect = bt_config_serialize(&got, classic);
    CHECK_STREQ(text, expect);
    free(text);
    free(expect);

    /* An empty update rewrites the same entries. */
    bt_config none = {0};
    CHECK_EQ(bt_config_merge_write(path, classic, &none, NULL, &err), 0);
    bt_config again = {0};
    CHECK_EQ(bt_config_read(path, classic, &again, &err), 0);
    CHECK_EQ(again.n, 5);
    CHECK_EQ(count_dir_entries(dir), 1); /* no temporary files left behind */
    bt_config_free(&again);
    bt_config_free(&first);
    bt_config_free(&update);
    bt_config_free(&got);
}

TEST(configio_merge_refuses_to_overwrite_an_unreadable_file)
{
    static const struct {
        const char *text, *expect;
    } cases[] = {
        {"{\n  \"1\": {\n", ":3:1: not valid JSON (existing file left as is)"},
        {"{\"8\": {\"BLOCK_SIZE_M\": 64}}",
         ": \"8\": missing BLOCK_SIZE_N (existing file left as is)"},
    };
    const char *dir = scratch_dir("corrupt");
    char path[4200];
    snprintf(path, sizeof path, "%s/cfg.json", dir);
    bt_config update = {0};
    bt_cand c = cand6(64, 128, 128, 32, 4, 3);
    bt_config_set(&update, 16, &c);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        FILE *f = fopen(path, "wb");
        CHECK(f != NULL);
        if (!f)
            break;
        fputs(cases[i].text, f);
        fclose(f);
        bt_err err;
        CHECK_EQ(bt_config_merge_write(path, classic, &update, NULL, &err), -1);
        char expect[4300];
        snprintf(expect, sizeof expect, "%s%s", path, cases[i].expect);
        CHECK_STREQ(err.msg, expect);
        char *text = slurp(path);
        CHECK_STREQ(text, cases[i].text);
        free(text);
    }
    CHECK_EQ(count_dir_entries(dir), 1);

    bt_err err;
    snprintf(path, sizeof path, "%s/no-such-dir/cfg.json", dir);
    CHECK_EQ(bt_config_merge_write(path, classic, &update, NULL, &err), -1);
    char expect[4300];
    snprintf(expect, sizeof expect,
             "%s/no-such-dir: cannot open directory: No such file or directory", dir);
    CHECK_STREQ(err.msg, expect);
    bt_config_free(&update);
}

/* A write that fails part-way (here: the file size limit, which binds root too) leaves the old
 * config as it was and no temporary file. The merge runs in a child so the limit stays there. */
TEST(configio_failed_write_leaves_old_file_intact)
{
    const char *dir = scratch_dir("failwrite");
    char path[4200];
    snprintf(path, sizeof path, "%s/cfg.json", dir);
    bt_config small = {0}, big = {0};
    bt_cand c = cand6(64, 128, 128, 32, 4, 3);
    bt_err err;
    bt_config_set(&small, 1, &c);
    CHECK_EQ(bt_config_merge_write(path, classic, &small, NULL, &err), 0);
    for (long b = 2; b <= 64; b *= 2)
        bt_config_set(&big, b, &c);

    int fds[2];
    CHECK_EQ(pipe(fds), 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit lim = {256, 256};
        setrlimit(RLIMIT_FSIZE, &lim);
        bt_err cerr = {{0}};
        int rc = bt_config_merge_write(path, classic, &big, NULL, &cerr);
        ssize_t w = write(fds[1], cerr.msg, strlen(cerr.msg));
        _exit(rc == -1 && w >= 0 ? 0 : 1);
    }
    close(fds[1]);
    char msg[BT_ERRMAX] = "";
    size_t got = 0;
    for (ssize_t r; (r = read(fds[0], msg + got, sizeof msg - 1 - got)) > 0;)
        got += (size_t)r;
    msg[got] = '\0';
    close(fds[0]);
    int status = -1;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_CONTAINS(msg, ": write failed: File too large");
    char *after = slurp(path), *before = bt_config_serialize(&small, classic);
    CHECK_STREQ(after, before);
    CHECK_EQ(count_dir_entries(dir), 1);
    free(before);
    free(after);
    bt_config_free(&small);
    bt_config_free(&big);
}

/* Two processes merging different batch sizes into one file (as per-GPU runs do) lose none. */
TEST(configio_concurrent_merges_lose_no_entries)
{
    enum { ROUNDS = 25 };
    const char *dir = scratch_dir("concurrent");
    char path[4200];
    snprintf(path, sizeof path, "%s/cfg.json", dir);
    pid_t pid = fork();
    long base = pid == 0 ? 1000 : 2000;
    int failed = 0;
    for (int i = 0; i < ROUNDS; i++) {
        bt_config one = {0};
        bt_cand c = cand6(64, 128, 128, 32, 4, 3);
        bt_err err;
        bt_config_set(&one, base + i, &c);
        failed |= bt_config_merge_write(path, classic, &one, NULL, &err) != 0;
        bt_config_free(&one);
        cJSON *run = cJSON_CreateObject(); /* and each one's provenance */
        cJSON_AddNumberToObject(run, "batch", (double)(base + i));
        failed |= bt_sidecar_append(path, run, &err) != 0;
    }
    if (pid == 0)
        _exit(failed);
    int status = -1;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_EQ(failed, 0);
    bt_config got = {0};
    bt_err err;
    CHECK_EQ(bt_config_read(path, classic, &got, &err), 0);
    CHECK_EQ(got.n, 2 * ROUNDS);
    CHECK_EQ(count_dir_entries(dir), 2);
    bt_config_free(&got);
    char side[4300];
    CHECK_EQ(bt_sidecar_path(side, sizeof side, path), 0);
    cJSON *root = bt_json_read(side, &err);
    CHECK(root != NULL);
    CHECK_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(root, "runs")), 2 * ROUNDS);
    cJSON_Delete(root);
}

/* A sidecar that is not {"runs": [...]} is someone's file: left as is, and the append fails. */
TEST(configio_sidecar_append_keeps_a_foreign_file)
{
    const char *dir = scratch_dir("sidecar");
    char path[4200], side[4300];
    snprintf(path, sizeof path, "%s/cfg.json", dir);
    CHECK_EQ(bt_sidecar_path(side, sizeof side, path), 0);
    bt_err err = {{0}};
    FILE *f = fopen(side, "w");
    if (f) {
        fputs("{\"notes\": \"mine\"}\n", f);
        fclose(f);
    }
    CHECK_EQ(bt_sidecar_append(path, cJSON_CreateObject(), &err), -1);
    char expect[4400];
    snprintf(expect, sizeof expect, "%s: expected an object with a \"runs\" list (existing file left as is)", side);
    CHECK_STREQ(err.msg, expect);
    char *after = slurp(side);
    CHECK_STREQ(after, "{\"notes\": \"mine\"}\n");
    free(after);
}

/* A NUL byte ends the text cJSON parses: a config with one read as the part before it, and a
 * sidecar with one lost everything after it when a run appended to it. Both are refused, naming
 * the byte's line and column, and the sidecar is left as it is. */
TEST(configio_nul_byte_is_refused)
{
    const char *dir = scratch_dir("nul");
    char path[4200], side[4300], expect[4400];
    static const char config[] = "{\"16\": {\"BLOCK_SIZE_M\": 64, \"BLOCK_SIZE_N\": 128, \"BLOCK_SIZE_K\": 128, "
                                 "\"GROUP_SIZE_M\": 32, \"num_warps\": 4, \"num_stages\": 3}}\n\0{\"junk\"";
    static const char sidecar[] = "{\"runs\": []}\n\0{\"mine\": 1}\n";
    snprintf(path, sizeof path, "%s/cfg.json", dir);
    CHECK_EQ(bt_sidecar_path(side, sizeof side, path), 0);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(config, 1, sizeof config - 1, f);
        fclose(f);
    }
    f = fopen(side, "wb");
    if (f) {
        fwrite(sidecar, 1, sizeof sidecar - 1, f);
        fclose(f);
    }
    bt_config c = {0};
    bt_err err = {{0}};
    CHECK_EQ(bt_config_read(path, classic, &c, &err), -1);
    CHECK_EQ(c.n, 0);
    snprintf(expect, sizeof expect, "%s:2:1: not valid JSON (a NUL byte)", path);
    CHECK_STREQ(err.msg, expect);

    CHECK_EQ(bt_sidecar_append(path, cJSON_CreateObject(), &err), -1);
    snprintf(expect, sizeof expect, "%s:2:1: not valid JSON (a NUL byte) (existing file left as is)", side);
    CHECK_STREQ(err.msg, expect);
    char *after = NULL;
    size_t len = 0;
    CHECK_EQ(bt_read_file(side, &after, &len, &err), 0);
    CHECK_EQ(len, sizeof sidecar - 1);
    CHECK(after && memcmp(after, sidecar, sizeof sidecar - 1) == 0);
    free(after);
}

TEST(configio_nearest_batch_ties_to_smaller)
{
    /* SGLang's default batch sizes; expectations from min(keys, key=lambda x: abs(x - M)). */
    static const long keys[] = {1,   2,   4,   8,   16,   24,   32,   48,   64,
                                96,  128, 256, 512, 1024, 1536, 2048, 3072, 4096};
    static const long probe[][2] = {
        {1, 1},       {3, 2},       {6, 4},       {20, 16},     {21, 24},     {40, 32},
        {80, 64},     {112, 96},    {192, 128},   {384, 256},   {768, 512},   {1280, 1024},
        {1281, 1536}, {2560, 2048}, {3584, 3072}, {5000, 4096}, {0, 1},       {-7, 1},
    };
    bt_config c = {0};
    CHECK(bt_config_nearest(&c, 16) == NULL);
    bt_cand cand = cand6(64, 128, 128, 32, 4, 3);
    for (size_t i = sizeof keys / sizeof keys[0]; i-- > 0;)
        bt_config_set(&c, keys[i], &cand);
    for (size_t i = 0; i < sizeof probe / sizeof probe[0]; i++) {
        const bt_config_entry *e = bt_config_nearest(&c, probe[i][0]);
        CHECK(e != NULL);
        if (e)
            CHECK_EQ(e->batch, probe[i][1]);
    }
    bt_config_free(&c);
}

TEST(configio_sidecar_path)
{
    char buf[256];
    CHECK_EQ(bt_sidecar_path(buf, sizeof buf, "out/N=576,K=7168,device_name=NVIDIA_H200,"
                                              "dtype=fp8_w8a8,block_shape=[128, 128].json"), 0);
    CHECK_STREQ(buf, "out/N=576,K=7168,device_name=NVIDIA_H200,dtype=fp8_w8a8,"
                     "block_shape=[128, 128].provenance.json");
    CHECK_EQ(bt_sidecar_path(buf, sizeof buf, "cfg"), 0);
    CHECK_STREQ(buf, "cfg.provenance.json");
    CHECK_EQ(bt_sidecar_path(buf, 10, "cfg.json"), -1);
}

/* The native family's INT8_CONVERT and CTAS_PER_SM are optional: a config without them (every
 * config written before they existed) reads as 0 and 1, and the writer leaves them out at those
 * values, so those configs read and write as they always did. */
TEST(configio_optional_parameter)
{
    const char *old = "{\n    \"4096\": {\n        \"BLOCK_SIZE_M\": 128,\n        \"BLOCK_SIZE_N\": 128,\n"
                      "        \"num_stages\": 5,\n        \"GROUP_SIZE_M\": 4,\n        \"CLUSTER_M\": 1,\n"
                      "        \"SPLIT_K\": 1\n    }\n}\n";
    const char *add = "{\"4096\": {\"BLOCK_SIZE_M\": 128, \"BLOCK_SIZE_N\": 128, \"num_stages\": 5, "
                      "\"GROUP_SIZE_M\": 4, \"CLUSTER_M\": 1, \"SPLIT_K\": 1, \"INT8_CONVERT\": 1}}";
    const char *two = "{\"16\": {\"BLOCK_SIZE_M\": 64, \"BLOCK_SIZE_N\": 64, \"num_stages\": 5, "
                      "\"GROUP_SIZE_M\": 4, \"CLUSTER_M\": 1, \"SPLIT_K\": 1, \"CTAS_PER_SM\": 2}}";
    const int want[3][8] = {{128, 128, 5, 4, 1, 1, 0, 1}, {128, 128, 5, 4, 1, 1, 1, 1}, {64, 64, 5, 4, 1, 1, 0, 2}};
    const char *texts[3] = {old, add, two};
    for (int f = 0; f < 3; f++) {
        bt_config c = {0};
        bt_err err = {{0}};
        CHECK_EQ(bt_config_read(bt_scratch_file("native.json", texts[f]), &bt_family_native, &c, &err), 0);
        CHECK_EQ(c.n, 1);
        if (c.n != 1)
            continue;
        for (int i = 0; i < 8; i++)
            CHECK_EQ(c.e[0].cand.v[i], want[f][i]);
        char *text = bt_config_serialize(&c, &bt_family_native);
        if (f == 0)
            CHECK_STREQ(text, old);
        else if (f == 1)
            CHECK_CONTAINS(text, "        \"SPLIT_K\": 1,\n        \"INT8_CONVERT\": 1\n    }\n");
        else
            CHECK_CONTAINS(text, "        \"SPLIT_K\": 1,\n        \"CTAS_PER_SM\": 2\n    }\n");
        free(text);
        bt_config_free(&c);
    }
}

/* Whether the run's "adopted" list holds batch. */
static int adopted_at(const cJSON *run, long batch)
{
    const cJSON *m;
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(run, "adopted"))
    {
        if (cJSON_IsNumber(m) && (long)cJSON_GetNumberValue(m) == batch)
            return 1;
    }
    return 0;
}

/* The run of the sidecar whose result for batch is this config (its pick, or, where the entry
 * was adopted from the run, one of its finalists: bench/finalists.py), or NULL. */
static const cJSON *run_of(const cJSON *runs, long batch, const char *csv)
{
    char key[32];
    snprintf(key, sizeof key, "%ld", batch);
    const cJSON *run;
    cJSON_ArrayForEach(run, runs)
    {
        const cJSON *res = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(run, "results"), key);
        const char *got = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(res, "config"));
        if (got && strcmp(got, csv) == 0)
            return run;
        if (!adopted_at(run, batch))
            continue;
        const cJSON *fin;
        cJSON_ArrayForEach(fin, cJSON_GetObjectItemCaseSensitive(res, "finalists"))
        {
            got = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(fin, "config"));
            if (got && strcmp(got, csv) == 0)
                return run;
        }
    }
    return NULL;
}

static const char *run_str(const cJSON *run, const char *key)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(run, key));
    return s ? s : "";
}

/* What is wrong with the shipped config dir/name, written into why (empty: nothing). It must
 * read as the library reads it, be byte for byte what tune writes, carry the name tune gives
 * it, have each batch size's config in a run of its sidecar, and pass the static checks of that
 * run's architecture, input and output types. */
static void shipped_config_problem(const char *dir, const char *name, char *why, size_t n)
{
    const bt_family *f = strstr(name, ",kernel=native.json") ? &bt_family_native : &bt_family_classic;
    char path[4096], side[4096], csv[128], want[512], reason[256];
    bt_config c = {0};
    bt_err err = {{0}};
    char *text = NULL, *out = NULL;
    cJSON *prov = NULL;
    why[0] = '\0';
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (bt_config_read(path, f, &c, &err)) {
        snprintf(why, n, "%s", err.msg);
        goto out;
    }
    text = slurp(path), out = bt_config_serialize(&c, f);
    if (!text || !out || strcmp(text, out) != 0) {
        snprintf(why, n, "not byte for byte what tune writes");
        goto out;
    }
    if (bt_sidecar_path(side, sizeof side, path) || !(prov = bt_json_read(side, &err))) {
        snprintf(why, n, "no provenance sidecar: %s", err.msg);
        goto out;
    }
    const cJSON *runs = cJSON_GetObjectItemCaseSensitive(prov, "runs");
    for (int i = 0; i < c.n && !why[0]; i++) {
        bt_cand_csv(f, &c.e[i].cand, csv, sizeof csv);
        const cJSON *run = run_of(runs, c.e[i].batch, csv);
        if (!run) {
            snprintf(why, n, "batch %ld: config %s is in no run of the sidecar", c.e[i].batch, csv);
            break;
        }
        bt_variant v = {BT_IN_FP8, BT_OUT_F16, 128, 128};
        bt_target tg;
        long N = (long)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(run, "N"));
        long K = (long)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(run, "K"));
        if (bt_in_parse(run_str(run, "input_type"), &v.in) || bt_out_parse(run_str(run, "out_dtype"), &v.out))
            snprintf(why, n, "batch %ld: its run's types \"%s\" -> \"%s\" are unknown", c.e[i].batch,
                     run_str(run, "input_type"), run_str(run, "out_dtype"));
        else if (strcmp(run_str(run, "family"), f->name) != 0 ||
            bt_config_filename(want, sizeof want, f, N, K, run_str(run, "device"), v.in, 128, 128, BT_FMT_SGLANG) ||
            strcmp(want, name) != 0)
            snprintf(why, n, "batch %ld: its run names the file %s (family %s)", c.e[i].batch, want,
                     run_str(run, "family"));
        else if (bt_target_from_arch(run_str(run, "arch"), &tg))
            snprintf(why, n, "batch %ld: unknown architecture \"%s\"", c.e[i].batch, run_str(run, "arch"));
        else if (f->check(&c.e[i].cand, &v, &tg, reason, sizeof reason) != BT_REJ_NONE)
            snprintf(why, n, "batch %ld: %s on %s: %s", c.e[i].batch, csv, tg.arch, reason);
    }
out:
    cJSON_Delete(prov);
    free(text);
    free(out);
    bt_config_free(&c);
}

/* The configs shipped in configs/ are what tune wrote on real GPUs: each must still load, pass
 * the checks of today's kernels, and carry its provenance. */
TEST(configio_shipped_configs_are_valid)
{
    char dir[4096], why[1024];
    snprintf(dir, sizeof dir, "%s/configs", bt_test_root());
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    if (!d)
        return;
    int checked = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 5, ".json") != 0 || strstr(e->d_name, ".provenance.json"))
            continue;
        shipped_config_problem(dir, e->d_name, why, sizeof why);
        if (why[0])
            bt_check_fail(t, __FILE__, __LINE__, "configs/%s: %s", e->d_name, why);
        checked++;
    }
    closedir(d);
    CHECK(checked > 0);
    printf("    %d shipped configs checked\n", checked);
}

/* An entry may be a finalist of a run other than its pick only where it was adopted from that
 * run: the sidecar then says why it ships instead of the pick. */
TEST(configio_finalist_entry_needs_its_adoption)
{
    const char *name = "N=7168,K=2304,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8,block_shape=[128, 128].json";
    const char *side = "N=7168,K=2304,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8,block_shape=[128, 128]"
                       ".provenance.json";
    const char *run = "{\"runs\": [{\"device\": \"NVIDIA H100 80GB HBM3\", \"arch\": \"sm_90a\", "
                      "\"family\": \"classic\", \"N\": 7168, \"K\": 2304, \"input_type\": \"fp8\", "
                      "\"out_dtype\": \"float16\", \"results\": {\"512\": {\"config\": \"64,64,128,1,4,3\", "
                      "\"finalists\": [{\"config\": \"64,64,128,1,4,3\", \"us\": 30.1}, "
                      "{\"config\": \"64,128,128,16,4,3\", \"us\": 30.4}]}}%s}]}\n";
    const char *cfg = "{\n    \"512\": {\n        \"BLOCK_SIZE_M\": 64,\n        \"BLOCK_SIZE_N\": 128,\n"
                      "        \"BLOCK_SIZE_K\": 128,\n        \"GROUP_SIZE_M\": 16,\n        \"num_warps\": 4,\n"
                      "        \"num_stages\": 3\n    }\n}\n";
    char dir[4200], cfg_at[4400], side_at[4400], text[2048], why[1024];
    snprintf(dir, sizeof dir, "%s/finalist-entry", bt_test_tmpdir());
    mkdir(dir, 0755);
    snprintf(cfg_at, sizeof cfg_at, "finalist-entry/%s", name);
    snprintf(side_at, sizeof side_at, "finalist-entry/%s", side);
    bt_scratch_file(cfg_at, cfg);
    snprintf(text, sizeof text, run, "");
    bt_scratch_file(side_at, text);
    shipped_config_problem(dir, name, why, sizeof why);
    CHECK_STREQ(why, "batch 512: config 64,128,128,16,4,3 is in no run of the sidecar");
    snprintf(text, sizeof text, run, ", \"adopted\": [512], \"adopted_because\": \"faster in Triton\"");
    bt_scratch_file(side_at, text);
    shipped_config_problem(dir, name, why, sizeof why);
    CHECK_STREQ(why, "");
}
