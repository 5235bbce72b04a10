// The CUDA row's classification: one batched cuPointerGetAttributes, then the refinements the attributes cannot
// give (VMM, pinned vs registered, IPC-imported); and the cheap revalidation of a cached answer (README.md).
#include "memtype/cuda_internal.h"

#if GDX_HAVE_CUDA_H
#include "core/error.h"
#include "memtype/host_mapping.h"
#include "memtype/ipc_registry.h"

#include <cstdio>
#include <optional>

namespace gdx::mem::cudarow {

namespace {

struct Attrs {
    unsigned int memtype = 0; // CUmemorytype; 0 = not known to CUDA (the batched call does not fail for those)
    int managed = 0;
    int ordinal = -1;
    unsigned long long buffer_id = 0;
    CUdeviceptr range_start = 0;
    size_t range_size = 0;
    int mapped = 0;
    CUmemoryPool pool = nullptr;
    int legacy_ipc = 0;
    uint64_t handle_types = 0; // the driver writes an unsigned int; a wider zeroed slot reads the same
    bool full = false;         // the last four were read too
};

CUresult read_attrs(const cuda::DriverApi *api, CUdeviceptr p, bool full, Attrs *a) {
    *a = Attrs{};
    CUpointer_attribute ids[10];
    void *data[10];
    unsigned n = 0;
    auto add = [&](CUpointer_attribute id, void *d) {
        ids[n] = id;
        data[n++] = d;
    };
    add(CU_POINTER_ATTRIBUTE_MEMORY_TYPE, &a->memtype);
    add(CU_POINTER_ATTRIBUTE_IS_MANAGED, &a->managed);
    add(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, &a->ordinal);
    add(CU_POINTER_ATTRIBUTE_BUFFER_ID, &a->buffer_id);
    add(CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, &a->range_start);
    add(CU_POINTER_ATTRIBUTE_RANGE_SIZE, &a->range_size);
    if (full) {
        add(CU_POINTER_ATTRIBUTE_MAPPED, &a->mapped);
        add(CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, &a->pool);
        add(CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, &a->legacy_ipc);
        add(CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, &a->handle_types);
    }
    CUresult r = api->cuPointerGetAttributes(n, ids, data, p);
    if (r == CUDA_ERROR_INVALID_CONTEXT) {
        // Some drivers want a context on the calling thread: retry inside GPU 0's primary context.
        cuda::DeviceScope scope(0);
        *a = Attrs{};
        if (scope.ok()) r = api->cuPointerGetAttributes(n, ids, data, p);
    }
    a->full = full && r == CUDA_SUCCESS;
    return r;
}

gdx_status_t get_attrs(const cuda::DriverApi *api, const void *ptr, Attrs *a) {
    const CUdeviceptr p = reinterpret_cast<CUdeviceptr>(ptr);
    CUresult r = read_attrs(api, p, true, a);
    if (r == CUDA_ERROR_INVALID_VALUE) {
        // A driver that rejects one of the newer attributes: classify with the core set. Without MEMPOOL_HANDLE
        // pool memory looks like device memory, so this answer never allows dma-buf (ucxx#749: driver crash).
        GDX_LOG_ONCE(log::Level::Info, kComp, "memtype:core-attrs",
                     "cuPointerGetAttributes rejects MAPPED/MEMPOOL_HANDLE/IS_LEGACY_CUDA_IPC_CAPABLE/"
                     "ALLOWED_HANDLE_TYPES (old driver?): classifying without them, dma-buf export off");
        r = read_attrs(api, p, false, a);
    }
    if (r == CUDA_SUCCESS) return GDX_OK;
    char what[96];
    std::snprintf(what, sizeof(what), "cuPointerGetAttributes(%p)", ptr);
    return driver_error(r, log::Level::Error, what);
}

// Bounds of the mapping that contains p. For VMM the range attributes give the whole cuMemAddressReserve
// reservation (which may hold several mappings or holes); cuMemGetAddressRange gives the one mapping.
bool address_range(const cuda::DriverApi *api, uintptr_t p, uintptr_t *base, size_t *size) {
    CUdeviceptr b = 0;
    size_t sz = 0;
    CUresult r = api->cuMemGetAddressRange(&b, &sz, static_cast<CUdeviceptr>(p));
    if (r != CUDA_SUCCESS || !contains(b, sz, p)) {
        GDX_DEBUG(kComp, "cuMemGetAddressRange(0x%zx): %s: bounds unknown", static_cast<size_t>(p),
                  r == CUDA_SUCCESS ? "range does not contain the pointer" : cuda::error_text(r).c_str());
        return false;
    }
    *base = b;
    *size = sz;
    return true;
}

// The one cuMemMap'd mapping containing p: cuMemGetAddressRange (which UCX relies on for this too), else the
// MAPPING_BASE_ADDR/MAPPING_SIZE attributes of newer drivers.
bool vmm_bounds(const cuda::DriverApi *api, uintptr_t p, uintptr_t *base, size_t *size) {
    if (address_range(api, p, base, size)) return true;
#if CUDA_VERSION >= 13000
    CUdeviceptr b = 0;
    size_t sz = 0;
    if (api->cuPointerGetAttribute(&b, CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR, p) == CUDA_SUCCESS &&
        api->cuPointerGetAttribute(&sz, CU_POINTER_ATTRIBUTE_MAPPING_SIZE, p) == CUDA_SUCCESS && contains(b, sz, p)) {
        *base = b;
        *size = sz;
        return true;
    }
#endif
    return false;
}

// True when ptr lies in a cuMemCreate + cuMemMap mapping; *prop then describes the physical allocation.
bool vmm_properties(const cuda::DriverApi *api, const void *ptr, CUmemAllocationProp *prop, gdx_status_t *st) {
    if (api->cuMemRetainAllocationHandle == nullptr || api->cuMemGetAllocationPropertiesFromHandle == nullptr ||
        api->cuMemRelease == nullptr)
        return false;
    CUmemGenericAllocationHandle h = 0;
    // Fails (INVALID_VALUE) for everything not mapped with cuMemMap: the expected answer, not an error.
    if (api->cuMemRetainAllocationHandle(&h, const_cast<void *>(ptr)) != CUDA_SUCCESS) return false;
    *prop = CUmemAllocationProp{};
    CUresult r = api->cuMemGetAllocationPropertiesFromHandle(prop, h);
    CUresult rr = api->cuMemRelease(h); // the retain took a reference: always give it back
    if (rr != CUDA_SUCCESS)
        GDX_WARN(kComp, "cuMemRelease of a retained handle (%p): %s", ptr, cuda::error_text(rr).c_str());
    if (r != CUDA_SUCCESS) {
        char what[112];
        std::snprintf(what, sizeof(what), "cuMemGetAllocationPropertiesFromHandle(VMM mapping at %p)", ptr);
        *st = driver_error(r, log::Level::Error, what);
    }
    return true;
}

// A host-located VMM mapping is CPU-accessible only where the CPU was granted access like a GPU (cuMemSetAccess
// with a host location); without that grant a load faults.
bool cpu_may_access(const cuda::DriverApi *api, uintptr_t p) {
#if CUDA_VERSION >= 12020
    if (api->cuMemGetAccess == nullptr) return false;
    for (CUmemLocationType t : {CU_MEM_LOCATION_TYPE_HOST_NUMA, CU_MEM_LOCATION_TYPE_HOST}) {
        CUmemLocation where{};
        where.type = t;
        unsigned long long flags = 0;
        if (api->cuMemGetAccess(&flags, &where, static_cast<CUdeviceptr>(p)) == CUDA_SUCCESS &&
            (flags & CU_MEM_ACCESS_FLAGS_PROT_READWRITE) == CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            return true;
    }
#endif
    (void)api;
    (void)p;
    return false;
}

// The VMM branch of query(): ptr lies in a cuMemMap mapping of the physical allocation `prop` describes.
void classify_vmm(const cuda::DriverApi *api, uintptr_t p, const Attrs &a, const CUmemAllocationProp &prop,
                  MemInfo *info) {
#if CUDA_VERSION >= 12020
    const bool on_host = prop.location.type == CU_MEM_LOCATION_TYPE_HOST ||
                         prop.location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
                         prop.location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
#else
    const bool on_host = false; // host-located VMM came with CUDA 12.2
#endif
    info->type = on_host ? MemType::CudaVmmHost : MemType::CudaVmm;
    info->host_accessible = on_host && cpu_may_access(api, p);
    if (!on_host && device_state(prop.location.id) != nullptr) info->device = prop.location.id;
    info->base = 0;
    info->size = 0;
    vmm_bounds(api, p, &info->base, &info->size);
#if CUDA_VERSION >= 13000
    // The buffer id may belong to the reservation and survive an unmap + remap; the block id is the
    // physical allocation's. Read once here so that cache hits can check it.
    unsigned long long block = 0;
    if (api->cuPointerGetAttribute(&block, CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID, p) == CUDA_SUCCESS)
        info->block_id = block;
#endif
    info->dmabuf_allowed = !on_host && a.full && prop.location.type == CU_MEM_LOCATION_TYPE_DEVICE;
}

// The host-memory branch of query(): pinned or registered.
void classify_host(const cuda::DriverApi *api, const void *ptr, MemInfo *info) {
    // Pinned (cuMemHostAlloc/cuMemAllocHost) and registered (cuMemHostRegister) memory report the same
    // attributes. Older drivers fail cuMemHostGetFlags for registered memory; current ones (580) answer for
    // both, and then who made the mapping decides (host_mapping.h).
    unsigned int flags = 0;
    CUresult r =
        api->cuMemHostGetFlags ? api->cuMemHostGetFlags(&flags, const_cast<void *>(ptr)) : CUDA_ERROR_NOT_SUPPORTED;
    info->type = r == CUDA_ERROR_INVALID_VALUE ? MemType::HostRegistered : MemType::HostPinned;
    if (info->type == MemType::HostPinned) {
        std::string why;
        HostMappingOrigin origin = host_mapping_origin(ptr, &why);
        if (origin == HostMappingOrigin::Application) info->type = MemType::HostRegistered;
        if (origin == HostMappingOrigin::Unknown) GDX_DEBUG(kComp, "%p: %s: reporting host-pinned", ptr, why.c_str());
    }
    info->kind = MemKind::Host;
    info->host_accessible = true;
}

// What the batched attributes say before any refinement.
MemInfo base_info(const Attrs &a, uintptr_t p) {
    MemInfo info;
    info.kind = MemKind::Cuda;
    info.device = device_state(a.ordinal) != nullptr ? a.ordinal : -1;
    info.buffer_id = a.buffer_id;
    info.legacy_ipc = a.legacy_ipc != 0;
    info.handle_types = static_cast<uint32_t>(a.handle_types);
    if (contains(a.range_start, a.range_size, p)) {
        info.base = a.range_start;
        info.size = a.range_size;
    }
    return info;
}

} // namespace

gdx_status_t query(const void *ptr, MemInfo *out) {
    if (ptr == nullptr || out == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "cuda query: null argument");
    const cuda::DriverApi *api = cuda::driver();
    if (api == nullptr) return GDX_ERR_NOT_FOUND;
    Attrs a;
    gdx_status_t st = get_attrs(api, ptr, &a);
    if (st != GDX_OK) return st;
    if (a.memtype == 0 && a.managed == 0) return GDX_ERR_NOT_FOUND; // pageable host, or not mapped at all

    const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
    MemInfo info = base_info(a, p);
    // The refinements below may need a context (cuMemHostGetFlags does): bound for them only, restored on return.
    std::optional<cuda::DeviceScope> scope;
    auto with_context = [&] {
        if (!scope) scope.emplace(info.device >= 0 ? info.device : 0);
    };
    CUmemAllocationProp prop{};
    ipc::Range imported{};
    if (a.managed != 0) {
        info.type = MemType::CudaManaged;
        info.host_accessible = true;
    } else if (a.pool != nullptr) {
        // Stream-ordered allocation: never dma-buf (ucxx#749). The range attributes may span the pool's whole
        // reservation; cuMemGetAddressRange narrows them to this allocation where the driver supports it.
        info.type = MemType::CudaPool;
        info.host_accessible = a.memtype == CU_MEMORYTYPE_HOST;
        with_context();
        address_range(api, p, &info.base, &info.size);
    } else if (ipc::find(p, a.buffer_id, &imported)) {
        info.type = MemType::CudaIpcImported;
        info.host_accessible = false;
        info.base = imported.base;
        info.size = imported.size;
        if (device_state(imported.device) != nullptr) info.device = imported.device;
    } else if (!info.legacy_ipc && (with_context(), vmm_properties(api, ptr, &prop, &st))) {
        // (Memory that legacy IPC can export is cuMemAlloc memory, never a cuMemMap mapping: no VMM probe, whose
        // expected INVALID_VALUE compute-sanitizer would report as an API error.)
        if (st != GDX_OK) return st;
        classify_vmm(api, p, a, prop, &info);
    } else if (a.memtype == CU_MEMORYTYPE_HOST) {
        classify_host(api, ptr, &info);
    } else if (a.full && a.mapped == 0) {
        // Known to CUDA but backed by nothing: a reserved VMM range between mappings. Never cached.
        info.type = MemType::Unmapped;
        info.host_accessible = false;
        info.base = 0;
        info.size = 0;
    } else {
        info.type = MemType::CudaDevice;
        info.host_accessible = false;
        info.dmabuf_allowed = a.full; // pool-ness known (see get_attrs)
    }
    const DeviceState *ds = device_state(info.device);
    info.integrated = ds != nullptr && ds->integrated;
    info.dmabuf_allowed = info.dmabuf_allowed && ds != nullptr && ds->dmabuf;
    *out = info;
    return GDX_OK;
}

gdx_status_t revalidate(const void *ptr, const MemInfo &cached) {
    const cuda::DriverApi *api = cuda::driver();
    if (api == nullptr) return GDX_ERR_NOT_FOUND;
    CUpointer_attribute attr = CU_POINTER_ATTRIBUTE_BUFFER_ID;
    uint64_t want = cached.buffer_id;
#if CUDA_VERSION >= 13000
    if (cached.block_id != 0) {
        attr = CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID;
        want = cached.block_id;
    }
#endif
    if (want == 0) return GDX_ERR_NOT_FOUND;
    unsigned long long id = 0;
    const CUdeviceptr p = reinterpret_cast<CUdeviceptr>(ptr);
    // Ids are unique over the process lifetime and never reused: equal id = the same live allocation.
    CUresult r = api->cuPointerGetAttribute(&id, attr, p);
    if (r == CUDA_ERROR_INVALID_CONTEXT) {
        cuda::DeviceScope scope(cached.device >= 0 ? cached.device : 0);
        id = 0;
        if (scope.ok()) r = api->cuPointerGetAttribute(&id, attr, p);
    }
    return r == CUDA_SUCCESS && id == want ? GDX_OK : GDX_ERR_NOT_FOUND;
}
} // namespace gdx::mem::cudarow

#endif // GDX_HAVE_CUDA_H
