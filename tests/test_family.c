#include "family.h"
#include "harness.h"
#include "classic_layout.h"
#include "native_layout.h"

/* The native kernel's shared memory includes the output slab of 16-bit outputs: a 128 x 128
 * tile with six stages no longer fits beside it on an H100, with fp32 outputs (no slab) it does. */
TEST(native_check_counts_the_output_slab)
{
    bt_target h100;
    CHECK_EQ(bt_target_from_arch("sm_90a", &h100), 0);
    h100.smem_optin = 232448;
    bt_variant bf16 = {BT_IN_FP8, BT_OUT_BF16, 128, 128}, f32 = {BT_IN_FP8, BT_OUT_F32, 128, 128};
    bt_cand six = {{128, 128, 6, 8, 1, 1}}, five = {{128, 128, 5, 8, 1, 1}};
    char why[200];
    CHECK_EQ(bt_family_native.check(&six, &bf16, &h100, why, sizeof why), BT_REJ_SMEM);
    CHECK_CONTAINS(why, "bytes of shared memory");
    CHECK_EQ(bt_family_native.check(&five, &bf16, &h100, why, sizeof why), BT_REJ_NONE);
    CHECK_EQ(bt_family_native.check(&six, &f32, &h100, why, sizeof why), BT_REJ_NONE);
    CHECK_EQ((long)bt_family_native.smem_bytes(&five, &bf16) - (long)bt_family_native.smem_bytes(&five, &f32),
             128 * 128 * 2);
}

/* The launch names the store box the kernel's slab is laid out in: the widest of 64/32/16/8
 * columns dividing BLOCK_SIZE_N, none for fp32 outputs; the launcher encodes C's tensor map only
 * when rows and base are 16-byte aligned, by the kernel's own rule. */
TEST(native_launch_store_box)
{
    bt_target h100;
    CHECK_EQ(bt_target_from_arch("sm_90a", &h100), 0);
    h100.sm_count = 132;
    bt_variant bf16 = {BT_IN_FP8, BT_OUT_BF16, 128, 128}, f32 = {BT_IN_FP8, BT_OUT_F32, 128, 128};
    const int bn[] = {128, 96, 144, 24, 160}, cols[] = {64, 32, 16, 8, 32};
    for (int i = 0; i < 5; i++) {
        bt_launch geo;
        bt_family_native.launch(&(bt_cand){{128, bn[i], 4, 8, 1, 1}}, &bf16, &h100, 4096, 7168, 7168, &geo);
        CHECK_EQ(geo.store_cols, cols[i]);
        bt_family_native.launch(&(bt_cand){{128, bn[i], 4, 8, 1, 1}}, &f32, &h100, 4096, 7168, 7168, &geo);
        CHECK_EQ(geo.store_cols, 0);
    }
    CHECK(bt_nv_tma_store(2, 7168, 0x10000));
    CHECK(!bt_nv_tma_store(2, 7164, 0x10000)); /* rows not 16-byte aligned */
    CHECK(!bt_nv_tma_store(2, 7168, 0x10008)); /* base not 16-byte aligned */
    CHECK(!bt_nv_tma_store(4, 7168, 0x10000)); /* fp32: no slab */
}

/* CTAS_PER_SM 2: the persistent grid covers two CTAs per SM, each with its share of the
 * registers (no setmaxnreg) and of the SM's shared memory, so wide tiles and deep rings are
 * rejected before compiling; a candidate zero-filled past its last value takes the default 1. */
