// The classic W8A8 block-scaled GEMM: C[M,N] = (A[M,K] * As) . (B[N,K] * Bs)^T, with the
// meaning SGLang's Triton kernel gives its six tuning keys, so that its configs serve that
// kernel (how well they carry over is measured: bench/triton_configs.py, BENCHMARKS.md).
//
// One thread block computes a BT_BM x BT_BN tile of C, walking K in steps of BT_BK through a
// BT_STAGES-deep cp.async shared-memory pipeline with 32 * BT_WARPS threads; tiles are ordered
// in groups of BT_GM rows (Triton's grouped order). After each K step the step's partial product
// is scaled by As[m, k / QBK] * Bs[n / QBN, k / QBK] and added to the fp32 sum.
//
// Inputs as SGLang's w8a8_block_fp8_matmul: A [M,K] row-major (e4m3 or s8), As fp32
// [M, ceil(K/QBK)], B [N,K] row-major, Bs fp32 [ceil(N/QBN), ceil(K/QBK)], C [M,N] row-major.
// Any M, N; K a multiple of 16 (16-byte copies).
//
// Tensor cores as Triton lowers this kernel: on sm_90a, wgmma when the tile holds whole m64
// warpgroup tiles; otherwise mma.sync m16n8k32 fed by ldmatrix.
//
// Compile-time parameters (set by the tuner): BT_BM BT_BN BT_BK BT_GM BT_WARPS BT_STAGES,
// BT_QBN BT_QBK (quantization block), BT_IN_INT8 (0: e4m3, 1: s8), BT_OUT (0 f16, 1 bf16, 2 f32).
#include "classic_layout.h"
#include "common.cuh"
#include "wgmma.cuh"

namespace bt {
namespace classic {

constexpr int BM = BT_BM, BN = BT_BN, BK = BT_BK, GM = BT_GM;
constexpr int WARPS = BT_WARPS, STAGES = BT_STAGES, QBN = BT_QBN, QBK = BT_QBK;
constexpr bool INT8 = BT_IN_INT8;
constexpr int OUT = BT_OUT;
constexpr int THREADS = 32 * WARPS;
constexpr int NBS = bt_cl_bscales(BN, QBN);
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
constexpr bool WGMMA = bt_cl_use_wgmma(1, BM, BN, WARPS);
#else
constexpr bool WGMMA = false;
#endif
static_assert(QBK % BK == 0, "a K step must lie inside one quantization block");
static_assert(BK == 32 || BK == 64 || BK == 128, "rows of one swizzle pattern");
static_assert(QBN % 8 == 0, "fragment column pairs share a weight-scale block");

// Shared memory: every stage's A tile, then every stage's B tile, then As and Bs per stage.
constexpr int OFF_A = 0;
constexpr int OFF_B = OFF_A + STAGES * BM * BK;
constexpr int OFF_AS = OFF_B + STAGES * BN * BK;
constexpr int OFF_BS = OFF_AS + STAGES * BM * 4;
static_assert(OFF_BS + STAGES * NBS * 4 == STAGES * bt_cl_stage_bytes(BM, BN, BK, QBN),
              "layout and the tuner's formula disagree");

typedef typename out_type<OUT>::type out_t;

struct Problem {
    const u8 *A, *B;
    const float *As, *Bs;
    out_t *C;
    int M, N, K;
    int ksc; // scale columns: ceil(K / QBK)
};

// This thread's cp.async copies, planned once per tile. Thread t copies 16-byte chunk column
// t % CH of tile rows t / CH + j * RSTEP (j < NA for A, < NB for B); from one K step to the
// next only the K offset moves, so the K loop adds it to a fixed plan instead of recomputing
// rows, row checks and swizzles per chunk (which had the port issue about twice the
// instructions of Triton's build of the same kernel).
struct Loader {
    static constexpr int CH = BK / 16, RSTEP = THREADS / CH;
    static constexpr int NA = bt_cl_passes(BM, BK, WARPS), NB = bt_cl_passes(BN, BK, WARPS);
    static constexpr int NSA = (BM + THREADS - 1) / THREADS; // activation-scale rows per thread
    // RSTEP rows are a multiple of 1024 bytes, which leaves the address bits the swizzle reads
    // ([7,10)) alone: chunk j's swizzled offset is chunk 0's plus j * RSTEP rows.
    static_assert(THREADS % CH == 0 && (RSTEP * BK) % 1024 == 0, "chunk plan");
    static_assert(RSTEP == bt_cl_pass_rows(BK, WARPS), "chunk plan and the tuner's formula disagree");
    static_assert(NA <= BT_CL_MAX_PASSES && NB <= BT_CL_MAX_PASSES, "a_rows/b_rows hold 16 chunks per half");
    const u8 *a, *b;            // chunk 0's row of A and of B at K step 0
    const float *as, *bs;       // this thread's first activation-scale row and weight-scale block
    long step;                  // RSTEP rows of A or B, in bytes
    u32 a_rows, b_rows;         // bit j: chunk j's row is in the tile; bit 16 + j: and in the matrix
    u32 as_rows;                // bit q: scale row tid + q * THREADS is in the tile; bit 16 + q: and in M
    u32 soff;                   // chunk 0's swizzled offset in a stage's A or B tile
    int c16;
    bool bs_ok;

