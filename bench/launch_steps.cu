// What each of the native kernel's set-up and tear-down steps adds to a launch: the time per
// launch of back-to-back kernels in a CUDA graph (200 launches, median of 20 replays; grid 224 x
// 256 threads, 54 KB of dynamic shared memory, two CTAs per SM, like the native kernel at
// (7168, 256) M = 1) of an empty kernel and of kernels that each add one step: griddepcontrol,
// mbarrier set-up, a block barrier, one 4 KB bulk copy from global memory waited for (its source
// rotated over 1 GB so that it misses L2), plain stores, a bulk store waited for (whole or read).
// Build and run on the GPU machine: nvcc -O2 -arch=sm_90a -o build/launch_steps bench/launch_steps.cu
// && build/launch_steps
#include "graph_timer.cuh"
#include <cstdio>
enum { GDC = 1, MBAR = 2, BULK_LOAD = 4, BULK_STORE = 8, STORE = 16, STORE_WAIT_READ = 32, BAR_SYNC = 64 };
__device__ __forceinline__ unsigned smem(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }
template <int F> __global__ void __launch_bounds__(256, 2) k(const unsigned char *src, unsigned char *dst, int *flag)
{
    extern __shared__ __align__(1024) unsigned char dyn[];
    if (F & GDC) asm volatile("griddepcontrol.wait;" ::: "memory");
    unsigned bar = smem(dyn + 52 * 1024);
    if ((F & (MBAR | BULK_LOAD)) && threadIdx.x == 0) {
        for (int i = 0; i < 8; i++)
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar + 8 * i));
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    if (F & (MBAR | BULK_LOAD | BAR_SYNC)) __syncthreads();
    if ((F & BULK_LOAD) && threadIdx.x == 0) {
        // 4 KB of the weights' kind of traffic: one bulk copy global -> shared, waited for.
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(4096) : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], 4096, [%2];"
                     ::"r"(smem(dyn)), "l"(src + 4096 * (size_t)blockIdx.x), "r"(bar) : "memory");
        asm volatile("{\n.reg .pred p;\nW: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], 0;\n@!p bra W;\n}" ::"r"(bar) : "memory");
    }
    if ((F & (BULK_STORE | STORE_WAIT_READ)) && threadIdx.x == 0) {
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], 64;" ::"l"(dst + 64 * (size_t)blockIdx.x), "r"(smem(dyn + 8192)) : "memory");
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
        if (F & STORE_WAIT_READ) asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
        else asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    }
    if ((F & STORE) && threadIdx.x < 4)
        ((unsigned *)dst)[16 * blockIdx.x + threadIdx.x] = threadIdx.x;
    if (F & GDC) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    if (flag && threadIdx.x == 0 && blockIdx.x == 1 << 30) *flag = 1;
}
template <int F> float timeit(cudaStream_t s, const unsigned char *src, unsigned char *dst, int sets)
{
    cudaFuncSetAttribute(k<F>, cudaFuncAttributeMaxDynamicSharedMemorySize, 54 * 1024);
    return per_launch_us([&](int i) {
        k<F><<<224, 256, 54 * 1024, s>>>(src + (size_t)(i % sets) * (8 << 20), dst + (size_t)(i % sets) * (1 << 20), nullptr);
    }, s);
}
int main()
{
    const int sets = 128; // 128 x 0.9 MB read: out of the 50 MB L2 between uses
    unsigned char *src, *dst; cudaMalloc(&src, (size_t)sets << 23); cudaMalloc(&dst, (size_t)sets << 20);
    cudaMemset(src, 1, (size_t)sets << 23);
    cudaStream_t s; cudaStreamCreate(&s);
    for (int rep = 0; rep < 3; rep++) {
        printf("empty %.3f | gdc %.3f | mbar %.3f | bar.sync %.3f | bulk load %.3f | store %.3f | bulk store %.3f | bulk store, wait read %.3f | mbar+load+bulk store+gdc %.3f us\n",
               timeit<0>(s, src, dst, sets), timeit<GDC>(s, src, dst, sets), timeit<MBAR>(s, src, dst, sets),
               timeit<BAR_SYNC>(s, src, dst, sets), timeit<BULK_LOAD>(s, src, dst, sets), timeit<STORE>(s, src, dst, sets),
               timeit<BULK_STORE>(s, src, dst, sets), timeit<STORE_WAIT_READ>(s, src, dst, sets),
               timeit<MBAR | BULK_LOAD | BULK_STORE | GDC>(s, src, dst, sets));
    }
    printf("err %s\n", cudaGetErrorString(cudaGetLastError()));
}
