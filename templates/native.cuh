// The native W8A8 block-scaled GEMM for Hopper (sm_90a), same inputs and result as the classic
// kernel, free of Triton's shape of things:
//
// - persistent: a grid of at most BT_OCC blocks per SM walks the output tiles in grouped order;
// - warp-specialized: one producer warpgroup, one thread of which drives the TMA copy engine
//   through a BT_STAGES-deep ring of shared-memory slots guarded by full/empty mbarriers, and
//   BT_BM / 64 consumer warpgroups, each computing a 64 x BT_BN slab with wgmma;
// - clusters of BT_CLUSTER CTAs on vertically adjacent tiles share each B tile: every CTA loads
//   1/BT_CLUSTER of its rows and multicasts them to all, which divides the B traffic from L2
//   by the cluster size;
// - or split-K for small M, where too few tiles leave SMs idle: a cluster of BT_SPLIT CTAs
//   shares one tile, each walks 1/BT_SPLIT of the K blocks, and the others store their fp32
//   partial tiles into the first one's shared memory (distributed shared memory), which adds
//   them up and writes C: no workspace, no atomics;
// - the block scales: every K block's wgmma partial is promoted into the fp32 sum times
//   As[m, kb] * Bs[n / QBN, kb]; producer warps copy each stage's scales into shared memory
//   beside its tiles, so the consumers never wait on a global load;
// - the consumer warpgroups take turns issuing wgmma, and where the registers allow keep two
//   K-block partials, so that one K block's wgmma runs while the last one is promoted;
// - the epilogue writes 16-bit outputs into a shared-memory slab and hands it to TMA stores,
//   which drain while the consumers already run the next tile (the producer has been filling
//   the ring with it); fp32 outputs are stored straight from registers.
//
// BT_BN may be any multiple of 8 up to 256 (of 16 with clusters, and for INT8 above 32), so tiles
// can be sized to fill all SMs. Compile-time parameters: BT_BM (64 or 128), BT_BN, BT_STAGES (at
// least 2), BT_GM, BT_CLUSTER (1 or 2), BT_SPLIT (1, 2 or 4; not with BT_CLUSTER 2), BT_QBN,
// BT_QBK (the K step; 64 or 128), BT_IN_INT8, BT_INT8_CONVERT (0 or 1, see partial_f32), BT_OCC
// (CTAs per SM: 1, or 2 for small tiles, two rings per SM that each keep a share of the register
// file), BT_OUT.
#include "async.cuh"
#include "common.cuh"
#include "native_layout.h"
#include "wgmma.cuh"