TEST(native_ctas_per_sm)
{
    bt_target h100;
    CHECK_EQ(bt_target_from_arch("sm_90a", &h100), 0);
    h100.smem_optin = 232448, h100.sm_count = 132;
    bt_variant v = {BT_IN_FP8, BT_OUT_BF16, 128, 128};
    bt_variant f32 = {BT_IN_FP8, BT_OUT_F32, 128, 128};
    bt_cand two = {{64, 64, 6, 8, 1, 1, 0, 2}}, wide = {{64, 112, 4, 8, 1, 1, 0, 2}}, deep = {{64, 64, 12, 8, 1, 1, 0, 2}};
    bt_cand wider = {{64, 120, 4, 8, 1, 1, 0, 2}}, old = {{64, 64, 6, 8, 1, 1}};
    char why[200], defs[512], desc[256];
    CHECK_EQ(bt_family_native.check(&two, &v, &h100, why, sizeof why), BT_REJ_NONE);
    /* One K-block partial of 112 columns fits in 128 registers with a 16-bit output, which leaves
     * through shared memory, not with an fp32 one, stored from registers. */
    CHECK_EQ(bt_family_native.check(&wide, &v, &h100, why, sizeof why), BT_REJ_NONE);
    CHECK_EQ(bt_family_native.check(&wide, &f32, &h100, why, sizeof why), BT_REJ_REGS);
    CHECK_CONTAINS(why, "with 2 CTAs per SM leaves 128");
    CHECK_EQ(bt_family_native.check(&wider, &v, &h100, why, sizeof why), BT_REJ_REGS);
    CHECK_EQ(bt_family_native.check(&deep, &v, &h100, why, sizeof why), BT_REJ_SMEM);
    CHECK_CONTAINS(why, "2 CTAs of");
    deep.v[7] = 1;
    CHECK_EQ(bt_family_native.check(&deep, &v, &h100, why, sizeof why), BT_REJ_NONE);
    CHECK(bt_family_native.defines(&two, &v, defs, sizeof defs) >= 0);
    CHECK_CONTAINS(defs, "#define BT_OCC 2\n");
    bt_launch geo;
    bt_family_native.launch(&two, &v, &h100, 16, 32768, 512, &geo); /* 512 tiles */
    CHECK_EQ(geo.grid[0], 264u);
    CHECK_EQ(geo.ctas_per_sm, 2);
    bt_family_native.launch(&old, &v, &h100, 16, 32768, 512, &geo);
    CHECK_EQ(geo.grid[0], 132u);
    CHECK(bt_family_native.defines(&old, &v, defs, sizeof defs) >= 0);
    CHECK_CONTAINS(defs, "#define BT_OCC 1\n");
    bt_cand_format(&bt_family_native, &two, desc, sizeof desc);
    CHECK_CONTAINS(desc, "SPLIT_K=1 CTAS_PER_SM=2");
}

/* Past 128 columns a consumer thread holds one K-block partial; with a 16-bit output (through
 * shared memory) tiles up to 208 columns fit in the 224 registers of a 128-row tile, with an fp32
 * one (stored from registers) up to 160. */
TEST(native_one_partial_columns_by_output)
{
    bt_target h100;
    CHECK_EQ(bt_target_from_arch("sm_90a", &h100), 0);
    h100.smem_optin = 232448;
    bt_variant bf16 = {BT_IN_FP8, BT_OUT_BF16, 128, 128}, f32 = {BT_IN_FP8, BT_OUT_F32, 128, 128};
    bt_cand c160 = {{128, 160, 4, 8, 1, 1, 0, 1}}, c208 = {{128, 208, 3, 8, 1, 1, 0, 1}};
    bt_cand c216 = {{128, 216, 3, 8, 1, 1, 0, 1}};
    char why[200];
    CHECK_EQ(bt_family_native.check(&c208, &bf16, &h100, why, sizeof why), BT_REJ_NONE);
    CHECK_EQ(bt_family_native.check(&c216, &bf16, &h100, why, sizeof why), BT_REJ_REGS);
    CHECK_EQ(bt_family_native.check(&c160, &f32, &h100, why, sizeof why), BT_REJ_NONE);
    CHECK_EQ(bt_family_native.check(&c208, &f32, &h100, why, sizeof why), BT_REJ_REGS);
    CHECK_CONTAINS(why, "BLOCK_SIZE_N 208 needs 272 registers");
}

/* INT8_CONVERT only changes INT8 kernels: 1 is rejected before compiling for FP8, becomes the
 * kernel's BT_INT8_CONVERT for INT8, and a candidate's description leaves it out at 0. */
