// Warpgroup matrix multiply-accumulate (wgmma, sm_90a): both operands from shared memory through
// matrix descriptors, D (N/2 registers per thread for m64nN) kept in registers. The PTX
// instruction names every accumulator register, so the wrappers below spell the register and
// operand lists for each N (multiples of 8 up to 256) with the list macros that follow.
#pragma once

#include "common.cuh"

namespace bt {

// Shared-memory matrix descriptor for a K-major operand tile whose rows are ROW_BYTES wide and
// stored with the matching swizzle (see swizzle<>): start address, leading byte offset (unused
// by swizzled K-major layouts, 1 by convention), stride byte offset = 8 rows (one core-matrix
// group), and the swizzle mode in bits 62-63 (1: 128 B, 2: 64 B, 3: 32 B). Advancing K by 32
// bytes inside a swizzled row is adding 32 to the start address: the hardware applies the XOR
// on the final address bits, which is why tiles must start on a whole swizzle pattern.
// Shared-window addresses are below 2^18, so the 14-bit start field is addr >> 4 and the other
// fields are constant: a descriptor is a constant plus addr >> 4, and one a stage or a K step
// further on is an add (not a rebuild, which costs five instructions per wgmma).
template <int ROW_BYTES> __device__ __forceinline__ u64 smem_desc(u32 addr)
{
    constexpr u64 mode = ROW_BYTES == 128 ? 1 : ROW_BYTES == 64 ? 2 : 3;
    constexpr u64 fixed = ((u64)1 << 16) | ((u64)(8 * ROW_BYTES >> 4) << 32) | (mode << 62);
    return fixed + (addr >> 4);
}

// Orders earlier register writes to the accumulators before the asynchronous wgmma reads them.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// The compiler does not know that wgmma writes the accumulators asynchronously; pinning them
// here keeps it from moving their reads across wgmma_wait or their writes across wgmma_fence.
// The constraint matches the type: punning a float through "+r" makes the compiler copy every
// accumulator into integer registers, reads that ptxas answers by serializing wgmma.
template <int N> __device__ __forceinline__ void pin(float (&d)[N])
{
#pragma unroll
    for (int i = 0; i < N; i++)
        asm volatile("" : "+f"(d[i])::"memory");
}
template <int N> __device__ __forceinline__ void pin(int (&d)[N])
{
#pragma unroll
    for (int i = 0; i < N; i++)
        asm volatile("" : "+r"(d[i])::"memory");
}

// "%0, %1, ..., %(R-1)" for R accumulator registers, R a multiple of 4.
#define BT_WG_REGS_4 "%0, %1, %2, %3"
#define BT_WG_REGS_8 BT_WG_REGS_4 ", %4, %5, %6, %7"
#define BT_WG_REGS_12 BT_WG_REGS_8 ", %8, %9, %10, %11"
#define BT_WG_REGS_16 BT_WG_REGS_12 ", %12, %13, %14, %15"
#define BT_WG_REGS_20 BT_WG_REGS_16 ", %16, %17, %18, %19"
#define BT_WG_REGS_24 BT_WG_REGS_20 ", %20, %21, %22, %23"
#define BT_WG_REGS_28 BT_WG_REGS_24 ", %24, %25, %26, %27"
#define BT_WG_REGS_32 BT_WG_REGS_28 ", %28, %29, %30, %31"
#define BT_WG_REGS_36 BT_WG_REGS_32 ", %32, %33, %34, %35"
#define BT_WG_REGS_40 BT_WG_REGS_36 ", %36, %37, %38, %39"
#define BT_WG_REGS_44 BT_WG_REGS_40 ", %40, %41, %42, %43"
#define BT_WG_REGS_48 BT_WG_REGS_44 ", %44, %45, %46, %47"
#define BT_WG_REGS_52 BT_WG_REGS_48 ", %48, %49, %50, %51"
#define BT_WG_REGS_56 BT_WG_REGS_52 ", %52, %53, %54, %55"
#define BT_WG_REGS_60 BT_WG_REGS_56 ", %56, %57, %58, %59"
#define BT_WG_REGS_64 BT_WG_REGS_60 ", %60, %61, %62, %63"
#define BT_WG_REGS_68 BT_WG_REGS_64 ", %64, %65, %66, %67"
#define BT_WG_REGS_72 BT_WG_REGS_68 ", %68, %69, %70, %71"
#define BT_WG_REGS_76 BT_WG_REGS_72 ", %72, %73, %74, %75"
#define BT_WG_REGS_80 BT_WG_REGS_76 ", %76, %77, %78, %79"
#define BT_WG_REGS_84 BT_WG_REGS_80 ", %80, %81, %82, %83"
#define BT_WG_REGS_88 BT_WG_REGS_84 ", %84, %85, %86, %87"
#define BT_WG_REGS_92 BT_WG_REGS_88 ", %88, %89, %90, %91"
#define BT_WG_REGS_96 BT_WG_REGS_92 ", %92, %93, %94, %95"
#define BT_WG_REGS_100 BT_WG_REGS_96 ", %96, %97, %98, %99"
#define BT_WG_REGS_104 BT_WG_REGS_100 ", %100, %101, %102, %103"
#define BT_WG_REGS_108 BT_WG_REGS_104 ", %104, %105, %106, %107"
#define BT_WG_REGS_112 BT_WG_REGS_108 ", %108, %109, %110, %111"
#define BT_WG_REGS_116 BT_WG_REGS_112 ", %112, %113, %114, %115"
#define BT_WG_REGS_120 BT_WG_REGS_116 ", %116, %117, %118, %119"
#define BT_WG_REGS_124 BT_WG_REGS_120 ", %120, %121, %122, %123"
#define BT_WG_REGS_128 BT_WG_REGS_124 ", %124, %125, %126, %127"

// C(d[0]), ..., C(d[R-1]) with C the constraint ("+f" or "+r").
#define BT_WG_OPS_4(C, d) C(d[0]), C(d[1]), C(d[2]), C(d[3])
#define BT_WG_OPS_8(C, d) BT_WG_OPS_4(C, d), C(d[4]), C(d[5]), C(d[6]), C(d[7])
#define BT_WG_OPS_12(C, d) BT_WG_OPS_8(C, d), C(d[8]), C(d[9]), C(d[10]), C(d[11])
#define BT_WG_OPS_16(C, d) BT_WG_OPS_12(C, d), C(d[12]), C(d[13]), C(d[14]), C(d[15])
#define BT_WG_OPS_20(C, d) BT_WG_OPS_16(C, d), C(d[16]), C(d[17]), C(d[18]), C(d[19])
#define BT_WG_OPS_24(C, d) BT_WG_OPS_20(C, d), C(d[20]), C(d[21]), C(d[22]), C(d[23])
#define BT_WG_OPS_28(C, d) BT_WG_OPS_24(C, d), C(d[24]), C(d[25]), C(d[26]), C(d[27])
#define BT_WG_OPS_32(C, d) BT_WG_OPS_28(C, d), C(d[28]), C(d[29]), C(d[30]), C(d[31])
#define BT_WG_OPS_36(C, d) BT_WG_OPS_32(C, d), C(d[32]), C(d[33]), C(d[34]), C(d[35])
#define BT_WG_OPS_40(C, d) BT_WG_OPS_36(C, d), C(d[36]), C(d[37]), C(d[38]), C(d[39])
#define BT_WG_OPS_44(C, d) BT_WG_OPS_40(C, d), C(d[40]), C(d[41]), C(d[42]), C(d[43])
#define BT_WG_OPS_48(C, d) BT_WG_OPS_44(C, d), C(d[44]), C(d[45]), C(d[46]), C(d[47])
#define BT_WG_OPS_52(C, d) BT_WG_OPS_48(C, d), C(d[48]), C(d[49]), C(d[50]), C(d[51])
#define BT_WG_OPS_56(C, d) BT_WG_OPS_52(C, d), C(d[52]), C(d[53]), C(d[54]), C(d[55])
#define BT_WG_OPS_60(C, d) BT_WG_OPS_56(C, d), C(d[56]), C(d[57]), C(d[58]), C(d[59])
#define BT_WG_OPS_64(C, d) BT_WG_OPS_60(C, d), C(d[60]), C(d[61]), C(d[62]), C(d[63])
#define BT_WG_OPS_68(C, d) BT_WG_OPS_64(C, d), C(d[64]), C(d[65]), C(d[66]), C(d[67])
#define BT_WG_OPS_72(C, d) BT_WG_OPS_68(C, d), C(d[68]), C(d[69]), C(d[70]), C(d[71])
#define BT_WG_OPS_76(C, d) BT_WG_OPS_72(C, d), C(d[72]), C(d[73]), C(d[74]), C(d[75])
#define BT_WG_OPS_80(C, d) BT_WG_OPS_76(C, d), C(d[76]), C(d[77]), C(d[78]), C(d[79])
#define BT_WG_OPS_84(C, d) BT_WG_OPS_80(C, d), C(d[80]), C(d[81]), C(d[82]), C(d[83])
#define BT_WG_OPS_88(C, d) BT_WG_OPS_84(C, d), C(d[84]), C(d[85]), C(d[86]), C(d[87])
#define BT_WG_OPS_92(C, d) BT_WG_OPS_88(C, d), C(d[88]), C(d[89]), C(d[90]), C(d[91])
#define BT_WG_OPS_96(C, d) BT_WG_OPS_92(C, d), C(d[92]), C(d[93]), C(d[94]), C(d[95])
#define BT_WG_OPS_100(C, d) BT_WG_OPS_96(C, d), C(d[96]), C(d[97]), C(d[98]), C(d[99])
#define BT_WG_OPS_104(C, d) BT_WG_OPS_100(C, d), C(d[100]), C(d[101]), C(d[102]), C(d[103])
#define BT_WG_OPS_108(C, d) BT_WG_OPS_104(C, d), C(d[104]), C(d[105]), C(d[106]), C(d[107])
#define BT_WG_OPS_112(C, d) BT_WG_OPS_108(C, d), C(d[108]), C(d[109]), C(d[110]), C(d[111])
#define BT_WG_OPS_116(C, d) BT_WG_OPS_112(C, d), C(d[112]), C(d[113]), C(d[114]), C(d[115])
#define BT_WG_OPS_120(C, d) BT_WG_OPS_116(C, d), C(d[116]), C(d[117]), C(d[118]), C(d[119])
#define BT_WG_OPS_124(C, d) BT_WG_OPS_120(C, d), C(d[120]), C(d[121]), C(d[122]), C(d[123])
#define BT_WG_OPS_128(C, d) BT_WG_OPS_124(C, d), C(d[124]), C(d[125]), C(d[126]), C(d[127])

#define BT_STR_(x) #x
#define BT_STR(x) BT_STR_(x)

// m64nNk32 with R = N/2 registers; operands R and R+1 are the descriptors, R+2 is scale-d
// (0: D = A*B, 1: D += A*B), read into a predicate.
template <int N> struct wgmma_e4m3; // f32 += e4m3 * e4m3
template <int N> struct wgmma_s8;   // s32 += s8 * s8

#define BT_WGMMA_E4M3(N, R, DA, DB, SD)                                                         \
    template <> struct wgmma_e4m3<N> {                                                           \
        static __device__ __forceinline__ void run(float (&d)[R], u64 da, u64 db, int scale_d)  \
        {                                                                                        \
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" BT_STR(SD) ", 0;\n"                \
                         "wgmma.mma_async.sync.aligned.m64n" BT_STR(N) "k32.f32.e4m3.e4m3 {"     \
                         BT_WG_REGS_##R "}, %" BT_STR(DA) ", %" BT_STR(DB) ", p, 1, 1;\n}\n"      \
                         : BT_WG_OPS_##R("+f", d)                                                \
                         : "l"(da), "l"(db), "r"(scale_d));                                      \
        }                                                                                        \
    };

#define BT_WGMMA_S8(N, R, DA, DB, SD)                                                           \
    template <> struct wgmma_s8<N> {                                                             \
        static __device__ __forceinline__ void run(int (&d)[R], u64 da, u64 db, int scale_d)    \
        {                                                                                        \
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" BT_STR(SD) ", 0;\n"                \
                         "wgmma.mma_async.sync.aligned.m64n" BT_STR(N) "k32.s32.s8.s8 {"         \
                         BT_WG_REGS_##R "}, %" BT_STR(DA) ", %" BT_STR(DB) ", p;\n}\n"            \
                         : BT_WG_OPS_##R("+r", d)                                                \
                         : "l"(da), "l"(db), "r"(scale_d));                                      \
        }                                                                                        \
    };

BT_WGMMA_E4M3(8, 4, 4, 5, 6)
BT_WGMMA_E4M3(16, 8, 8, 9, 10)
BT_WGMMA_E4M3(24, 12, 12, 13, 14)
BT_WGMMA_E4M3(32, 16, 16, 17, 18)
BT_WGMMA_E4M3(40, 20, 20, 21, 22)
BT_WGMMA_E4M3(48, 24, 24, 25, 26)
BT_WGMMA_E4M3(56, 28, 28, 29, 30)
BT_WGMMA_E4M3(64, 32, 32, 33, 34)
BT_WGMMA_E4M3(72, 36, 36, 37, 38)
BT_WGMMA_E4M3(80, 40, 40, 41, 42)
BT_WGMMA_E4M3(88, 44, 44, 45, 46)
BT_WGMMA_E4M3(96, 48, 48, 49, 50)
BT_WGMMA_E4M3(104, 52, 52, 53, 54)
BT_WGMMA_E4M3(112, 56, 56, 57, 58)
BT_WGMMA_E4M3(120, 60, 60, 61, 62)
BT_WGMMA_E4M3(128, 64, 64, 65, 66)
BT_WGMMA_E4M3(136, 68, 68, 69, 70)
BT_WGMMA_E4M3(144, 72, 72, 73, 74)
BT_WGMMA_E4M3(152, 76, 76, 77, 78)
BT_WGMMA_E4M3(160, 80, 80, 81, 82)
BT_WGMMA_E4M3(168, 84, 84, 85, 86)
BT_WGMMA_E4M3(176, 88, 88, 89, 90)
BT_WGMMA_E4M3(184, 92, 92, 93, 94)
BT_WGMMA_E4M3(192, 96, 96, 97, 98)
BT_WGMMA_E4M3(200, 100, 100, 101, 102)
BT_WGMMA_E4M3(208, 104, 104, 105, 106)
BT_WGMMA_E4M3(216, 108, 108, 109, 110)
BT_WGMMA_E4M3(224, 112, 112, 113, 114)
BT_WGMMA_E4M3(232, 116, 116, 117, 118)
BT_WGMMA_E4M3(240, 120, 120, 121, 122)
BT_WGMMA_E4M3(248, 124, 124, 125, 126)
BT_WGMMA_E4M3(256, 128, 128, 129, 130)
// s8 takes N = 8, 16, 24 and the multiples of 16 from 32 on (the tuner rejects other tiles).
BT_WGMMA_S8(8, 4, 4, 5, 6)
BT_WGMMA_S8(16, 8, 8, 9, 10)
BT_WGMMA_S8(24, 12, 12, 13, 14)
BT_WGMMA_S8(32, 16, 16, 17, 18)
BT_WGMMA_S8(48, 24, 24, 25, 26)
BT_WGMMA_S8(64, 32, 32, 33, 34)
BT_WGMMA_S8(80, 40, 40, 41, 42)
BT_WGMMA_S8(96, 48, 48, 49, 50)
BT_WGMMA_S8(112, 56, 56, 57, 58)
BT_WGMMA_S8(128, 64, 64, 65, 66)
BT_WGMMA_S8(144, 72, 72, 73, 74)
BT_WGMMA_S8(160, 80, 80, 81, 82)
BT_WGMMA_S8(176, 88, 88, 89, 90)
BT_WGMMA_S8(192, 96, 96, 97, 98)
BT_WGMMA_S8(208, 104, 104, 105, 106)
BT_WGMMA_S8(224, 112, 112, 113, 114)
BT_WGMMA_S8(240, 120, 120, 121, 122)
BT_WGMMA_S8(256, 128, 128, 129, 130)

// wgmma for the accumulator type of the input type (FP8 -> f32, INT8 -> s32).
template <bool INT8, int N> struct wgmma;
template <int N> struct wgmma<false, N> : wgmma_e4m3<N> { typedef float acc; };
template <int N> struct wgmma<true, N> : wgmma_s8<N> { typedef int acc; };

} // namespace bt
