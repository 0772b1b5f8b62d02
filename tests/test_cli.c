#include <stdlib.h>
#include <unistd.h>

#include "cli.h"
#include "harness.h"

#define MAXARGS 32

/* Parses "tune" followed by the NULL-terminated args. */
static int parse(const char *const *args, bt_options *o, bt_err *err, FILE *out)
{
    char *argv[MAXARGS + 2] = {"tune"};
    int argc = 1;
    while (args[argc - 1] && argc <= MAXARGS) {
        argv[argc] = (char *)args[argc - 1];
        argc++;
    }
    err->msg[0] = '\0';
    return bt_cli_parse(argc, argv, o, out, err);
}

/* Output of one parse that prints (--help, --version); caller frees. */
static char *parse_output(const char *const *args, int *rc)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    bt_options o;
    bt_err err;
    *rc = parse(args, &o, &err, f);
    fclose(f);
    return text;
}

static const struct {
    const char *args[8];
    const char *msg;
} usage_errors[] = {
    {{"--N", "abc", "--K", "5"}, "--N: 'abc' is not a positive integer"},
    {{"--N", "12x", "--K", "5"}, "--N: '12x' is not a positive integer"},
    {{"--N=", "--K", "5"}, "--N: '' is not a positive integer"},
    {{"--N", "-3", "--K", "5"}, "--N: '-3' is not a positive integer"},
    {{"--N", "0", "--K", "5"}, "--N: '0' is not a positive integer"},
    {{"--N", "7168", "--K", "99999999999999999999"},
     "--K: '99999999999999999999' is too large (at most 1048576)"},
    {{"--N", "2097152", "--K", "5"}, "--N: '2097152' is too large (at most 1048576)"},
    {{"--N", "7168"}, "--N given without --K"},
    {{"--K=7168"}, "--K given without --N"},
    {{"--N", "1", "--K", "1", "--tp-size", "8"}, "--N/--K cannot be combined with --tp-size"},
    {{"--model", "m.json", "--N", "1", "--K", "1"}, "--N/--K cannot be combined with --model"},
    {{"--pdl"}, "--pdl: only native kernels are launched programmatically (add --family native)"},
    {{"--pdl=1", "--family", "native"}, "--pdl takes no value"},
    {{"--tp-size", "0"}, "--tp-size: '0' is not a positive integer"},
    {{"--tp-size", "8.5"}, "--tp-size: '8.5' is not a positive integer"},
    {{"--foo"}, "unknown flag '--foo' (see tune --help)"},
    {{"--tp-size", "8", "--foo=bar"}, "unknown flag '--foo' (see tune --help)"},
    {{"-x"}, "unknown flag '-x' (see tune --help)"},
    {{"--n", "5"}, "unknown flag '--n' (see tune --help)"},
    {{"configs"}, "unexpected argument 'configs' (tune takes only flags; see tune --help)"},
    {{"--tp-size", "8", "-"}, "unexpected argument '-' (tune takes only flags; see tune --help)"},
    {{"--N"}, "--N: missing value"},
    {{"--N", "--K", "5"}, "--N: missing value before '--K'"},
    {{"--tp-size", "8", "--tp-size", "4"}, "--tp-size given twice"},
    {{"--tp-size=8", "--tp-size=8"}, "--tp-size given twice"},
    {{"--dry-run", "--dry-run"}, "--dry-run given twice"},
    {{"-j", "2", "-j4"}, "-j given twice"},
    {{"--dry-run=yes"}, "--dry-run takes no value"},
    {{"--family", "fancy"}, "--family: 'fancy' is not one of classic, native"},
    {{"--input-type", "fp16"}, "--input-type: 'fp16' is not one of fp8, int8"},
    {{"--out-dtype", "half"}, "--out-dtype: 'half' is not one of float16, bfloat16, float32"},
    {{"--format=json"}, "--format: 'json' is not one of sglang, vllm"},
    {{"--block-n", "100"}, "--block-n: 100 is not a multiple of 16"},
    {{"--block-k", "2048"}, "--block-k: '2048' is too large (at most 1024)"},
    {{"--block-k", "0"}, "--block-k: '0' is not a positive integer"},
    {{"--batch-sizes", "1,x"}, "--batch-sizes: 'x' is not a positive integer (at most 1048576)"},
    {{"--batch-sizes", "1,2,"},
     "--batch-sizes: '1,2,' is not a comma-separated list of positive integers"},
    {{"--batch-sizes", "1,,2"},
     "--batch-sizes: '1,,2' is not a comma-separated list of positive integers"},
    {{"--batch-sizes", ",1"},
     "--batch-sizes: ',1' is not a comma-separated list of positive integers"},
    {{"--batch-sizes", "1, 2"}, "--batch-sizes: ' 2' is not a positive integer (at most 1048576)"},
    {{"--batch-sizes", "1,2000000"}, "--batch-sizes: '2000000' is too large (at most 1048576)"},
    {{"--batch-sizes", "99999999999999999999"},
     "--batch-sizes: '99999999999999999999' is too large (at most 1048576)"},
    {{"--batch-sizes", "0"}, "--batch-sizes: '0' is not a positive integer (at most 1048576)"},
    {{"--batch-sizes", "000"}, "--batch-sizes: '000' is not a positive integer (at most 1048576)"},
    {{"--N", "+5", "--K", "16"}, "--N: '+5' is not a positive integer"},
    {{"--dry-run", "--resume"}, "--resume cannot be combined with --dry-run, which measures nothing"},
    {{"-h=1"}, "--help takes no value"},
    {{"--top", "3", "--dry-run"}, "--top cannot be combined with --dry-run, which measures nothing"},
    {{"--family", "native", "--pdl", "--dry-run"},
     "--pdl cannot be combined with --dry-run, which measures nothing"},
    {{"--arch", "sm_75"},
     "--arch: unknown architecture 'sm_75' (known: sm_80, sm_86, sm_89, sm_90, sm_90a, sm_100, "
     "sm_120)"},
    {{"-j", "0"}, "-j: '0' is not a positive integer"},
    {{"-jx"}, "-j: 'x' is not a positive integer"},
    {{"-j"}, "-j: missing value"},
    {{"--device", "-1"}, "--device: '-1' is not a non-negative integer"},
    {{"--devices", "0,1,0"}, "--devices: device 0 given twice"},
    {{"--devices", "0,-1"}, "--devices: '-1' is not a non-negative integer"},
    {{"--devices", "1,"}, "--devices: '1,' is not a comma-separated list of device ordinals"},
    {{"--devices", "0,1", "--device", "1"}, "--device cannot be combined with --devices (which lists every GPU to use)"},
    {{"--devices", "0,1", "--dry-run"}, "--devices cannot be combined with --dry-run, which measures nothing"},
    {{"--timeout", "0"}, "--timeout: '0' is not a positive number of seconds"},
    {{"--timeout", "nan"}, "--timeout: 'nan' is not a positive number of seconds"},
    {{"--timeout", "5s"}, "--timeout: '5s' is not a positive number of seconds"},
    {{"--timeout", "1000000"}, "--timeout: '1000000' is too large (at most 86400 seconds)"},
    {{"--timeout", "1e-300"}, "--timeout: '1e-300' is not a positive number of seconds"},
    {{"--timeout", "0x10"}, "--timeout: '0x10' is not a positive number of seconds"},
    {{"--timeout", " 5"}, "--timeout: ' 5' is not a positive number of seconds"},
    {{"--timeout", "0.0001"}, "--timeout: '0.0001' is under a millisecond"},
    {{"--top", "abc"}, "--top: 'abc' is not a non-negative integer"},
    {{"--top", "2000"}, "--top: '2000' is too large (at most 1000)"},
    {{"--rest", "-5"}, "--rest: '-5' is not a non-negative integer"},
    {{"--rest", "20000"}, "--rest: '20000' is too large (at most 10000)"},
    {{"--out-dir", ""}, "--out-dir: empty value"},
    {{"--space="}, "--space: empty value"},
    {{"--inject", "fault:x"}, "--inject: fault index 'x' is not a non-negative integer"},
    {{"--inject", "hang:-1"}, "--inject: hang index '-1' is not a non-negative integer"},
    {{"--inject", "boom:1"}, "--inject: 'boom:1' is not fault:I or hang:J"},
    {{"--inject", "fault:1,,hang:2"}, "--inject: '' is not fault:I or hang:J"},
    {{"--inject", "fault:1,fault:2"}, "--inject: 'fault' given twice in 'fault:1,fault:2'"},
    /* Strings parsed before the error are released (the leak checkers watch this one). */
    {{"--space", "s.yaml", "--model", "m.json", "--out-dir", "o", "--bogus"},
     "unknown flag '--bogus' (see tune --help)"},
};

