#include "cli.h"
#include "jit.h"
#include "shapes.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Sanity limits, far above real models, that keep later size arithmetic from overflowing. */
#define MAX_TP 1024L
#define MAX_BLOCK 1024L
#define MAX_JOBS 1024L
#define MAX_DEVICE 1023L
#define MAX_TIMEOUT_S 86400.0
#define MAX_REST_MS 10000L
#define BLOCK_ALIGN 16

typedef enum {
    F_SPACE, F_FAMILY, F_N, F_K, F_TP, F_MODEL, F_IN, F_OUT, F_BLOCK_N, F_BLOCK_K, F_BATCH,
    F_ARCH, F_DRY_RUN, F_OUT_DIR, F_FORMAT, F_JOBS, F_CACHE_DIR, F_RESUME, F_DEVICE, F_DEVICES, F_TIMEOUT,
    F_QUIET, F_TOP, F_PDL, F_REST, F_HELP, F_VERSION, F_WORKER, F_INJECT
} flag_id;
#define F_COUNT (F_INJECT + 1)

static const struct {
    const char *name;
    int takes_value;
} flags[F_COUNT] = {
    [F_SPACE] = {"--space", 1},         [F_FAMILY] = {"--family", 1},
    [F_N] = {"--N", 1},                 [F_K] = {"--K", 1},
    [F_TP] = {"--tp-size", 1},          [F_MODEL] = {"--model", 1},
    [F_IN] = {"--input-type", 1},       [F_OUT] = {"--out-dtype", 1},
    [F_BLOCK_N] = {"--block-n", 1},     [F_BLOCK_K] = {"--block-k", 1},
    [F_BATCH] = {"--batch-sizes", 1},   [F_ARCH] = {"--arch", 1},
    [F_DRY_RUN] = {"--dry-run", 0},     [F_OUT_DIR] = {"--out-dir", 1},
    [F_FORMAT] = {"--format", 1},       [F_JOBS] = {"-j", 1},
    [F_CACHE_DIR] = {"--cache-dir", 1}, [F_RESUME] = {"--resume", 0},
    [F_DEVICE] = {"--device", 1},       [F_DEVICES] = {"--devices", 1},
    [F_TIMEOUT] = {"--timeout", 1},
    [F_QUIET] = {"--quiet", 0},         [F_TOP] = {"--top", 1},
    [F_PDL] = {"--pdl", 0},             [F_REST] = {"--rest", 1},
    [F_HELP] = {"--help", 0},
    [F_VERSION] = {"--version", 0},     [F_WORKER] = {"--worker", 0},
    [F_INJECT] = {"--inject", 1},
};

/* Flag values, indexed by the enums they map to. */
static const char *const family_names[] = {"classic", "native"};
static const char *const in_names[] = {[BT_IN_FP8] = "fp8", [BT_IN_INT8] = "int8"};
static const char *const out_names[] = {
    [BT_OUT_F16] = "float16", [BT_OUT_BF16] = "bfloat16", [BT_OUT_F32] = "float32"};
static const char *const format_names[] = {[BT_FMT_SGLANG] = "sglang", [BT_FMT_VLLM] = "vllm"};
/* Every entry must be known to bt_target_from_arch (the tests check). */
static const char *const arch_names[] = {"sm_80",  "sm_86",  "sm_89", "sm_90",
                                         "sm_90a", "sm_100", "sm_120"};

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Flag id of arg, with *val set to a value given in the same argument ("--N=5", "-j4",
 * "-j=4"); -1 when arg is no known flag. */
static int lookup(const char *arg, const char **val)
{
    *val = NULL;
    if (strncmp(arg, "-h", 2) == 0 && (!arg[2] || arg[2] == '=')) {
        if (arg[2])
            *val = arg + 3; /* refused: -h takes no value */
        return F_HELP;
    }
    if (strncmp(arg, "-j", 2) == 0) {
        if (arg[2])
            *val = arg + 2 + (arg[2] == '=');
        return F_JOBS;
    }
    if (strncmp(arg, "--", 2) != 0)
        return -1;
    const char *eq = strchr(arg, '=');
    size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
    for (int id = 0; id < F_COUNT; id++) {
        if (strlen(flags[id].name) == len && strncmp(flags[id].name, arg, len) == 0) {
            if (eq)
                *val = eq + 1;
            return id;
        }
    }
    return -1;
}