TEST(native_int8_convert)
{
    bt_target h100;
    CHECK_EQ(bt_target_from_arch("sm_90a", &h100), 0);
    h100.smem_optin = 232448;
    bt_variant fp8 = {BT_IN_FP8, BT_OUT_BF16, 128, 128}, int8 = {BT_IN_INT8, BT_OUT_BF16, 128, 128};
    bt_cand i2f = {{128, 128, 5, 4, 1, 1, 0, 1}}, add = {{128, 128, 5, 4, 1, 1, 1, 1}};
    char why[200], defs[512], desc[256];
    CHECK_EQ(bt_family_native.check(&add, &fp8, &h100, why, sizeof why), BT_REJ_SHAPE);
    CHECK_CONTAINS(why, "INT8_CONVERT 1 changes only INT8 kernels");
    CHECK_EQ(bt_family_native.check(&add, &int8, &h100, why, sizeof why), BT_REJ_NONE);
    CHECK_EQ(bt_family_native.check(&i2f, &fp8, &h100, why, sizeof why), BT_REJ_NONE);
    CHECK(bt_family_native.defines(&add, &int8, defs, sizeof defs) >= 0);
    CHECK_CONTAINS(defs, "#define BT_INT8_CONVERT 1\n");
    CHECK(bt_family_native.defines(&i2f, &int8, defs, sizeof defs) >= 0);
    CHECK_CONTAINS(defs, "#define BT_INT8_CONVERT 0\n");
    bt_cand_format(&bt_family_native, &i2f, desc, sizeof desc);
    CHECK_STREQ(desc, "BLOCK_SIZE_M=128 BLOCK_SIZE_N=128 num_stages=5 GROUP_SIZE_M=4 CLUSTER_M=1 SPLIT_K=1");
    bt_cand_format(&bt_family_native, &add, desc, sizeof desc);
    CHECK_CONTAINS(desc, "SPLIT_K=1 INT8_CONVERT=1");
}

/* The heuristic's INT8 kernels convert by adds from M = 512 with 12 K blocks or more and a
 * 16-bit output; FP8, fp32 outputs, short K and smaller M keep the conversion instruction.
 * Every candidate it gives passes the static checks. */
TEST(native_fallback_int8_convert)
{
    bt_target h100;
    CHECK_EQ(bt_target_from_arch("sm_90a", &h100), 0);
    h100.smem_optin = 232448, h100.sm_count = 132;
    const struct {
        bt_variant v;
        long M, K;
        int cvt;
    } cases[] = {
        {{BT_IN_INT8, BT_OUT_BF16, 128, 128}, 2048, 7168, 1}, {{BT_IN_INT8, BT_OUT_F16, 128, 128}, 512, 1536, 1},
        {{BT_IN_INT8, BT_OUT_BF16, 128, 128}, 2048, 1408, 0}, {{BT_IN_INT8, BT_OUT_BF16, 128, 128}, 256, 7168, 0},
        {{BT_IN_INT8, BT_OUT_F32, 128, 128}, 2048, 7168, 0},  {{BT_IN_FP8, BT_OUT_BF16, 128, 128}, 2048, 7168, 0},
        {{BT_IN_INT8, BT_OUT_BF16, 128, 64}, 2048, 768, 1},
    };
    const int cvt = bt_family_param_index(&bt_family_native, "INT8_CONVERT");
    CHECK(cvt >= 0);
    for (size_t i = 0; cvt >= 0 && i < sizeof cases / sizeof cases[0]; i++) {
        bt_cand c;
        char why[200];
        bt_family_native.fallback(cases[i].M, 7168, cases[i].K, &cases[i].v, &h100, &c);
        CHECK_EQ(c.v[cvt], cases[i].cvt);
        CHECK_EQ(bt_family_native.check(&c, &cases[i].v, &h100, why, sizeof why), BT_REJ_NONE);
    }
}

/* The heuristic's tiles: 64 rows up to M = 128, as wide as gives about one tile per SM (two
 * row tiles of 7168 columns on 132 SMs: 109 columns, rounded up to 112); 128 x 128 above, unless
 * those leave half the SMs idle ((1536, 7168) at M = 256 has 24 of them: 64 x 48, 128 tiles).
 * Tiles that still leave half the SMs idle split K where K >= 6144, widened so the clusters
 * fill three quarters of the SMs ((512, 7168) at M = 1: 32 tiles of 16 columns, then 22 of 24
 * split 4 ways); at K = 4096 they do not. */
