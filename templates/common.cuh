// Device helpers shared by the kernel templates: fixed-width types (NVRTC has no libc headers),
// thin wrappers over the PTX instructions the kernels use, and output conversion.
#pragma once

namespace bt {

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

// Output element types by the tuner's numbering (0 float16, 1 bfloat16, 2 float32).
template <int OUT> struct out_type { typedef u16 type; };
template <> struct out_type<2> { typedef float type; };

template <int OUT> __device__ __forceinline__ typename out_type<OUT>::type to_out(float x);
template <> __device__ __forceinline__ u16 to_out<0>(float x)
{
    u16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
    return h;
}
template <> __device__ __forceinline__ u16 to_out<1>(float x)
{
    u16 h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(x));
    return h;
}
template <> __device__ __forceinline__ float to_out<2>(float x) { return x; }

__device__ __forceinline__ u32 smem_addr(const void *p)
{
    return (u32)__cvta_generic_to_shared(p);
}

// The dynamic shared memory's start rounded up to ALIGN bytes (the launch adds ALIGN to the size).
template <int ALIGN> __device__ __forceinline__ u8 *aligned_dyn(u8 *dyn)
{
    return dyn + (ALIGN - smem_addr(dyn) % ALIGN) % ALIGN;
}

// The tuner's robustness tests (tune.c) plant a fault or a hang at a kernel's entry.
__device__ __forceinline__ void test_plants()
{
#ifdef BT_TEST_FAULT
    *(volatile int *)(~0ull - 63) = 1; // an illegal address
#endif
#ifdef BT_TEST_HANG
    for (;;)
        __nanosleep(1000); // an asm side effect: the compiler may not drop the loop
#endif
}

// 16-byte asynchronous global->shared copy; src_bytes 0 fills the destination with zeros,
// which is how tiles past the matrix edge read as zero without a branch in the main loop.
__device__ __forceinline__ void cp_async16(u32 dst, const void *src, bool valid)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(valid ? 16 : 0));
}

__device__ __forceinline__ void cp_async4(u32 dst, const void *src, bool valid)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src),
                 "r"(valid ? 4 : 0));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

template <int N> __device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Makes this thread's generic-proxy shared-memory writes (cp.async included) visible to the
// async proxy, which wgmma and TMA stores read through; needed before the barrier that precedes
// the wgmma or the store.
__device__ __forceinline__ void fence_proxy_async()
{
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Byte offset of (row, 16-byte chunk) in a tile of ROW_BYTES-wide rows stored with the
// hardware's swizzle for that width (128 B: address bits [4,7) ^= bits [7,10); 64 B: [4,6) ^=
// [7,9); 32 B: bit 4 ^= bit 7; 16 B: none). The same layout serves ldmatrix and stmatrix (8 rows
// of one 16-byte column land in 8 different bank groups), wgmma descriptors and TMA boxes with
// the matching swizzle mode.
template <int ROW_BYTES> __device__ __forceinline__ u32 swizzle(u32 off)
{
    static_assert(ROW_BYTES == 16 || ROW_BYTES == 32 || ROW_BYTES == 64 || ROW_BYTES == 128, "row width");
    return off ^ (((off >> 7) & (ROW_BYTES / 16 - 1)) << 4);
}

// ldmatrix of 8-bit data: each 8x8 "b16" matrix is 8 rows x 16 bytes, so every thread gets 4
// consecutive K bytes of one row, which is the m16n8k32 operand layout for 8-bit types.
__device__ __forceinline__ void ldmatrix_x4(u32 &r0, u32 &r1, u32 &r2, u32 &r3, u32 addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

__device__ __forceinline__ void ldmatrix_x2(u32 &r0, u32 &r1, u32 addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r0), "=r"(r1)
                 : "r"(addr));
}

// D = A * B + D for one m16n8k32 tile. FP8 e4m3 accumulates in f32, INT8 in s32.
template <bool INT8> struct mma16832;

template <> struct mma16832<false> {
    typedef float acc;
    static __device__ __forceinline__ void run(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2])
    {
        asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
};

template <> struct mma16832<true> {
    typedef int acc;
    static __device__ __forceinline__ void run(int (&d)[4], const u32 (&a)[4], const u32 (&b)[2])
    {
        asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                     : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
};

// Stores two horizontally adjacent outputs (c, c+1) of row r, bounds-checked; one vector store
// when both are in range and aligned.
template <int OUT>
__device__ __forceinline__ void store_pair(typename out_type<OUT>::type *C, long ldc, long r, long c,
                                           long M, long N, float x0, float x1)
{
    typedef typename out_type<OUT>::type T;
    if (r >= M || c >= N)
        return;
    T *p = C + r * ldc + c;
    T v0 = to_out<OUT>(x0), v1 = to_out<OUT>(x1);
    if (c + 1 < N && ((unsigned long long)p % (2 * sizeof(T))) == 0) {
        if (sizeof(T) == 2) {
            *(u32 *)p = (u32)v0 | ((u32)v1 << 16);
        } else {
            float2 f;
            f.x = x0, f.y = x1;
            *(float2 *)p = f;
        }
    } else {
        p[0] = v0;
        if (c + 1 < N)
            p[1] = v1;
    }
}

// Triton's grouped tile order: GM rows of tiles are walked column by column so that the tiles
// running at the same time share A rows and B columns in L2.
__device__ __forceinline__ void grouped_tile(int pid, int tiles_m, int tiles_n, int gm, int &tm, int &tn)
{
    int per_group = gm * tiles_n;
    int group = pid / per_group;
    int first_m = group * gm;
    int rows = tiles_m - first_m < gm ? tiles_m - first_m : gm;
    tm = first_m + (pid % per_group) % rows;
    tn = (pid % per_group) / rows;
}

} // namespace bt
