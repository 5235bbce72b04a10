// The CUDA row's IPC slots: exporting an allocation (legacy IPC handle, VMM or pool POSIX fd), importing one into
// this process (and telling the memtype layer: note_ipc_import), closing it, pool imports, and peer access between
// two GPUs. Moved from the cuda_ipc transport, driver calls unchanged; what stays there is transport logic (keys,
// the import cache's policy, revocation, epochs).
#include "memtype/cuda_internal.h"

#if GDX_HAVE_CUDA_H
#include "core/error.h"
#include "memtype/range_cache.h"

#include <cstring>
#include <mutex>
#include <set>
#include <unistd.h>

namespace gdx::mem::cudarow {

namespace {

gdx_status_t ipc_fail(CUresult r, const char *call, size_t size, int device) {
    return fail(r == CUDA_ERROR_OUT_OF_MEMORY ? GDX_ERR_NO_MEMORY : GDX_ERR_DRIVER, log::Level::Debug, kComp,
                "%s (%zu bytes, GPU %d): %s", call, size, device, cuda::error_text(r).c_str());
}

// Cleanup calls on an error path: their failure is logged, the first error is what the caller reports.
void cleanup(CUresult r, const char *call) {
    if (r != CUDA_SUCCESS) GDX_WARN(kComp, "%s while undoing a failed IPC import: %s", call, cuda::error_text(r).c_str());
}

CUmemAccessDesc device_rw(int device) {
    CUmemAccessDesc acc{};
    acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    acc.location.id = device;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return acc;
}

// VMM: the physical allocation's POSIX fd (the exporter's handle is released again at once).
void export_vmm(const cuda::DriverApi *api, const MemInfo &info, IpcHandle *h, int *fd, std::string *why) {
    if (!(info.handle_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) {
        *why = "VMM allocation created without CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR: not exportable";
        return;
    }
    CUmemGenericAllocationHandle ah;
    CUresult r = api->cuMemRetainAllocationHandle(&ah, reinterpret_cast<void *>(info.base));
    if (r != CUDA_SUCCESS) {
        *why = "cuMemRetainAllocationHandle: " + cuda::error_text(r);
        return;
    }
    int f = -1;
    r = api->cuMemExportToShareableHandle(&f, ah, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    // Drops the reference cuMemRetainAllocationHandle took.
    if (CUresult rr = api->cuMemRelease(ah); rr != CUDA_SUCCESS)
        GDX_WARN(kComp, "cuMemRelease of a retained VMM handle: %s", cuda::error_text(rr).c_str());
    if (r != CUDA_SUCCESS) {
        *why = "cuMemExportToShareableHandle(POSIX fd): " + cuda::error_text(r);
        return;
    }
    *fd = f;
    h->kind = IpcKind::Vmm;
}

// Stream-ordered pool: the pool's POSIX fd and the pointer's export data.
void export_pool(const cuda::DriverApi *api, const MemInfo &info, IpcHandle *h, int *fd, std::string *why) {
    CUmemoryPool pool = nullptr;
    CUresult r =
        api->cuPointerGetAttribute(&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, static_cast<CUdeviceptr>(info.base));
    if (r != CUDA_SUCCESS || pool == nullptr) {
        *why = "no memory pool behind a stream-ordered allocation (" + cuda::error_text(r) + ")";
        return;
    }
    int f = -1;
    r = api->cuMemPoolExportToShareableHandle(&f, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    if (r != CUDA_SUCCESS) {
        *why = "pool not exportable (created without CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR; the default pool "
               "never is): " + cuda::error_text(r);
        return;
    }
    CUmemPoolPtrExportData d;
    if ((r = api->cuMemPoolExportPointer(&d, static_cast<CUdeviceptr>(info.base))) != CUDA_SUCCESS) {
        close(f);
        *why = "cuMemPoolExportPointer: " + cuda::error_text(r);
        return;
    }
    static_assert(sizeof(d) <= kIpcHandleSize);
    std::memcpy(h->bytes, &d, sizeof(d));
    h->pool_id = reinterpret_cast<uintptr_t>(pool);
    *fd = f;
    h->kind = IpcKind::Pool;
}

// VMM import: the fd's allocation mapped into a reservation of its own, read-write for `device`.
gdx_status_t import_vmm(const cuda::DriverApi *api, size_t size, int fd, int device, CUdeviceptr *out) {
    if (!api->cuMemImportFromShareableHandle || !api->cuMemMap)
        return fail(GDX_ERR_UNSUPPORTED, log::Level::Debug, kComp, "driver has no VMM import entry points");
    CUmemGenericAllocationHandle h;
    CUresult r = api->cuMemImportFromShareableHandle(&h, reinterpret_cast<void *>(static_cast<intptr_t>(fd)),
                                                     CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    if (r != CUDA_SUCCESS) return ipc_fail(r, "cuMemImportFromShareableHandle", size, device);
    CUdeviceptr p = 0;
    const char *call = "cuMemAddressReserve";
    r = api->cuMemAddressReserve(&p, size, 0, 0, 0);
    if (r == CUDA_SUCCESS) {
        call = "cuMemMap";
        r = api->cuMemMap(p, size, 0, h, 0);
        if (r == CUDA_SUCCESS) {
            CUmemAccessDesc acc = device_rw(device);
            call = "cuMemSetAccess";
            r = api->cuMemSetAccess(p, size, &acc, 1);
            if (r != CUDA_SUCCESS) cleanup(api->cuMemUnmap(p, size), "cuMemUnmap");
        }
        if (r != CUDA_SUCCESS) cleanup(api->cuMemAddressFree(p, size), "cuMemAddressFree");
    }
    cleanup(api->cuMemRelease(h), "cuMemRelease"); // the mapping holds its own reference
    if (r != CUDA_SUCCESS) return ipc_fail(r, call, size, device);
    *out = p;
    return GDX_OK;
}

} // namespace

gdx_status_t ipc_export(const MemInfo &info, IpcHandle *h, int *fd, std::string *why) {
    if (h == nullptr || fd == nullptr || why == nullptr)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "ipc_export: null argument");
    *h = IpcHandle{};
    *fd = -1;
    const cuda::DriverApi *api = cuda::driver();
    if (api == nullptr) {
        *why = cuda::why_unavailable();
        return GDX_OK;
    }
    cuda::DeviceScope scope(info.device);
    if (!scope.ok()) {
        *why = "binding GPU " + std::to_string(info.device) + ": " + cuda::error_text(scope.status());
        return GDX_OK;
    }
    switch (info.type) {
    case MemType::CudaDevice: {
        CUipcMemHandle ih;
        CUresult r = api->cuIpcGetMemHandle(&ih, static_cast<CUdeviceptr>(info.base));
        if (r != CUDA_SUCCESS) {
            *why = "cuIpcGetMemHandle: " + cuda::error_text(r);
            return GDX_OK;
        }
        static_assert(sizeof(ih) <= kIpcHandleSize);
        std::memcpy(h->bytes, &ih, sizeof(ih));
        h->kind = IpcKind::Legacy;
        return GDX_OK;
    }
    case MemType::CudaVmm: export_vmm(api, info, h, fd, why); return GDX_OK;
    case MemType::CudaPool: export_pool(api, info, h, fd, why); return GDX_OK;
    case MemType::CudaManaged: *why = "managed memory cannot be exported with CUDA IPC"; return GDX_OK;
    case MemType::CudaIpcImported:
        *why = "memory imported from another process cannot be exported again";
        return GDX_OK;
    default:
        *why = std::string(type_name(info.type)) + ": not GPU memory (host memory goes through shared memory)";
        return GDX_OK;
    }
}

gdx_status_t ipc_import_pool(int fd, int device, void **out) {
    const cuda::DriverApi *api = cuda::driver();
    if (api == nullptr || out == nullptr || !api->cuMemPoolImportFromShareableHandle || !api->cuMemPoolSetAccess)
        return fail(GDX_ERR_UNSUPPORTED, log::Level::Debug, kComp, "ipc_import_pool: no driver with pool imports");
    cuda::DeviceScope scope(device);
    CUmemoryPool pool = nullptr;
    CUresult r = api->cuMemPoolImportFromShareableHandle(&pool, reinterpret_cast<void *>(static_cast<intptr_t>(fd)),
                                                         CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    if (r != CUDA_SUCCESS) return ipc_fail(r, "cuMemPoolImportFromShareableHandle", 0, device);
    CUmemAccessDesc acc = device_rw(device);
    r = api->cuMemPoolSetAccess(pool, &acc, 1);
    if (r != CUDA_SUCCESS) {
        cleanup(api->cuMemPoolDestroy(pool), "cuMemPoolDestroy");
        return ipc_fail(r, "cuMemPoolSetAccess", 0, device);
    }
    *out = pool;
    return GDX_OK;
}

void ipc_release_pool(void *pool, int device) {
    const cuda::DriverApi *api = cuda::driver();
    if (pool == nullptr || api == nullptr || api->cuMemPoolDestroy == nullptr) return;
    cuda::DeviceScope scope(device);
    if (CUresult r = api->cuMemPoolDestroy(static_cast<CUmemoryPool>(pool)); r != CUDA_SUCCESS)
        GDX_WARN(kComp, "cuMemPoolDestroy of an imported pool (GPU %d): %s", device, cuda::error_text(r).c_str());
}

gdx_status_t ipc_import(const IpcHandle &h, size_t size, int fd, void *pool, int device, IpcMapping *out) {
    const cuda::DriverApi *api = cuda::driver();
    if (out == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "ipc_import: null output");
    if (api == nullptr) return fail(GDX_ERR_NO_DEVICE, log::Level::Debug, kComp, "%s", cuda::why_unavailable().c_str());
    cuda::DeviceScope scope(device);
    CUdeviceptr p = 0;
    gdx_status_t st = GDX_OK;
    if (h.kind == IpcKind::Legacy) {
        CUipcMemHandle ih;
        std::memcpy(&ih, h.bytes, sizeof(ih));
        CUresult r = api->cuIpcOpenMemHandle(&p, ih, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
        if (r != CUDA_SUCCESS) st = ipc_fail(r, "cuIpcOpenMemHandle", size, device);
    } else if (h.kind == IpcKind::Vmm) {
        st = import_vmm(api, size, fd, device, &p);
    } else if (h.kind == IpcKind::Pool) {
        CUmemPoolPtrExportData d;
        std::memcpy(&d, h.bytes, sizeof(d));
        CUresult r = api->cuMemPoolImportPointer(&p, static_cast<CUmemoryPool>(pool), &d);
        if (r != CUDA_SUCCESS) st = ipc_fail(r, "cuMemPoolImportPointer", size, device);
    } else {
        st = fail(GDX_ERR_UNSUPPORTED, log::Level::Debug, kComp, "ipc_import: an unexported handle opens nothing");
    }
    if (st != GDX_OK) return st;
    *out = IpcMapping{h.kind, reinterpret_cast<uint8_t *>(p), size, device};
    note_ipc_import(out->ptr, size, device);
    return GDX_OK;
}

gdx_status_t ipc_close(IpcMapping *m) {
    if (m == nullptr || m->ptr == nullptr) return GDX_OK;
    const cuda::DriverApi *api = cuda::driver();
    CUresult r = CUDA_SUCCESS;
    const char *call = "";
    // Cached answers for the range go first (range_cache.h: invalidate, close, note), so that a lookup racing the
    // close cannot keep an "imported" answer for addresses the driver may hand out again.
    invalidate(m->ptr, m->size);
    if (api != nullptr) { // a mapping exists only where a driver made it
        cuda::DeviceScope scope(m->device);
        CUdeviceptr p = reinterpret_cast<CUdeviceptr>(m->ptr);
        if (m->kind == IpcKind::Legacy) {
            call = "cuIpcCloseMemHandle";
            r = api->cuIpcCloseMemHandle(p);
        } else if (m->kind == IpcKind::Vmm) {
            call = "cuMemUnmap";
            r = api->cuMemUnmap(p, m->size);
            if (r == CUDA_SUCCESS) {
                call = "cuMemAddressFree";
                r = api->cuMemAddressFree(p, m->size);
            }
        } else if (m->kind == IpcKind::Pool) {
            call = "cuMemFree";
            r = api->cuMemFree(p); // releases this process's import of the pool allocation
        }
    }
    note_ipc_close(m->ptr);
    m->ptr = nullptr;
    return r == CUDA_SUCCESS ? GDX_OK : ipc_fail(r, call, m->size, m->device);
}

gdx_status_t peer_access(int from, int to, std::string *why) {
    static std::mutex m;
    static std::set<std::pair<int, int>> done;
    std::lock_guard<std::mutex> g(m);
    if (done.count({from, to})) return GDX_OK;
    const cuda::DriverApi *api = cuda::driver();
    if (api == nullptr) {
        *why = cuda::why_unavailable();
        return GDX_ERR_UNREACHABLE;
    }
    CUdevice df, dt;
    int can = 0;
    CUresult r = api->cuDeviceGet(&df, from);
    if (r == CUDA_SUCCESS) r = api->cuDeviceGet(&dt, to);
    if (r == CUDA_SUCCESS) r = api->cuDeviceCanAccessPeer(&can, df, dt);
    if (r != CUDA_SUCCESS || !can) {
        *why = r != CUDA_SUCCESS ? "cuDeviceCanAccessPeer: " + cuda::error_text(r)
                                 : "cuDeviceCanAccessPeer(GPU" + std::to_string(from) + ", GPU" + std::to_string(to) +
                                       ") = 0: no peer-to-peer path (PCIe ACS/IOMMU, or no NVLink)";
        return GDX_ERR_UNREACHABLE;
    }
    CUcontext peer_ctx = nullptr;
    if ((r = api->cuDevicePrimaryCtxRetain(&peer_ctx, dt)) != CUDA_SUCCESS) { // kept for the process lifetime
        *why = "retaining GPU " + std::to_string(to) + "'s context: " + cuda::error_text(r);
        return GDX_ERR_DRIVER;
    }
    cuda::DeviceScope scope(from);
    r = api->cuCtxEnablePeerAccess(peer_ctx, 0);
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) {
        *why = "cuCtxEnablePeerAccess(GPU" + std::to_string(from) + " -> GPU" + std::to_string(to) +
               "): " + cuda::error_text(r);
        return GDX_ERR_DRIVER;
    }
    GDX_INFO(kComp, "peer access GPU %d -> GPU %d enabled", from, to);
    done.insert({from, to});
    return GDX_OK;
}

} // namespace gdx::mem::cudarow

#endif // GDX_HAVE_CUDA_H
