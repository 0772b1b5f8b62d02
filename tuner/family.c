#include "family.h"

#include <stdio.h>
#include <string.h>

#include "classic_layout.h"
#include "native_layout.h"
#include "util.h"

const char *bt_reject_name(bt_reject r)
{
    switch (r) {
    case BT_REJ_NONE: return "none";
    case BT_REJ_SMEM: return "shared memory";
    case BT_REJ_REGS: return "registers";
    case BT_REJ_SHAPE: return "tile shape";
    case BT_REJ_ARCH: return "architecture";
    default: return "?";
    }
}

const char *bt_in_name(bt_in_type t) { return t == BT_IN_INT8 ? "int8" : "fp8"; }
const char *bt_dtype_tag(bt_in_type t) { return t == BT_IN_INT8 ? "int8_w8a8" : "fp8_w8a8"; }

const char *bt_out_name(bt_out_type t)
{
    return t == BT_OUT_BF16 ? "bfloat16" : t == BT_OUT_F32 ? "float32" : "float16";
}

int bt_out_size(bt_out_type t) { return t == BT_OUT_F32 ? 4 : 2; }

int bt_in_parse(const char *name, bt_in_type *t)
{
    for (int i = BT_IN_FP8; i <= BT_IN_INT8; i++)
        if (strcmp(name, bt_in_name((bt_in_type)i)) == 0)
            return *t = (bt_in_type)i, 0;
    return -1;
}

int bt_out_parse(const char *name, bt_out_type *t)
{
    for (int i = BT_OUT_F16; i <= BT_OUT_F32; i++)
        if (strcmp(name, bt_out_name((bt_out_type)i)) == 0)
            return *t = (bt_out_type)i, 0;
    return -1;
}

int bt_target_from_arch(const char *arch, bt_target *t)
{
    static const struct {
        const char *arch;
        int cc;
        long smem;
    } known[] = {
        {"sm_80", 80, 166912},  {"sm_86", 86, 101376},  {"sm_89", 89, 101376},
        {"sm_90", 90, 232448},  {"sm_90a", 90, 232448}, {"sm_100", 100, 232448},
        {"sm_120", 120, 101376},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        if (strcmp(arch, known[i].arch) == 0) {
            memset(t, 0, sizeof *t);
            snprintf(t->arch, sizeof t->arch, "%s", arch);
            t->cc = known[i].cc;
            t->smem_optin = known[i].smem;
            return 0;
        }
    }
    return -1;
}

static int is_sm90a(const bt_target *t) { return strcmp(t->arch, "sm_90a") == 0; }

/* ---- classic: SGLang's Triton kernel's six keys, same meaning ---- */

enum { CL_BM, CL_BN, CL_BK, CL_GM, CL_WARPS, CL_STAGES, CL_NPARAM };

static const bt_param_def classic_params[CL_NPARAM] = {
    {.key = "BLOCK_SIZE_M", .pow2 = 1, .min = 16, .max = 256, .help = "rows of C per thread block"},
    {.key = "BLOCK_SIZE_N", .pow2 = 1, .min = 8, .max = 256, .help = "columns of C per thread block"},
    {.key = "BLOCK_SIZE_K", .pow2 = 1, .min = 32, .max = 128,
     .help = "K per pipeline step (divides the quantization block_k)"},
    {.key = "GROUP_SIZE_M", .pow2 = 0, .min = 1, .max = 1024, .help = "rows of tiles visited together for L2 reuse"},
    {.key = "num_warps", .pow2 = 1, .min = 1, .max = 8, .help = "warps per thread block"},
    {.key = "num_stages", .pow2 = 0, .min = 1, .max = 8, .help = "shared-memory pipeline depth"},
};

