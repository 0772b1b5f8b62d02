#include "cuda.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

/* cuda.h maps most names to their current ABI (cuMemAlloc -> cuMemAlloc_v2); the macro
 * argument is expanded before it is stringified, so dlsym asks for the symbol a program
 * linked against this cuda.h would use. */
#define BT_STR_(x) #x
#define BT_STR(x) BT_STR_(x)

int bt_cuda_open(bt_cuda *cu, bt_err *err)
{
    const char *lib = getenv("BT_LIBCUDA");
    if (!lib || !*lib)
        lib = "libcuda.so.1";
    memset(cu, 0, sizeof *cu);
    cu->handle = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!cu->handle)
        return bt_fail(err, "no CUDA driver: cannot load %s (%s); GPU work needs the NVIDIA driver",
                       lib, dlerror());

#define BT_CUDA_RESOLVE(name)                                                                  \
    cu->name = (__typeof__(cu->name))dlsym(cu->handle, BT_STR(name));                          \
    if (!cu->name) {                                                                           \
        bt_fail(err, "no usable CUDA driver: %s has no %s (not a CUDA driver, or one older "   \
                "than CUDA 12)", lib, BT_STR(name));                                           \
        goto fail;                                                                             \
    }
    BT_CUDA_FUNCS(BT_CUDA_RESOLVE)
#undef BT_CUDA_RESOLVE

    CUresult r = cu->cuInit(0);
    if (r == CUDA_SUCCESS)
        return 0;
    if (r == CUDA_ERROR_STUB_LIBRARY) {
        bt_fail(err, "no CUDA driver: %s is the toolkit's stub library; GPU work needs the "
                "NVIDIA driver's libcuda.so.1", lib);
    } else if (r == CUDA_ERROR_NO_DEVICE) {
        const char *vis = getenv("CUDA_VISIBLE_DEVICES");
        if (vis)
            bt_fail(err, "no CUDA device: the driver sees none (CUDA_VISIBLE_DEVICES=\"%s\")", vis);
        else
            bt_fail(err, "no CUDA device: the driver sees none");
    } else {
        bt_cuda_fail(cu, r, err, "CUDA driver unusable: cuInit");
    }
fail:
    bt_cuda_close(cu);
    return -1;
}

void bt_cuda_close(bt_cuda *cu)
{
    if (cu->handle)
        dlclose(cu->handle);
    memset(cu, 0, sizeof *cu);
}

int bt_cuda_fail(const bt_cuda *cu, CUresult r, bt_err *err, const char *what)
{
    const char *name = NULL, *desc = NULL;
    if (cu->cuGetErrorName && cu->cuGetErrorName(r, &name) != CUDA_SUCCESS)
        name = NULL;
    if (cu->cuGetErrorString && cu->cuGetErrorString(r, &desc) != CUDA_SUCCESS)
        desc = NULL;
    if (name && desc)
        return bt_fail(err, "%s: %s (%s)", what, name, desc);
    if (name)
        return bt_fail(err, "%s: %s", what, name);
    return bt_fail(err, "%s: CUDA error %d", what, (int)r);
}

int bt_cuda_device_info(const bt_cuda *cu, int ordinal, bt_device_info *info, bt_err *err)
{
    int rc = -1, count = 0, smem = 0, l2 = 0;
    CUdevice dev;
    memset(info, 0, sizeof *info);
    BT_CU(cu, cuDeviceGetCount(&count), err, "cuDeviceGetCount");
    if (ordinal < 0 || ordinal >= count) {
        bt_fail(err, "CUDA device %d does not exist (the driver sees %d)", ordinal, count);
        goto out;
    }
    BT_CU(cu, cuDeviceGet(&dev, ordinal), err, "cuDeviceGet");
    BT_CU(cu, cuDeviceGetName(info->name, (int)sizeof info->name, dev), err, "cuDeviceGetName");
    const struct {
        CUdevice_attribute attr;
        int *out;
    } attrs[] = {
        {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &info->cc_major},
        {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &info->cc_minor},
        {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &info->sm_count},
        {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, &smem},
        {CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, &l2},
    };
    for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++)
        BT_CU(cu, cuDeviceGetAttribute(attrs[i].out, attrs[i].attr, dev), err,
              "cuDeviceGetAttribute");
    info->smem_optin = smem;
    info->l2_bytes = l2;
    BT_CU(cu, cuDriverGetVersion(&info->driver_version), err, "cuDriverGetVersion");
    rc = 0;
out:
    return rc;
}
