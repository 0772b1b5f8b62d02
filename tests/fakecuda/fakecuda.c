/* A stand-in CUDA driver for CPU tests (BT_LIBCUDA=build/tests/libfakecuda.so): one device of
 * compute capability 9.0, "device" memory in host memory, kernels that do nothing and events
 * 10 us apart. The support kernels' checks therefore pass. Knobs, by environment variable:
 * - BT_FAKE_CUDA_FLAKY: a GEMM kernel's output reads as unwritten from its second check on (a
 *   kernel right the first time only);
 * - BT_FAKE_CUDA_SLOW: the GEMM kernel of every second module loaded times 10x slower;
 * - BT_FAKE_CUDA_HANG: every GEMM launch hangs;
 * - BT_FAKE_CUDA_MEM=bytes: an allocation larger than that fails, as on a GPU out of memory;
 * - BT_FAKE_CUDA_LOAD=oom or =bad: every module load fails (out of memory, or an image the GPU
 *   refuses); =bad:N the next N loads only;
 * - BT_FAKE_CUDA_CTX: a context is current from the start, as a library's caller has one;
 * - BT_FAKE_CUDA_CAPTURING: every stream is capturing a graph;
 * - BT_FAKE_CUDA_DEVICES="Fake GPU,Other GPU": one device of each name, in that order (unset: one
 *   "Fake GPU"). */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct CUfunc_st {
    struct CUmod_st *mod;
    char name[64];
};
struct CUmod_st {
    int index; /* in load order */
    int checks; /* of the GEMM kernel in it */
    int nfns;
    struct CUfunc_st fns[8];
    unsigned block; /* threads per block of its last GEMM launch */
};

static struct CUmod_st *last_gemm; /* the module of the last GEMM launched */
static int modules;                  /* loaded so far */
static char dummy;

CUresult CUDAAPI cuInit(unsigned int Flags) { (void)Flags; return CUDA_SUCCESS; }
CUresult CUDAAPI cuGetErrorName(CUresult error, const char **pStr) { (void)error; *pStr = "CUDA_ERROR_FAKE"; return CUDA_SUCCESS; }
CUresult CUDAAPI cuGetErrorString(CUresult error, const char **pStr) { (void)error; *pStr = "fake"; return CUDA_SUCCESS; }
CUresult CUDAAPI cuDriverGetVersion(int *v) { *v = 12040; return CUDA_SUCCESS; }
CUresult CUDAAPI cuDeviceGet(CUdevice *d, int ordinal) { *d = ordinal; return CUDA_SUCCESS; }
CUresult CUDAAPI cuDeviceGetCount(int *count)
{
    const char *d = getenv("BT_FAKE_CUDA_DEVICES");
    *count = 1;
    for (; d && *d; d++)
        *count += *d == ',';
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev)
{
    const char *d = getenv("BT_FAKE_CUDA_DEVICES");
    if (!d)
        d = "Fake GPU";
    for (int i = 0; i < dev && strchr(d, ','); i++)
        d = strchr(d, ',') + 1;
    int n = (int)strcspn(d, ",");
    snprintf(name, (size_t)len, "%.*s", n, d);
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute a, CUdevice dev)
{
    (void)dev;
    *pi = a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR ? 9
        : a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR ? 0
        : a == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT ? 132
        : a == CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN ? 232448
        : a == CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE ? 1 << 20 : 0;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) { (void)d; *c = (CUcontext)&dummy; return CUDA_SUCCESS; }
CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice d) { (void)d; return CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxSetCurrent(CUcontext c) { (void)c; return CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxGetCurrent(CUcontext *c) { *c = getenv("BT_FAKE_CUDA_CTX") ? (CUcontext)&dummy : NULL; return CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxPushCurrent(CUcontext c) { (void)c; return CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxPopCurrent(CUcontext *c) { *c = NULL; return CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxGetDevice(CUdevice *d) { *d = 0; return CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxSynchronize(void) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuModuleLoadData(CUmodule *m, const void *image)
{
    (void)image;
    static int failed; /* loads failed under a BT_FAKE_CUDA_LOAD with a count */
    const char *fail = getenv("BT_FAKE_CUDA_LOAD"), *count = fail ? strchr(fail, ':') : NULL;
    if (!fail)
        failed = 0;
    else if (!count || failed++ < atoi(count + 1))
        return strncmp(fail, "oom", 3) == 0 ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_IMAGE;
    *m = calloc(1, sizeof **m);
    (*m)->index = modules++;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuModuleUnload(CUmodule m) { if (last_gemm == m) last_gemm = NULL; free(m); return CUDA_SUCCESS; }
CUresult CUDAAPI cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name)
{
    if (m->nfns == 8)
        return CUDA_ERROR_NOT_FOUND;
    *f = &m->fns[m->nfns++];
    (*f)->mod = m;
    strncpy((*f)->name, name, sizeof (*f)->name - 1);
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v) { (void)f, (void)a, (void)v; return CUDA_SUCCESS; }
CUresult CUDAAPI cuFuncGetAttribute(int *pi, CUfunction_attribute a, CUfunction f) { (void)a, (void)f; *pi = 0; return CUDA_SUCCESS; }
CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                                unsigned int by, unsigned int bz, unsigned int smem, CUstream s, void **params, void **extra)
{
    (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)smem, (void)s, (void)extra;
    if (strcmp(f->name, "bt_compare") == 0 && last_gemm) {
        unsigned long long *bad = (unsigned long long *)*(CUdeviceptr *)params[5];
        if (last_gemm->checks++ > 0 && getenv("BT_FAKE_CUDA_FLAKY"))
            bad[0] = 1;
    }
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params, void **extra)
{
    (void)params, (void)extra;
    last_gemm = f->mod;
    last_gemm->block = config->blockDimX;
    while (getenv("BT_FAKE_CUDA_HANG"))
        sleep(1);
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuOccupancyMaxActiveClusters(int *n, CUfunction f, const CUlaunchConfig *c) { (void)f, (void)c; *n = 16; return CUDA_SUCCESS; }
CUresult CUDAAPI cuMemAlloc(CUdeviceptr *p, size_t n)
{
    const char *cap = getenv("BT_FAKE_CUDA_MEM");
    if (cap && n > strtoull(cap, NULL, 10))
        return CUDA_ERROR_OUT_OF_MEMORY;
    *p = (CUdeviceptr)calloc(1, n ? n : 1);
    return *p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
CUresult CUDAAPI cuMemFree(CUdeviceptr p) { free((void *)p); return CUDA_SUCCESS; }
CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr d, const void *s, size_t n) { memcpy((void *)d, s, n); return CUDA_SUCCESS; }
CUresult CUDAAPI cuMemcpyDtoH(void *d, CUdeviceptr s, size_t n) { memcpy(d, (void *)s, n); return CUDA_SUCCESS; }
CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) { (void)st; memcpy((void *)d, (void *)s, n); return CUDA_SUCCESS; }
CUresult CUDAAPI cuMemsetD8(CUdeviceptr d, unsigned char c, size_t n) { memset((void *)d, c, n); return CUDA_SUCCESS; }
CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr d, unsigned char c, size_t n, CUstream s) { (void)s; memset((void *)d, c, n); return CUDA_SUCCESS; }
CUresult CUDAAPI cuMemsetD32(CUdeviceptr d, unsigned int v, size_t n) { for (size_t i = 0; i < n; i++) ((unsigned *)d)[i] = v; return CUDA_SUCCESS; }
CUresult CUDAAPI cuStreamCreate(CUstream *s, unsigned int fl) { (void)fl; *s = (CUstream)&dummy; return CUDA_SUCCESS; }
CUresult CUDAAPI cuStreamDestroy(CUstream s) { (void)s; return CUDA_SUCCESS; }
CUresult CUDAAPI cuStreamSynchronize(CUstream s) { (void)s; return CUDA_SUCCESS; }
CUresult CUDAAPI cuStreamBeginCapture(CUstream s, CUstreamCaptureMode m) { (void)s, (void)m; return CUDA_SUCCESS; }
CUresult CUDAAPI cuStreamEndCapture(CUstream s, CUgraph *g) { (void)s; *g = (CUgraph)&dummy; return CUDA_SUCCESS; }
CUresult CUDAAPI cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *st)
{
    (void)s;
    *st = getenv("BT_FAKE_CUDA_CAPTURING") ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec *e, CUgraph g, unsigned long long fl) { (void)g, (void)fl; *e = (CUgraphExec)&dummy; return CUDA_SUCCESS; }
CUresult CUDAAPI cuGraphLaunch(CUgraphExec e, CUstream s) { (void)e, (void)s; return CUDA_SUCCESS; }
CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec e) { (void)e; return CUDA_SUCCESS; }
CUresult CUDAAPI cuGraphDestroy(CUgraph g) { (void)g; return CUDA_SUCCESS; }
CUresult CUDAAPI cuEventCreate(CUevent *e, unsigned int fl) { (void)fl; *e = (CUevent)&dummy; return CUDA_SUCCESS; }
CUresult CUDAAPI cuEventDestroy(CUevent e) { (void)e; return CUDA_SUCCESS; }
CUresult CUDAAPI cuEventRecord(CUevent e, CUstream s) { (void)e, (void)s; return CUDA_SUCCESS; }
CUresult CUDAAPI cuEventSynchronize(CUevent e) { (void)e; return CUDA_SUCCESS; }
CUresult CUDAAPI cuEventElapsedTime(float *ms, CUevent a, CUevent b)
{
    (void)a, (void)b;
    const char *slow_block = getenv("BT_FAKE_CUDA_SLOW_BLOCK"); /* kernels of that many threads 1.2x slower */
    *ms = getenv("BT_FAKE_CUDA_SLOW") && last_gemm && last_gemm->index % 2                       ? 0.1f
          : slow_block && last_gemm && last_gemm->block == (unsigned)strtoul(slow_block, NULL, 10) ? 0.012f
                                                                                                  : 0.01f;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuTensorMapEncodeTiled(CUtensorMap *m, CUtensorMapDataType t, cuuint32_t r, void *g, const cuuint64_t *d,
                                        const cuuint64_t *s, const cuuint32_t *b, const cuuint32_t *e, CUtensorMapInterleave i,
                                        CUtensorMapSwizzle sw, CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill o)
{
    (void)t, (void)r, (void)g, (void)d, (void)s, (void)b, (void)e, (void)i, (void)sw, (void)l2, (void)o;
    memset(m, 0, sizeof *m);
    return CUDA_SUCCESS;
}