static bt_reject classic_check(const bt_cand *c, const bt_variant *v, const bt_target *t,
                               char *why, size_t n)
{
    const int *p = c->v;
    int bm = p[CL_BM], bn = p[CL_BN], bk = p[CL_BK], w = p[CL_WARPS], s = p[CL_STAGES];
    char dummy[8];
    if (!why)
        why = dummy, n = sizeof dummy;
    if (v->in == BT_IN_FP8 && t->cc < 89) {
        snprintf(why, n, "FP8 tensor-core mma needs sm_89 or newer, target is %s", t->arch);
        return BT_REJ_ARCH;
    }
    if (w <= 0 || w % 2 != 0) {
        snprintf(why, n, "num_warps %d: the loader copies in passes of 32 * num_warps 16-byte chunks, "
                 "which cover whole 1 KiB swizzle patterns only for an even number of warps", w);
        return BT_REJ_SHAPE;
    }
    if (bk != 32 && bk != 64 && bk != 128) {
        snprintf(why, n, "BLOCK_SIZE_K %d: the kernel's swizzled tiles take rows of 32, 64 or 128 bytes", bk);
        return BT_REJ_SHAPE;
    }
    if (v->block_k % bk != 0) {
        snprintf(why, n, "BLOCK_SIZE_K %d does not divide the quantization block_k %d", bk,
                 v->block_k);
        return BT_REJ_SHAPE;
    }
    int na = bt_cl_passes(bm, bk, w), nb = bt_cl_passes(bn, bk, w);
    if (na > BT_CL_MAX_PASSES || nb > BT_CL_MAX_PASSES) {
        snprintf(why, n, "%d warps copy the %d x %d A tile and the %d x %d B tile in %d and %d passes, "
                 "the loader keeps at most %d", w, bm, bk, bn, bk, na, nb, BT_CL_MAX_PASSES);
        return BT_REJ_SHAPE;
    }
    long acc = bt_cl_acc_per_thread(bt_cl_use_wgmma(is_sm90a(t), bm, bn, w), bm, bn, w);
    if (acc >= 128) {
        snprintf(why, n, "%ld fp32 accumulators per thread, twice that (running sum and block "
                 "partial) exceeds the 255-register limit", acc);
        return BT_REJ_REGS;
    }
    long smem = bt_cl_smem_bytes(bm, bn, bk, s, v->block_n);
    if (smem > t->smem_optin) {
        snprintf(why, n, "needs %ld bytes of shared memory, %s allows %ld", smem, t->arch,
                 t->smem_optin);
        return BT_REJ_SMEM;
    }
    snprintf(why, n, "ok");
    return BT_REJ_NONE;
}

static size_t classic_smem(const bt_cand *c, const bt_variant *v)
{
    const int *p = c->v;
    return (size_t)bt_cl_smem_bytes(p[CL_BM], p[CL_BN], p[CL_BK], p[CL_STAGES], v->block_n);
}

static int classic_defines(const bt_cand *c, const bt_variant *v, char *buf, size_t n)
{
    const int *p = c->v;
    return bt_sprintf(buf, n,
                      "#define BT_BM %d\n#define BT_BN %d\n#define BT_BK %d\n#define BT_GM %d\n"
                      "#define BT_WARPS %d\n#define BT_STAGES %d\n#define BT_QBN %d\n"
                      "#define BT_QBK %d\n#define BT_IN_INT8 %d\n#define BT_OUT %d\n",
                      p[CL_BM], p[CL_BN], p[CL_BK], p[CL_GM], p[CL_WARPS], p[CL_STAGES],
                      v->block_n, v->block_k, v->in == BT_IN_INT8, (int)v->out);
}

static void classic_launch(const bt_cand *c, const bt_variant *v, const bt_target *t, long M,
                           long N, long K, bt_launch *out)
{
    (void)K, (void)t;
    const int *p = c->v;
    long tiles = ((M + p[CL_BM] - 1) / p[CL_BM]) * ((N + p[CL_BN] - 1) / p[CL_BN]);
    memset(out, 0, sizeof *out);
    out->grid[0] = (unsigned)tiles, out->grid[1] = out->grid[2] = 1;
    out->block[0] = 32u * (unsigned)p[CL_WARPS], out->block[1] = out->block[2] = 1;
    out->cluster[0] = out->cluster[1] = out->cluster[2] = 1;
    out->smem = (size_t)bt_cl_smem_bytes(p[CL_BM], p[CL_BN], p[CL_BK], p[CL_STAGES], v->block_n);
}

