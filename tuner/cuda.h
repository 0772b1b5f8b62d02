/* The CUDA driver API, opened at run time with dlopen so the binary starts (dry runs, --help,
 * config handling) on machines without a driver. */

#ifndef BT_CUDA_H
#define BT_CUDA_H

#include <cuda.h> /* the toolkit's: tuner/ is on the quote path only (-iquote) */

#include "util.h"

/* One pointer per driver entry point we use, resolved from libcuda.so.1. cuda.h's macros
 * apply to these names (cuMemAlloc is cuMemAlloc_v2), so each field is looked up under the
 * versioned symbol a program linked against this cuda.h would call; write cu->cuMemAlloc(). */
#define BT_CUDA_FUNCS(X)                                                                       \
    X(cuInit)                                                                                  \
    X(cuGetErrorName)                                                                          \
    X(cuGetErrorString)                                                                        \
    X(cuDriverGetVersion)                                                                      \
    X(cuDeviceGet)                                                                             \
    X(cuDeviceGetCount)                                                                        \
    X(cuDeviceGetName)                                                                         \
    X(cuDeviceGetAttribute)                                                                    \
    X(cuDevicePrimaryCtxRetain)                                                                \
    X(cuDevicePrimaryCtxRelease)                                                               \
    X(cuCtxSetCurrent)                                                                         \
    X(cuCtxGetCurrent)                                                                         \
    X(cuCtxPushCurrent)                                                                        \
    X(cuCtxPopCurrent)                                                                         \
    X(cuCtxGetDevice)                                                                          \
    X(cuCtxSynchronize)                                                                        \
    X(cuModuleLoadData)                                                                        \
    X(cuModuleUnload)                                                                          \
    X(cuModuleGetFunction)                                                                     \
    X(cuFuncSetAttribute)                                                                      \
    X(cuFuncGetAttribute)                                                                      \
    X(cuLaunchKernel)                                                                          \
    X(cuLaunchKernelEx)                                                                        \
    X(cuOccupancyMaxActiveClusters)                                                            \
    X(cuMemAlloc)                                                                              \
    X(cuMemFree)                                                                               \
    X(cuMemcpyHtoD)                                                                            \
    X(cuMemcpyDtoH)                                                                            \
    X(cuMemcpyDtoDAsync)                                                                       \
    X(cuMemsetD8)                                                                              \
    X(cuMemsetD8Async)                                                                         \
    X(cuMemsetD32)                                                                             \
    X(cuStreamCreate)                                                                          \
    X(cuStreamDestroy)                                                                         \
    X(cuStreamSynchronize)                                                                     \
    X(cuStreamBeginCapture)                                                                    \
    X(cuStreamEndCapture)                                                                      \
    X(cuStreamIsCapturing)                                                                     \
    X(cuGraphInstantiateWithFlags)                                                             \
    X(cuGraphLaunch)                                                                           \
    X(cuGraphExecDestroy)                                                                      \
    X(cuGraphDestroy)                                                                          \
    X(cuEventCreate)                                                                           \
    X(cuEventDestroy)                                                                          \
    X(cuEventRecord)                                                                           \
    X(cuEventSynchronize)                                                                      \
    X(cuEventElapsedTime)                                                                      \
    X(cuTensorMapEncodeTiled)

typedef struct {
#define BT_CUDA_FIELD(name) __typeof__(&name) name;
    BT_CUDA_FUNCS(BT_CUDA_FIELD)
#undef BT_CUDA_FIELD
    void *handle;
} bt_cuda;

/* Opens libcuda.so.1 (or $BT_LIBCUDA), resolves every entry point and calls cuInit(0). Each
 * failure is one line: "no CUDA driver: ..." (library missing, or the toolkit's stub), "no
 * usable CUDA driver: ..." (an entry point missing), "no CUDA device: ...", or cuInit's error.
 * On failure cu is left zeroed. */
int bt_cuda_open(bt_cuda *cu, bt_err *err);
void bt_cuda_close(bt_cuda *cu);

/* Formats a driver error: "what: CUDA_ERROR_X (description)". Returns -1. */
int bt_cuda_fail(const bt_cuda *cu, CUresult r, bt_err *err, const char *what);

/* Checks a driver call: on failure fills err and jumps to `out` with rc left at -1. */
#define BT_CU(cu, call, err, what)                                                             \
    do {                                                                                       \
        CUresult bt_r_ = (cu)->call;                                                           \
        if (bt_r_ != CUDA_SUCCESS) {                                                           \
            bt_cuda_fail((cu), bt_r_, (err), (what));                                          \
            goto out;                                                                          \
        }                                                                                      \
    } while (0)

/* What the tuner needs to know about a device. */
typedef struct {
    char name[256];      /* as the driver reports, e.g. "NVIDIA H100 80GB HBM3" */
    int cc_major, cc_minor;
    int sm_count;
    long smem_optin;     /* max dynamic shared memory per block after opt-in */
    long l2_bytes;
    int driver_version;
} bt_device_info;

int bt_cuda_device_info(const bt_cuda *cu, int ordinal, bt_device_info *info, bt_err *err);

#endif
