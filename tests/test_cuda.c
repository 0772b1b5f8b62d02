#include <stdlib.h>
#include <unistd.h>

#include "cuda.h"
#include "harness.h"
#include "jit.h"

#define STUB "/usr/local/cuda/lib64/stubs/libcuda.so"

/* bt_cuda_open with BT_LIBCUDA set to lib (NULL: unset), restoring the caller's setting. */
static int open_with(const char *lib, bt_cuda *cu, bt_err *err)
{
    char *saved = bt_test_set_env("BT_LIBCUDA", lib);
    int rc = bt_cuda_open(cu, err);
    bt_test_restore_env("BT_LIBCUDA", saved);
    return rc;
}

TEST(cuda_missing_library_is_one_line)
{
    char lib[4200];
    snprintf(lib, sizeof lib, "%s/no-such-dir/libcuda.so.1", bt_test_tmpdir());
    bt_cuda cu;
    bt_err err = {{0}};
    CHECK_EQ(open_with(lib, &cu, &err), -1);
    CHECK(cu.handle == NULL && cu.cuInit == NULL);
    char want[9000];
    snprintf(want, sizeof want,
             "no CUDA driver: cannot load %s (%s: cannot open shared object file: No such file or "
             "directory); GPU work needs the NVIDIA driver",
             lib, lib);
    CHECK_STREQ(err.msg, want);
    CHECK(strchr(err.msg, '\n') == NULL);
}

TEST(cuda_toolkit_stub_is_named)
{
    if (access(STUB, R_OK) != 0)
        SKIP("no toolkit stub at " STUB);
    bt_cuda cu;
    bt_err err = {{0}};
    /* The stub exports every entry point under its versioned name (cuMemAlloc_v2, ...), so
     * reaching cuInit's answer also shows that each name in BT_CUDA_FUNCS resolved. */
    CHECK_EQ(open_with(STUB, &cu, &err), -1);
    CHECK(cu.handle == NULL);
    CHECK_STREQ(err.msg, "no CUDA driver: " STUB " is the toolkit's stub library; GPU work needs "
                         "the NVIDIA driver's libcuda.so.1");
}

TEST(cuda_library_without_entry_points)
{
    bt_cuda cu;
    bt_err err = {{0}};
    CHECK_EQ(open_with("libc.so.6", &cu, &err), -1);
    CHECK(cu.handle == NULL);
    CHECK_STREQ(err.msg, "no usable CUDA driver: libc.so.6 has no cuInit (not a CUDA driver, or "
                         "one older than CUDA 12)");
}

TEST(cuda_fail_without_driver_names_the_code)
{
    bt_cuda cu;
    bt_err err;
    memset(&cu, 0, sizeof cu);
    CHECK_EQ(bt_cuda_fail(&cu, CUDA_ERROR_NO_DEVICE, &err, "cuDeviceGet"), -1);
    CHECK_STREQ(err.msg, "cuDeviceGet: CUDA error 100");
}

/* GPU tests run under `make test-gpu` and skip, saying why, wherever no GPU answers. */
#define OPEN_GPU(cu)                                                                           \
    do {                                                                                       \
        bt_err open_err_;                                                                      \
        if (!getenv("BT_GPU_TESTS"))                                                           \
            SKIP("GPU test: run with BT_GPU_TESTS=1 (make test-gpu)");                         \
        if (open_with(getenv("BT_LIBCUDA"), (cu), &open_err_) != 0)                            \
            SKIP("%.200s", open_err_.msg);                                                     \
    } while (0)

TEST(cuda_gpu_device_info)
{
    bt_cuda cu;
    bt_err err = {{0}};
    bt_device_info info;
    OPEN_GPU(&cu);
    if (bt_cuda_device_info(&cu, 0, &info, &err) != 0) {
        bt_check_fail(t, __FILE__, __LINE__, "bt_cuda_device_info: %s", err.msg);
    } else {
        printf("    %s: sm_%d%d, %d SMs, %ld B shared/block, %ld B L2, driver %d\n", info.name,
               info.cc_major, info.cc_minor, info.sm_count, info.smem_optin, info.l2_bytes,
               info.driver_version);
        CHECK(info.name[0] != '\0');
        CHECK(info.cc_major >= 7);
        CHECK(info.sm_count > 0);
        CHECK(info.smem_optin >= 48 * 1024);
        CHECK(info.l2_bytes > 0);
        CHECK(info.driver_version >= 12000);
    }
    CHECK_EQ(bt_cuda_device_info(&cu, 4096, &info, &err), -1);
    CHECK_CONTAINS(err.msg, "CUDA device 4096 does not exist (the driver sees ");
    CHECK_EQ(bt_cuda_fail(&cu, CUDA_ERROR_OUT_OF_MEMORY, &err, "cuMemAlloc"), -1);
    CHECK_STREQ(err.msg, "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (out of memory)");
    bt_cuda_close(&cu);
}