/* SGLang's own default when no config file exists for a shape: 64 rows, the quantization
 * block's width and depth as BLOCK_SIZE_N and BLOCK_SIZE_K, GROUP_SIZE_M 32, 4 warps, 3 stages.
 * Where the kernel cannot take the block as a tile: BLOCK_SIZE_N 128 (a block wider than that,
 * or not a power of two; 4 warps have registers for 128 columns), and the largest BLOCK_SIZE_K
 * of 128, 64 and 32 dividing block_k (none: 128, which the check then refuses). */
static void classic_fallback(long M, long N, long K, const bt_variant *v, const bt_target *t, bt_cand *out)
{
    (void)M, (void)N, (void)K, (void)t;
    memset(out, 0, sizeof *out);
    int bn = bt_is_pow2(v->block_n) && v->block_n >= 8 && v->block_n <= 128 ? v->block_n : 128, bk = 128;
    while (bk > 32 && v->block_k % bk != 0)
        bk /= 2;
    out->v[CL_BM] = 64, out->v[CL_BN] = bn, out->v[CL_BK] = v->block_k % bk == 0 ? bk : 128;
    out->v[CL_GM] = 32, out->v[CL_WARPS] = 4, out->v[CL_STAGES] = 3;
}

const bt_family bt_family_classic = {
    .name = "classic",
    .abi = BT_ABI_POINTERS,
    .entry = "classic.cuh",
    .kernel = "bt_classic_gemm",
    .nparams = CL_NPARAM,
    .params = classic_params,
    .check = classic_check,
    .smem_bytes = classic_smem,
    .defines = classic_defines,
    .launch = classic_launch,
    .fallback = classic_fallback,
    /* the port ranks 8-warp tiles first at large M, Triton 4-warp ones (BENCHMARKS.md, "The
     * classic finalists in Triton") */
    .finalist_key = "num_warps",
};


/* ---- native: TMA + wgmma, warp-specialized and persistent (sm_90a) ---- */

enum { NV_BM, NV_BN, NV_STAGES, NV_GM, NV_CLUSTER, NV_SPLIT, NV_CVT, NV_OCC, NV_NPARAM };

static const bt_param_def native_params[NV_NPARAM] = {
    {.key = "BLOCK_SIZE_M", .pow2 = 1, .min = 64, .max = 128,
     .help = "rows of C per tile: 64 per consumer warpgroup"},
    {.key = "BLOCK_SIZE_N", .pow2 = 0, .min = 8, .max = 256, .help = "columns of C per tile, a multiple of 8"},
    {.key = "num_stages", .pow2 = 0, .min = 2, .max = 16, .help = "TMA ring depth"},
    {.key = "GROUP_SIZE_M", .pow2 = 0, .min = 1, .max = 1024, .help = "rows of tiles visited together for L2 reuse"},
    {.key = "CLUSTER_M", .pow2 = 1, .min = 1, .max = 2,
     .help = "CTAs on adjacent row tiles sharing each B tile by TMA multicast"},
    {.key = "SPLIT_K", .pow2 = 1, .min = 1, .max = 4,
     .help = "CTAs of a cluster sharing one tile's K blocks, reduced in shared memory"},
    {.key = "INT8_CONVERT", .pow2 = 0, .min = 0, .max = 1, .optional = 1, .dflt = 0,
     .help = "INT8 partials to float: 0 by the conversion instruction (exact), 1 by an integer add onto an offset"},
    {.key = "CTAS_PER_SM", .pow2 = 0, .min = 1, .max = 2, .optional = 1, .dflt = 1,
     .help = "persistent CTAs per SM: 2 runs two TMA rings per SM, on half the registers and shared memory each"},
};

/* CTAS_PER_SM of a candidate; 0, in one built before the parameter existed (zero-filled past
 * its last value), is the default 1. */
static int native_occ(const bt_cand *c) { return c->v[NV_OCC] > 1 ? c->v[NV_OCC] : 1; }