namespace bt {
namespace native {

constexpr int BM = BT_BM, BN = BT_BN, STAGES = BT_STAGES, GM = BT_GM, CLUSTER = BT_CLUSTER, SPLIT = BT_SPLIT;
constexpr int CTAS = CLUSTER * SPLIT; // CTAs per cluster
constexpr int QBN = BT_QBN, BK = BT_QBK;
constexpr bool INT8 = BT_IN_INT8, OFFSET = BT_IN_INT8 && BT_INT8_CONVERT; // OFFSET: see partial_f32
constexpr int OFFSET_BITS = 0x4B400000; // the float OFFSET_F = 1.5 * 2^23
constexpr float OFFSET_F = 12582912.f;
constexpr int OUT = BT_OUT, OCC = BT_OCC;
constexpr int NC = bt_nv_consumers(BM), THREADS = bt_nv_threads(BM);
// Registers per thread after setmaxnreg. Reallocation only moves registers within the CTA's
// launch allocation (168 per thread for 384 threads, 232 for 256): the producer gives up what
// the consumers take, 128 * (168 - 56) = 256 * (224 - 168) with two consumer warpgroups. With
// one (64-row tiles) the consumers already have their 232 and nothing moves. With two CTAs per
// SM the launch gives each thread its share of half the register file, and no reallocation
// takes place.
constexpr int PRODUCER_REGS = 56, CONSUMER_REGS = bt_nv_consumer_regs(BM, OCC);
// Two K-block partials: K block kb + 1's wgmma is issued before kb's partial is promoted.
constexpr bool DOUBLE = bt_nv_double_partial(BM, BN, OCC);
constexpr int A_BYTES = BM * BK, B_BYTES = BN * BK, STAGE_BYTES = A_BYTES + B_BYTES;
constexpr int S_BYTES = bt_nv_scale_bytes(BM); // one stage's scales: As[BM], then Bs[4]
constexpr int B_SHARE = BN / CLUSTER; // rows of each B tile one CTA of the cluster loads
constexpr int FN = BN / 8;            // m16n8 fragments per row band of a thread's accumulators
// Weight-scale blocks a tile can touch: one when BN divides QBN (tiles never straddle one).
constexpr int NBS = QBN % BN == 0 ? 1 : (BN - 1) / QBN + 2;
static_assert(NBS <= 3, "at most three weight-scale blocks per tile");
// Where tiles straddle weight-scale blocks, a tile starts at one of QBN / G offsets within its
// block, G = gcd(BN, QBN) (at most 16 of them); each offset fixes which block every fragment
// column is in. Each offset gets its own copy of the main loop, in which that is a constant:
// picking each fragment's scale at run time took a fifth of the time of 128 x 144 tiles and
// 3-4% of 128 x 72 ones on the H100 (BENCHMARKS.md).
__host__ __device__ constexpr int gcd(int a, int b) { return b == 0 ? a : gcd(b, a % b); }
constexpr int G = gcd(BN, QBN), OFFSETS = NBS == 1 ? 1 : QBN / G;
// How many K blocks' share of the offset the running sums carry before it is taken off (see
// partial_f32): 8 measured 3-13% faster than 2 and within 4% of 16, whose rounding is twice
// 8's. Carrying it takes registers for the pending scales, two per weight-scale block: with one
// partial, or tiles over more than one block, some candidates then spill, so those subtract
// it from each partial instead (1: no offset carried).
constexpr int OFFSET_GROUP = DOUBLE && NBS == 1 ? 8 : 1;
// Where the offset is carried, each partial register array also runs on through two of its K
// blocks (a chain) before the wgmma starts it from zero again: see partial_f32.
constexpr bool CHAIN = OFFSET && OFFSET_GROUP > 1;
static_assert(BM % 64 == 0 && BM <= 128, "one or two m64 consumer slabs");
static_assert(BN % 8 == 0 && BN <= 256 && (!INT8 || BN <= 32 || BN % 16 == 0), "wgmma N");
// One stage cannot run: with two partials a K block's full slot is waited for before the one
// before it is released.
static_assert(STAGES >= 2, "ring depth");
static_assert(BK == 64 || BK == 128, "one swizzle row per K step");
static_assert(QBN % 8 == 0, "a thread's column pair shares a weight-scale block");
static_assert(CLUSTER == 1 || CLUSTER == 2, "cluster size");
static_assert((SPLIT == 1 || SPLIT == 2 || SPLIT == 4) && (SPLIT == 1 || CLUSTER == 1), "split-K");
// Each stage's tiles, and each CTA's share of a multicast B tile, start on a whole swizzle
// pattern (8 rows).
static_assert(A_BYTES % 1024 == 0 && B_SHARE % 8 == 0, "tile alignment");

typedef typename out_type<OUT>::type out_t;

// The output slab of each consumer warpgroup (16-bit outputs): BN / SC boxes of 64 rows x SC
// columns, each laid out as the TMA store reads it, rows swizzled at their width.
constexpr int C_BYTES = (int)bt_nv_store_bytes(BM, BN, sizeof(out_t)), SC = bt_nv_store_cols(BN);
constexpr int C_BOX = 64 * SC * 2;

// Shared memory: output slabs, A slots, B slots, scale slots, split-K slots, then the full and
// empty barrier of each slot and the split-K barriers (partials arrived, in the first CTA; slot
// free, in the others).
constexpr int OFF_C = 0, OFF_A = C_BYTES, OFF_B = OFF_A + STAGES * A_BYTES, OFF_S = OFF_A + STAGES * STAGE_BYTES;
constexpr int OFF_R = OFF_S + STAGES * S_BYTES, OFF_BAR = OFF_R + (int)bt_nv_reduce_bytes(BM, BN, SPLIT);
static_assert(OFF_BAR + 16 * STAGES + 16 + BT_NV_ALIGN == bt_nv_smem_bytes(BM, BN, BK, STAGES, SPLIT, sizeof(out_t)),
              "layout and the tuner's formula disagree");
// Each store box starts on its swizzle pattern (at most 1 KiB), like the tiles.
static_assert(C_BOX % 1024 == 0 && OFF_A % 1024 == 0, "slab alignment");
constexpr int SLOT_FLOATS = BM * BN; // one partial tile, in consumer-thread order

typedef wgmma<INT8, BN> mma;
typedef typename mma::acc acc_t;

// Scale warps: one that copies each stage's scales, or (windowed, see the producer) one per 64
// rows of the tile; each lane arrives on a full barrier once its scales are there.
constexpr int SCALE_WARPS = BM / 64;

// Two 16-bit outputs packed into one word, x0 in the low half (cvt packs its first source
// into the high half).
template <int O> __device__ __forceinline__ u32 pack_pair(float x0, float x1)
{
    u32 v;
    if (O == 0)
        asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(v) : "f"(x1), "f"(x0));
    else
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(v) : "f"(x1), "f"(x0));
    return v;
}

// store_pair for an in-range, pair-aligned p: one conversion of both values, one store.
template <int O> __device__ __forceinline__ void store_pair_fast(typename out_type<O>::type *p, float x0, float x1)
{
    if (O == 2) {
        float2 f;
        f.x = x0, f.y = x1;
        *(float2 *)p = f;
    } else {
        *(u32 *)p = pack_pair<O>(x0, x1);
    }
}

// Stores 8x8 matrices of 16-bit pairs (.x4: four, .x2: two): lane l gives the address of row
// l % 8 of matrix l / 8, and register i of each lane holds its pair of row lane / 4 of matrix
// i, columns 2 * (lane % 4): exactly an m16n8 accumulator fragment packed into pairs.
__device__ __forceinline__ void stmatrix_x4(u32 addr, u32 a, u32 b, u32 c, u32 d)
{
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(a), "r"(b),
                 "r"(c), "r"(d)
                 : "memory");
}
__device__ __forceinline__ void stmatrix_x2(u32 addr, u32 a, u32 b)
{
    asm volatile("stmatrix.sync.aligned.m8n8.x2.shared.b16 [%0], {%1, %2};\n" ::"r"(addr), "r"(a), "r"(b) : "memory");
}

__device__ __forceinline__ void st_shared_f32(u32 addr, float v)
{
    asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(addr), "f"(v) : "memory");
}