static int all_digits(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return 0;
    return 1;
}

/* An integer in [min, max] where min is 0 or 1; the message says which rule s breaks. */
static int parse_int(const char *flag, const char *s, long min, long max, long *out, bt_err *err)
{
    if (bt_parse_long(s, min, max, out) == 0)
        return 0;
    const char *what = min > 0 ? "a positive integer" : "a non-negative integer";
    if (all_digits(s)) {
        errno = 0;
        long v = strtol(s, NULL, 10);
        if (errno == ERANGE || v > max)
            return bt_fail(err, "%s: '%s' is too large (at most %ld)", flag, s, max);
    }
    return bt_fail(err, "%s: '%s' is not %s", flag, s, what);
}

/* "0,2,3": device ordinals, each once, kept in the order given. */
static int parse_devices(const char *flag, const char *s, bt_options *o, bt_err *err)
{
    int rc = -1;
    char *copy = bt_strdup(s), *save = NULL;
    o->devices = bt_xcalloc(strlen(s) / 2 + 1, sizeof *o->devices);
    o->ndevices = 0;
    if (!bt_is_comma_list(s)) {
        bt_fail(err, "%s: '%s' is not a comma-separated list of device ordinals", flag, s);
        goto out;
    }
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        long n;
        if (parse_int(flag, tok, 0, MAX_DEVICE, &n, err))
            goto out;
        for (int i = 0; i < o->ndevices; i++)
            if (o->devices[i] == n) {
                bt_fail(err, "%s: device %ld given twice", flag, n);
                goto out;
            }
        o->devices[o->ndevices++] = (int)n;
    }
    o->device = o->devices[0];
    rc = 0;
out:
    free(copy);
    return rc;
}

/* "a, b, c" into buf. */
static const char *join(const char *const *names, int n, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "", names[i]);
    return buf;
}

static int parse_choice(const char *flag, const char *s, const char *const *names, int n,
                        int *out, bt_err *err)
{
    for (int i = 0; i < n; i++) {
        if (strcmp(s, names[i]) == 0) {
            *out = i;
            return 0;
        }
    }
    char list[256];
    return bt_fail(err, "%s: '%s' is not one of %s", flag, s, join(names, n, list, sizeof list));
}

static int parse_block(const char *flag, const char *s, int *out, bt_err *err)
{
    long v;
    if (parse_int(flag, s, 1, MAX_BLOCK, &v, err))
        return -1;
    if (v % BLOCK_ALIGN != 0)
        return bt_fail(err, "%s: %ld is not a multiple of %d", flag, v, BLOCK_ALIGN);
    *out = (int)v;
    return 0;
}

static int parse_timeout(const char *s, double *out, bt_err *err)
{
    char *end;
    /* decimal seconds only (strtod also reads hex, exponents, "inf" and leading blanks), at
     * least 1 ms */
    if (!*s || strspn(s, "0123456789.") != strlen(s))
        return bt_fail(err, "--timeout: '%s' is not a positive number of seconds", s);
    double v = strtod(s, &end);
    if (*end || !isfinite(v) || v <= 0)
        return bt_fail(err, "--timeout: '%s' is not a positive number of seconds", s);
    if (v < 1e-3)
        return bt_fail(err, "--timeout: '%s' is under a millisecond", s);
    if (v > MAX_TIMEOUT_S)
        return bt_fail(err, "--timeout: '%s' is too large (at most %.0f seconds)", s,
                       MAX_TIMEOUT_S);
    *out = v;
    return 0;
}