static bt_reject native_check(const bt_cand *c, const bt_variant *v, const bt_target *t, char *why,
                              size_t n)
{
    const int *p = c->v;
    int bm = p[NV_BM], bn = p[NV_BN], s = p[NV_STAGES], occ = native_occ(c);
    char dummy[8];
    if (!why)
        why = dummy, n = sizeof dummy;
    if (!is_sm90a(t)) {
        snprintf(why, n, "the native family needs sm_90a (TMA, wgmma, setmaxnreg), target is %s", t->arch);
        return BT_REJ_ARCH;
    }
    if (v->block_k != 64 && v->block_k != 128) {
        snprintf(why, n, "the native kernel steps K by the quantization block_k, which must be 64 or 128 (got %d)",
                 v->block_k);
        return BT_REJ_SHAPE;
    }
    if (bn % 8 != 0 || v->block_n % 8 != 0) {
        snprintf(why, n, "BLOCK_SIZE_N %d and block_n %d must be multiples of 8", bn, v->block_n);
        return BT_REJ_SHAPE;
    }
    if (v->in == BT_IN_INT8 && bn > 32 && bn % 16 != 0) {
        snprintf(why, n, "INT8 wgmma takes BLOCK_SIZE_N 8, 16, 24, 32 or a multiple of 16, not %d", bn);
        return BT_REJ_SHAPE;
    }
    if (p[NV_CVT] && v->in != BT_IN_INT8) {
        snprintf(why, n, "INT8_CONVERT %d changes only INT8 kernels; FP8 partials are float already", p[NV_CVT]);
        return BT_REJ_SHAPE;
    }
    if (p[NV_CLUSTER] > 1 && p[NV_SPLIT] > 1) {
        snprintf(why, n, "CLUSTER_M %d and SPLIT_K %d: a cluster either shares B tiles or splits K", p[NV_CLUSTER],
                 p[NV_SPLIT]);
        return BT_REJ_SHAPE;
    }
    if (bn % (8 * p[NV_CLUSTER]) != 0) {
        snprintf(why, n, "BLOCK_SIZE_N %d does not split into %d multicast shares of whole 8-row groups", bn,
                 p[NV_CLUSTER]);
        return BT_REJ_SHAPE;
    }
    if ((bn - 1) / v->block_n + 2 > 3) {
        snprintf(why, n, "a BLOCK_SIZE_N %d tile would touch more than three weight-scale blocks of %d", bn,
                 v->block_n);
        return BT_REJ_SHAPE;
    }
    const int need = bt_nv_consumer_need(bm, bn, occ, bt_out_size(v->out));
    if (need > bt_nv_consumer_regs(bm, occ)) {
        snprintf(why, n, "BLOCK_SIZE_N %d needs %d registers per consumer thread, BLOCK_SIZE_M %d with %d CTAs per SM leaves %d",
                 bn, need, bm, occ, bt_nv_consumer_regs(bm, occ));
        return BT_REJ_REGS;
    }
    long smem = bt_nv_smem_bytes(bm, bn, v->block_k, s, p[NV_SPLIT], bt_out_size(v->out));
    if (smem > t->smem_optin) {
        snprintf(why, n, "needs %ld bytes of shared memory, %s allows %ld", smem, t->arch, t->smem_optin);
        return BT_REJ_SMEM;
    }
    if (occ > 1 && occ * (smem + 1024) > bt_nv_sm_smem(t->smem_optin)) {
        snprintf(why, n, "%d CTAs of %ld bytes of shared memory do not fit on one %s SM (%ld)", occ, smem, t->arch,
                 bt_nv_sm_smem(t->smem_optin));
        return BT_REJ_SMEM;
    }
    snprintf(why, n, "ok");
    return BT_REJ_NONE;
}

static size_t native_smem(const bt_cand *c, const bt_variant *v)
{
    return (size_t)bt_nv_smem_bytes(c->v[NV_BM], c->v[NV_BN], v->block_k, c->v[NV_STAGES], c->v[NV_SPLIT],
                                    bt_out_size(v->out));
}