/* --devices keeps the order given (the first is the one whose name the configs carry). */
TEST(cli_devices_in_order)
{
    bt_options o;
    bt_err err;
    const char *args[] = {"--devices", "3,0,1", NULL};
    CHECK_EQ(parse(args, &o, &err, stdout), 0);
    CHECK_EQ(o.ndevices, 3);
    CHECK(o.devices && o.devices[0] == 3 && o.devices[1] == 0 && o.devices[2] == 1);
    CHECK_EQ(o.device, 3);
    bt_options_free(&o);
}

TEST(cli_usage_errors)
{
    int n = (int)(sizeof usage_errors / sizeof usage_errors[0]);
    CHECK(n >= 25);
    for (int i = 0; i < n; i++) {
        bt_options o;
        bt_err err;
        CHECK_EQ(parse(usage_errors[i].args, &o, &err, stdout), -1);
        CHECK_STREQ(err.msg, usage_errors[i].msg);
        CHECK(strchr(err.msg, '\n') == NULL);
        CHECK(o.family == NULL && o.cache_dir == NULL && o.batch == NULL);
    }
}

TEST(cli_defaults)
{
    bt_options o;
    bt_err err;
    const char *args[] = {NULL};
    CHECK_EQ(parse(args, &o, &err, stdout), 0);
    CHECK_EQ(o.space_path == NULL, 1);
    CHECK_STREQ(o.family, "classic");
    CHECK_EQ(o.N, 0);
    CHECK_EQ(o.K, 0);
    CHECK_EQ(o.tp, 8); /* SGLang's tuner's default */
    CHECK(o.model == NULL);
    CHECK_EQ(o.in, BT_IN_FP8);
    CHECK_EQ(o.out, BT_OUT_F16);
    CHECK_EQ(o.block_n, 128);
    CHECK_EQ(o.block_k, 128);
    CHECK(o.batch == NULL);
    CHECK_EQ(o.nbatch, 0);
    CHECK(o.arch == NULL);
    CHECK_EQ(o.dry_run, 0);
    CHECK_STREQ(o.out_dir, "configs");
    CHECK_EQ(o.format, BT_FMT_SGLANG);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    CHECK_EQ(o.jobs, cpus < 1 ? 1 : cpus);
    CHECK(o.cache_dir != NULL);
    CHECK_EQ(o.resume, 0);
    CHECK_EQ(o.device, 0);
    CHECK(o.devices == NULL && o.ndevices == 0);
    CHECK(o.timeout_s == 60);
    CHECK_EQ(o.rest_ms, 100);
    CHECK_EQ(o.quiet, 0);
    CHECK_EQ(o.pdl, 0);
    CHECK_EQ(o.worker, 0);
    CHECK(o.inject == NULL);
    CHECK_EQ(o.inject_fault, -1);
    CHECK_EQ(o.inject_hang, -1);
    bt_options_free(&o);
    CHECK(o.family == NULL);
    bt_options_free(&o); /* harmless twice */
}