TEST(native_fallback_tiles)
{
    bt_target h100;
    CHECK_EQ(bt_target_from_arch("sm_90a", &h100), 0);
    h100.smem_optin = 232448, h100.sm_count = 132;
    const bt_variant v = {BT_IN_FP8, BT_OUT_BF16, 128, 128};
    const struct {
        long M, N, K;
        int bm, bn, split;
    } cases[] = {{1, 7168, 7168, 64, 64, 1},      {64, 7168, 7168, 64, 64, 1},     {128, 7168, 7168, 64, 112, 1},
                 {96, 576, 7168, 64, 16, 1},      {128, 24576, 7168, 64, 128, 1},  {129, 7168, 7168, 128, 128, 1},
                 {4096, 7168, 7168, 128, 128, 1}, {256, 1536, 7168, 64, 48, 1},    {2048, 512, 7168, 64, 128, 1},
                 {1, 512, 7168, 64, 24, 4},       {1, 576, 7168, 64, 16, 2},       {128, 256, 7168, 64, 24, 4},
                 {1, 1024, 4096, 64, 16, 1},      {256, 256, 16384, 64, 24, 2}};
    const int bm = bt_family_param_index(&bt_family_native, "BLOCK_SIZE_M"),
              bn = bt_family_param_index(&bt_family_native, "BLOCK_SIZE_N"),
              sk = bt_family_param_index(&bt_family_native, "SPLIT_K");
    CHECK(bm >= 0 && bn >= 0 && sk >= 0);
    for (size_t i = 0; bm >= 0 && bn >= 0 && sk >= 0 && i < sizeof cases / sizeof cases[0]; i++) {
        bt_cand c;
        char why[200];
        bt_family_native.fallback(cases[i].M, cases[i].N, cases[i].K, &v, &h100, &c);
        CHECK_EQ(c.v[bm], cases[i].bm);
        CHECK_EQ(c.v[bn], cases[i].bn);
        CHECK_EQ(c.v[sk], cases[i].split);
        CHECK_EQ(bt_family_native.check(&c, &v, &h100, why, sizeof why), BT_REJ_NONE);
    }
}

/* The heuristic's stages: as many 128-deep K blocks' worth as fit beside a 16-bit output's
 * slab, up to 12, at a block_k of 64 too, whose stages are half the size: 8 of them at 128 x 128
 * tiles ran 13-15% slower than 5 (BENCHMARKS.md). */
TEST(native_fallback_stages)
{
    bt_target h100;
    CHECK_EQ(bt_target_from_arch("sm_90a", &h100), 0);
    h100.smem_optin = 232448, h100.sm_count = 132;
    const struct {
        long M;
        int block_k, stages;
    } cases[] = {{4096, 64, 5}, {4096, 128, 5}, {16, 64, 12}, {16, 128, 12}, {128, 128, 9}};
    const int st = bt_family_param_index(&bt_family_native, "num_stages");
    CHECK(st >= 0);
    for (size_t i = 0; st >= 0 && i < sizeof cases / sizeof cases[0]; i++) {
        const bt_variant v = {BT_IN_FP8, BT_OUT_BF16, 128, cases[i].block_k};
        bt_cand c;
        char why[200];
        bt_family_native.fallback(cases[i].M, 7168, 7168, &v, &h100, &c);
        CHECK_EQ(c.v[st], cases[i].stages);
        CHECK_EQ(bt_family_native.check(&c, &v, &h100, why, sizeof why), BT_REJ_NONE);
    }
}

/* The classic kernel's mma.sync warps sit where Triton puts them (its MMA v2 layout, as the
 * Triton 3.6 kernels of bench/triton_configs.py print it), so num_warps costs the same in both:
 * [1, 4] for a 32 x 64 tile of 4 warps, [2, 4] for 16 x 32 of 8, where the second warp row
 * repeats the first. */
TEST(classic_warps_as_triton_lays_them)
{
    static const struct {
        int bm, bn, warps, wm, wn, copies;
    } cases[] = {
        {16, 32, 4, 1, 4, 1}, {16, 32, 8, 1, 4, 2}, {16, 64, 8, 1, 8, 1}, {32, 64, 4, 1, 4, 1},
        {32, 128, 8, 1, 8, 1}, {64, 64, 4, 2, 2, 1}, {64, 32, 8, 4, 2, 1}, {128, 32, 4, 4, 1, 1},
        {16, 16, 8, 1, 2, 4},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_EQ(bt_cl_warps_m(cases[i].bm, cases[i].bn, cases[i].warps), cases[i].wm);
        CHECK_EQ(bt_cl_warps_n(cases[i].bm, cases[i].bn, cases[i].warps), cases[i].wn);
        CHECK_EQ(bt_cl_warp_copies(cases[i].bm, cases[i].bn, cases[i].warps), cases[i].copies);
    }
}

/* README's table says native num_stages 2 to 16: the kernel's ring needs two stages. */
TEST(native_num_stages_range_as_documented)
{
    int i = bt_family_param_index(&bt_family_native, "num_stages");
    CHECK(i >= 0);
    if (i < 0)
        return;
    const bt_param_def *d = &bt_family_native.params[i];
    char why[80];
    CHECK(bt_param_refuse(d, 2, why, sizeof why) == NULL);
    CHECK(bt_param_refuse(d, 16, why, sizeof why) == NULL);
    CHECK(bt_param_refuse(d, 1, why, sizeof why) != NULL);
    CHECK_STREQ(why, "1 is outside [2, 16]");
    CHECK(bt_param_refuse(d, 17, why, sizeof why) != NULL);
}

