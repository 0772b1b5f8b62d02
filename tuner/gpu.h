/* A GPU to run on: device context and target, GEMM kernels loaded from cubins and launched
 * with a family's geometry, and the support kernels (random inputs, reference, checks). */
#ifndef BT_GPU_H
#define BT_GPU_H

#include "cuda.h"
#include "family.h"
#include "jit.h"
#include "util.h"

typedef struct {
    bt_cuda cu;
    CUdevice dev;
    CUcontext ctx;
    int retained; /* we retained the primary context and release it on close */
    bt_device_info info;
    bt_target target;
    CUstream stream;
    CUmodule support;
    CUfunction fill_inputs, ref_gemm, compare, guard_check;
} bt_gpu;

/* Opens the driver and device `ordinal` in its primary context, or (ordinal < 0) the context
 * current on this thread; derives the target (sm_90a on Hopper, sm_89 on Ada, ...) and opens
 * the compile cache for it (jit_mode: bt_jit_open's mode). with_support: also compile and
 * load the support kernels (random inputs, reference, checks) the tuner and tests use, and
 * create `stream` for them (the library, without, launches on its callers' streams). */
int bt_gpu_open(bt_gpu *g, int ordinal, const char *cache_dir, int jit_mode, int with_support, bt_jit **jit,
                bt_err *err);
void bt_gpu_close(bt_gpu *g);

/* The target NVRTC compiles for on a device of compute capability major.minor. */
int bt_target_from_device(const bt_device_info *info, bt_target *t, bt_err *err);

typedef struct {
    CUdeviceptr A, B, As, Bs, C;
    long M, N, K;
} bt_gemm_args;

typedef struct {
    CUmodule mod;
    CUfunction fn;
    const bt_family *family;
    bt_cand cand;
    bt_variant variant;
    int max_clusters; /* clusters of its size that fit on the GPU at once (0: no clusters) */
} bt_kernel;

/* Loads a candidate's cubin and raises its dynamic shared-memory limit. Fails with -1 when the
 * kernel itself cannot be loaded here (an image or a limit this GPU refuses, a cluster that does
 * not fit), with -2 when the GPU's state is to blame (out of memory, a context a fault broke),
 * which may pass. */
int bt_kernel_load(bt_gpu *g, const void *cubin, const bt_family *f, const bt_cand *c,
                   const bt_variant *v, bt_kernel *k, bt_err *err);
void bt_kernel_unload(bt_gpu *g, bt_kernel *k);

/* Checks shapes the kernels cannot take (K not a multiple of 16, sizes over int range). */
int bt_gemm_check(const bt_gemm_args *a, bt_err *err);
/* Checks the pointers: none 0, A and B 16-byte aligned (TMA and 16-byte copies), the scales
 * 4-byte aligned, C aligned to its elements (of `out`). */
int bt_gemm_check_pointers(const bt_gemm_args *a, bt_out_type out, bt_err *err);

/* Enqueues one GEMM on stream; no allocation, no synchronisation (graph-capturable). With
 * programmatic set, a kernel of a family that allows it is launched with programmatic stream
 * serialization (it may start while the previous kernel in the stream finishes). */
int bt_kernel_launch(bt_gpu *g, const bt_kernel *k, const bt_gemm_args *a, CUstream stream,
                     int programmatic, bt_err *err);

/* Device buffers of one GEMM problem filled with fresh random quantized data. C lies between
 * two guard regions of guard_bytes in one allocation, c_alloc. */
typedef struct {
    bt_gemm_args args;
    CUdeviceptr c_alloc;
    size_t a_bytes, b_bytes, as_bytes, bs_bytes, c_bytes, guard_bytes;
} bt_problem;

int bt_problem_alloc(bt_gpu *g, long M, long N, long K, const bt_variant *v, bt_problem *p,
                     bt_err *err);
void bt_problem_free(bt_gpu *g, bt_problem *p);
/* New random codes and scales from seed (never zeros). */
int bt_problem_fill(bt_gpu *g, bt_problem *p, const bt_variant *v, unsigned long long seed,
                    bt_err *err);
/* Writes the inputs of bt_problem_fill(seed) again, for a check under programmatic launch: poisons
 * them, then refills them in a kernel that lets a GEMM launched programmatically right after it
 * start at once and holds its writes back well past that GEMM's start. A GEMM that touches its
 * inputs before griddepcontrol.wait (the kernel before it complete) then reads poison. */
int bt_problem_refill(bt_gpu *g, bt_problem *p, const bt_variant *v, unsigned long long seed, CUstream stream,
                      bt_err *err);
/* Fills C with 0xFF (NaN in every output type) and the guards around it with a pattern. */
int bt_problem_poison(bt_gpu *g, bt_problem *p, CUstream stream, bt_err *err);

/* The reference result (float32 of a float64 sum) into a caller's buffer of M*N floats. */
int bt_reference(bt_gpu *g, const bt_problem *p, const bt_variant *v, CUdeviceptr ref,
                 bt_err *err);

typedef struct {
    double rel_err;            /* ||C - R||_F / ||R||_F over finite elements */
    unsigned long long nonfinite; /* unwritten (still poisoned) or NaN/Inf outputs */
    unsigned long long guard;  /* bytes written before or past C */
} bt_check;

/* Compares the problem's C with ref; synchronizes. */
int bt_compare(bt_gpu *g, const bt_problem *p, const bt_variant *v, CUdeviceptr ref,
               bt_check *out, bt_err *err);

/* Relative Frobenius error a correct kernel stays under for an output type (see gpu.c). */
double bt_tolerance(bt_out_type out);

/* Whether a check passes: every output written and finite, nothing past C, the error within
 * the output type's tolerance. */
int bt_check_passed(const bt_check *c, bt_out_type out);

#endif
