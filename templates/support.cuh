// Kernels the tuner and the GPU tests use around the GEMMs: random quantized inputs, a plain
// reference GEMM, and the error and guard checks. Deliberately simple; not tuned.
#include "common.cuh"

namespace bt {
namespace support {

// Counter-based random numbers (splitmix64 finalizer): any element can be drawn on its own,
// so one launch fills a tensor of any size without per-thread state.
__device__ __forceinline__ u64 mix(u64 x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

__device__ __forceinline__ float uniform(u64 seed, u64 i, int which)
{
    u64 h = mix(seed ^ mix(2 * i + which));
    return ((float)(h >> 40) + 0.5f) * (1.0f / 16777216.0f); // (0, 1)
}

__device__ __forceinline__ float normal(u64 seed, u64 i)
{
    float u1 = uniform(seed, i, 0), u2 = uniform(seed, i, 1);
    return sqrtf(-2.f * logf(u1)) * cospif(2.f * u2);
}

// e4m3 (bias 7, no infinities, S.1111.111 is NaN) decoded by its definition rather than by the
// hardware conversion the kernels under test rely on.
__device__ __forceinline__ double decode_e4m3(u8 v)
{
    int sign = v >> 7, exp = (v >> 3) & 15, man = v & 7;
    double mag = exp == 0 ? man * 0.001953125 /* 2^-9 */ : (1.0 + man / 8.0) * ldexp(1.0, exp - 7);
    if (exp == 15 && man == 7)
        mag = __longlong_as_double(0x7ff8000000000000ll);
    return sign ? -mag : mag;
}

__device__ __forceinline__ double decode(u8 v, int int8) { return int8 ? (double)(signed char)v : decode_e4m3(v); }

// The e4m3 code of x, rounded to nearest even and saturated at 448: the hardware conversion
// from sm_89 on, the format's definition before (sm_80 and sm_86 run INT8 only, but the fill
// compiles for them too).
__device__ __forceinline__ u8 encode_e4m3(float x)
{
#if __CUDA_ARCH__ >= 890
    unsigned short pair;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(pair) : "f"(0.f), "f"(x));
    return (u8)(pair & 0xff);
#else
    const int sign = signbit(x) ? 0x80 : 0;
    const float a = fminf(fabsf(x), 448.f);
    if (a < 0.015625f) // under 2^-6: subnormal steps of 2^-9; 8 steps is the smallest normal's code
        return (u8)(sign | (int)rintf(a * 512.f));
    int e;
    const float f = frexpf(a, &e); // a = f * 2^e, f in [0.5, 1)
    int man = (int)rintf((2.f * f - 1.f) * 8.f), exp = e - 1 + 7;
    if (man == 8)
        man = 0, exp++;
    const int code = exp << 3 | man;
    return (u8)(sign | (code > 0x7e ? 0x7e : code));
#endif
}

// A quantized operand code as a quantizer would produce it from N(0, 1) data scaled to a quarter
// of the format's range: FP8 e4m3 (max 448) or INT8 (max 127), never all zeros.
__device__ __forceinline__ u8 random_code(u64 seed, u64 i, int int8)
{
    const float x = normal(seed, i);
    if (int8)
        return (u8)(signed char)fmaxf(-127.f, fminf(127.f, rintf(x * 127.f / 4.f)));
    return encode_e4m3(x * 448.f / 4.f);
}

// A positive scale, log-uniform in [lo, hi].
__device__ __forceinline__ float random_scale(u64 seed, u64 i, float lo, float hi)
{
    return lo * powf(hi / lo, uniform(seed, i, 0));
}

__device__ __forceinline__ u64 global_ns()
{
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory"); // "memory": no store moves above it
    return t;
}

} // namespace support
} // namespace bt

// A GEMM problem's inputs from one seed: codes of A (na) and B (nb), scales of A (nas, in
// [alo, ahi]) and B (nbs, in [blo, bhi]); element i of each is the same whatever the grid.
// For the check under programmatic launch (bt_problem_refill) the kernel lets a successor
// launched so start at once and holds its writes back hold_ns; then it writes B and A from
// their last elements to their first, and the scales last, so what a GEMM reads first comes
// last: a successor that reads its inputs before griddepcontrol.wait reads the poison they held.
extern "C" __global__ void __launch_bounds__(1024)
    bt_fill_inputs(bt::u8 *A, long na, bt::u8 *B, long nb, float *As, long nas, float *Bs, long nbs, int int8,
                   unsigned long long seed, float alo, float ahi, float blo, float bhi, unsigned long long hold_ns)
{
    using namespace bt;
    using namespace bt::support;
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
    if (hold_ns) {
        const u64 t0 = global_ns();
        do
            __nanosleep(1000);
        while (global_ns() - t0 < hold_ns);
    }
    // The index space is As, Bs, A, B, walked from its end.
    const long total = nas + nbs + na + nb;
    for (long j = blockIdx.x * (long)blockDim.x + threadIdx.x; j < total; j += (long)gridDim.x * blockDim.x) {
        long i = total - 1 - j;
        if (i < nas) {
            As[i] = random_scale(4 * seed + 3, (u64)i, alo, ahi);
        } else if ((i -= nas) < nbs) {
            Bs[i] = random_scale(4 * seed + 4, (u64)i, blo, bhi);
        } else if ((i -= nbs) < na) {
            A[i] = random_code(4 * seed + 1, (u64)i, int8);
        } else {
            i -= na;
            B[i] = random_code(4 * seed + 2, (u64)i, int8);
        }
    }
}