/* "fault:I,hang:J", either or both, in any order. */
static int parse_inject(const char *s, bt_options *o, bt_err *err)
{
    const char *p = s;
    for (;;) {
        size_t len = strcspn(p, ",");
        char item[64];
        long *dst = NULL;
        if (len < sizeof item) {
            memcpy(item, p, len);
            item[len] = '\0';
            char *colon = strchr(item, ':');
            if (colon) {
                *colon = '\0';
                dst = strcmp(item, "fault") == 0  ? &o->inject_fault
                      : strcmp(item, "hang") == 0 ? &o->inject_hang
                                                  : NULL;
            }
            if (dst && *dst >= 0)
                return bt_fail(err, "--inject: '%s' given twice in '%s'", item, s);
            if (dst && bt_parse_long(colon + 1, 0, INT_MAX, dst))
                return bt_fail(err, "--inject: %s index '%s' is not a non-negative integer",
                               item, colon + 1);
        }
        if (!dst)
            return bt_fail(err, "--inject: '%.*s' is not fault:I or hang:J", (int)len, p);
        if (!p[len])
            return 0;
        p += len + 1;
    }
}

static void set_str(char **dst, const char *s)
{
    free(*dst);
    *dst = bt_strdup(s);
}

static int parse_path(const char *flag, const char *s, char **dst, bt_err *err)
{
    if (!*s)
        return bt_fail(err, "%s: empty value", flag);
    set_str(dst, s);
    return 0;
}

static int parse_arch(const char *s, char **dst, bt_err *err)
{
    bt_target t;
    char list[256];
    if (bt_target_from_arch(s, &t) != 0)
        return bt_fail(err, "--arch: unknown architecture '%s' (known: %s)", s,
                       join(arch_names, COUNT(arch_names), list, sizeof list));
    set_str(dst, s);
    return 0;
}

/* Applies one flag's value: 0 to go on, 1 when --help/--version was printed, -1 on error. */
static int apply(bt_options *o, flag_id id, const char *v, FILE *out, bt_err *err)
{
    const char *flag = flags[id].name;
    long n;
    int c;
    switch (id) {
    case F_HELP: bt_cli_usage(out); return 1;
    case F_VERSION: fprintf(out, "blocktune %s\n", BT_VERSION); return 1;
    case F_SPACE: return parse_path(flag, v, &o->space_path, err);
    case F_MODEL: return parse_path(flag, v, &o->model, err);
    case F_OUT_DIR: return parse_path(flag, v, &o->out_dir, err);
    case F_CACHE_DIR: return parse_path(flag, v, &o->cache_dir, err);
    case F_ARCH: return parse_arch(v, &o->arch, err);
    case F_FAMILY:
        if (parse_choice(flag, v, family_names, COUNT(family_names), &c, err))
            return -1;
        set_str(&o->family, family_names[c]);
        break;
    case F_IN:
        if (parse_choice(flag, v, in_names, COUNT(in_names), &c, err))
            return -1;
        o->in = (bt_in_type)c;
        break;
    case F_OUT:
        if (parse_choice(flag, v, out_names, COUNT(out_names), &c, err))
            return -1;
        o->out = (bt_out_type)c;
        break;
    case F_FORMAT:
        if (parse_choice(flag, v, format_names, COUNT(format_names), &c, err))
            return -1;
        o->format = (bt_format)c;
        break;
    case F_N: return parse_int(flag, v, 1, BT_MAX_DIM, &o->N, err);
    case F_K: return parse_int(flag, v, 1, BT_MAX_DIM, &o->K, err);
    case F_TP:
        if (parse_int(flag, v, 1, MAX_TP, &n, err))
            return -1;
        o->tp = (int)n;
        break;
    case F_JOBS:
        if (parse_int(flag, v, 1, MAX_JOBS, &n, err))
            return -1;
        o->jobs = (int)n;
        break;
    case F_TOP:
        if (parse_int(flag, v, 0, 1000, &n, err))
            return -1;
        o->top = (int)n;
        break;
    case F_REST: return parse_int(flag, v, 0, MAX_REST_MS, &o->rest_ms, err);
    case F_DEVICE:
        if (parse_int(flag, v, 0, MAX_DEVICE, &n, err))
            return -1;
        o->device = (int)n;
        break;
    case F_DEVICES: return parse_devices(flag, v, o, err);
    case F_BLOCK_N: return parse_block(flag, v, &o->block_n, err);
    case F_BLOCK_K: return parse_block(flag, v, &o->block_k, err);
    case F_BATCH:
        if (bt_parse_int_list(v, BT_MAX_DIM, &o->batch, &o->nbatch, err))
            return bt_wrap(err, "%s", flag);
        break;
    case F_TIMEOUT: return parse_timeout(v, &o->timeout_s, err);
    case F_INJECT:
        if (parse_inject(v, o, err))
            return -1;
        set_str(&o->inject, v);
        break;
    case F_DRY_RUN: o->dry_run = 1; break;
    case F_RESUME: o->resume = 1; break;
    case F_QUIET: o->quiet = 1; break;
    case F_PDL: o->pdl = 1; break;
    case F_WORKER: o->worker = 1; break;
    }
    return 0;
}

