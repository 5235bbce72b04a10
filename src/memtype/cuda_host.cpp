// The CUDA row's host memory: pinned bounce buffers (cuMemHostAlloc), registration of memory someone else mapped
// (cuMemHostRegister: the shared bounce pools), and dma-buf export of device memory for NIC registration.
#include "memtype/cuda_internal.h"

#if GDX_HAVE_CUDA_H
#include "core/error.h"
#include "memtype/range_cache.h"

#include <cstdio>
#include <unistd.h>

namespace gdx::mem::cudarow {

gdx_status_t host_alloc(size_t len, int device, void **out) {
    if (out == nullptr || len == 0)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "cuda host_alloc(%zu): null output or zero length", len);
    *out = nullptr;
    const cuda::DriverApi *api = cuda::driver();
    if (api == nullptr)
        return GDX_FAIL(GDX_ERR_NO_DEVICE, kComp, "cuda host_alloc: %s", cuda::why_unavailable().c_str());
    const int dev = device < 0 ? 0 : device;
    if (device_state(dev) == nullptr)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "cuda host_alloc: no GPU %d", device);
    cuda::DeviceScope scope(dev);
    if (!scope.ok()) return driver_error(scope.status(), log::Level::Error, "cuda host_alloc: binding the context");
    // PORTABLE: pinned for every context (bounce buffers serve any GPU); DEVICEMAP: kernels may read it too.
    CUresult r = api->cuMemHostAlloc(out, len, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
    if (r != CUDA_SUCCESS) {
        *out = nullptr;
        char what[80];
        std::snprintf(what, sizeof(what), "cuMemHostAlloc(%zu, PORTABLE|DEVICEMAP) on GPU %d", len, dev);
        return driver_error(r, log::Level::Error, what);
    }
    invalidate(*out, len); // an Events-mode cache may remember older memory at these addresses
    return GDX_OK;
}

void host_free(void *p) {
    const cuda::DriverApi *api = cuda::driver();
    if (p == nullptr || api == nullptr) return;
    invalidate(p, 1); // before the free (the entry containing p is the allocation's)...
    // Free in the allocating context (PORTABLE memory is usable from all, but belongs to one).
    CUcontext ctx = nullptr;
    CUresult r = api->cuPointerGetAttribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, reinterpret_cast<CUdeviceptr>(p));
    if (r == CUDA_SUCCESS && ctx != nullptr && (r = api->cuCtxPushCurrent(ctx)) == CUDA_SUCCESS) {
        r = api->cuMemFreeHost(p);
        CUcontext popped = nullptr;
        api->cuCtxPopCurrent(&popped);
    } else {
        cuda::DeviceScope scope(0);
        r = api->cuMemFreeHost(p);
    }
    if (r != CUDA_SUCCESS) GDX_WARN(kComp, "cuMemFreeHost(%p): %s", p, cuda::error_text(r).c_str());
    invalidate(p, 1); // and after (README: Events validation)
}

