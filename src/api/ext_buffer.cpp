// gdx_ext.h's test buffers: memory of every kind gdx_perftest measures, through the CUDA driver gdx opened at run
// time (the tools cannot link libcuda). On a machine without a driver the GPU kinds fail with the reason.
#include "api/ext_util.h"
#include "api/handles.h"
#include "gdx/gdx_ext.h"
#include "memtype/cuda_driver.h"

#include <cstdlib>
#include <cstring>

struct gdx_ext_buffer {
    gdx_ext_mem_kind_t kind = GDX_EXT_MEM_HOST;
    int gpu = 0;
    void *ptr = nullptr;
    size_t len = 0;
    size_t map_len = 0;               // VMM: mapped (granularity-rounded) length
    unsigned long long vmm_handle = 0;
    ~gdx_ext_buffer();
};

namespace {

using gdx::api::guarded;


std::string kind_text(gdx_ext_mem_kind_t kind, int gpu) {
    static const char *const kNames[] = {"host", "host-pinned", "cuda", "cuda-managed", "cuda-vmm"};
    if (kind == GDX_EXT_MEM_HOST) return "host";
    return std::string(kNames[kind]) + ":" + std::to_string(gpu);
}

#if GDX_HAVE_CUDA_H
namespace cuda = gdx::cuda;

gdx_status_t driver_failed(const gdx_ext_buffer &b, const char *call, CUresult r) {
    return GDX_EXT_FAIL(GDX_ERR_DRIVER, "%s: %s: %s", kind_text(b.kind, b.gpu).c_str(), call, cuda::error_text(r).c_str());
}

gdx_status_t bind(const gdx_ext_buffer &b) {
    CUresult r = cuda::bind_device(b.gpu);
    if (r != CUDA_SUCCESS)
        return GDX_EXT_FAIL(GDX_ERR_DRIVER, "cannot make GPU %d's context current: %s", b.gpu, cuda::error_text(r).c_str());
    return GDX_OK;
}

// cuMemCreate + cuMemAddressReserve + cuMemMap + cuMemSetAccess on b.gpu; the destructor undoes what was done.
gdx_status_t alloc_vmm(gdx_ext_buffer &b, const cuda::DriverApi &api) {
    const std::string what = kind_text(b.kind, b.gpu);
    if (!api.cuMemCreate || !api.cuMemMap || !api.cuMemAddressReserve || !api.cuMemSetAccess ||
        !api.cuMemGetAllocationGranularity)
        return GDX_EXT_FAIL(GDX_ERR_UNSUPPORTED, "%s: this CUDA driver lacks the virtual memory management API (cuMemCreate)",
                    what.c_str());
    const cuda::DeviceInfo *info = nullptr;
    std::vector<cuda::DeviceInfo> devs = cuda::list_devices();
    for (const auto &d : devs)
        if (d.ordinal == b.gpu) info = &d;
    if (info == nullptr || !info->vmm_supported)
        return GDX_EXT_FAIL(GDX_ERR_UNSUPPORTED, "%s: GPU %d does not support virtual memory management", what.c_str(), b.gpu);
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = b.gpu;
    if (info->posix_fd_handles) prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    if (info->gdr_with_vmm) prop.allocFlags.gpuDirectRDMACapable = 1;
    size_t gran = 0;
    CUresult r = api.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
    if (r != CUDA_SUCCESS || gran == 0) return driver_failed(b, "cuMemGetAllocationGranularity", r);
    const size_t map_len = (b.len + gran - 1) / gran * gran;
    CUmemGenericAllocationHandle h = 0;
    if ((r = api.cuMemCreate(&h, map_len, &prop, 0)) != CUDA_SUCCESS) return driver_failed(b, "cuMemCreate", r);
    CUdeviceptr d = 0;
    if ((r = api.cuMemAddressReserve(&d, map_len, gran, 0, 0)) != CUDA_SUCCESS) {
        api.cuMemRelease(h);
        return driver_failed(b, "cuMemAddressReserve", r);
    }
    if ((r = api.cuMemMap(d, map_len, 0, h, 0)) != CUDA_SUCCESS) {
        api.cuMemAddressFree(d, map_len);
        api.cuMemRelease(h);
        return driver_failed(b, "cuMemMap", r);
    }
    b.map_len = map_len;
    b.vmm_handle = h;
    b.ptr = reinterpret_cast<void *>(d); // from here the destructor unmaps and releases
    CUmemAccessDesc access{};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if ((r = api.cuMemSetAccess(d, map_len, &access, 1)) != CUDA_SUCCESS) return driver_failed(b, "cuMemSetAccess", r);
    return GDX_OK;
}

gdx_status_t alloc_gpu_kind(gdx_ext_buffer &b) {
    if (gdx_status_t st = gdx_ext_mem_check(b.kind, b.gpu); st != GDX_OK) return st;
    if (gdx_status_t st = bind(b); st != GDX_OK) return st;
    const cuda::DriverApi &api = *cuda::driver();
    CUresult r = CUDA_SUCCESS;
    CUdeviceptr d = 0;
    switch (b.kind) {
    case GDX_EXT_MEM_HOST_PINNED:
        if ((r = api.cuMemHostAlloc(&b.ptr, b.len, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP)) != CUDA_SUCCESS)
            return driver_failed(b, "cuMemHostAlloc", r);
        std::memset(b.ptr, 0, b.len);
        return GDX_OK;
    case GDX_EXT_MEM_CUDA:
        if ((r = api.cuMemAlloc(&d, b.len)) != CUDA_SUCCESS) return driver_failed(b, "cuMemAlloc", r);
        b.ptr = reinterpret_cast<void *>(d);
        break;
    case GDX_EXT_MEM_CUDA_MANAGED:
        if ((r = api.cuMemAllocManaged(&d, b.len, CU_MEM_ATTACH_GLOBAL)) != CUDA_SUCCESS)
            return driver_failed(b, "cuMemAllocManaged", r);
        b.ptr = reinterpret_cast<void *>(d);
        break;
    case GDX_EXT_MEM_CUDA_VMM:
        if (gdx_status_t st = alloc_vmm(b, api); st != GDX_OK) return st;
        break;
    case GDX_EXT_MEM_HOST: break;
    }
    // Zeroed and synchronized: the first iteration must not pay for first-touch, nor race with the memset.
    r = api.cuMemsetD8(reinterpret_cast<CUdeviceptr>(b.ptr), 0, b.len);
    if (r == CUDA_SUCCESS) r = api.cuCtxSynchronize();
    return r == CUDA_SUCCESS ? GDX_OK : driver_failed(b, "cuMemsetD8", r);
}
#endif

bool host_kind(gdx_ext_mem_kind_t k) { return k == GDX_EXT_MEM_HOST || k == GDX_EXT_MEM_HOST_PINNED; }

gdx_status_t check_range(const gdx_ext_buffer *b, size_t offset, size_t len, const void *host, const char *what) {
    if (b == nullptr || host == nullptr)
        return GDX_EXT_FAIL(GDX_ERR_INVALID_PARAM, "%s: NULL %s", what, b == nullptr ? "buffer" : "host pointer");
    if (offset > b->len || len > b->len - offset)
        return GDX_EXT_FAIL(GDX_ERR_INVALID_PARAM, "%s of %zu bytes at %zu exceeds the %zu-byte buffer", what, len, offset,
                    b->len);
    return GDX_OK;
}

} // namespace

