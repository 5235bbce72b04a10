// typed_alloc.h for the CUDA row: the tools' test buffers (moved from src/api/ext_buffer.cpp, driver calls
// unchanged). Failures are logged at debug level and recorded as the thread's last error: the tool prints them.
#include "memtype/typed_alloc.h"

#include "core/error.h"
#include "memtype/cuda_internal.h"

#include <cstring>

namespace gdx::mem {

#if GDX_HAVE_CUDA_H

namespace {

using cudarow::kComp;

gdx_status_t driver_failed(const TypedAlloc &a, const char *call, CUresult r) {
    return fail(GDX_ERR_DRIVER, log::Level::Debug, kComp, "%s on GPU %d: %s: %s", type_name(a.type), a.device, call,
                cuda::error_text(r).c_str());
}

gdx_status_t bind(const TypedAlloc &a) {
    CUresult r = cuda::bind_device(a.device);
    if (r != CUDA_SUCCESS)
        return fail(GDX_ERR_DRIVER, log::Level::Debug, kComp, "cannot make GPU %d's context current: %s", a.device,
                    cuda::error_text(r).c_str());
    return GDX_OK;
}

// cuMemCreate + cuMemAddressReserve + cuMemMap + cuMemSetAccess on a.device; typed_free undoes what was done.
gdx_status_t alloc_vmm(TypedAlloc &a, const cuda::DriverApi &api) {
    if (!api.cuMemCreate || !api.cuMemMap || !api.cuMemAddressReserve || !api.cuMemSetAccess ||
        !api.cuMemGetAllocationGranularity)
        return fail(GDX_ERR_UNSUPPORTED, log::Level::Debug, kComp,
                    "cuda-vmm: this CUDA driver lacks the virtual memory management API (cuMemCreate)");
    const cuda::DeviceInfo *info = nullptr;
    std::vector<cuda::DeviceInfo> devs = cuda::list_devices();
    for (const auto &d : devs)
        if (d.ordinal == a.device) info = &d;
    if (info == nullptr || !info->vmm_supported)
        return fail(GDX_ERR_UNSUPPORTED, log::Level::Debug, kComp,
                    "cuda-vmm: GPU %d does not support virtual memory management", a.device);
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = a.device;
    if (info->posix_fd_handles) prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    if (info->gdr_with_vmm) prop.allocFlags.gpuDirectRDMACapable = 1;
    size_t gran = 0;
    CUresult r = api.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
    if (r != CUDA_SUCCESS || gran == 0) return driver_failed(a, "cuMemGetAllocationGranularity", r);
    const size_t map_len = (a.len + gran - 1) / gran * gran;
    CUmemGenericAllocationHandle h = 0;
    if ((r = api.cuMemCreate(&h, map_len, &prop, 0)) != CUDA_SUCCESS) return driver_failed(a, "cuMemCreate", r);
    CUdeviceptr d = 0;
    if ((r = api.cuMemAddressReserve(&d, map_len, gran, 0, 0)) != CUDA_SUCCESS) {
        if (CUresult rr = api.cuMemRelease(h); rr != CUDA_SUCCESS)
            GDX_WARN(kComp, "cuMemRelease after a failed reservation: %s", cuda::error_text(rr).c_str());
        return driver_failed(a, "cuMemAddressReserve", r);
    }
    if ((r = api.cuMemMap(d, map_len, 0, h, 0)) != CUDA_SUCCESS) {
        if (CUresult rr = api.cuMemAddressFree(d, map_len); rr != CUDA_SUCCESS)
            GDX_WARN(kComp, "cuMemAddressFree after a failed map: %s", cuda::error_text(rr).c_str());
        if (CUresult rr = api.cuMemRelease(h); rr != CUDA_SUCCESS)
            GDX_WARN(kComp, "cuMemRelease after a failed map: %s", cuda::error_text(rr).c_str());
        return driver_failed(a, "cuMemMap", r);
    }
    a.map_len = map_len;
    a.vmm_handle = h;
    a.ptr = reinterpret_cast<void *>(d); // from here typed_free unmaps and releases
    CUmemAccessDesc access{};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if ((r = api.cuMemSetAccess(d, map_len, &access, 1)) != CUDA_SUCCESS) return driver_failed(a, "cuMemSetAccess", r);
    return GDX_OK;
}

} // namespace

gdx_status_t typed_alloc(MemType type, int device, size_t len, TypedAlloc *a) {
    *a = TypedAlloc{type, device, nullptr, len, 0, 0};
    const cuda::DriverApi *api = cuda::driver();
    if (api == nullptr) return fail(GDX_ERR_NO_DEVICE, log::Level::Debug, kComp, "%s", cuda::why_unavailable().c_str());
    if (gdx_status_t st = bind(*a); st != GDX_OK) return st;
    CUresult r = CUDA_SUCCESS;
    CUdeviceptr d = 0;
    switch (type) {
    case MemType::HostPinned:
        if ((r = api->cuMemHostAlloc(&a->ptr, len, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP)) != CUDA_SUCCESS)
            return driver_failed(*a, "cuMemHostAlloc", r);
        std::memset(a->ptr, 0, len);
        return GDX_OK;
    case MemType::CudaDevice:
        if ((r = api->cuMemAlloc(&d, len)) != CUDA_SUCCESS) return driver_failed(*a, "cuMemAlloc", r);
        a->ptr = reinterpret_cast<void *>(d);
        break;
    case MemType::CudaManaged:
        if ((r = api->cuMemAllocManaged(&d, len, CU_MEM_ATTACH_GLOBAL)) != CUDA_SUCCESS)
            return driver_failed(*a, "cuMemAllocManaged", r);
        a->ptr = reinterpret_cast<void *>(d);
        break;
    case MemType::CudaVmm:
        if (gdx_status_t st = alloc_vmm(*a, *api); st != GDX_OK) return st;
        break;
    default:
        return fail(GDX_ERR_INVALID_PARAM, log::Level::Debug, kComp, "typed_alloc: %s is not made by a driver",
                    type_name(type));
    }
    // Zeroed and synchronized: the first iteration must not pay for first-touch, nor race with the memset.
    r = api->cuMemsetD8(reinterpret_cast<CUdeviceptr>(a->ptr), 0, len);
    if (r != CUDA_SUCCESS) return driver_failed(*a, "cuMemsetD8", r);
    if ((r = api->cuCtxSynchronize()) != CUDA_SUCCESS) return driver_failed(*a, "cuCtxSynchronize", r);
    return GDX_OK;
}

void typed_free(TypedAlloc *a) {
    if (a == nullptr || a->ptr == nullptr) return;
    const cuda::DriverApi *api = cuda::driver();
    if (api == nullptr || cuda::bind_device(a->device) != CUDA_SUCCESS) return;
    auto d = reinterpret_cast<CUdeviceptr>(a->ptr);
    auto check = [&](CUresult r, const char *call) {
        if (r != CUDA_SUCCESS)
            GDX_WARN(kComp, "%s of a %s test buffer on GPU %d: %s", call, type_name(a->type), a->device,
                     cuda::error_text(r).c_str());
    };
    switch (a->type) {
    case MemType::HostPinned: check(api->cuMemFreeHost(a->ptr), "cuMemFreeHost"); break;
    case MemType::CudaDevice:
    case MemType::CudaManaged: check(api->cuMemFree(d), "cuMemFree"); break;
    case MemType::CudaVmm:
        check(api->cuMemUnmap(d, a->map_len), "cuMemUnmap");
        check(api->cuMemAddressFree(d, a->map_len), "cuMemAddressFree");
        check(api->cuMemRelease(a->vmm_handle), "cuMemRelease");
        break;
    default: break;
    }
    a->ptr = nullptr;
}

gdx_status_t typed_write(const TypedAlloc &a, size_t off, const void *src, size_t len) {
    if (gdx_status_t st = bind(a); st != GDX_OK) return st;
    CUresult r = cuda::driver()->cuMemcpyHtoD(reinterpret_cast<CUdeviceptr>(a.ptr) + off, src, len);
    if (r != CUDA_SUCCESS) return driver_failed(a, "cuMemcpyHtoD", r);
    // From pageable memory cuMemcpyHtoD may return before its DMA lands, and gdx's copies run on non-blocking
    // streams that do not wait for it: the bytes must be in place before anything reads them.
    if ((r = cuda::driver()->cuCtxSynchronize()) != CUDA_SUCCESS) return driver_failed(a, "cuCtxSynchronize", r);
    return GDX_OK;
}

gdx_status_t typed_read(const TypedAlloc &a, size_t off, void *dst, size_t len) {
    if (gdx_status_t st = bind(a); st != GDX_OK) return st;
    CUresult r = cuda::driver()->cuMemcpyDtoH(dst, reinterpret_cast<CUdeviceptr>(a.ptr) + off, len);
    return r == CUDA_SUCCESS ? GDX_OK : driver_failed(a, "cuMemcpyDtoH", r);
}

#else // !GDX_HAVE_CUDA_H

namespace {
gdx_status_t no_cuda() {
    return fail(GDX_ERR_NO_DEVICE, log::Level::Debug, "memtype", "gdx was built without CUDA headers");
}
} // namespace

gdx_status_t typed_alloc(MemType type, int device, size_t len, TypedAlloc *a) {
    *a = TypedAlloc{type, device, nullptr, len, 0, 0};
    return no_cuda();
}
void typed_free(TypedAlloc *) {}
gdx_status_t typed_write(const TypedAlloc &, size_t, const void *, size_t) { return no_cuda(); }
gdx_status_t typed_read(const TypedAlloc &, size_t, void *, size_t) { return no_cuda(); }

#endif // GDX_HAVE_CUDA_H

} // namespace gdx::mem
