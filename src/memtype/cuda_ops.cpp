// The CUDA row of the ops table: classification (one batched cuPointerGetAttributes, then the refinements the
// attributes cannot give: VMM, pinned vs registered, IPC-imported), copies on per-device non-blocking streams,
// pinned bounce buffers and dma-buf export. Built as a never-available row when cuda.h was absent.
#include "memtype/memory_ops.h"

#include "core/error.h"
#include "core/log.h"
#include "memtype/host_mapping.h"
#include "memtype/ipc_registry.h"
#include "memtype/range_cache.h"

#include <atomic>
#include <cstdio>
#include <mutex>
#include <optional>
#include <vector>

#if GDX_HAVE_CUDA_H
#include "memtype/cuda_driver.h"

#include <unistd.h>
#endif

namespace gdx::mem {

namespace {

constexpr const char *kComp = "memtype";

std::atomic<bool> g_pcie_first{true};

#if GDX_HAVE_CUDA_H

constexpr int kStreamsPerDevice = 4;

bool contains(uintptr_t base, size_t size, uintptr_t p) { return size != 0 && p >= base && p - base < size; }

// Per-GPU facts read once, plus the copy streams and a free list of events. Never destroyed: static destructors
// may still copy or classify.
struct DeviceState {
    bool integrated = false;
    bool dmabuf = false;
    std::mutex mu;
    std::vector<CUstream> streams; // created on first copy: the first half copies to host, the second to the GPU
    unsigned next_stream[3] = {0, 0, 0}; // round robin per CopyDir
    std::vector<CUevent> free_events;
};

DeviceState *device_state(int ordinal) {
    static const std::vector<DeviceState *> *all = [] {
        auto *v = new std::vector<DeviceState *>;
        const cuda::DriverApi *api = cuda::driver();
        for (int i = 0; api != nullptr && i < api->device_count; ++i) {
            auto *s = new DeviceState;
            CUdevice dev;
            if (api->cuDeviceGet(&dev, i) == CUDA_SUCCESS) {
                int val = 0;
                if (api->cuDeviceGetAttribute(&val, CU_DEVICE_ATTRIBUTE_INTEGRATED, dev) == CUDA_SUCCESS)
                    s->integrated = val != 0;
                val = 0;
                if (api->cuDeviceGetAttribute(&val, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, dev) == CUDA_SUCCESS)
                    s->dmabuf = val != 0;
            }
            v->push_back(s);
        }
        return v;
    }();
    return ordinal >= 0 && ordinal < static_cast<int>(all->size()) ? (*all)[ordinal] : nullptr;
}

gdx_status_t driver_error(CUresult r, log::Level level, const char *what) {
    gdx_status_t st = r == CUDA_ERROR_OUT_OF_MEMORY ? GDX_ERR_NO_MEMORY : GDX_ERR_DRIVER;
    return fail(st, level, kComp, "%s: %s", what, cuda::error_text(r).c_str());
}

// ---- classification -----------------------------------------------------------------------------------------

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

gdx_status_t cuda_query(const void *ptr, MemInfo *out) {
    if (ptr == nullptr || out == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "cuda query: null argument");
    const cuda::DriverApi *api = cuda::driver();
    if (api == nullptr) return GDX_ERR_NOT_FOUND;
    Attrs a;
    gdx_status_t st = get_attrs(api, ptr, &a);
    if (st != GDX_OK) return st;
    if (a.memtype == 0 && a.managed == 0) return GDX_ERR_NOT_FOUND; // pageable host, or not mapped at all

    const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
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
#if CUDA_VERSION >= 12020
        const bool on_host = prop.location.type == CU_MEM_LOCATION_TYPE_HOST ||
                             prop.location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
                             prop.location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
#else
        const bool on_host = false; // host-located VMM came with CUDA 12.2
#endif
        info.type = on_host ? MemType::CudaVmmHost : MemType::CudaVmm;
        info.host_accessible = on_host && cpu_may_access(api, p);
        if (!on_host && device_state(prop.location.id) != nullptr) info.device = prop.location.id;
        info.base = 0;
        info.size = 0;
        vmm_bounds(api, p, &info.base, &info.size);
#if CUDA_VERSION >= 13000
        // The buffer id may belong to the reservation and survive an unmap + remap; the block id is the
        // physical allocation's. Read once here so that cache hits can check it.
        unsigned long long block = 0;
        if (api->cuPointerGetAttribute(&block, CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID, p) == CUDA_SUCCESS)
            info.block_id = block;
#endif
        info.dmabuf_allowed = !on_host && a.full && prop.location.type == CU_MEM_LOCATION_TYPE_DEVICE;
    } else if (a.memtype == CU_MEMORYTYPE_HOST) {
        // Pinned (cuMemHostAlloc/cuMemAllocHost) and registered (cuMemHostRegister) memory report the same
        // attributes. Older drivers fail cuMemHostGetFlags for registered memory; current ones (580) answer for
        // both, and then who made the mapping decides (host_mapping.h).
        unsigned int flags = 0;
        CUresult r =
            api->cuMemHostGetFlags ? api->cuMemHostGetFlags(&flags, const_cast<void *>(ptr)) : CUDA_ERROR_NOT_SUPPORTED;
        info.type = r == CUDA_ERROR_INVALID_VALUE ? MemType::HostRegistered : MemType::HostPinned;
        if (info.type == MemType::HostPinned) {
            std::string why;
            HostMappingOrigin origin = host_mapping_origin(ptr, &why);
            if (origin == HostMappingOrigin::Application) info.type = MemType::HostRegistered;
            if (origin == HostMappingOrigin::Unknown)
                GDX_DEBUG(kComp, "%p: %s: reporting host-pinned", ptr, why.c_str());
        }
        info.kind = MemKind::Host;
        info.host_accessible = true;
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

gdx_status_t cuda_revalidate(const void *ptr, const MemInfo &cached) {
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

// ---- copies -------------------------------------------------------------------------------------------------

// Caller holds a DeviceScope for the device: streams belong to its primary context.
// Copies towards the GPU and towards the host get streams of their own: a staging pipeline runs the D2H of one
// fragment beside the H2D of another, and on a shared stream one would wait behind the other (the copy engines
// and PCIe run both directions at once). A copy of unknown direction takes any stream.
gdx_status_t pick_stream(const cuda::DriverApi *api, DeviceState *ds, CopyDir dir, CUstream *out) {
    std::lock_guard<std::mutex> g(ds->mu);
    if (ds->streams.empty()) {
        for (int i = 0; i < kStreamsPerDevice; ++i) {
            CUstream s = nullptr;
            // Non-blocking: never serialized with the application's work on the legacy default stream.
            CUresult r = api->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
            if (r != CUDA_SUCCESS) {
                if (ds->streams.empty()) return driver_error(r, log::Level::Error, "cuStreamCreate(NON_BLOCKING)");
                break; // fewer streams still work
            }
            ds->streams.push_back(s);
        }
    }
    const size_t n = ds->streams.size(), half = n / 2;
    const unsigned k = ds->next_stream[static_cast<int>(dir)]++;
    if (dir == CopyDir::Unknown || half == 0) *out = ds->streams[k % n];
    else *out = dir == CopyDir::ToHost ? ds->streams[k % half] : ds->streams[half + k % (n - half)];
    return GDX_OK;
}

gdx_status_t take_event(const cuda::DriverApi *api, DeviceState *ds, CUevent *out) {
    {
        std::lock_guard<std::mutex> g(ds->mu);
        if (!ds->free_events.empty()) {
            *out = ds->free_events.back();
            ds->free_events.pop_back();
            return GDX_OK;
        }
    }
    CUresult r = api->cuEventCreate(out, CU_EVENT_DISABLE_TIMING); // no timestamps: cheaper record and query
    return r == CUDA_SUCCESS ? GDX_OK : driver_error(r, log::Level::Error, "cuEventCreate(DISABLE_TIMING)");
}

void give_event(DeviceState *ds, CUevent ev) {
    std::lock_guard<std::mutex> g(ds->mu);
    ds->free_events.push_back(ev);
}

gdx_status_t cuda_copy_async(void *dst, const void *src, size_t len, int device, CopyDir dir, CopyHandle *h) {
    if (h == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "cuda copy_async: null handle");
    *h = CopyHandle{};
    h->kind = MemKind::Cuda;
    if (len == 0) return GDX_OK;
    if (dst == nullptr || src == nullptr)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "cuda copy of %zu bytes: null pointer", len);
    const cuda::DriverApi *api = cuda::driver();
    if (api == nullptr) return GDX_FAIL(GDX_ERR_NO_DEVICE, kComp, "cuda copy: %s", cuda::why_unavailable().c_str());
    const int dev = device < 0 ? 0 : device;
    DeviceState *ds = device_state(dev);
    if (ds == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "cuda copy: no GPU %d", device);
    cuda::DeviceScope scope(dev);
    if (!scope.ok()) return driver_error(scope.status(), log::Level::Error, "cuda copy: binding the GPU's context");
    CUstream stream = nullptr;
    CUevent ev = nullptr;
    gdx_status_t st = pick_stream(api, ds, dir, &stream);
    if (st == GDX_OK) st = take_event(api, ds, &ev);
    if (st != GDX_OK) return st;
    // Unified addressing: the driver infers the direction from the pointers (host, pinned, device, managed).
    CUresult r =
        api->cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src), len, stream);
    if (r != CUDA_SUCCESS) {
        give_event(ds, ev);
        char what[112];
        std::snprintf(what, sizeof(what), "cuMemcpyAsync(%p <- %p, %zu) on GPU %d", dst, src, len, dev);
        return driver_error(r, log::Level::Error, what);
    }
    r = api->cuEventRecord(ev, stream);
    if (r != CUDA_SUCCESS) {
        // The copy is queued but cannot be tracked: wait for the stream instead, and drop the event.
        api->cuEventDestroy(ev);
        CUresult rs = api->cuStreamSynchronize(stream);
        if (rs != CUDA_SUCCESS) return driver_error(rs, log::Level::Error, "cuStreamSynchronize after a copy");
        GDX_DEBUG(kComp, "cuEventRecord failed (%s): copy completed synchronously", cuda::error_text(r).c_str());
        return GDX_OK;
    }
    h->event = ev;
    h->device = dev;
    return GDX_INPROGRESS;
}

gdx_status_t cuda_copy_test(CopyHandle *h) {
    if (h == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "cuda copy_test: null handle");
    if (h->event == nullptr) return GDX_OK;
    const cuda::DriverApi *api = cuda::driver();
    DeviceState *ds = device_state(h->device);
    if (api == nullptr || ds == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "cuda copy_test: bad handle");
    cuda::DeviceScope scope(h->device);
    CUevent ev = static_cast<CUevent>(h->event);
    CUresult r = api->cuEventQuery(ev);
    if (r == CUDA_ERROR_NOT_READY) return GDX_INPROGRESS;
    h->event = nullptr;
    if (r == CUDA_SUCCESS) {
        give_event(ds, ev);
        return GDX_OK;
    }
    api->cuEventDestroy(ev); // an event that reported an error is not reused
    return driver_error(r, log::Level::Error, "asynchronous copy failed (cuEventQuery)");
}

gdx_status_t cuda_copy(void *dst, const void *src, size_t len, int device) {
    // cuMemcpy may return before a device-to-device or pageable copy has landed; waiting for our own event
    // makes "synchronous" mean complete.
    CopyHandle h;
    gdx_status_t st = cuda_copy_async(dst, src, len, device, CopyDir::Unknown, &h);
    if (st != GDX_INPROGRESS) return st;
    const cuda::DriverApi *api = cuda::driver();
    DeviceState *ds = device_state(h.device);
    cuda::DeviceScope scope(h.device);
    CUevent ev = static_cast<CUevent>(h.event);
    // Polled, not cuEventSynchronize: the synchronous copies are the small-message path's, a few microseconds
    // each, and a blocking wait that yields or sleeps (the context's scheduling policy decides) adds its wake-up
    // to every one of them.
    CUresult r;
    while ((r = api->cuEventQuery(ev)) == CUDA_ERROR_NOT_READY) {
#if defined(__x86_64__)
        __builtin_ia32_pause();
#endif
    }
    if (r == CUDA_SUCCESS) {
        give_event(ds, ev);
        return GDX_OK;
    }
    api->cuEventDestroy(ev);
    return driver_error(r, log::Level::Error, "cuda copy (cuEventQuery)");
}

gdx_status_t cuda_copy_pinned(void *dst, const void *src, size_t len, int device, CopyDir dir) {
    if (dir == CopyDir::Unknown) return cuda_copy(dst, src, len, device);
    const cuda::DriverApi *api = cuda::driver();
    if (api == nullptr) return GDX_FAIL(GDX_ERR_NO_DEVICE, kComp, "cuda copy: %s", cuda::why_unavailable().c_str());
    cuda::DeviceScope scope(device < 0 ? 0 : device);
    if (!scope.ok()) return driver_error(scope.status(), log::Level::Error, "cuda copy: binding the context");
    // With a pinned host side both calls return once the bytes have landed (the driver's documented behaviour for
    // pinned memory), on the context's own (legacy) stream, which the engine's non-blocking streams do not wait on.
    CUresult r = dir == CopyDir::ToHost
                     ? api->cuMemcpyDtoH(dst, reinterpret_cast<CUdeviceptr>(src), len)
                     : api->cuMemcpyHtoD(reinterpret_cast<CUdeviceptr>(dst), src, len);
    if (r != CUDA_SUCCESS)
        return driver_error(r, log::Level::Error, dir == CopyDir::ToHost ? "cuMemcpyDtoH" : "cuMemcpyHtoD");
    return GDX_OK;
}

// ---- pinned bounce buffers, dma-buf -------------------------------------------------------------------------

gdx_status_t cuda_host_alloc(size_t len, int device, void **out) {
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

void cuda_host_free(void *p) {
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
// GPU); DEVICEMAP like cuda_host_alloc's memory.
gdx_status_t cuda_host_register(void *p, size_t len, int device) {
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

void cuda_host_unregister(void *p) {
    const cuda::DriverApi *api = cuda::driver();
    if (p == nullptr || api == nullptr) return;
    invalidate(p, 1);
    if (CUresult r = api->cuMemHostUnregister(p); r != CUDA_SUCCESS)
        GDX_WARN(kComp, "cuMemHostUnregister(%p): %s", p, cuda::error_text(r).c_str());
    invalidate(p, 1);
}

gdx_status_t cuda_dmabuf_fd(const void *ptr, size_t len, int *fd, uint64_t *offset) {
    if (ptr == nullptr || fd == nullptr || offset == nullptr || len == 0)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "dmabuf_fd(%p, %zu): null argument or zero length", ptr, len);
    *fd = -1;
    *offset = 0;
    const cuda::DriverApi *api = cuda::driver();
    if (api == nullptr || api->cuMemGetHandleForAddressRange == nullptr) return GDX_ERR_UNSUPPORTED;
    // Classify here, uncached: registration is not a hot path, and an export of managed or pool memory can
    // crash the driver (ucxx#749), so no caller's possibly stale answer is trusted.
    MemInfo info;
    gdx_status_t st = cuda_query(ptr, &info);
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
    if (g_pcie_first.load(std::memory_order_relaxed)) flags = CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE;
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

bool cuda_available() { return cuda::driver() != nullptr; }

#else // !GDX_HAVE_CUDA_H: a row that is never available

bool cuda_available() { return false; }
gdx_status_t cuda_query(const void *, MemInfo *) { return GDX_ERR_NOT_FOUND; }
gdx_status_t cuda_revalidate(const void *, const MemInfo &) { return GDX_ERR_NOT_FOUND; }
gdx_status_t no_cuda() { return GDX_FAIL(GDX_ERR_UNSUPPORTED, kComp, "gdx was built without cuda.h"); }
gdx_status_t cuda_copy(void *, const void *, size_t, int) { return no_cuda(); }
gdx_status_t cuda_copy_pinned(void *, const void *, size_t, int, CopyDir) { return no_cuda(); }
gdx_status_t cuda_copy_async(void *, const void *, size_t, int, CopyDir, CopyHandle *) { return no_cuda(); }
gdx_status_t cuda_copy_test(CopyHandle *) { return no_cuda(); }
gdx_status_t cuda_host_alloc(size_t, int, void **) { return no_cuda(); }
void cuda_host_free(void *) {}
gdx_status_t cuda_host_register(void *, size_t, int) { return no_cuda(); }
void cuda_host_unregister(void *) {}
gdx_status_t cuda_dmabuf_fd(const void *, size_t, int *fd, uint64_t *) {
    if (fd != nullptr) *fd = -1;
    return GDX_ERR_UNSUPPORTED;
}

#endif // GDX_HAVE_CUDA_H

const Ops kCudaRow = {
    .name = "cuda",
    .available = cuda_available,
    .query = cuda_query,
    .copy = cuda_copy,
    .copy_pinned = cuda_copy_pinned,
    .copy_async = cuda_copy_async,
    .copy_test = cuda_copy_test,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .host_register = cuda_host_register,
    .host_unregister = cuda_host_unregister,
    .dmabuf_fd = cuda_dmabuf_fd,
    .revalidate = cuda_revalidate,
};

} // namespace

const Ops &cuda_row() { return kCudaRow; }

void set_dmabuf_pcie_first(bool on) { g_pcie_first.store(on, std::memory_order_relaxed); }

} // namespace gdx::mem