    __device__ __forceinline__ Loader(const Problem &p, int m0, int n0)
    {
        const int tid = threadIdx.x, r0 = tid / CH;
        c16 = tid % CH * 16;
        soff = swizzle<BK>(r0 * BK + c16);
        a = p.A + (long)(m0 + r0) * p.K + c16, b = p.B + (long)(n0 + r0) * p.K + c16;
        step = (long)RSTEP * p.K;
        a_rows = b_rows = as_rows = 0;
#pragma unroll
        for (int j = 0; j < NA; j++) {
            const int r = r0 + j * RSTEP;
            a_rows |= (u32)(r < BM) << j | (u32)(r < BM && m0 + r < p.M) << (16 + j);
        }
#pragma unroll
        for (int j = 0; j < NB; j++) {
            const int r = r0 + j * RSTEP;
            b_rows |= (u32)(r < BN) << j | (u32)(r < BN && n0 + r < p.N) << (16 + j);
        }
        as = p.As + (long)(m0 + tid) * p.ksc;
#pragma unroll
        for (int q = 0; q < NSA; q++) {
            const int r = tid + q * THREADS;
            as_rows |= (u32)(r < BM) << q | (u32)(r < BM && m0 + r < p.M) << (16 + q);
        }
        const int nb = n0 / QBN + tid;
        bs_ok = nb < (p.N + QBN - 1) / QBN;
        bs = p.Bs + (long)(bs_ok ? nb : 0) * p.ksc;
    }