static int online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > MAX_JOBS ? (int)MAX_JOBS : (int)n;
}

static void set_defaults(bt_options *o)
{
    memset(o, 0, sizeof *o);
    o->family = bt_strdup("classic");
    o->in = BT_IN_FP8;
    o->out = BT_OUT_F16;
    o->block_n = o->block_k = 128;
    o->out_dir = bt_strdup("configs");
    o->format = BT_FMT_SGLANG;
    o->jobs = online_cpus();
    o->cache_dir = bt_jit_default_cache_dir();
    o->timeout_s = 60;
    o->rest_ms = 100;
    o->inject_fault = o->inject_hang = -1;
}

/* Rules between flags, checked once all are read. */
static int check_combination(bt_options *o, const int *seen, bt_err *err)
{
    if (seen[F_N] && !seen[F_K])
        return bt_fail(err, "--N given without --K");
    if (seen[F_K] && !seen[F_N])
        return bt_fail(err, "--K given without --N");
    if (seen[F_N] && seen[F_TP])
        return bt_fail(err, "--N/--K cannot be combined with --tp-size");
    if (seen[F_N] && seen[F_MODEL])
        return bt_fail(err, "--N/--K cannot be combined with --model");
    if (seen[F_DEVICE] && seen[F_DEVICES])
        return bt_fail(err, "--device cannot be combined with --devices (which lists every GPU to use)");
    /* A dry run compiles and counts: flags about measuring would be silently ignored. */
    static const flag_id measuring[] = {F_RESUME, F_TOP, F_TIMEOUT, F_REST, F_PDL, F_INJECT, F_DEVICES};
    for (size_t i = 0; seen[F_DRY_RUN] && i < sizeof measuring / sizeof measuring[0]; i++)
        if (seen[measuring[i]])
            return bt_fail(err, "%s cannot be combined with --dry-run, which measures nothing", flags[measuring[i]].name);
    const bt_family *fam = bt_family_find(o->family);
    if (o->pdl && !(fam && fam->programmatic))
        return bt_fail(err, "--pdl: only native kernels are launched programmatically (add --family native)");
    /* As SGLang's tuner: no shape given means DeepSeek-V3 at tensor-parallel size 8. */
    if (!seen[F_N] && !seen[F_TP])
        o->tp = seen[F_MODEL] ? 1 : 8;
    return 0;
}

int bt_cli_parse(int argc, char **argv, bt_options *o, FILE *out, bt_err *err)
{
    int seen[F_COUNT] = {0}, rc = -1;
    set_defaults(o);
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *val;
        if (arg[0] != '-' || arg[1] == '\0') {
            bt_fail(err, "unexpected argument '%s' (tune takes only flags; see tune --help)", arg);
            goto out;
        }
        int id = lookup(arg, &val);
        if (id < 0) {
            bt_fail(err, "unknown flag '%.*s' (see tune --help)", (int)strcspn(arg, "="), arg);
            goto out;
        }
        const char *flag = flags[id].name;
        if (!flags[id].takes_value && val) {
            bt_fail(err, "%s takes no value", flag);
            goto out;
        }
        if (flags[id].takes_value && !val) {
            if (i + 1 >= argc) {
                bt_fail(err, "%s: missing value", flag);
                goto out;
            }
            /* "--N --K 5" is a forgotten value, not an N of "--K". */
            if (strncmp(argv[i + 1], "--", 2) == 0) {
                bt_fail(err, "%s: missing value before '%s'", flag, argv[i + 1]);
                goto out;
            }
            val = argv[++i];
        }
        if (seen[id]++) {
            bt_fail(err, "%s given twice", flag);
            goto out;
        }
        int r = apply(o, (flag_id)id, val, out, err);
        if (r != 0) {
            rc = r;
            goto out;
        }
    }
    rc = check_combination(o, seen, err);