static char *cache_dir_with(const char *xdg, const char *home)
{
    bt_options o;
    bt_err err;
    const char *args[] = {NULL};
    free(bt_test_set_env("XDG_CACHE_HOME", xdg));
    free(bt_test_set_env("HOME", home));
    char *dir = parse(args, &o, &err, stdout) == 0 ? bt_strdup(o.cache_dir) : NULL;
    bt_options_free(&o);
    return dir;
}

TEST(cli_cache_dir_default)
{
    char *xdg = bt_test_set_env("XDG_CACHE_HOME", NULL), *home = bt_test_set_env("HOME", NULL);
    char *d;
    CHECK_STREQ(d = cache_dir_with("/x/cache", "/home/u"), "/x/cache/blocktune");
    free(d);
    CHECK_STREQ(d = cache_dir_with(NULL, "/home/u"), "/home/u/.cache/blocktune");
    free(d);
    /* The XDG spec says to ignore relative paths. */
    CHECK_STREQ(d = cache_dir_with("rel/cache", "/home/u"), "/home/u/.cache/blocktune");
    free(d);
    CHECK_STREQ(d = cache_dir_with("", ""), ".blocktune-cache");
    free(d);
    CHECK_STREQ(d = cache_dir_with(NULL, NULL), ".blocktune-cache");
    free(d);
    bt_test_restore_env("XDG_CACHE_HOME", xdg);
    bt_test_restore_env("HOME", home);
}