// R[m, n] = sum_k (A[m, k] * As[m, k/qbk]) * (B[n, k] * Bs[n/qbn, k/qbk]) in float64, one thread
// per output, operands staged through shared memory 16 x 16 at a time. 16 x 16 threads a block.
extern "C" __global__ void bt_ref_gemm(const bt::u8 *A, const bt::u8 *B, const float *As,
                                       const float *Bs, float *R, int M, int N, int K, int qbn,
                                       int qbk, int int8)
{
    using namespace bt;
    __shared__ double sa[16][17], sb[16][17];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int n = blockIdx.x * 16 + tx;
    const int ksc = (K + qbk - 1) / qbk;
    // Row blocks stride by the grid, whose y extent stops at 65535 (M up to 2^20 has 65536).
    for (int by = blockIdx.y; by < (M + 15) / 16; by += gridDim.y) {
        const int m = by * 16 + ty;
        double acc = 0;
        for (int k0 = 0; k0 < K; k0 += 16) {
            int ka = k0 + tx;
            sa[ty][tx] = (m < M && ka < K) ? support::decode(A[(long)m * K + ka], int8) * As[(long)m * ksc + ka / qbk] : 0.0;
            int nb = blockIdx.x * 16 + ty, kb = k0 + tx;
            sb[ty][tx] = (nb < N && kb < K) ? support::decode(B[(long)nb * K + kb], int8) * Bs[(long)(nb / qbn) * ksc + kb / qbk] : 0.0;
            __syncthreads();
            for (int k = 0; k < 16; k++)
                acc += sa[ty][k] * sb[tx][k];
            __syncthreads();
        }
        if (m < M && n < N)
            R[(long)m * N + n] = (float)acc;
    }
}

// Accumulates sum((C - R)^2), sum(R^2) into sums[0..1] and counts non-finite C elements (an
// unwritten, poisoned element reads as NaN) into bad[0]. out: 0 f16, 1 bf16, 2 f32.
extern "C" __global__ void bt_compare(const void *C, const float *R, long n, int out, double *sums,
                                      unsigned long long *bad)
{
    using namespace bt;
    __shared__ double s_err[32], s_ref[32];
    __shared__ unsigned long long s_bad[32];
    double err = 0, ref = 0;
    unsigned long long nbad = 0;
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        float c;
        if (out == 2) {
            c = ((const float *)C)[i];
        } else {
            u16 h = ((const u16 *)C)[i];
            if (out == 0)
                asm("cvt.f32.f16 %0, %1;" : "=f"(c) : "h"(h));
            else
                c = __uint_as_float((u32)h << 16);
        }
        if (!isfinite(c)) {
            nbad++;
            continue;
        }
        double d = (double)c - (double)R[i];
        err += d * d;
        ref += (double)R[i] * R[i];
    }
    for (int o = 16; o > 0; o /= 2) {
        err += __shfl_down_sync(0xffffffffu, err, o);
        ref += __shfl_down_sync(0xffffffffu, ref, o);
        nbad += __shfl_down_sync(0xffffffffu, nbad, o);
    }
    int w = threadIdx.x / 32;
    if (threadIdx.x % 32 == 0)
        s_err[w] = err, s_ref[w] = ref, s_bad[w] = nbad;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int i = 1; i < (int)(blockDim.x / 32); i++)
            err += s_err[i], ref += s_ref[i], nbad += s_bad[i];
        atomicAdd(&sums[0], err);
        atomicAdd(&sums[1], ref);
        atomicAdd(bad, nbad);
    }
}

// Counts bytes of the guard region after C that no longer hold the fill pattern (stray writes).
extern "C" __global__ void bt_guard_check(const bt::u8 *g, long n, int pattern, unsigned long long *bad)
{
    unsigned long long nbad = 0;
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        nbad += g[i] != (bt::u8)pattern;
    if (nbad)
        atomicAdd(bad, nbad);
}