static int native_defines(const bt_cand *c, const bt_variant *v, char *buf, size_t n)
{
    const int *p = c->v;
    return bt_sprintf(buf, n,
                      "#define BT_BM %d\n#define BT_BN %d\n#define BT_STAGES %d\n#define BT_GM %d\n"
                      "#define BT_CLUSTER %d\n#define BT_SPLIT %d\n#define BT_QBN %d\n#define BT_QBK %d\n"
                      "#define BT_IN_INT8 %d\n#define BT_INT8_CONVERT %d\n#define BT_OCC %d\n#define BT_OUT %d\n",
                      p[NV_BM], p[NV_BN], p[NV_STAGES], p[NV_GM], p[NV_CLUSTER], p[NV_SPLIT], v->block_n,
                      v->block_k, v->in == BT_IN_INT8, p[NV_CVT], native_occ(c), (int)v->out);
}

static void native_launch(const bt_cand *c, const bt_variant *v, const bt_target *t, long M, long N,
                          long K, bt_launch *out)
{
    (void)K;
    const int *p = c->v;
    int cl = p[NV_CLUSTER], ctas = cl * p[NV_SPLIT];
    long tiles_m = (M + p[NV_BM] - 1) / p[NV_BM], tiles_n = (N + p[NV_BN] - 1) / p[NV_BN];
    long units = (tiles_m + cl - 1) / cl * tiles_n, slots = (t->sm_count > 0 ? t->sm_count : 132) * native_occ(c) / ctas;
    memset(out, 0, sizeof *out);
    /* Persistent: one cluster per unit of work, at most as many as fit on the SMs (CTAS_PER_SM
     * each). */
    out->grid[0] = (unsigned)((units < slots ? units : slots) * ctas), out->grid[1] = out->grid[2] = 1;
    out->block[0] = (unsigned)bt_nv_threads(p[NV_BM]), out->block[1] = out->block[2] = 1;
    out->cluster[0] = (unsigned)ctas, out->cluster[1] = out->cluster[2] = 1;
    out->smem = native_smem(c, v);
    out->tile_m = bt_nv_a_rows(p[NV_BM], M), out->tile_n = p[NV_BN] / cl, out->tile_k = v->block_k;
    out->ctas_per_sm = native_occ(c);
    out->store_cols = bt_nv_store_bytes(p[NV_BM], p[NV_BN], bt_out_size(v->out)) ? bt_nv_store_cols(p[NV_BN]) : 0;
}

/* Columns per tile that give about one tile per slot over tiles_m row tiles: a multiple of 8 (of
 * 16 past 32, a width INT8 wgmma takes too), between 16 and 128. */
static int native_fill_width(long tiles_m, long N, long slots)
{
    long want = (tiles_m * N + slots - 1) / slots;
    int bn = (int)((want + 7) / 8 * 8);
    if (bn > 32)
        bn = (bn + 15) / 16 * 16;
    return bn < 16 ? 16 : bn > 128 ? 128 : bn;
}

/* At most half the SMs would have a tile. */
static int native_underfilled(long ctas, long sms)
{
    return ctas * 2 <= sms;
}

/* Without a config: up to M = 128 a call streams the weights, so tiles of 64 rows, as wide as
 * gives about one tile per SM (1.27-1.45x faster in geomean at M = 96 and 128 than 128 x 128
 * tiles on the H100: BENCHMARKS.md, "The native heuristic"). Larger M takes 128 x 128 tiles, or
 * 64-row ones where those would leave half the SMs idle. Where tiles still leave half the SMs
 * idle and K is at least 6144, 2 or 4 CTAs share each tile's K blocks (SPLIT_K), their clusters
 * sized for three quarters of the SMs: at K = 4096 splitting ran up to 9% slower, and clusters
 * for every SM up to 16% (the same section). Stages: as many as fit, up to 12, so narrow tiles
 * keep enough bytes in flight. INT8 from M = 512 with at least 12 K blocks converts its partials
 * by adds (INT8_CONVERT 1) where the output is 16-bit, whose rounding hides that conversion's. */
