/* What the UCP and MPI GPU checks share: the CUDA driver, opened at run time (dlopen libcuda.so.1: nothing links
 * CUDA, so the checks build everywhere and skip (77) where there is no driver or no GPU), the byte pattern and a
 * synchronized upload. Header-only, one user per binary. */
#pragma once

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef int CUdevice;
typedef void *CUcontext;

static struct {
    CUresult (*cuInit)(unsigned);
    CUresult (*cuDeviceGetCount)(int*);
    CUresult (*cuDeviceGet)(CUdevice*, int);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
    CUresult (*cuCtxSetCurrent)(CUcontext);
    CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);
    CUresult (*cuMemFree)(CUdeviceptr);
    CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, size_t);
    CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, size_t);
    CUresult (*cuCtxSynchronize)(void);
} cu;

/* 1 when GPU `ordinal` is ready (its primary context current), else 0 with the reason in why. */
static int cuda_open(int ordinal, char *why, size_t why_len)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    CUcontext ctx;
    CUdevice dev;
    int count = 0;
    CUresult r;

    if (h == NULL) {
        snprintf(why, why_len, "no CUDA driver (dlopen libcuda.so.1: %s)", dlerror());
        return 0;
    }
    /* _v2 first: the plain names of cuMemAlloc and cuMemcpy* are the 32-bit-size ABI of CUDA 3 */
#define SYM(name) if ((*(void**)&cu.name = dlsym(h, #name "_v2")) == NULL && \
                      (*(void**)&cu.name = dlsym(h, #name)) == NULL) { \
                      snprintf(why, why_len, "libcuda.so.1 lacks %s", #name); return 0; }
    SYM(cuInit) SYM(cuDeviceGetCount) SYM(cuDeviceGet) SYM(cuDevicePrimaryCtxRetain) SYM(cuCtxSetCurrent)
    SYM(cuMemAlloc) SYM(cuMemFree) SYM(cuMemcpyHtoD) SYM(cuMemcpyDtoH)
#undef SYM
    /* the classic (void) entry point: cuCtxSynchronize_v2 of CUDA 13 takes a context */
    if ((*(void**)&cu.cuCtxSynchronize = dlsym(h, "cuCtxSynchronize")) == NULL) {
        snprintf(why, why_len, "libcuda.so.1 lacks cuCtxSynchronize");
        return 0;
    }
    if (cu.cuInit(0) != 0 || cu.cuDeviceGetCount(&count) != 0 || count == 0) {
        snprintf(why, why_len, "no GPU (cuInit/cuDeviceGetCount: %d devices)", count);
        return 0;
    }
    if (ordinal >= count) {
        snprintf(why, why_len, "GPU %d requested, %d present", ordinal, count);
        return 0;
    }
    if ((r = cu.cuDeviceGet(&dev, ordinal)) != 0 || (r = cu.cuDevicePrimaryCtxRetain(&ctx, dev)) != 0 ||
        (r = cu.cuCtxSetCurrent(ctx)) != 0) {
        snprintf(why, why_len, "GPU %d: context setup failed: CUresult %d", ordinal, r);
        return 0;
    }
    return 1;
}

/* How many GPUs' primary contexts are active in this process (retained by anyone), without making one: cuInit and
 * cuDevicePrimaryCtxGetState create none. -1 with the reason in why when there is no driver or no GPU. */
static inline int cuda_active_contexts(char *why, size_t why_len)
{
    CUresult (*init)(unsigned), (*count_fn)(int*), (*get)(CUdevice*, int);
    CUresult (*state)(CUdevice, unsigned*, int*);
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    int count = 0, i, n = 0;

    if (h == NULL) {
        snprintf(why, why_len, "no CUDA driver (dlopen libcuda.so.1: %s)", dlerror());
        return -1;
    }
    *(void**)&init = dlsym(h, "cuInit");
    *(void**)&count_fn = dlsym(h, "cuDeviceGetCount");
    *(void**)&get = dlsym(h, "cuDeviceGet");
    if ((*(void**)&state = dlsym(h, "cuDevicePrimaryCtxGetState_v2")) == NULL) {
        *(void**)&state = dlsym(h, "cuDevicePrimaryCtxGetState");
    }
    if (init == NULL || count_fn == NULL || get == NULL || state == NULL || init(0) != 0 || count_fn(&count) != 0 ||
        count == 0) {
        snprintf(why, why_len, "no GPU (or no cuDevicePrimaryCtxGetState)");
        return -1;
    }
    for (i = 0; i < count; ++i) {
        CUdevice dev;
        unsigned flags = 0;
        int active = 0;
        if (get(&dev, i) == 0 && state(dev, &flags, &active) == 0 && active) {
            ++n;
        }
    }
    return n;
}

/* Deterministic bytes for a seed: any lost, shifted or stale byte changes them. Eight bytes per step of the
 * generator, so 256 MiB take a fraction of a second. */
static void pattern(uint8_t *p, size_t len, uint64_t seed)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 7;
    for (size_t i = 0; i < len; i += 8) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        for (size_t k = 0; k < 8 && i + k < len; ++k) {
            p[i + k] = (uint8_t)(x >> (8 * k));
        }
    }
}

/* Sizes 1 B .. max for the checks: odd sizes (a fragment cut never lands on a boundary), then max itself; out needs
 * room for 10. Their number. */
static size_t sizes_upto(size_t max, size_t *out)
{
    static const size_t odd[] = {1, 8, 4099, 65537, 1048577, 4194311, 16777259, 67108879, 268435399};
    size_t n = 0;
    for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]) && odd[i] < max; ++i) {
        out[n++] = odd[i];
    }
    out[n++] = max;
    return n;
}

/* Host -> device, complete on return. cuMemcpyHtoD from pageable memory may return before its DMA lands; an
 * application synchronizes before it hands GPU memory to UCX or MPI (which copy on streams of their own). */
static CUresult cuda_upload(CUdeviceptr d, const void *h, size_t len)
{
    CUresult r = cu.cuMemcpyHtoD(d, h, len);
    return (r != 0) ? r : cu.cuCtxSynchronize();
}