TEST(cli_shape_and_batch_sizes)
{
    bt_options o;
    bt_err err;
    const char *args[] = {"--N", "7168", "--K=2304", "--batch-sizes=64,1,16,16", NULL};
    CHECK_EQ(parse(args, &o, &err, stdout), 0);
    CHECK_EQ(o.N, 7168);
    CHECK_EQ(o.K, 2304);
    CHECK_EQ(o.tp, 0);
    CHECK_EQ(o.nbatch, 3);
    if (o.nbatch == 3) {
        CHECK_EQ(o.batch[0], 1);
        CHECK_EQ(o.batch[1], 16);
        CHECK_EQ(o.batch[2], 64);
    }
    bt_options_free(&o);
}

TEST(cli_model_tp)
{
    bt_options o;
    bt_err err;
    const char *alone[] = {"--model", "config.json", NULL};
    CHECK_EQ(parse(alone, &o, &err, stdout), 0);
    CHECK_STREQ(o.model, "config.json");
    CHECK_EQ(o.tp, 1);
    bt_options_free(&o);
    const char *with_tp[] = {"--tp-size", "4", "--model=config.json", NULL};
    CHECK_EQ(parse(with_tp, &o, &err, stdout), 0);
    CHECK_STREQ(o.model, "config.json");
    CHECK_EQ(o.tp, 4);
    bt_options_free(&o);
    const char *tp_only[] = {"--tp-size", "16", NULL};
    CHECK_EQ(parse(tp_only, &o, &err, stdout), 0);
    CHECK_EQ(o.tp, 16);
    CHECK(o.model == NULL);
    bt_options_free(&o);
}

TEST(cli_every_flag)
{
    bt_options o;
    bt_err err;
    const char *args[] = {"--space", "s.yaml", "--family=native", "--input-type", "int8",
                          "--out-dtype", "bfloat16", "--block-n", "64", "--block-k=256",
                          "--arch", "sm_90a", "--out-dir", "out", "--format",
                          "vllm", "-j3", "--cache-dir", "c", "--resume", "--device", "1",
                          "--timeout", "2.5", "--quiet", "--pdl", "--rest", "0", "--worker", "--inject",
                          "hang:7,fault:3", NULL};
    CHECK_EQ(parse(args, &o, &err, stdout), 0);
    CHECK_STREQ(err.msg, "");
    CHECK_STREQ(o.space_path, "s.yaml");
    CHECK_STREQ(o.family, "native");
    CHECK_EQ(o.in, BT_IN_INT8);
    CHECK_EQ(o.out, BT_OUT_BF16);
    CHECK_EQ(o.block_n, 64);
    CHECK_EQ(o.block_k, 256);
    CHECK_STREQ(o.arch, "sm_90a");
    CHECK_EQ(o.dry_run, 0);
    CHECK_STREQ(o.out_dir, "out");
    CHECK_EQ(o.format, BT_FMT_VLLM);
    CHECK_EQ(o.jobs, 3);
    CHECK_STREQ(o.cache_dir, "c");
    CHECK_EQ(o.resume, 1);
    CHECK_EQ(o.device, 1);
    CHECK(o.timeout_s == 2.5);
    CHECK_EQ(o.quiet, 1);
    CHECK_EQ(o.pdl, 1);
    CHECK_EQ(o.rest_ms, 0);
    CHECK_EQ(o.worker, 1);
    CHECK_STREQ(o.inject, "hang:7,fault:3");
    CHECK_EQ(o.inject_fault, 3);
    CHECK_EQ(o.inject_hang, 7);
    CHECK_EQ(o.tp, 8);
    bt_options_free(&o);

    const char *more[] = {"-j", "4", "--out-dtype=float32", "--inject=fault:0", NULL};
    CHECK_EQ(parse(more, &o, &err, stdout), 0);
    CHECK_EQ(o.jobs, 4);
    CHECK_EQ(o.out, BT_OUT_F32);
    CHECK_EQ(o.inject_fault, 0);
    CHECK_EQ(o.inject_hang, -1);
    bt_options_free(&o);

    const char *dry[] = {"--dry-run", "--arch", "sm_89", "-j=5", NULL};
    CHECK_EQ(parse(dry, &o, &err, stdout), 0);
    CHECK_EQ(o.dry_run, 1);
    CHECK_EQ(o.jobs, 5);
    bt_options_free(&o);
}