static void native_fallback(long M, long N, long K, const bt_variant *v, const bt_target *t, bt_cand *out)
{
    long sms = t->sm_count > 0 ? t->sm_count : 132;
    memset(out, 0, sizeof *out);
    int bm = 128, bn = 128, split = 1;
    long tiles_m = (M + 127) / 128;
    if (M <= 128 || native_underfilled(tiles_m * ((N + 127) / 128), sms)) {
        bm = 64, tiles_m = (M + 63) / 64;
        bn = native_fill_width(tiles_m, N, sms);
    }
    while (split < 4 && K >= 6144 && native_underfilled(tiles_m * ((N + bn - 1) / bn) * split, sms)) {
        split *= 2;
        bn = native_fill_width(tiles_m, N, sms * 3 / 4 / split);
    }
    /* Sized for 16-bit outputs, whose slab takes shared memory, and for 128-deep K blocks even
     * at a block_k of 64: 5 such stages of 128 x 128 tiles ran 1.13-1.15x faster at M = 4096
     * than the 8 half-size ones that fit (H100, BENCHMARKS.md). */
    int stages = 12;
    while (stages > 2 &&
           bt_nv_smem_bytes(bm, bn, 128, stages, split, 2) > (t->smem_optin ? t->smem_optin : 232448))
        stages--;
    out->v[NV_BM] = bm, out->v[NV_BN] = bn, out->v[NV_STAGES] = stages, out->v[NV_GM] = 8;
    out->v[NV_CLUSTER] = 1, out->v[NV_SPLIT] = split, out->v[NV_OCC] = 1;
    out->v[NV_CVT] = v->in == BT_IN_INT8 && M >= 512 && K >= 12L * v->block_k && v->out != BT_OUT_F32;
}

const bt_family bt_family_native = {
    .name = "native",
    .abi = BT_ABI_TMA,
    .programmatic = 1,
    .entry = "native.cuh",
    .kernel = "bt_native_gemm",
    .nparams = NV_NPARAM,
    .params = native_params,
    .check = native_check,
    .smem_bytes = native_smem,
    .defines = native_defines,
    .launch = native_launch,
    .fallback = native_fallback,
};

const bt_family *bt_family_find(const char *name)
{
    if (strcmp(name, "classic") == 0)
        return &bt_family_classic;
    if (strcmp(name, "native") == 0)
        return &bt_family_native;
    return NULL;
}

int bt_family_param_index(const bt_family *f, const char *key)
{
    for (int i = 0; i < f->nparams; i++)
        if (strcmp(f->params[i].key, key) == 0)
            return i;
    return -1;
}

const char *bt_param_refuse(const bt_param_def *d, long v, char *why, size_t n)
{
    if (d->min == 0 && v < 0)
        snprintf(why, n, "%ld is negative", v);
    else if (d->min != 0 && v <= 0)
        snprintf(why, n, "%ld is not positive", v);
    else if (v < d->min || v > d->max)
        snprintf(why, n, "%ld is outside [%ld, %ld]", v, d->min, d->max);
    else if (d->pow2 && !bt_is_pow2(v))
        snprintf(why, n, "%ld is not a power of two", v);
    else
        return NULL;
    return why;
}

int bt_param_omitted(const bt_family *f, const bt_cand *c, int i)
{
    return f->params[i].optional && c->v[i] == f->params[i].dflt;
}

void bt_cand_format(const bt_family *f, const bt_cand *c, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < f->nparams && used < n; i++) {
        if (bt_param_omitted(f, c, i))
            continue;
        int w = snprintf(buf + used, n - used, "%s%s=%d", used ? " " : "", f->params[i].key, c->v[i]);
        if (w < 0)
            break;
        used += (size_t)w;
    }
}

void bt_cand_csv(const bt_family *f, const bt_cand *c, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < f->nparams && used < n; i++) {
        int w = snprintf(buf + used, n - used, "%s%d", i ? "," : "", c->v[i]);
        if (w < 0)
            break;
        used += (size_t)w;
    }
}