/* Without a config the classic kernel runs SGLang's default: 64 rows, the quantization block as
 * BLOCK_SIZE_N x BLOCK_SIZE_K, GROUP_SIZE_M 32, 4 warps, 3 stages; a block the kernel cannot
 * take as a tile gets 128 columns and the largest BLOCK_SIZE_K dividing it, and a block_k none
 * divides is refused as a block shape. */
TEST(classic_fallback_takes_the_block_shape)
{
    bt_target h100, a100;
    CHECK_EQ(bt_target_from_arch("sm_90a", &h100), 0);
    CHECK_EQ(bt_target_from_arch("sm_80", &a100), 0);
    static const struct {
        int block_n, block_k, bn, bk;
    } cases[] = {{128, 128, 128, 128}, {64, 64, 64, 64}, {128, 64, 128, 64}, {32, 128, 32, 128},
                 {256, 256, 128, 128}, {96, 128, 128, 128}, {128, 96, 128, 32}, {16, 32, 16, 32}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bt_variant v = {BT_IN_INT8, BT_OUT_BF16, cases[i].block_n, cases[i].block_k};
        bt_cand c;
        char why[300];
        bt_family_classic.fallback(16, 4096, 7168, &v, NULL, &c);
        const int want[] = {64, cases[i].bn, cases[i].bk, 32, 4, 3};
        for (int p = 0; p < 6; p++)
            CHECK_EQ(c.v[p], want[p]);
        CHECK_EQ(bt_family_classic.check(&c, &v, &h100, why, sizeof why), BT_REJ_NONE);
        CHECK_EQ(bt_family_classic.check(&c, &v, &a100, why, sizeof why), BT_REJ_NONE);
    }
    bt_variant odd = {BT_IN_FP8, BT_OUT_BF16, 128, 48};
    bt_cand c;
    char why[300];
    bt_family_classic.fallback(16, 4096, 7168, &odd, NULL, &c);
    CHECK_EQ(bt_family_classic.check(&c, &odd, &h100, why, sizeof why), BT_REJ_SHAPE);
    CHECK_CONTAINS(why, "quantization block_k 48");
}

/* The classic kernel's loader copies tiles in passes of 32 * num_warps 16-byte chunks: odd
 * warps leave a pass short of the swizzle's 1 KiB and at most 16 passes fit each thread's
 * masks, so the check refuses those candidates (which would not compile, or would copy wrong
 * rows) before compiling. */
TEST(classic_check_refuses_what_the_loader_cannot_copy)
{
    bt_target h100;
    CHECK_EQ(bt_target_from_arch("sm_90a", &h100), 0);
    bt_variant v = {BT_IN_FP8, BT_OUT_BF16, 128, 128};
    char why[300];
    bt_cand one = {{64, 64, 64, 1, 1, 2}}, fits = {{128, 32, 128, 1, 2, 2}}, over = {{256, 16, 128, 1, 2, 2}};
    CHECK_EQ(bt_family_classic.check(&one, &v, &h100, why, sizeof why), BT_REJ_SHAPE);
    CHECK_CONTAINS(why, "num_warps 1: ");
    CHECK(!strchr(why, '\n'));
    CHECK_EQ(bt_cl_passes(128, 128, 2), 16);
    CHECK_EQ(bt_family_classic.check(&fits, &v, &h100, why, sizeof why), BT_REJ_NONE);
    CHECK_EQ(bt_cl_passes(256, 128, 2), 32);
    CHECK_EQ(bt_family_classic.check(&over, &v, &h100, why, sizeof why), BT_REJ_SHAPE);
    CHECK_STREQ(why, "2 warps copy the 256 x 128 A tile and the 16 x 128 B tile in 32 and 2 passes, the loader "
                     "keeps at most 16");
    bt_cand narrow = {{64, 64, 16, 1, 4, 2}}; /* no pass plan (nor swizzle) for 16-byte rows */
    CHECK_EQ(bt_family_classic.check(&narrow, &v, &h100, why, sizeof why), BT_REJ_SHAPE);
    CHECK_CONTAINS(why, "BLOCK_SIZE_K 16: ");
    /* The same rows per pass as the kernel's 32 * warps threads over BK / 16 chunks per row. */
    CHECK_EQ(bt_cl_pass_rows(64, 4), 32);
    CHECK_EQ(bt_cl_pass_rows(128, 8), 32);
}