// Pins a shared-memory mapping for the copy engines. PORTABLE: every context may DMA to it (a pool serves any
// GPU); DEVICEMAP like host_alloc's memory.
gdx_status_t host_register(void *p, size_t len, int device) {
    const cuda::DriverApi *api = cuda::driver();
    if (api == nullptr)
        return GDX_FAIL(GDX_ERR_NO_DEVICE, kComp, "cuda host_register: %s", cuda::why_unavailable().c_str());
    const int dev = device < 0 ? 0 : device;
    cuda::DeviceScope scope(dev);
    if (!scope.ok()) return driver_error(scope.status(), log::Level::Error, "cuda host_register: binding the context");
    CUresult r = api->cuMemHostRegister(p, len, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
    if (r != CUDA_SUCCESS) {
        char what[96];
        std::snprintf(what, sizeof(what), "cuMemHostRegister(%p, %zu, PORTABLE|DEVICEMAP) on GPU %d", p, len, dev);
        return driver_error(r, log::Level::Warn, what);
    }
    invalidate(p, len); // the cache may remember these pages as pageable
    return GDX_OK;
}

void host_unregister(void *p) {
    const cuda::DriverApi *api = cuda::driver();
    if (p == nullptr || api == nullptr) return;
    invalidate(p, 1);
    if (CUresult r = api->cuMemHostUnregister(p); r != CUDA_SUCCESS)
        GDX_WARN(kComp, "cuMemHostUnregister(%p): %s", p, cuda::error_text(r).c_str());
    invalidate(p, 1);
}

gdx_status_t dmabuf_fd(const void *ptr, size_t len, int *fd, uint64_t *offset) {
    if (ptr == nullptr || fd == nullptr || offset == nullptr || len == 0)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "dmabuf_fd(%p, %zu): null argument or zero length", ptr, len);
    *fd = -1;
    *offset = 0;
    const cuda::DriverApi *api = cuda::driver();
    if (api == nullptr || api->cuMemGetHandleForAddressRange == nullptr) return GDX_ERR_UNSUPPORTED;
    // Classify here, uncached: registration is not a hot path, and an export of managed or pool memory can
    // crash the driver (ucxx#749), so no caller's possibly stale answer is trusted.
    MemInfo info;
    gdx_status_t st = query(ptr, &info);
    if (st == GDX_ERR_NOT_FOUND) return GDX_ERR_UNSUPPORTED;
    if (st != GDX_OK) return st;
    if (!info.dmabuf_allowed) {
        GDX_DEBUG(kComp, "dmabuf_fd(%p): %s memory is not exported by dma-buf", ptr, type_name(info.type));
        return GDX_ERR_UNSUPPORTED;
    }
    const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
    if (len > UINTPTR_MAX - p || (info.size != 0 && p + len - info.base > info.size))
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "dmabuf_fd(%p, %zu): range leaves its allocation", ptr, len);
    // The driver wants a host-page-aligned range; the fd then covers a little more, and the caller
    // registers at `offset` inside it.
    const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const uintptr_t start = p & ~(page - 1);
    const uintptr_t end = (p + len + page - 1) & ~(page - 1);
    if (end < p) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "dmabuf_fd(%p, %zu): range overflows", ptr, len);
    cuda::DeviceScope scope(info.device >= 0 ? info.device : 0);
    unsigned long long flags = 0;
#if CUDA_VERSION >= 12080
    if (dmabuf_pcie_first()) flags = CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE;
#endif
    int out = -1;
    CUresult r =
        api->cuMemGetHandleForAddressRange(&out, start, end - start, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, flags);
    if (flags != 0 && (r == CUDA_ERROR_INVALID_VALUE || r == CUDA_ERROR_NOT_SUPPORTED)) {
        // The PCIe (BAR1) mapping type is platform-dependent: retry with the default mapping.
        GDX_LOG_ONCE(log::Level::Debug, kComp, "memtype:dmabuf-pcie",
                     "dma-buf PCIe mapping type refused (%s): "
                     "using the default mapping",
                     cuda::error_text(r).c_str());
        out = -1;
        r = api->cuMemGetHandleForAddressRange(&out, start, end - start, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
    }
    if (r != CUDA_SUCCESS || out < 0) {
        // Debug level: the registration ladder falls back (peer memory, staging) and logs its own decision.
        char what[128];
        std::snprintf(what, sizeof(what), "cuMemGetHandleForAddressRange(DMA_BUF_FD, 0x%zx, %zu) for %s",
                      static_cast<size_t>(start), static_cast<size_t>(end - start), type_name(info.type));
        return driver_error(r == CUDA_SUCCESS ? CUDA_ERROR_UNKNOWN : r, log::Level::Debug, what);
    }
    *fd = out;
    *offset = p - start;
    return GDX_OK;
}
} // namespace gdx::mem::cudarow

#endif // GDX_HAVE_CUDA_H