/* A driver call in a test: on failure, record the driver's message and leave. */
#define GPU_OK(call)                                                                           \
    do {                                                                                       \
        CUresult r_ = cu.call;                                                                 \
        if (r_ != CUDA_SUCCESS) {                                                              \
            bt_cuda_fail(&cu, r_, &err, #call);                                                \
            bt_check_fail(t, __FILE__, __LINE__, "%s", err.msg);                               \
            goto out;                                                                          \
        }                                                                                      \
    } while (0)

/* End to end: an NVRTC cubin for this device loads and computes the right thing. */
TEST(cuda_gpu_runs_a_jit_kernel)
{
    enum { N = 1000 };
    bt_cuda cu;
    bt_err err = {{0}};
    bt_device_info info;
    bt_target tg;
    bt_jit *j = NULL;
    bt_jit_job job = {
        .name = "affine",
        .source = "extern \"C\" __global__ void affine(float *o, const float *a, int n) {"
                  "int i = blockIdx.x * blockDim.x + threadIdx.x;"
                  "if (i < n) o[i] = a[i] * 2.f + 1.f; }\n",
    };
    CUdevice dev;
    CUcontext ctx = NULL;
    CUmodule mod = NULL;
    CUfunction fn;
    CUdeviceptr da = 0, dout = 0;
    void *cubin = NULL;
    size_t len;
    float a[N], o[N];
    char dir[4200];

    OPEN_GPU(&cu);
    if (bt_cuda_device_info(&cu, 0, &info, &err) != 0) {
        bt_check_fail(t, __FILE__, __LINE__, "%s", err.msg);
        goto out;
    }
    memset(&tg, 0, sizeof tg);
    snprintf(tg.arch, sizeof tg.arch, "sm_%d%d%s", info.cc_major, info.cc_minor,
             info.cc_major == 9 ? "a" : "");
    snprintf(dir, sizeof dir, "%s/cuda-jit", bt_test_tmpdir());
    if (bt_jit_open(dir, &tg, BT_JIT_STORE_REQUIRED, &j, &err) || bt_jit_run(j, &job, 1, 1, NULL, NULL, &err) ||
        bt_jit_read_cubin(&job, &cubin, &len, &err)) {
        bt_check_fail(t, __FILE__, __LINE__, "%s %s", err.msg, job.log ? job.log : "");
        goto out;
    }
    for (int i = 0; i < N; i++)
        a[i] = (float)i;
    GPU_OK(cuDeviceGet(&dev, 0));
    GPU_OK(cuDevicePrimaryCtxRetain(&ctx, dev));
    GPU_OK(cuCtxSetCurrent(ctx));
    GPU_OK(cuModuleLoadData(&mod, cubin));
    GPU_OK(cuModuleGetFunction(&fn, mod, "affine"));
    GPU_OK(cuMemAlloc(&da, sizeof a));
    GPU_OK(cuMemAlloc(&dout, sizeof o));
    GPU_OK(cuMemcpyHtoD(da, a, sizeof a));
    int n = N;
    void *args[] = {&dout, &da, &n};
    GPU_OK(cuLaunchKernel(fn, (N + 127) / 128, 1, 1, 128, 1, 1, 0, NULL, args, NULL));
    GPU_OK(cuCtxSynchronize());
    GPU_OK(cuMemcpyDtoH(o, dout, sizeof o));
    int bad = 0;
    for (int i = 0; i < N; i++)
        bad += o[i] != 2.f * (float)i + 1.f;
    CHECK_EQ(bad, 0);
out:
    if (dout)
        cu.cuMemFree(dout);
    if (da)
        cu.cuMemFree(da);
    if (mod)
        cu.cuModuleUnload(mod);
    if (ctx)
        cu.cuDevicePrimaryCtxRelease(dev);
    free(cubin);
    bt_jit_job_clear(&job);
    bt_jit_close(j);
    bt_cuda_close(&cu);
}