// Scales of K blocks kb .. kb + 3 of one row of As or Bs (row-major, ks per row, rows 16-byte
// aligned; zeros past the row's end or for a row that does not exist): one 16-byte load where
// the window is aligned.
__device__ __forceinline__ void load_scales4(const float *row, int kb, int ks, bool exists, float (&v)[4])
{
    if (exists && kb % 4 == 0 && kb + 3 < ks) {
        const float4 t = __ldg((const float4 *)(row + kb));
        v[0] = t.x, v[1] = t.y, v[2] = t.z, v[3] = t.w;
        return;
    }
#pragma unroll
    for (int j = 0; j < 4; j++)
        v[j] = exists && kb + j < ks ? __ldg(row + kb + j) : 0.f;
}

__device__ __forceinline__ float ld_shared_f32(u32 addr)
{
    float v;
    asm volatile("ld.shared.f32 %0, [%1];\n" : "=f"(v) : "r"(addr) : "memory");
    return v;
}

// A K block's wgmma partial as a float. An INT8 partial x is a sum of at most 128 products of
// two 8-bit codes, so |x| <= 2^21. With OFFSET (INT8_CONVERT 1) x is added to the bits of
// 1.5 * 2^23, a float whose steps are 1, which gives the float 1.5 * 2^23 + x exactly for
// |x| <= 2^22: no conversion instruction, which runs at a lower rate. The promotion adds that
// times the scale, and the offset's share of the sums is taken off every OFFSET_GROUP K blocks
// (take_offset). Until then a sum carries up to OFFSET_GROUP offsets times a scale (1e8 times
// it: finite for scale products below 3e30), and rounds to a few units of x per K block: what 1
// costs in accuracy against 0's exact conversion (BENCHMARKS.md has the measured errors).
// With CHAIN, K blocks i and i + 2 of one partial register array form a chain: promoting i
// adds the offset's bits into the array in place (O + x_i), i + 2's wgmma adds onto that (O +
// x_i + x_(i+2), |x_i + x_(i+2)| <= 2^22, still exact), which is read as it is. Promoting i
// with the scale s_i - s_(i+2) and i + 2 with s_(i+2) adds s_i x_i + s_(i+2) x_(i+2), plus the
// offset times the scales used: one integer add per element every two K blocks instead of one
// in each. (Setting the array to the offset before i's wgmma instead measured slower: a wgmma
// that adds onto its registers costs more than one that starts from zero.) Where no offset
// is carried, a float subtraction leaves x exactly.
template <typename T> __device__ __forceinline__ float partial_f32(T x)
{
    if constexpr (CHAIN)
        return __int_as_float((int)x);
    else if constexpr (OFFSET)
        return __int_as_float((int)x + OFFSET_BITS) - OFFSET_F;
    else
        return (float)x;
}

// The weight-scale block of each fragment column j of a tile that starts `off` columns into its
// block, as 2-bit field j.
__host__ __device__ constexpr u64 blocks_at(int off)
{
    u64 which = 0;
    for (int j = 0; j < FN; j++)
        which |= (u64)((off + j * 8) / QBN) << (2 * j);
    return which;
}

// blocks_at(off) as a type, for a generic lambda to take as a compile-time constant.
template <u64 V> struct blocks_const {
    static constexpr u64 value = V;
};

// f(blocks_const<blocks_at(offset)>{}) for the tile starting at column n0.
template <int I = 0, typename F> __device__ __forceinline__ void with_blocks(int n0, F &&f)
{
    if constexpr (I + 1 < OFFSETS) {
        if (n0 % QBN != I * G)
            return with_blocks<I + 1>(n0, f);
    }
    f(blocks_const<blocks_at(I * G)>{});
}

// v[w] for w < N without a run-time index into a register array (which would go to local memory).
template <int N> __device__ __forceinline__ float pick(const float (&v)[N], int w)
{
    return N == 1 || w == 0 ? v[0] : N == 2 || w == 1 ? v[1 % N] : v[N - 1];
}

// The cluster's unit of work u covers tile rows CLUSTER*um .. and tile column un; CTA `rank`
// takes row CLUSTER*um + rank (past the last row when tiles_m is not a multiple: that CTA
// still loads and multicasts its share of B, and stores nothing).
// With split-K every CTA of the cluster takes the same tile (rank 0 here).
__device__ __forceinline__ void tile_of(int u, int tiles_m, int tiles_n, int rank, int &tm, int &tn)
{
    int units_m = (tiles_m + CLUSTER - 1) / CLUSTER, um;
    grouped_tile(u, units_m, tiles_n, GM, um, tn);
    tm = um * CLUSTER + rank;
}

// The K blocks split-K rank r walks: [r * kblocks / SPLIT, (r + 1) * kblocks / SPLIT), possibly
// none when there are fewer K blocks than CTAs.
__device__ __forceinline__ void k_range(int kblocks, int r, int &kb0, int &kb1)
{
    kb0 = r * kblocks / SPLIT, kb1 = (r + 1) * kblocks / SPLIT;
}

} // namespace native
} // namespace bt

