// Hopper's asynchronous machinery used by the native kernel: mbarriers, the tensor memory
// accelerator (TMA) copy engine, and per-warpgroup register reallocation (sm_90a).
#pragma once

#include "common.cuh"

namespace bt {

// A CUtensorMap as the kernel sees it: 128 opaque bytes, 64-byte aligned, passed by value as a
// __grid_constant__ parameter so the TMA unit can read it from the parameter space.
struct __align__(64) tensor_map {
    u64 opaque[16];
};

__device__ __forceinline__ void mbar_init(u32 bar, u32 count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}

// Makes barrier initialisation visible to the async proxy (TMA completes transactions on it).
__device__ __forceinline__ void mbar_fence_init()
{
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// Arms the barrier for `bytes` of incoming TMA data and counts this thread's arrival.
__device__ __forceinline__ void mbar_expect_tx(u32 bar, u32 bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_arrive(u32 bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

// Waits until the phase with the given parity has completed. A barrier's phases alternate
// parity 0, 1, 0, ...; waiting on the parity before the first phase returns at once, which is
// how a producer starts on empty slots.
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity)
{
    asm volatile("{\n"
                 ".reg .pred done;\n"
                 "wait_%=:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra wait_%=;\n"
                 "}\n" ::"r"(bar),
                 "r"(parity)
                 : "memory");
}

// 2-D tile copy global -> shared by the TMA unit; coordinates are (inner, outer) elements, and
// rows or columns outside the tensor arrive as zeros. Completion is signalled on bar.
__device__ __forceinline__ void tma_load_2d(u32 dst, const tensor_map *map, int x, int y, u32 bar)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
                 "l"((u64)map), "r"(x), "r"(y), "r"(bar)
                 : "memory");
}

// The same copy, multicast: the tile lands at the same shared-memory offset in every CTA of
// the cluster named in cta_mask, and completes on the barrier at bar's offset in each.
__device__ __forceinline__ void tma_load_2d_multicast(u32 dst, const tensor_map *map, int x, int y, u32 bar,
                                                      u16 cta_mask)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(dst),
                 "l"((u64)map), "r"(x), "r"(y), "r"(bar), "h"(cta_mask)
                 : "memory");
}

__device__ __forceinline__ u32 cluster_rank()
{
    u32 r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}

// Every thread of every CTA in the cluster: orders barrier initialisation before peers use
// it, and keeps a CTA alive until its peers no longer touch its shared memory.
__device__ __forceinline__ void cluster_sync()
{
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

// The address of the shared-memory word at `addr` in cluster CTA `rank` (distributed shared
// memory), for st_cluster and the .shared::cluster barrier operations.
__device__ __forceinline__ u32 map_cluster(u32 addr, u32 rank)
{
    u32 r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(addr), "r"(rank));
    return r;
}

// Arrives on the barrier at the same shared-memory offset in cluster CTA `rank` (possibly
// this one). The default .release.cta semantics suffice: what the arrival releases is a slot
// the tensor cores have finished reading (wgmma wait), not memory this thread wrote, and a
// .release.cluster arrival would first wait for every earlier store of this thread (the
// previous tile's epilogue) to become visible across the cluster.
__device__ __forceinline__ void mbar_arrive_cluster(u32 bar, u32 rank)
{
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(map_cluster(bar, rank)) : "memory");
}

__device__ __forceinline__ void st_cluster_f32(u32 addr, float v)
{
    asm volatile("st.shared::cluster.f32 [%0], %1;\n" ::"r"(addr), "f"(v) : "memory");
}

// Arrives on the barrier at `bar` in cluster CTA `rank`, releasing this thread's earlier
// writes (and reads) at cluster scope: what the waiter acquires is data.
__device__ __forceinline__ void mbar_arrive_cluster_release(u32 bar, u32 rank)
{
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(map_cluster(bar, rank))
                 : "memory");
}

// mbar_wait that acquires, at cluster scope, what the arrivals released.
__device__ __forceinline__ void mbar_wait_cluster(u32 bar, u32 parity)
{
    asm volatile("{\n"
                 ".reg .pred done;\n"
                 "wait_%=:\n"
                 "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra wait_%=;\n"
                 "}\n" ::"r"(bar),
                 "r"(parity)
                 : "memory");
}

// 2-D tile copy shared -> global by the TMA unit, in this thread's bulk group; rows or columns
// outside the tensor are not written. The shared-memory writes it reads must have been made
// visible to the async proxy first (fence_proxy_async by each writer, then a barrier).
__device__ __forceinline__ void tma_store_2d(const tensor_map *map, u32 src, int x, int y)
{
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"((u64)map),
                 "r"(x), "r"(y), "r"(src)
                 : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// Waits until this thread's committed stores have read their shared memory (it may be reused)...
__device__ __forceinline__ void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }
// ... or have completed, their writes done too.
__device__ __forceinline__ void bulk_wait() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }

// Counts one arrival on bar once every cp.async this thread issued before has landed; the
// barrier's expected count must include it (.noinc).
__device__ __forceinline__ void cp_async_arrive(u32 bar)
{
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}

// Named barrier `id` (1-15; 0 is __syncthreads) over `count` threads: named_sync waits until
// `count` threads have synced or arrived; named_arrive counts the calling warp and goes on.
__device__ __forceinline__ void named_sync(u32 id, u32 count)
{
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ void named_arrive(u32 id, u32 count)
{
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

__device__ __forceinline__ void prefetch_tensor_map(const tensor_map *map)
{
    asm volatile("prefetch.tensormap [%0];\n" ::"l"((u64)map) : "memory");
}

// Programmatic dependent launch (sm_90). A grid launched with programmatic stream
// serialization may start while the kernel before it in the stream still runs; griddep_wait
// returns once that kernel has completed and its memory is visible (at once for a grid launched
// without the attribute), so whatever it may have written is read, and whatever it may still
// read is written, only after it. griddep_launch_dependents lets the next such grid start.
__device__ __forceinline__ void griddep_wait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }
__device__ __forceinline__ void griddep_launch_dependents()
{
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}

// Moves registers between warpgroups: the producer gives most of its away, the consumers that
// hold the accumulators take them. Takes effect only under a register cap at launch.
template <int N> __device__ __forceinline__ void regs_dealloc() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N)); }
template <int N> __device__ __forceinline__ void regs_alloc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N)); }

} // namespace bt