out:
    if (rc != 0)
        bt_options_free(o);
    return rc;
}

void bt_options_free(bt_options *o)
{
    free(o->space_path);
    free(o->family);
    free(o->model);
    free(o->batch);
    free(o->devices);
    free(o->arch);
    free(o->out_dir);
    free(o->cache_dir);
    free(o->inject);
    memset(o, 0, sizeof *o);
}

void bt_cli_usage(FILE *f)
{
    char archs[256];
    fprintf(f,
"usage: tune [flags]\n"
"\n"
"Tunes block-wise quantized W8A8 GEMM kernels (FP8 e4m3 or INT8) on an NVIDIA\n"
"GPU and writes the fastest configuration per batch size as SGLang or vLLM\n"
"config files. Flags take a value as --flag value or --flag=value.\n"
"\n"
"Shapes (one of --N/--K, --tp-size, --model; default --tp-size 8):\n"
"  --N n --K k            one weight shape: n output and k input features\n"
"  --tp-size t            DeepSeek-V3's weight shapes at tensor-parallel size t\n"
"  --model config.json    a dense Hugging Face model's weight shapes\n"
"                         (at --tp-size, default 1)\n"
"  --batch-sizes 1,16,64  batch sizes M to tune (default: the search space's)\n"
"\n"
"Data types:\n"
"  --input-type fp8|int8  quantized activations and weights (default fp8)\n"
"  --out-dtype float16|bfloat16|float32\n"
"                         output type (default float16)\n"
"  --block-n n            quantization block along N, a multiple of %d\n"
"                         (default 128)\n"
"  --block-k k            quantization block along K, a multiple of %d\n"
"                         (default 128)\n"
"\n"
"Search:\n"
"  --space FILE           search space YAML\n"
"                         (default search_spaces/default.yaml, or\n"
"                         search_spaces/native.yaml for --family native)\n"
"  --family classic|native\n"
"                         kernel family (default classic)\n"
"  --arch ARCH            target architecture (default: the device's), one of\n"
"                         %s\n"
"  --dry-run              list the shapes and the candidates that pass the\n"
"                         static checks; nothing runs on the GPU\n"
"  --pdl                  check and time native kernels with programmatic\n"
"                         dependent launch, as the library runs them with\n"
"                         blocktune_options.pdl\n"
"  --rest MS              idle the GPU MS milliseconds before each re-timing of a\n"
"                         finalist, so finalists are timed at the clock a GPU\n"
"                         runs between bursts, not at the one minutes of tuning\n"
"                         leave it at (default 100; 0: back to back)\n"
"\n"
"Output:\n"
"  --out-dir DIR          where config files go (default configs)\n"
"  --format sglang|vllm   name files for that serving stack (default sglang)\n"
"  --quiet                no progress line\n"
"  --top N                also list the N fastest candidates per batch size\n"
"                         (default 0)\n"
"\n"
"Execution:\n"
"  -j N                   parallel compile jobs (default: online CPUs, here %d)\n"
"  --cache-dir DIR        compiled kernel cache (default\n"
"                         $XDG_CACHE_HOME/blocktune, else $HOME/.cache/blocktune,\n"
"                         else .blocktune-cache)\n"
"  --resume               continue an interrupted run from its journals\n"
"  --device N             CUDA device ordinal (default 0)\n"
"  --devices 0,1,...      tune on these GPUs at once (all of one model), each\n"
"                         taking the next shape as it finishes one\n"
"  --timeout SECONDS      time a GPU step may take before the kernel counts as\n"
"                         hung and its worker is killed (default 60)\n"
"\n"
"  -h, --help             this help\n"
"  --version              the version\n"
"\n"
"Examples:\n"
"  tune --tp-size 8\n"
"  tune --N 7168 --K 2304 --batch-sizes 1,16,64\n"
"  tune --tp-size 8 --dry-run --arch sm_90a\n",
            BLOCK_ALIGN, BLOCK_ALIGN, join(arch_names, COUNT(arch_names), archs, sizeof archs),
            online_cpus());
}
