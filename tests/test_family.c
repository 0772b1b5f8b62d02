#include "family.h"
#include "harness.h"
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
