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

/* Whether a candidate runs on the warpgroup (wgmma) path: needs sm_90a, whole m64 tiles and
 * whole warpgroups; smaller tiles use mma.sync m16n8k32, as Triton lowers them. */
BT_LAYOUT_FN int bt_cl_use_wgmma(int sm90a, int bm, int bn, int warps)
{
    if (!sm90a || bm % 64 != 0 || warps % 4 != 0)
        return 0;
    int wgs = warps / 4;
    return (bm / 64) % wgs == 0 || bn % (8 * wgs) == 0;
}

/* mma.sync path: warps split the tile over M (16-row steps) and N (8-column steps), keeping
 * warp tiles near square; warps left over split each stage's K steps (wk). Returns the warps
 * along N when want_n, else along M. */
BT_LAYOUT_FN int bt_cl_warp_split(int bm, int bn, int warps, int want_n)
{
    int wm = 1, wn = 1;
    for (int r = warps; r > 1; r /= 2) {
        int can_m = bm / (wm * 2) >= 16, can_n = bn / (wn * 2) >= 8;
        if (can_m && (!can_n || bm / wm >= bn / wn))
            wm *= 2;
        else if (can_n)
            wn *= 2;
        else
            break;
    }
    return want_n ? wn : wm;
}

BT_LAYOUT_FN int bt_cl_warps_m(int bm, int bn, int warps) { return bt_cl_warp_split(bm, bn, warps, 0); }
BT_LAYOUT_FN int bt_cl_warps_n(int bm, int bn, int warps) { return bt_cl_warp_split(bm, bn, warps, 1); }

BT_LAYOUT_FN int bt_cl_warps_k(int bm, int bn, int warps)
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

/* Warps that split K hand their partial tiles to warp-k 0 through shared memory after the
 * main loop, reusing the pipeline's space. */
BT_LAYOUT_FN long bt_cl_reduce_bytes(int wgmma, int bm, int bn, int warps)
{
    return wgmma ? 0 : (long)(bt_cl_warps_k(bm, bn, warps) - 1) * bm * bn * 4;
}

BT_LAYOUT_FN long bt_cl_smem_bytes(int wgmma, int bm, int bn, int bk, int warps, int stages,
                                   int qbn)
{
    long pipe = stages * bt_cl_stage_bytes(bm, bn, bk, qbn);
    long red = bt_cl_reduce_bytes(wgmma, bm, bn, warps);
    return (pipe > red ? pipe : red) + BT_CL_ALIGN;
}

#endif
