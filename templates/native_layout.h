/* The native kernel's geometry, included by native.cuh and by the tuner's C code so the
 * shared-memory check before compiling is the kernel's real allocation. C11 and C++17. */
#ifndef BT_NATIVE_LAYOUT_H
#define BT_NATIVE_LAYOUT_H

#ifdef __cplusplus
#define BT_NLAYOUT_FN static constexpr __host__ __device__ inline
#else
#define BT_NLAYOUT_FN static inline
#endif

/* TMA writes 128-byte-swizzled tiles that must start on the 1 KiB swizzle pattern; the dynamic
 * shared-memory base is aligned up by hand, hence one extra KiB. */
#define BT_NV_ALIGN 1024

/* Rows of A one TMA copy brings per stage: the whole tile, except that when all of M fits in
 * one tile only M rounded up to the 8-row swizzle pattern comes (the host encodes the tensor
 * map's box with the same rule). Small-M GEMMs then do not move zero-filled rows through the
 * TMA unit; wgmma still reads the tile's other rows, whatever the slot held, into
 * accumulator rows that are never stored. */
BT_NLAYOUT_FN int bt_nv_a_rows(int bm, long m) { return m >= bm ? bm : (int)((m + 7) / 8 * 8); }

/* Consumer warpgroups: one per 64-row slab of the tile; one producer warpgroup more. */
BT_NLAYOUT_FN int bt_nv_consumers(int bm) { return bm / 64; }
BT_NLAYOUT_FN int bt_nv_threads(int bm) { return 128 * (bt_nv_consumers(bm) + 1); }

/* Each stage's scales: BM activation scales of the stage's K block and up to four weight
 * scales (a tile touches at most three weight-scale blocks; four keeps 16-byte alignment). */
BT_NLAYOUT_FN long bt_nv_scale_bytes(int bm) { return 4L * bm + 16; }

/* With split-K over a cluster of `split` CTAs, the first one receives the others' fp32 partial
 * tiles: (split - 1) BM x BN slots. */
BT_NLAYOUT_FN long bt_nv_reduce_bytes(int bm, int bn, int split) { return (long)(split - 1) * bm * bn * 4; }

/* 16-bit outputs leave through shared memory: each consumer warpgroup writes its 64 x BN slab
 * there and one thread hands it to TMA stores, which drain while the next tile's main loop runs.
 * fp32 outputs (twice the bytes) are stored from registers. */
BT_NLAYOUT_FN long bt_nv_store_bytes(int bm, int bn, int out_bytes) { return out_bytes == 2 ? 2L * bm * bn : 0; }

/* Columns of one TMA store box (64 rows): the widest of 64, 32, 16 and 8 that divides BN, so a
 * box row is 128, 64, 32 or 16 bytes and takes the swizzle of that width. */
BT_NLAYOUT_FN int bt_nv_store_cols(int bn) { return bn % 64 == 0 ? 64 : bn % 32 == 0 ? 32 : bn % 16 == 0 ? 16 : 8; }

/* Whether a launch stores through the slab: the kernel and the launcher both decide with this
 * (a TMA tensor needs 16-byte aligned rows and base). */
BT_NLAYOUT_FN int bt_nv_tma_store(int out_bytes, long n, unsigned long long c_addr)
{
    return out_bytes == 2 && n % 8 == 0 && c_addr % 16 == 0;
}

/* The output slabs, stages of A (BM x BK) and B (BN x BK) tiles, then each stage's scales, the
 * split-K slots, a full and an empty mbarrier per stage, and the two split-K mbarriers. */
BT_NLAYOUT_FN long bt_nv_smem_bytes(int bm, int bn, int bk, int stages, int split, int out_bytes)
{
    return bt_nv_store_bytes(bm, bn, out_bytes) +
           (long)stages * ((long)bm * bk + (long)bn * bk + bt_nv_scale_bytes(bm)) + bt_nv_reduce_bytes(bm, bn, split) +
           16L * stages + 16 + BT_NV_ALIGN;
}

/* Registers per consumer thread: after setmaxnreg with one CTA per SM (native.cuh says how they
 * are split); with `occ` CTAs per SM every thread keeps its share of the register file (64 K
 * registers), rounded down to the allocation unit of 8. */
BT_NLAYOUT_FN int bt_nv_consumer_regs(int bm, int occ)
{
    return occ == 1 ? (bm / 64 == 2 ? 224 : 232) : 65536 / (occ * bt_nv_threads(bm)) / 8 * 8;
}

/* Shared memory one SM holds for its CTAs (228 KiB on sm_90): the per-CTA opt-in limit plus the
 * 1 KiB each CTA reserves; `occ` CTAs of `smem` bytes fit when occ * (smem + 1 KiB) does. */
BT_NLAYOUT_FN long bt_nv_sm_smem(long smem_optin) { return smem_optin + 1024; }

/* A consumer thread holds BN / 2 fp32 of running sum and BN / 2 of K-block partial, and a
 * second partial, so the next K block's wgmma runs while this one is promoted, where the
 * registers allow it. Beyond the accumulators: addresses, scales and counters, and with one
 * partial the epilogue's temporaries too, which fp32 outputs (stored from registers) need
 * more of: with 16-bit outputs one partial fits up to 208 columns, with fp32 ones 160. The
 * counts keep every candidate from spilling. */
BT_NLAYOUT_FN int bt_nv_double_partial(int bm, int bn, int occ)
{
    return 3 * bn / 2 + 32 <= bt_nv_consumer_regs(bm, occ);
}
BT_NLAYOUT_FN int bt_nv_consumer_need(int bm, int bn, int occ, int out_bytes)
{
    return bt_nv_double_partial(bm, bn, occ) ? 3 * bn / 2 + 32 : bn + (out_bytes == 2 ? 16 : 64);
}

#endif