gdx_ext_buffer::~gdx_ext_buffer() {
    if (ptr == nullptr) return;
    if (kind == GDX_EXT_MEM_HOST) {
        std::free(ptr);
        return;
    }
#if GDX_HAVE_CUDA_H
    const cuda::DriverApi *api = cuda::driver();
    if (api == nullptr || cuda::bind_device(gpu) != CUDA_SUCCESS) return;
    auto d = reinterpret_cast<CUdeviceptr>(ptr);
    switch (kind) {
    case GDX_EXT_MEM_HOST_PINNED: api->cuMemFreeHost(ptr); break;
    case GDX_EXT_MEM_CUDA:
    case GDX_EXT_MEM_CUDA_MANAGED: api->cuMemFree(d); break;
    case GDX_EXT_MEM_CUDA_VMM:
        api->cuMemUnmap(d, map_len);
        api->cuMemAddressFree(d, map_len);
        api->cuMemRelease(vmm_handle);
        break;
    case GDX_EXT_MEM_HOST: break;
    }
#endif
}

extern "C" {

gdx_status_t gdx_ext_gpu_count(int *count) {
    if (count == nullptr) return GDX_EXT_FAIL(GDX_ERR_INVALID_PARAM, "gdx_ext_gpu_count: NULL count");
    *count = 0;
#if GDX_HAVE_CUDA_H
    const cuda::DriverApi *api = cuda::driver();
    if (api == nullptr || api->device_count == 0) return GDX_EXT_FAIL(GDX_ERR_NO_DEVICE, "%s", cuda::why_unavailable().c_str());
    *count = api->device_count;
    return GDX_OK;
#else
    return GDX_EXT_FAIL(GDX_ERR_NO_DEVICE, "gdx was built without CUDA headers");
#endif
}

gdx_status_t gdx_ext_mem_check(gdx_ext_mem_kind_t kind, int gpu) {
    if (kind == GDX_EXT_MEM_HOST) return GDX_OK;
    return guarded("gdx_ext_mem_check", [&] {
        int n = 0;
        if (gdx_ext_gpu_count(&n) != GDX_OK)
            return GDX_EXT_FAIL(GDX_ERR_NO_DEVICE, "memory kind '%s' needs a GPU, and there is none here: %s",
                        kind_text(kind, gpu).c_str(), gdx::last_error().c_str());
        if (gpu < 0 || gpu >= n)
            return GDX_EXT_FAIL(GDX_ERR_NO_DEVICE, "memory kind '%s': GPU %d does not exist (this machine has %d GPU%s)",
                        kind_text(kind, gpu).c_str(), gpu, n, n == 1 ? "" : "s");
        return GDX_OK;
    });
}

gdx_status_t gdx_ext_buffer_alloc(gdx_ext_mem_kind_t kind, int gpu, size_t len, gdx_ext_buffer_t **buf_p) {
    return guarded("gdx_ext_buffer_alloc", [&] {
        if (buf_p == nullptr || len == 0 || kind < GDX_EXT_MEM_HOST || kind > GDX_EXT_MEM_CUDA_VMM)
            return GDX_EXT_FAIL(GDX_ERR_INVALID_PARAM, "gdx_ext_buffer_alloc: NULL output, zero length or unknown kind %d",
                        static_cast<int>(kind));
        auto b = std::make_unique<gdx_ext_buffer>();
        b->kind = kind;
        b->gpu = kind == GDX_EXT_MEM_HOST ? 0 : gpu;
        b->len = len;
        if (kind == GDX_EXT_MEM_HOST) {
            // Page-aligned and touched: the first iteration must not pay for page faults.
            b->ptr = std::aligned_alloc(4096, (len + 4095) & ~size_t{4095});
            if (b->ptr == nullptr) return GDX_EXT_FAIL(GDX_ERR_NO_MEMORY, "host: cannot allocate %zu bytes of host memory", len);
            std::memset(b->ptr, 0, len);
        } else {
#if GDX_HAVE_CUDA_H
            if (gdx_status_t st = alloc_gpu_kind(*b); st != GDX_OK) return st;
#else
            return gdx_ext_mem_check(kind, gpu); // says why there is no GPU here
#endif
        }
        *buf_p = b.release();
        return GDX_OK;
    });
}

void *gdx_ext_buffer_ptr(const gdx_ext_buffer_t *buf) { return buf == nullptr ? nullptr : buf->ptr; }

gdx_status_t gdx_ext_buffer_write(gdx_ext_buffer_t *buf, size_t offset, const void *src, size_t len) {
    if (gdx_status_t st = check_range(buf, offset, len, src, "gdx_ext_buffer_write"); st != GDX_OK) return st;
    if (host_kind(buf->kind)) {
        std::memcpy(static_cast<uint8_t *>(buf->ptr) + offset, src, len);
        return GDX_OK;
    }
#if GDX_HAVE_CUDA_H
    if (gdx_status_t st = bind(*buf); st != GDX_OK) return st;
    CUresult r = cuda::driver()->cuMemcpyHtoD(reinterpret_cast<CUdeviceptr>(buf->ptr) + offset, src, len);
    if (r != CUDA_SUCCESS) return driver_failed(*buf, "cuMemcpyHtoD", r);
    // From pageable memory cuMemcpyHtoD may return before its DMA lands, and gdx's copies run on non-blocking
    // streams that do not wait for it: the bytes must be in place before anything reads them.
    if ((r = cuda::driver()->cuCtxSynchronize()) != CUDA_SUCCESS) return driver_failed(*buf, "cuCtxSynchronize", r);
    return GDX_OK;
#else
    return GDX_EXT_FAIL(GDX_ERR_UNSUPPORTED, "no CUDA support");
#endif
}

gdx_status_t gdx_ext_buffer_read(const gdx_ext_buffer_t *buf, size_t offset, void *dst, size_t len) {
    if (gdx_status_t st = check_range(buf, offset, len, dst, "gdx_ext_buffer_read"); st != GDX_OK) return st;
    if (host_kind(buf->kind)) {
        std::memcpy(dst, static_cast<const uint8_t *>(buf->ptr) + offset, len);
        return GDX_OK;
    }
#if GDX_HAVE_CUDA_H
    if (gdx_status_t st = bind(*buf); st != GDX_OK) return st;
    CUresult r = cuda::driver()->cuMemcpyDtoH(dst, reinterpret_cast<CUdeviceptr>(buf->ptr) + offset, len);
    return r == CUDA_SUCCESS ? GDX_OK : driver_failed(*buf, "cuMemcpyDtoH", r);
#else
    return GDX_EXT_FAIL(GDX_ERR_UNSUPPORTED, "no CUDA support");
#endif
}

void gdx_ext_buffer_free(gdx_ext_buffer_t *buf) { delete buf; }

} // extern "C"