/* The --arch list the CLI advertises is the one bt_target_from_arch knows. */
TEST(cli_arch_list)
{
    static const char *archs[] = {"sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100",
                                  "sm_120"};
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++) {
        bt_options o;
        bt_err err;
        const char *args[] = {"--arch", archs[i], NULL};
        CHECK_EQ(parse(args, &o, &err, stdout), 0);
        CHECK_STREQ(o.arch, archs[i]);
        bt_options_free(&o);
        bt_target tgt;
        CHECK_EQ(bt_target_from_arch(archs[i], &tgt), 0);
    }
}

TEST(cli_help)
{
    int rc;
    const char *args[] = {"--tp-size", "8", "--help", NULL};
    char *help = parse_output(args, &rc);
    CHECK_EQ(rc, 1);
    static const char *documented[] = {
        "usage: tune [flags]", "Shapes", "Data types", "Search", "Output", "Execution",
        "--N n --K k", "--tp-size t", "default --tp-size 8", "--model config.json",
        "--batch-sizes 1,16,64", "--input-type fp8|int8", "(default fp8)",
        "--out-dtype float16|bfloat16|float32", "(default float16)",
        "--block-n n", "--block-k k", "a multiple of 16\n", "(default 128)",
        "--space FILE", "search_spaces/default.yaml", "search_spaces/native.yaml", "--family classic|native",
        "(default classic)", "--arch ARCH", "sm_80, sm_86, sm_89, sm_90, sm_90a, sm_100, sm_120",
        "--dry-run", "--out-dir DIR", "(default configs)", "--format sglang|vllm",
        "(default sglang)", "--quiet", "-j N", "online CPUs", "--cache-dir DIR",
        "$XDG_CACHE_HOME/blocktune", "--resume", "--device N", "(default 0)",
        "--timeout SECONDS", "(default 60)", "--rest MS", "(default 100; 0: back to back)", "--top N", "(at --tp-size, default 1)", "-h, --help", "--version",
        "  tune --tp-size 8\n", "  tune --N 7168 --K 2304 --batch-sizes 1,16,64\n",
        "  tune --tp-size 8 --dry-run --arch sm_90a\n",
    };
    for (size_t i = 0; i < sizeof documented / sizeof documented[0]; i++)
        CHECK_CONTAINS(help, documented[i]);
    CHECK(strstr(help, "--worker") == NULL);
    CHECK(strstr(help, "--inject") == NULL);
    /* Fits an 80-column terminal. */
    for (const char *line = help; *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        CHECK(len <= 80);
        line += len + (nl != NULL);
    }
    free(help);

    const char *short_h[] = {"-h", NULL};
    help = parse_output(short_h, &rc);
    CHECK_EQ(rc, 1);
    CHECK_CONTAINS(help, "usage: tune");
    free(help);
}

TEST(cli_version)
{
    int rc;
    const char *args[] = {"--version", NULL};
    char *text = parse_output(args, &rc);
    CHECK_EQ(rc, 1);
    CHECK_STREQ(text, "blocktune 0.1.0\n");
    free(text);
}