extern "C" __global__ void __launch_bounds__(bt::native::THREADS, bt::native::OCC)
bt_native_gemm(const __grid_constant__ bt::tensor_map tmA, const __grid_constant__ bt::tensor_map tmB,
               const __grid_constant__ bt::tensor_map tmC, bt::native::out_t *__restrict__ C, const float *__restrict__ As,
               const float *__restrict__ Bs, int M, int N, int K)
{
    using namespace bt;
    using namespace bt::native;
    test_plants();
    extern __shared__ u8 dyn[];
    const u32 base = smem_addr(aligned_dyn<BT_NV_ALIGN>(dyn));
    const u32 full0 = base + OFF_BAR, empty0 = full0 + 8 * STAGES;
    const u32 reduced = empty0 + 8 * STAGES, slot_free = reduced + 8;
    // The warpgroup, broadcast from lane 0 so that the compiler knows it is the same across the
    // warp: what derives from it (the wgmma descriptors) then stays in uniform registers.
    const int wg = __shfl_sync(0xffffffff, (int)threadIdx.x / 128, 0), tid = threadIdx.x % 128;
    const int crank = CTAS > 1 ? (int)cluster_rank() : 0;
    const int rank = CLUSTER > 1 ? crank : 0, krank = SPLIT > 1 ? crank : 0;
    const int cluster = blockIdx.x / CTAS, clusters = gridDim.x / CTAS;
    const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
    const int units = (tiles_m + CLUSTER - 1) / CLUSTER * tiles_n;
    const int kblocks = (K + BK - 1) / BK, ksc = kblocks;
    const int a_bytes = bt_nv_a_rows(BM, M) * BK; // what one A copy brings
    int kb0, kb1;
    k_range(kblocks, krank, kb0, kb1);
    // The producer warpgroup works out its first tile first (with a programmatic launch, while
    // the kernel before still runs): tile_of's two divisions by run-time values are a chain of
    // dependent instructions that took about 0.25 us, and the first copy needs the result.
    // With one row of units (M <= BM * CLUSTER: small batches) the grouped order is the units'
    // column order, and skipping those divisions brings the first copy about 0.15 us forward.
    // Only here: in tile_of, which the loops call per tile, it would change their code too.
    int tm0 = 0, tn0 = 0;
    if (wg == NC && cluster < units) {
        if (tiles_m <= CLUSTER)
            tm0 = rank, tn0 = cluster;
        else
            tile_of(cluster, tiles_m, tiles_n, rank, tm0, tn0);
        asm volatile("" ::"r"(tm0), "r"(tn0)); // here, not sunk past the barrier
    }
    // The coordinates of the producer's unit u, which this CTA walks from `cluster` on.
    auto unit_tile = [&](int u, int &tm, int &tn) {
        if (u == cluster)
            tm = tm0, tn = tn0;
        else
            tile_of(u, tiles_m, tiles_n, rank, tm, tn);
    };

    // Whether the scale warps load four K blocks' scales at a time (see the producer).
    const bool windowed = BM == 128 && ksc % 4 == 0 && ksc > 4 && (u64)As % 16 == 0 && (u64)Bs % 16 == 0;
    // One stage's A and B tiles, by TMA, from one thread, which also expects their bytes on the
    // stage's full barrier.
    auto copy_tiles = [&](int stage, int kb, int tm, int tn) {
        const u32 full = full0 + 8 * stage, sb = base + OFF_B + stage * B_BYTES;
        mbar_expect_tx(full, a_bytes + B_BYTES); // out-of-range rows land as zeros
        tma_load_2d(base + OFF_A + stage * A_BYTES, &tmA, kb * BK, tm * BM, full);
        if (CLUSTER > 1)
            tma_load_2d_multicast(sb + rank * B_SHARE * BK, &tmB, kb * BK, tn * BN + rank * B_SHARE, full,
                                  (u16)((1 << CLUSTER) - 1));
        else
            tma_load_2d(sb, &tmB, kb * BK, tn * BN, full);
    };
    // Without clusters the producer thread sets up the barriers and copies the first K block's
    // tiles right after (`early`), without waiting for the consumers or going through the first
    // steps of its loop: the first copy goes out about 0.25 us sooner.
    const int early = CTAS == 1 && cluster < units && kb1 > kb0;
    if (threadIdx.x == (CTAS == 1 ? NC * 128 : 0)) {
        for (int s = 0; s < STAGES; s++) {
            mbar_init(full0 + 8 * s, 1 + 32 * (windowed ? SCALE_WARPS : 1)); // TMA expect_tx (+ bytes), scale lanes
            mbar_init(empty0 + 8 * s, NC * CLUSTER);    // every consumer warpgroup of the cluster
        }
        if (SPLIT > 1) { // (an mbarrier of count 0 is invalid: ptxas crashes on one)
            mbar_init(reduced, (SPLIT - 1) * NC * 128); // every consumer thread of the other CTAs
            mbar_init(slot_free, NC * 128);             // every consumer thread of the first CTA
        }
        mbar_fence_init();
    }
    if (CTAS > 1) {
        cluster_sync();
    } else if (wg == NC) {
        // The producer warpgroup does not wait for the consumers: the scale warps wait for the
        // set-up (named barrier 6), and every warp marks it done for the consumers (barrier 7).
        if (tid < 32 * (1 + SCALE_WARPS))
            named_sync(6, 32 * (1 + SCALE_WARPS));
        named_arrive(7, THREADS);
        // The early copy waits for the grid before on its own: issued after the common wait
        // below instead, it measured 2-4% slower with a programmatic launch.
        if (early && tid == 0) {
            griddep_wait();
            copy_tiles(0, kb0, tm0, tn0);
        }
    } else {
        named_sync(7, THREADS);
    }
    // A programmatic launch may have started this grid before the kernel before it finished:
    // no thread touches global memory before that kernel has completed. (Requesting the first
    // B tiles before this wait measured 8-13% slower at small M without a programmatic launch,
    // and mixed with one.)
    griddep_wait();

    if (wg == NC) {
        // Producer warpgroup: hands most of its registers to the consumers (with one CTA per
        // SM); one thread issues the tile copies, the next warp (or BM / 64 warps) the scales.
        if (OCC == 1)
            regs_dealloc<PRODUCER_REGS>();
        if (tid == 0) {
            prefetch_tensor_map(&tmA);
            prefetch_tensor_map(&tmB);
            int stage = early, phase = 0;
            for (int u = cluster; u < units; u += clusters) {
                int tm, tn;
                unit_tile(u, tm, tn);
                for (int kb = kb0 + (u == cluster ? early : 0); kb < kb1; kb++) {
                    // Free in every CTA of the cluster: the multicast below writes them all.
                    mbar_wait(empty0 + 8 * stage, phase ^ 1);
                    copy_tiles(stage, kb, tm, tn);
                    if (++stage == STAGES)
                        stage = 0, phase ^= 1;
                }
            }
            // A programmatically launched successor (blocktune_options.pdl) may start its
            // set-up now, in this grid's tail; it waits for this grid's end before it touches
            // what this grid writes or reads. Letting it start with this grid instead measured
            // 1-14% slower on 128-row tiles and up to 16% on 64-row ones, and no faster.
            griddep_launch_dependents();
        } else if (!windowed && tid / 32 == 1) {
            // The scale warp: the same walk over tiles and K blocks; cp.async copies the
            // stage's BM activation scales (As is row-major, so a K block's column is strided)
            // and the tile's weight scales, and each lane's arrival waits for its own copies.
            const int lane = tid % 32, nblocks = (N + QBN - 1) / QBN;
            int stage = 0, phase = 0;
            for (int u = cluster; u < units; u += clusters) {
                int tm, tn;
                unit_tile(u, tm, tn);
                const int nb0 = tn * BN / QBN;
                for (int kb = kb0; kb < kb1; kb++) {
                    mbar_wait(empty0 + 8 * stage, phase ^ 1);
                    const u32 ss = base + OFF_S + stage * S_BYTES;
#pragma unroll
                    for (int i = lane; i < BM; i += 32) {
                        const int r = tm * BM + i; // rows past M read as zero
                        cp_async4(ss + 4 * i, As + (long)(r < M ? r : 0) * ksc + kb, r < M);
                    }
                    if (lane < NBS) {
                        const int nb = nb0 + lane < nblocks ? nb0 + lane : nblocks - 1;
                        cp_async4(ss + 4 * (BM + lane), Bs + (long)nb * ksc + kb, true);
                    }
                    cp_async_arrive(full0 + 8 * stage);
                    if (++stage == STAGES)
                        stage = 0, phase ^= 1;
                }
            }
        } else if (windowed && tid / 32 >= 1 && tid / 32 <= SCALE_WARPS) {
            // Windowed scale warps, for 128-row tiles whose scale rows are 16-byte aligned. A K
            // block's column of As is 128 words 4 * ks bytes apart; with ks a multiple of 32 (K
            // a multiple of 4096) they all fall in one L1 bank, with ks = 56 in four, so the
            // copies above serialize 8- to 32-fold in the L1 data path that the tensor cores'
            // operands share (K = 16384 ran 10% slower per K block than K = 16512). Each lane
            // instead loads K blocks kb .. kb + 3 of its two rows with one 16-byte load (four
            // loads where a split-K share starts off a multiple of 4) and stores one column per
            // stage. The loads block the warp, which costs more than the
            // conflicts when there are few K blocks (K = 512) and at small M, where the tiles
            // are 64 rows and the copies stay.
            const int lane = tid % 32, w = tid / 32 - 1, nblocks = (N + QBN - 1) / QBN;
            float a[2][4], b[4]; // rows 64w + lane and 64w + lane + 32; a weight-scale block
            int stage = 0, phase = 0;
            for (int u = cluster; u < units; u += clusters) {
                int tm, tn;
                unit_tile(u, tm, tn);
                const int nb = tn * BN / QBN + lane < nblocks ? tn * BN / QBN + lane : nblocks - 1;
                const bool weights = w == 0 && lane < NBS;
                for (int kb = kb0; kb < kb1; kb++) {
                    if ((kb - kb0) % 4 == 0) {
#pragma unroll
                        for (int i = 0; i < 2; i++) {
                            const int r = tm * BM + 64 * w + lane + 32 * i; // rows past M read as zero
                            load_scales4(As + (long)(r < M ? r : 0) * ksc, kb, ksc, r < M, a[i]);
                        }
                        if (weights)
                            load_scales4(Bs + (long)nb * ksc, kb, ksc, true, b);
                    }
                    mbar_wait(empty0 + 8 * stage, phase ^ 1);
                    const u32 ss = base + OFF_S + stage * S_BYTES;
#pragma unroll
                    for (int i = 0; i < 2; i++)
                        st_shared_f32(ss + 4 * (64 * w + lane + 32 * i), a[i][0]);
                    if (weights)
                        st_shared_f32(ss + 4 * (BM + lane), b[0]);
                    mbar_arrive(full0 + 8 * stage); // releases the stores to the consumers
                    // The next K block's scales move to the front (a fixed index: no local memory).
#pragma unroll
                    for (int j = 0; j < 3; j++)
                        a[0][j] = a[0][j + 1], a[1][j] = a[1][j + 1], b[j] = b[j + 1];
                    if (++stage == STAGES)
                        stage = 0, phase ^= 1;
                }
            }
        }
    } else {
        // Consumer warpgroup wg: rows wg*64 .. wg*64+63 of the tile.
        if (OCC == 1)
            regs_alloc<CONSUMER_REGS>();
        const int warp = tid / 32, lane = tid % 32;
        // 16-bit outputs go through the slab when C's rows suit a tensor map (the launcher
        // encoded tmC by the same rule); otherwise whole tiles store pairs without per-element
        // checks when rows are pair-aligned.
        const bool staged = C_BYTES > 0 && bt_nv_tma_store(sizeof(out_t), N, (u64)C);
        const bool pairs = N % 2 == 0 && (u64)C % (2 * sizeof(out_t)) == 0;
        if (staged && tid == 0)
            prefetch_tensor_map(&tmC);
        float sum[FN * 4];
        acc_t part0[FN * 4], part1[FN * 4]; // part1 only with DOUBLE
        // wgmma descriptors of stage 0: this warpgroup's rows of the A slot, and the B slot.
        const u64 desc_a = smem_desc<BK>(base + OFF_A + wg * 64 * BK), desc_b = smem_desc<BK>(base + OFF_B);
        int stage = 0, phase = 0, red_phase = 0;
        // Two consumer warpgroups take turns issuing wgmma (named barriers 1 and 2, the second
        // one's first turn granted here), so one promotes its partial while the tensor cores
        // run the other's instead of both finishing, and promoting, together. (The last turn
        // granted is never taken: the CTA exits with that arrival pending, which ends with it.)
        if (NC == 2 && wg == 1)
            named_arrive(1, 256);
        for (int u = cluster; u < units; u += clusters) {
            int tm, tn;
            tile_of(u, tiles_m, tiles_n, rank, tm, tn);
            const int m0 = tm * BM, n0 = tn * BN;
            // This thread's two rows (m16n8 accumulator layout, warp w owning rows 16w..16w+15).
            const int row = wg * 64 + warp * 16 + lane / 4, r0 = m0 + row, r1 = r0 + 8;
#pragma unroll
            for (int i = 0; i < FN * 4; i++)
                sum[i] = 0.f;
            // 2-bit field j of `which` says which of the NBS weight-scale blocks the tile touches
            // (BN need not divide QBN or align with it) fragment column j is in.
            with_blocks(n0, [&](auto blocks) {
                constexpr u64 which = decltype(blocks)::value;
                // With OFFSET: the scales of the K blocks whose offset the sums still carry, per
                // weight-scale block, for this thread's two rows, and how many K blocks that is.
                float off_top[NBS], off_bot[NBS];
                int pending = 0;
#pragma unroll
                for (int i = 0; i < NBS; i++)
                    off_top[i] = off_bot[i] = 0.f;

                // One K block's scales, loaded from its slot once the slot is full. Thread 0 releases
                // the slot a whole wgmma later, and its arrival orders only its own accesses. The
                // other lanes' loads are done by then: each was issued before its warp issued that
                // K block's wgmma, which starts only once all four warps have, and thread 0 waits
                // for it to end, hundreds of cycles on. Releasing from every warp after its
                // promotion, which orders them by the memory model, ran at 0.83-1.00x the speed at
                // M >= 2048 (BENCHMARKS.md, thirtieth session).
                struct scales {
                    float a0, a1, b[NBS];
                };
                auto wait_slot = [&](scales &sc, int st, int ph) {
                    const u32 ss = base + OFF_S + st * S_BYTES;
                    mbar_wait(full0 + 8 * st, ph);
                    sc.a0 = ld_shared_f32(ss + 4 * row), sc.a1 = ld_shared_f32(ss + 4 * (row + 8));
#pragma unroll
                    for (int i = 0; i < NBS; i++)
                        sc.b[i] = ld_shared_f32(ss + 4 * (BM + i));
                };
                auto wait_full = [&](scales &sc) { wait_slot(sc, stage, phase); };
                // Issues this stage's K block into P, in this warpgroup's turn; each K step of 32
                // bytes is 2 in a descriptor's address field. With CHAIN a K block that does not
                // start a chain (`start`) adds onto P.
                auto issue = [&](acc_t(&P)[FN * 4], bool start) {
                    const u64 da = desc_a + stage * (A_BYTES >> 4), db = desc_b + stage * (B_BYTES >> 4);
                    if (NC == 2)
                        named_sync(1 + wg, 256);
                    pin(P);
                    wgmma_fence();
#pragma unroll
                    for (int s = 0; s < BK / 32; s++)
                        mma::run(P, da + 2 * s, db + 2 * s, (CHAIN && !start) || s > 0);
                    wgmma_commit();
                    if (NC == 2)
                        named_arrive(2 - wg, 256);
                };
                // The warpgroup's wgmma has finished reading slot st: release it in every CTA of
                // the cluster (each one's producer multicasts into all of them).
                auto release = [&](int st) {
                    if (tid == 0) {
                        if (CLUSTER > 1)
                            for (int r = 0; r < CLUSTER; r++)
                                mbar_arrive_cluster(empty0 + 8 * st, (u32)r);
                        else
                            mbar_arrive(empty0 + 8 * st);
                    }
                };
                auto advance = [&]() {
                    if (++stage == STAGES)
                        stage = 0, phase ^= 1;
                };
                // sum -= 1.5 * 2^23 * (the scales of the pending K blocks): one FFMA per output,
                // exact but for the rounding of the scales' sum.
                auto take_offset = [&]() {
#pragma unroll
                    for (int j = 0; j < FN; j++) {
                        const int w = (int)(which >> (2 * j)) & 3;
                        const float top = pick(off_top, w), bot = pick(off_bot, w);
                        sum[j * 4 + 0] = fmaf(-OFFSET_F, top, sum[j * 4 + 0]);
                        sum[j * 4 + 1] = fmaf(-OFFSET_F, top, sum[j * 4 + 1]);
                        sum[j * 4 + 2] = fmaf(-OFFSET_F, bot, sum[j * 4 + 2]);
                        sum[j * 4 + 3] = fmaf(-OFFSET_F, bot, sum[j * 4 + 3]);
                    }
#pragma unroll
                    for (int i = 0; i < NBS; i++)
                        off_top[i] = off_bot[i] = 0.f;
                    pending = 0;
                };
                // sum += P * As[row, kb] * Bs[the column's block, kb] (with OFFSET, P plus the offset);
                // with `after`, the scales of the chain's next K block, times the difference. With
                // `first`, the first K block of a chain, the offset is added into P.
                auto promote = [&](acc_t(&P)[FN * 4], const scales &sc, const scales *after, bool first) {
                    float top_s[NBS], bot_s[NBS];
#pragma unroll
                    for (int i = 0; i < NBS; i++) {
                        top_s[i] = sc.a0 * sc.b[i], bot_s[i] = sc.a1 * sc.b[i];
                        if (CHAIN && after)
                            top_s[i] = fmaf(-after->a0, after->b[i], top_s[i]),
                            bot_s[i] = fmaf(-after->a1, after->b[i], bot_s[i]);
                    }
#pragma unroll
                    for (int j = 0; j < FN; j++) {
                        const int w = (int)(which >> (2 * j)) & 3;
                        const float top = pick(top_s, w), bot = pick(bot_s, w);
                        if (CHAIN && first)
#pragma unroll
                            for (int i = 0; i < 4; i++)
                                P[j * 4 + i] += OFFSET_BITS;
                        sum[j * 4 + 0] += partial_f32(P[j * 4 + 0]) * top;
                        sum[j * 4 + 1] += partial_f32(P[j * 4 + 1]) * top;
                        sum[j * 4 + 2] += partial_f32(P[j * 4 + 2]) * bot;
                        sum[j * 4 + 3] += partial_f32(P[j * 4 + 3]) * bot;
                    }
                    if constexpr (CHAIN) {
#pragma unroll
                        for (int i = 0; i < NBS; i++)
                            off_top[i] += top_s[i], off_bot[i] += bot_s[i];
                        if (++pending == OFFSET_GROUP)
                            take_offset();
                    }
                };

                const int nk = kb1 - kb0; // this CTA's K blocks of the tile
                // The scales of the oldest K block in flight, of the next one, and (CHAIN) of the
                // second K block of the chain whose first one was promoted last.
                scales prev, next, after;
                int prev_stage = stage;
                // Waits for the oldest wgmma group in flight, the tile's kb-th K block (the only one
                // in flight if last), frees its slot and promotes its partial. `first`: whether the
                // K block is the first of its chain ((kb & 2) == 0), as a constant where the lambda
                // is inlined: otherwise ptxas, seeing P's registers written on one path only, waits
                // for the wgmma in flight (its note C7517). A chain's first K block needs the scales
                // of the second, two slots on from it: that slot's full barrier is waited for here,
                // one K block early, and its scales are kept in `after` for the second's issue.
                auto finish = [&](acc_t(&P)[FN * 4], int kb, bool first, bool last) {
                    if (last)
                        wgmma_wait<0>();
                    else
                        wgmma_wait<1>();
                    pin(P);
                    release(prev_stage);
                    if (CHAIN && first && kb + 2 < nk) {
                        const bool wrap = stage + 1 == STAGES; // `stage` holds K block kb + 1
                        wait_slot(after, wrap ? 0 : stage + 1, wrap ? phase ^ 1 : phase);
                        promote(P, prev, &after, true);
                    } else {
                        promote(P, prev, nullptr, first);
                    }
                };
                // Issues the tile's kb-th K block into P while the one before it, in Q, is finished
                // (`start` as in issue, `first` as in finish, for kb - 1). The second K block of a
                // chain was waited for when its first one was promoted.
                auto step = [&](acc_t(&Q)[FN * 4], acc_t(&P)[FN * 4], int kb, bool start, bool first) {
                    if (CHAIN && !start)
                        next = after;
                    else
                        wait_full(next);
                    issue(P, start);
                    finish(Q, kb - 1, first, false);
                    prev = next, prev_stage = stage;
                    advance();
                };
                if constexpr (!DOUBLE) {
                    for (int kb = 0; kb < nk; kb++) {
                        wait_full(prev);
                        prev_stage = stage;
                        issue(part0, true);
                        advance();
                        finish(part0, kb, false, true);
                    }
                } else if (nk > 0) {
                    // K block kb is in flight in one partial while kb - 1 is promoted from the
                    // other; unrolled by two so that each partial is a fixed register array, and by
                    // four with CHAIN so that each K block's place in its chain is a constant.
                    wait_full(prev);
                    issue(part0, true);
                    advance();
                    for (int kb = 1;; kb += CHAIN ? 4 : 2) {
                        if (kb == nk) {
                            finish(part0, kb - 1, true, true);
                            break;
                        }
                        step(part0, part1, kb, true, true);
                        if (kb + 1 == nk) {
                            finish(part1, kb, true, true);
                            break;
                        }
                        step(part1, part0, kb + 1, false, true);
                        if constexpr (CHAIN) {
                            if (kb + 2 == nk) {
                                finish(part0, kb + 1, false, true);
                                break;
                            }
                            step(part0, part1, kb + 2, false, false);
                            if (kb + 3 == nk) {
                                finish(part1, kb + 2, false, true);
                                break;
                            }
                            step(part1, part0, kb + 3, true, false);
                        }
                    }
                }
                if (CHAIN && pending > 0)
                    take_offset();
            });
            if (SPLIT > 1) {
                // Slot krank - 1 of the first CTA holds this CTA's partial tile, thread-major so
                // that a warp's stores and loads are consecutive words.
                auto slot = [&](int r, int i) {
                    return base + OFF_R + 4 * ((r - 1) * SLOT_FLOATS + (wg * FN * 4 + i) * 128 + tid);
                };
                if (krank > 0) {
                    mbar_wait_cluster(slot_free, red_phase ^ 1); // the first CTA read the last one
                    const u32 dst = map_cluster(slot(krank, 0), 0); // the window is contiguous
#pragma unroll
                    for (int i = 0; i < FN * 4; i++)
                        st_cluster_f32(dst + 4 * 128 * i, sum[i]);
                    mbar_arrive_cluster_release(reduced, 0);
                    red_phase ^= 1;
                    continue; // the first CTA stores the tile
                }
                mbar_wait_cluster(reduced, red_phase);
                for (int r = 1; r < SPLIT; r++)
#pragma unroll
                    for (int i = 0; i < FN * 4; i++)
                        sum[i] += ld_shared_f32(slot(r, i));
                for (int r = 1; r < SPLIT; r++)
                    mbar_arrive_cluster_release(slot_free, (u32)r);
                red_phase ^= 1;
            }
            if (staged) {
                const u32 slab = base + OFF_C + wg * 64 * BN * 2;
                // The last tile's stores must have read the slab before it is overwritten.
                if (tid == 0)
                    bulk_wait_read();
                named_sync(3 + wg, 128);
                // Fragments j and j + 1 as four 8x8 matrices: rows 0-7 and 8-15 of the warp's
                // band, each in both fragments. The swizzle puts the 8 rows of each matrix in 8
                // different 16-byte bank groups.
                const int srow = warp * 16 + (lane / 8 % 2) * 8 + lane % 8;
#pragma unroll
                for (int j = 0; j < FN; j += 2) {
                    const int col = (j + lane / 16) * 8;
                    const u32 addr = slab + col / SC * C_BOX + swizzle<SC * 2>(srow * SC * 2 + col % SC * 2);
                    const u32 p0 = pack_pair<OUT>(sum[j * 4 + 0], sum[j * 4 + 1]);
                    const u32 p1 = pack_pair<OUT>(sum[j * 4 + 2], sum[j * 4 + 3]);
                    if (j + 1 < FN)
                        stmatrix_x4(addr, p0, p1, pack_pair<OUT>(sum[j * 4 + 4], sum[j * 4 + 5]),
                                    pack_pair<OUT>(sum[j * 4 + 6], sum[j * 4 + 7]));
                    else // an odd last fragment; lanes 16-31 give no address
                        stmatrix_x2(addr, p0, p1);
                }
                fence_proxy_async();
                named_sync(3 + wg, 128);
                if (tid == 0 && m0 + wg * 64 < M) {
                    for (int b = 0; b < BN / SC; b++)
                        tma_store_2d(&tmC, slab + b * C_BOX, n0 + b * SC, m0 + wg * 64);
                    bulk_commit();
                }
            } else if (pairs && m0 + BM <= M && n0 + BN <= N) {
                out_t *p0 = C + (long)r0 * N + n0 + (lane % 4) * 2, *p1 = p0 + 8L * N;
#pragma unroll
                for (int j = 0; j < FN; j++) {
                    store_pair_fast<OUT>(p0 + j * 8, sum[j * 4 + 0], sum[j * 4 + 1]);
                    store_pair_fast<OUT>(p1 + j * 8, sum[j * 4 + 2], sum[j * 4 + 3]);
                }
            } else {
#pragma unroll
                for (int j = 0; j < FN; j++) {
                    const int c = n0 + j * 8 + (lane % 4) * 2;
                    store_pair<OUT>(C, N, r0, c, M, N, sum[j * 4 + 0], sum[j * 4 + 1]);
                    store_pair<OUT>(C, N, r1, c, M, N, sum[j * 4 + 2], sum[j * 4 + 3]);
                }
            }
        }
        if (staged && tid == 0)
            bulk_wait(); // the slab must outlive the stores' reads (waiting for .read only measured the same)
    }
    // No CTA may leave while a peer can still arrive on its barriers or write into it.
    if (CTAS > 1) {
        __syncwarp(); // the cluster barrier is .aligned: the producer's warp must reconverge
        cluster_sync();
    }
}
