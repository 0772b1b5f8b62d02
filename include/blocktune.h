/* blocktune: W8A8 block-scaled GEMM kernels (FP8 e4m3 or INT8 in, f16/bf16/f32 out) for NVIDIA
 * GPUs, picked per shape and batch size from the config files `tune` writes.
 *
 *   C[M,N] = (A[M,K] * As) . (B[N,K] * Bs)^T
 *
 * A [M,K] and B [N,K] row-major 8-bit codes; As fp32 [M, ceil(K/block_k)] (one scale per row
 * and K block, row-major); Bs fp32 [ceil(N/block_n), ceil(K/block_k)] row-major; C [M,N]
 * row-major. The layout of SGLang's w8a8_block_fp8_matmul. K must be a multiple of 16.
 *
 * Kernels are compiled with NVRTC on first use (through the same on-disk cache as the tuner)
 * and run on the caller's stream with the caller's device pointers: blocktune_gemm allocates
 * nothing and never synchronizes, so it can be captured in a CUDA graph once
 * blocktune_prepare has compiled what the capture will need.
 *
 * Which kernel runs: the native (Hopper) family's config for (device, N, K) when one exists in
 * the config directory, else the classic family's (SGLang's format, nearest batch size as
 * SGLang picks), else a built-in heuristic (README: "Dispatch"). Thread safety: one handle per
 * thread, or serialize calls on a handle. A handle belongs to the CUDA context current when it
 * was opened, and may be called from any thread: when the calling thread has another context
 * current, or none, blocktune_prepare, blocktune_gemm and blocktune_close make the handle's
 * current for the call and restore the thread's own before returning (when it is already
 * current, as it is where one context serves the whole process, a call only checks that).
 * Streams passed in must belong to the handle's context (NULL: its legacy default stream).
 *
 * Every function returns 0 on success, or -1 with a one-line message in err (may be NULL).
 * The handle's own host allocations are small (its configs, kernels and compile sources);
 * when one fails the library prints "blocktune: out of memory" and aborts, as the tuner does.
 * A config file that cannot be read, or holds values out of range, is passed over like a
 * missing one (blocktune_describe names what runs instead), never trusted. A kernel that fails
 * to compile or load (a config entry a newer NVRTC refuses, say) is remembered by the handle and
 * never tried again: that call and later ones run the next choice of the order above, and fail
 * only when every one has failed, with the last failure's reason.
 */
#ifndef BLOCKTUNE_H
#define BLOCKTUNE_H

#include <stddef.h>

#include <cuda.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct blocktune blocktune;

typedef enum { BLOCKTUNE_FP8 = 0, BLOCKTUNE_INT8 = 1 } blocktune_input;
typedef enum { BLOCKTUNE_F16 = 0, BLOCKTUNE_BF16 = 1, BLOCKTUNE_F32 = 2 } blocktune_output;

typedef struct {
    const char *config_dir; /* where `tune` wrote its configs (a directory, resolved at open);
                             * NULL: built-in heuristic only */
    const char *cache_dir;  /* compiled-kernel cache; NULL: $XDG_CACHE_HOME/blocktune or
                               ~/.cache/blocktune. One that cannot be written (a read-only
                               file system) is only read: kernels it lacks compile again in
                               each process, and blocktune_describe says why. */
    int pdl; /* nonzero: launch native kernels with programmatic dependent launch, so that one
                is set up (launched, its barriers initialized) while the kernel before it in the
                stream finishes; it reads and writes memory only once that kernel has completed,
                so any kernel may come before it. Native kernels also let the next such kernel
                start early. */
} blocktune_options;

typedef struct {
    CUdeviceptr A, B, As, Bs, C;
    long M, N, K;
    blocktune_input input;
    blocktune_output output;
    int block_n, block_k; /* quantization block of the scales, usually 128, 128 */
} blocktune_gemm_args;

/* Opens blocktune on the CUDA context current on this thread (the driver is loaded at run
 * time; a machine without one gets a clear error here). Keep that context alive, and destroy
 * graphs that captured the handle's launches, before blocktune_close. */
int blocktune_open(blocktune **bt, const blocktune_options *opt, char *err, size_t errlen);
void blocktune_close(blocktune *bt);

/* Compiles and loads the kernels that M values in Ms would use for this shape and types
 * (shape's M and pointers are not read); refuses, compiling nothing, what blocktune_gemm would
 * refuse of the shape and types, also with nM = 0. */
int blocktune_prepare(blocktune *bt, const blocktune_gemm_args *shape, const long *Ms, int nM,
                      char *err, size_t errlen);

/* Enqueues C = A.B^T with block scales on stream. Refuses 0 pointers, A or B not 16-byte
 * aligned, As or Bs not 4-byte aligned, C not aligned to its elements. */
int blocktune_gemm(blocktune *bt, const blocktune_gemm_args *g, CUstream stream, char *err,
                   size_t errlen);

/* Describes the kernel blocktune_gemm would run for g (or, returning -1, why it refuses g), e.g.
 * "classic BLOCK_SIZE_M=64 ... (config N=7168,K=2304,..., batch 64)"; into buf. Once the
 * kernel it would have run failed (it compiles nothing itself), it adds ", instead of native
 * ... (config ..., batch 64), which failed: " and the reason. */
int blocktune_describe(blocktune *bt, const blocktune_gemm_args *g, char *buf, size_t n);

#ifdef __cplusplus
}
#endif

#endif