    // Issues the copies of K step kt into stage slot `slot`. Rows past M or N and chunks past K
    // are zero-filled (source size 0, read from the tensor's start).
    __device__ __forceinline__ void stage(const Problem &p, u32 smem, int slot, int kt) const
    {
        const int k0 = kt * BK;
        const bool k_ok = k0 + c16 < p.K;
        const u32 sa = smem + OFF_A + slot * BM * BK + soff, sb = smem + OFF_B + slot * BN * BK + soff;
#pragma unroll
        for (int j = 0; j < NA; j++)
            if (BM % RSTEP == 0 || (a_rows >> j & 1)) {
                const bool ok = k_ok && (a_rows >> (16 + j) & 1);
                cp_async16(sa + j * RSTEP * BK, ok ? a + j * step + k0 : p.A, ok);
            }
#pragma unroll
        for (int j = 0; j < NB; j++)
            if (BN % RSTEP == 0 || (b_rows >> j & 1)) {
                const bool ok = k_ok && (b_rows >> (16 + j) & 1);
                cp_async16(sb + j * RSTEP * BK, ok ? b + j * step + k0 : p.B, ok);
            }
        const int kb = k0 / QBK, tid = threadIdx.x;
#pragma unroll
        for (int q = 0; q < NSA; q++)
            if (as_rows >> q & 1) {
                const bool ok = as_rows >> (16 + q) & 1;
                cp_async4(smem + OFF_AS + (slot * BM + tid + q * THREADS) * 4,
                          ok ? as + (long)q * THREADS * p.ksc + kb : p.As, ok);
            }
        if (tid < NBS)
            cp_async4(smem + OFF_BS + (slot * NBS + tid) * 4, bs + kb, bs_ok);
    }
};

// A stage's weight-scale index for the 8 tile columns from c (a multiple of 8; QBN % 8 == 0
// keeps them in one block). Where BN is a multiple of QBN every tile starts on a block, and the
// index follows from c alone: the same for the whole warp, one shared load per block.
__device__ __forceinline__ int bscale_index(int n0, int c)
{
    return BN % QBN == 0 ? c / QBN : (n0 % QBN + c) / QBN;
}

// Per-thread accumulators and the math of one K step. Fragment (f, j, e) of a thread is the
// C element at tile row row(f, e) and column col(j, e): the m16n8 accumulator layout, which
// mma.sync tiles and wgmma (per 8 columns of each m64 slab) share.
// (Partial specializations on the tile shape, so only the path in use is instantiated.)
template <bool USE_WGMMA, int TBM, int TBN> struct Math;

// mma.sync m16n8k32: warps laid out WM x WN over the tile as Triton lays them; warps beyond
// the tile's MMA tiles are copies of that layout, doing the same work and storing nothing
// (classic_layout.h says why).
template <int TBM, int TBN> struct Math<false, TBM, TBN> {
    static constexpr int WM = bt_cl_warps_m(TBM, TBN, WARPS), WN = bt_cl_warps_n(TBM, TBN, WARPS);
    static constexpr int TM = TBM / WM, TN = TBN / WN, FM = TM / 16, FN = TN / 8;
    static constexpr int KSTEPS = BK / 32;
    typedef mma16832<INT8> mma;
    typedef typename mma::acc acc_t;

    float sum[FM][FN][4];
    int wm, wn, copy, lane;

    __device__ __forceinline__ Math()
    {
        int warp = threadIdx.x / 32;
        lane = threadIdx.x % 32;
        wm = warp % WM, wn = warp / WM % WN, copy = warp / (WM * WN);
#pragma unroll
        for (int f = 0; f < FM; f++)
#pragma unroll
            for (int j = 0; j < FN; j++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    sum[f][j][e] = 0.f;
    }
    __device__ __forceinline__ int row(int f, int e) const { return wm * TM + f * 16 + lane / 4 + (e / 2) * 8; }
    __device__ __forceinline__ int col(int j, int e) const { return wn * TN + j * 8 + (lane % 4) * 2 + e % 2; }
    __device__ __forceinline__ bool stores() const { return copy == 0; }

    __device__ __forceinline__ void step(const u8 *base, u32 smem, int slot, int n0)
    {
        const u32 sa = smem + OFF_A + slot * BM * BK, sb = smem + OFF_B + slot * BN * BK;
        acc_t part[FM][FN][4];
#pragma unroll
        for (int f = 0; f < FM; f++)
#pragma unroll
            for (int j = 0; j < FN; j++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    part[f][j][e] = 0;
#pragma unroll
        for (int s = 0; s < KSTEPS; s++) {
            const int kbyte = s * 32;
            u32 a[FM][4], b[FN][2];
#pragma unroll
            for (int f = 0; f < FM; f++) {
                int r = wm * TM + f * 16 + lane % 16;
                ldmatrix_x4(a[f][0], a[f][1], a[f][2], a[f][3], sa + swizzle<BK>(r * BK + kbyte + lane / 16 * 16));
            }
            if (FN % 2 == 0) {
#pragma unroll
                for (int j = 0; j < FN; j += 2) {
                    int r = wn * TN + j * 8 + lane % 8 + lane / 16 * 8;
                    ldmatrix_x4(b[j][0], b[j][1], b[j + 1][0], b[j + 1][1],
                                sb + swizzle<BK>(r * BK + kbyte + lane / 8 % 2 * 16));
                }
            } else {
                int r = wn * TN + lane % 8;
                ldmatrix_x2(b[0][0], b[0][1], sb + swizzle<BK>(r * BK + kbyte + lane / 8 % 2 * 16));
            }
#pragma unroll
            for (int f = 0; f < FM; f++)
#pragma unroll
                for (int j = 0; j < FN; j++)
                    mma::run(part[f][j], a[f], b[j]);
        }
        const float *as = (const float *)(base + OFF_AS) + slot * BM;
        const float *bs = (const float *)(base + OFF_BS) + slot * NBS;
#pragma unroll
        for (int f = 0; f < FM; f++) {
            float sa[2] = {as[row(f, 0)], as[row(f, 2)]};
#pragma unroll
            for (int j = 0; j < FN; j++) {
                const float sb = bs[bscale_index(n0, wn * TN + j * 8)];
#pragma unroll
                for (int e = 0; e < 4; e++)
                    sum[f][j][e] += (float)part[f][j][e] * (sa[e / 2] * sb);
            }
        }
    }
};

// wgmma m64nNk32: warpgroups split the tile along M when it has an m64 slab for each, else N.
template <int TBM, int TBN> struct Math<true, TBM, TBN> {
    static constexpr int NWG = WARPS / 4;
    static constexpr bool SPLIT_M = (TBM / 64) % NWG == 0;
    static constexpr int WG_M = SPLIT_M ? TBM / NWG : TBM, WG_N = SPLIT_M ? TBN : TBN / NWG;
    static constexpr int FM = WG_M / 64, FN = WG_N / 8;
    typedef wgmma<INT8, WG_N> mma;
    typedef typename mma::acc acc_t;

    float sum[FM][FN][4];
    acc_t part[FM][FN * 4];
    int m_off, n_off, lane, wi;

    __device__ __forceinline__ Math()
    {
        int warp = threadIdx.x / 32, wg = warp / 4;
        lane = threadIdx.x % 32, wi = warp % 4;
        m_off = SPLIT_M ? wg * WG_M : 0;
        n_off = SPLIT_M ? 0 : wg * WG_N;
#pragma unroll
        for (int f = 0; f < FM; f++)
#pragma unroll
            for (int j = 0; j < FN; j++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    sum[f][j][e] = 0.f, part[f][j * 4 + e] = 0;
    }
    // Warp wi of the warpgroup owns rows 16*wi .. 16*wi+15 of each m64 slab.
    __device__ __forceinline__ int row(int f, int e) const { return m_off + f * 64 + wi * 16 + lane / 4 + (e / 2) * 8; }
    __device__ __forceinline__ int col(int j, int e) const { return n_off + j * 8 + (lane % 4) * 2 + e % 2; }
    __device__ __forceinline__ bool stores() const { return true; }

    __device__ __forceinline__ void step(const u8 *base, u32 smem, int slot, int n0)
    {
        const u32 sa = smem + OFF_A + slot * BM * BK, sb = smem + OFF_B + slot * BN * BK;
#pragma unroll
        for (int f = 0; f < FM; f++)
            pin(part[f]);
        wgmma_fence();
#pragma unroll
        for (int f = 0; f < FM; f++)
#pragma unroll
            for (int s = 0; s < BK / 32; s++)
                mma::run(part[f], smem_desc<BK>(sa + (m_off + f * 64) * BK + s * 32),
                         smem_desc<BK>(sb + n_off * BK + s * 32), s > 0);
        wgmma_commit();
        wgmma_wait<0>();
#pragma unroll
        for (int f = 0; f < FM; f++)
            pin(part[f]);
        const float *as = (const float *)(base + OFF_AS) + slot * BM;
        const float *bs = (const float *)(base + OFF_BS) + slot * NBS;
#pragma unroll
        for (int f = 0; f < FM; f++) {
            float sa2[2] = {as[row(f, 0)], as[row(f, 2)]};
#pragma unroll
            for (int j = 0; j < FN; j++) {
                const float sb = bs[bscale_index(n0, n_off + j * 8)];
#pragma unroll
                for (int e = 0; e < 4; e++)
                    sum[f][j][e] += (float)part[f][j * 4 + e] * (sa2[e / 2] * sb);
            }
        }
    }
};

// Writes the tile's 16-bit outputs 16 bytes per lane. In the m16n8 layout the four lanes of a
// quad hold 4-byte column pairs of one row, so a store per fragment writes 16 bytes of a row
// per quad; a rotation across the quad (three shuffles per four fragments) gives each lane the
// 8 columns of one fragment, and a quad writes 64 contiguous bytes of its row, as Triton's
// epilogue writes whole sectors. Whole tiles of 16-byte-aligned rows only (a tile past M keeps
// the fragment stores, which skip its missing rows without the shuffles), and warps of 64 or
// more columns: at 32 the fragment stores already fill a row's two sectors one after the
// other, and the shuffles measured 5% slower (BENCHMARKS.md, "The classic kernel's stores").
template <typename MathT>
__device__ __forceinline__ void store_tile16(const MathT &math, out_t *C, int N, int m0, int n0)
{
    const int lane = threadIdx.x % 32, i = lane % 4;
#pragma unroll
    for (int f = 0; f < MathT::FM; f++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const long r = m0 + math.row(f, 2 * h);
#pragma unroll
            for (int q = 0; q < MathT::FN / 4; q++) {
                u32 v[4], o[4] = {0, 0, 0, 0};
#pragma unroll
                for (int t = 0; t < 4; t++)
                    v[t] = (u32)to_out<OUT>(math.sum[f][4 * q + t][2 * h]) |
                           (u32)to_out<OUT>(math.sum[f][4 * q + t][2 * h + 1]) << 16;
                // Round k: lane i takes column pair (i + k) % 4 of fragment 4q + i from that lane,
                // which sends its pair of fragment 4q + (lane - k) % 4 (selects, not a dynamic
                // index, keep v and o in registers).
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    const int want = (i - k) & 3, from = (i + k) & 3;
                    const u32 send = want == 0 ? v[0] : want == 1 ? v[1] : want == 2 ? v[2] : v[3];
                    const u32 got = k == 0 ? send : __shfl_sync(0xffffffffu, send, (lane & ~3) | from);
#pragma unroll
                    for (int t = 0; t < 4; t++)
                        o[t] = t == from ? got : o[t];
                }
                *(uint4 *)(C + r * N + n0 + math.col(4 * q + i, 0) - 2 * i) = make_uint4(o[0], o[1], o[2], o[3]);
            }
        }
}

} // namespace classic
} // namespace bt

extern "C" __global__ void __launch_bounds__(bt::classic::THREADS)
bt_classic_gemm(const bt::u8 *__restrict__ A, const bt::u8 *__restrict__ B,
                bt::classic::out_t *__restrict__ C, const float *__restrict__ As,
                const float *__restrict__ Bs, int M, int N, int K)
{
    using namespace bt;
    using namespace bt::classic;
    test_plants();
    extern __shared__ u8 dyn[];
    // Operand tiles start on a whole swizzle pattern: align the dynamic base up to 1 KiB.
    u8 *base = aligned_dyn<BT_CL_ALIGN>(dyn);
    const u32 smem = smem_addr(base);

    Problem p = {A, B, As, Bs, C, M, N, K, (K + QBK - 1) / QBK};
    int tm, tn;
    grouped_tile(blockIdx.x, (M + BM - 1) / BM, (N + BN - 1) / BN, GM, tm, tn);
    const int m0 = tm * BM, n0 = tn * BN;
    const int ktiles = (K + BK - 1) / BK;

    typedef Math<WGMMA, BM, BN> math_t;
    math_t math;
    const Loader load(p, m0, n0);
    if (STAGES == 1) {
        for (int kt = 0; kt < ktiles; kt++) {
            load.stage(p, smem, 0, kt);
            cp_async_commit();
            cp_async_wait<0>();
            if (WGMMA)
                fence_proxy_async();
            __syncthreads();
            math.step(base, smem, 0, n0);
            __syncthreads();
        }
    } else {
#pragma unroll
        for (int s = 0; s < STAGES - 1; s++) {
            if (s < ktiles)
                load.stage(p, smem, s, s);
            cp_async_commit();
        }
        for (int kt = 0; kt < ktiles; kt++) {
            // Step kt's copies are done once at most STAGES-2 newer groups are pending.
            cp_async_wait<(STAGES > 1 ? STAGES - 2 : 0)>();
            if (WGMMA)
                fence_proxy_async();
            // All threads' copies for kt are visible, and everyone has finished step kt-1,
            // whose slot the load below refills.
            __syncthreads();
            int next = kt + STAGES - 1;
            if (next < ktiles)
                load.stage(p, smem, next % STAGES, next);
            cp_async_commit();
            math.step(base, smem, kt % STAGES, n0);
        }
    }
    cp_async_wait<0>();
    if (!math.stores())
        return;
    if (OUT != 2 && math_t::FN % 8 == 0 && m0 + BM <= M && n0 + BN <= N && N % 8 == 0 &&
        (unsigned long long)C % 16 == 0) {
        store_tile16(math, C, N, m0, n0);
        return;
    }
#pragma unroll
    for (int f = 0; f < math_t::FM; f++)
#pragma unroll
        for (int j = 0; j < math_t::FN; j++)
#pragma unroll
            for (int h = 0; h < 2; h++)
                store_pair<OUT>(C, N, m0 + math.row(f, 2 * h), n0 + math.col(j, 0), M, N,
                                math.sum[f][j][2 * h], math.sum[f][j][2 * h + 1]);
}
