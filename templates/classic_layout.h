/* The classic kernel's geometry: warp layout and shared-memory size. Included by classic.cuh
 * and by the tuner's C code, so the tuner's check before compiling is the kernel's real
 * allocation and the two cannot drift. Written in the common subset of C11 and C++17. */
#ifndef BT_CLASSIC_LAYOUT_H
#define BT_CLASSIC_LAYOUT_H

#ifdef __cplusplus
#define BT_LAYOUT_FN static constexpr __host__ __device__ inline
#else
#define BT_LAYOUT_FN static inline
#endif

/* wgmma's 128-byte swizzle repeats every 8 rows of 128 B, so operand tiles start on 1 KiB;
 * the dynamic shared-memory base is aligned up by hand, hence one extra KiB. */
#define BT_CL_ALIGN 1024

/* Weight-scale blocks a BN-wide tile can touch (tiles need not align with blocks of qbn). */
BT_LAYOUT_FN int bt_cl_bscales(int bn, int qbn) { return (bn - 1) / qbn + 2; }

/* One pipeline stage: an A tile and a B tile (rows of BK bytes), As for the tile's rows and
 * its Bs. The kernel keeps all stages' A tiles first, then B tiles, then scales, so every
 * operand tile starts on a multiple of its swizzle pattern (BM * BK and BN * BK are). */
BT_LAYOUT_FN long bt_cl_stage_bytes(int bm, int bn, int bk, int qbn)
{
    return (long)bm * bk + (long)bn * bk + 4L * (bm + bt_cl_bscales(bn, qbn));
}

/* The loader's copy plan: BK / 16 threads share a tile row in 16-byte chunks, so one pass of
 * the 32 * warps threads covers this many rows; odd warps leave a pass short of the 1 KiB the
 * swizzle repeats over (the kernel's "chunk plan" assertion). */
BT_LAYOUT_FN int bt_cl_pass_rows(int bk, int warps) { return 32 * warps / (bk / 16); }

/* Passes over a tile of `rows` rows; each thread keeps one bit per pass in 16-bit halves of a
 * mask, so at most BT_CL_MAX_PASSES. */
#define BT_CL_MAX_PASSES 16
BT_LAYOUT_FN int bt_cl_passes(int rows, int bk, int warps)
{
    return (rows + bt_cl_pass_rows(bk, warps) - 1) / bt_cl_pass_rows(bk, warps);
}

/* Whether a candidate runs on the warpgroup (wgmma) path: needs sm_90a, whole m64 tiles and
 * whole warpgroups; smaller tiles use mma.sync m16n8k32, as Triton lowers them. */
BT_LAYOUT_FN int bt_cl_use_wgmma(int sm90a, int bm, int bn, int warps)
{
    if (!sm90a || bm % 64 != 0 || warps % 4 != 0)
        return 0;
    int wgs = warps / 4;
    return (bm / 64) % wgs == 0 || bn % (8 * wgs) == 0;
}

/* mma.sync path, with warps laid over the tile as Triton lays them: each warp holds rm
 * 16-row and rn 8-column MMA tiles, and each doubling of the warps halves the larger count
 * (rows on a tie). Once a warp is down to one MMA tile, further warps go along M onto rows
 * that other warps already compute: Triton gives them the same work again, and so does this
 * kernel, so that num_warps costs here what it costs in SGLang's kernel. Returns the warps
 * along N when want_n, else along M (counting the repeating ones). */
BT_LAYOUT_FN int bt_cl_warp_split(int bm, int bn, int warps, int want_n)
{
    int wm = 1, wn = 1, rm = bm / 16, rn = bn / 8;
    while (wm * wn < warps) {
        if (rm >= rn) {
            wm *= 2;
            rm = rm > 1 ? rm / 2 : 1;
        } else {
            wn *= 2;
            rn /= 2;
        }
    }
    return want_n ? wn : wm;
}

/* Warps along M over distinct rows, along N, and the copies of that layout (1 unless warps
 * outnumber the tile's MMA tiles). */
BT_LAYOUT_FN int bt_cl_warps_m(int bm, int bn, int warps)
{
    int wm = bt_cl_warp_split(bm, bn, warps, 0);
    return wm * 16 > bm ? bm / 16 : wm;
}
BT_LAYOUT_FN int bt_cl_warps_n(int bm, int bn, int warps) { return bt_cl_warp_split(bm, bn, warps, 1); }
BT_LAYOUT_FN int bt_cl_warp_copies(int bm, int bn, int warps)
{
    return warps / (bt_cl_warps_m(bm, bn, warps) * bt_cl_warps_n(bm, bn, warps));
}

/* fp32 accumulator values each thread keeps for the running sum (the per-stage partial
 * product needs as many again). */
BT_LAYOUT_FN long bt_cl_acc_per_thread(int wgmma, int bm, int bn, int warps)
{
    if (wgmma)
        return (long)bm * bn / (32L * warps);
    return (long)(bm / bt_cl_warps_m(bm, bn, warps)) * (bn / bt_cl_warps_n(bm, bn, warps)) / 32;
}

BT_LAYOUT_FN long bt_cl_smem_bytes(int bm, int bn, int bk, int stages, int qbn)
{
    return stages * bt_cl_stage_bytes(bm, bn, bk, qbn) + BT_CL_ALIGN;
}

#endif
