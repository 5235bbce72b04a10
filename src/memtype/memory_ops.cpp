// Names, the host row of the ops table, and the table itself. The CUDA row lives in cuda_ops.cpp.
#include "memtype/memory_ops.h"

#include "core/error.h"

#include <cstdlib>
#include <cstring>
#include <unistd.h>

namespace gdx::mem {

// Defined in cuda_ops.cpp (a row that is never available when gdx was built without cuda.h).
const Ops &cuda_row();

const char *kind_name(MemKind k) {
    switch (k) {
    case MemKind::Host:
        return "host";
    case MemKind::Cuda:
        return "cuda";
    case MemKind::kCount:
        break;
    }
    return "unknown";
}

const char *type_name(MemType t) {
    switch (t) {
    case MemType::HostPageable:
        return "host-pageable";
    case MemType::HostPinned:
        return "host-pinned";
    case MemType::HostRegistered:
        return "host-registered";
    case MemType::CudaDevice:
        return "cuda-device";
    case MemType::CudaManaged:
        return "cuda-managed";
    case MemType::CudaVmm:
        return "cuda-vmm";
    case MemType::CudaVmmHost:
        return "cuda-vmm-host";
    case MemType::CudaPool:
        return "cuda-pool";
    case MemType::CudaIpcImported:
        return "cuda-ipc-imported";
    case MemType::Unmapped:
        return "unmapped";
    }
    return "unknown";
}

namespace {

constexpr const char *kComp = "memtype";

bool host_available() { return true; }

// The host row owns every address no other row claims: it answers without looking (asking the kernel whether
// the page is mapped would cost a system call per query, and a bad pointer faults in the copy anyway).
gdx_status_t host_query(const void *ptr, MemInfo *out) {
    if (ptr == nullptr || out == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "host query: null argument");
    *out = MemInfo{};
    return GDX_OK;
}

gdx_status_t host_copy(void *dst, const void *src, size_t len, int /*device*/) {
    if (len == 0) return GDX_OK;
    if (dst == nullptr || src == nullptr)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "host copy of %zu bytes: null pointer", len);
    std::memmove(dst, src, len);
    return GDX_OK;
}

gdx_status_t host_copy_async(void *dst, const void *src, size_t len, int device, CopyDir, CopyHandle *h) {
    if (h == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "host copy_async: null handle");
    *h = CopyHandle{};
    return host_copy(dst, src, len, device); // done before returning: GDX_OK means finished
}

gdx_status_t host_copy_test(CopyHandle *h) {
    if (h == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "host copy_test: null handle");
    *h = CopyHandle{};
    return GDX_OK;
}

gdx_status_t host_alloc(size_t len, int /*device*/, void **out) {
    if (out == nullptr || len == 0)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "host_alloc(%zu): null output or zero length", len);
    *out = nullptr;
    long page = sysconf(_SC_PAGESIZE);
    int rc = posix_memalign(out, page > 0 ? static_cast<size_t>(page) : 4096, len);
    if (rc != 0) return fail_errno(GDX_ERR_NO_MEMORY, rc, kComp, "host_alloc(%zu): posix_memalign", len);
    return GDX_OK;
}

void host_free(void *p) { std::free(p); }
gdx_status_t host_copy_pinned(void *dst, const void *src, size_t len, int, CopyDir, MemType) {
    std::memmove(dst, src, len);
    return GDX_OK;
}
gdx_status_t host_register(void *, size_t, int) { return GDX_OK; } // the CPU reaches host memory as it is
void host_unregister(void *) {}

gdx_status_t host_dmabuf_fd(const void *, size_t, int *fd, uint64_t *) {
    if (fd != nullptr) *fd = -1;
    return GDX_ERR_UNSUPPORTED; // not an error: host memory is registered with ibv_reg_mr, never by dma-buf
}

// Host answers are never cached (range_cache.h says why), so a host entry can never be confirmed.
gdx_status_t host_revalidate(const void *, const MemInfo &) { return GDX_ERR_NOT_FOUND; }

// The host row has no devices, no driver, no IPC handles and no copy queues: it answers UNSUPPORTED there (host
// memory between processes goes through the transports' shared segments instead).
const std::string &host_why_unavailable() {
    static const std::string none;
    return none;
}
int host_driver_version() { return 0; }
int host_device_count() { return 0; }
gdx_status_t host_devices(std::vector<DeviceInfo> *out) {
    if (out != nullptr) out->clear();
    return GDX_ERR_UNSUPPORTED;
}
int host_current_device() { return -1; }
gdx_status_t host_buffer_id(const void *, uint64_t *) { return GDX_ERR_UNSUPPORTED; }
gdx_status_t host_ipc_export(const MemInfo &, IpcHandle *h, int *fd, std::string *why) {
    if (h != nullptr) *h = IpcHandle{};
    if (fd != nullptr) *fd = -1;
    if (why != nullptr) *why = "host memory has no IPC handle (it is shared through shared-memory segments)";
    return GDX_ERR_UNSUPPORTED;
}
gdx_status_t host_ipc_import_pool(int, int, void **) { return GDX_ERR_UNSUPPORTED; }
void host_ipc_release_pool(void *, int) {}
gdx_status_t host_ipc_import(const IpcHandle &, size_t, int, void *, int, IpcMapping *) { return GDX_ERR_UNSUPPORTED; }
gdx_status_t host_ipc_close(IpcMapping *) { return GDX_ERR_UNSUPPORTED; }
gdx_status_t host_peer_access(int, int, std::string *why) {
    if (why != nullptr) *why = "host memory has no peer access";
    return GDX_ERR_UNSUPPORTED;
}
gdx_status_t host_copy_queue(int, const CopyQueueOptions &, std::unique_ptr<CopyQueue> *) {
    return GDX_ERR_UNSUPPORTED;
}

const Ops kHostRow = {
    .name = "host",
    .available = host_available,
    .query = host_query,
    .copy = host_copy,
    .copy_pinned = host_copy_pinned,
    .copy_async = host_copy_async,
    .copy_test = host_copy_test,
    .host_alloc = host_alloc,
    .host_free = host_free,
    .host_register = host_register,
    .host_unregister = host_unregister,
    .dmabuf_fd = host_dmabuf_fd,
    .revalidate = host_revalidate,
    .why_unavailable = host_why_unavailable,
    .driver_version = host_driver_version,
    .device_count = host_device_count,
    .devices = host_devices,
    .current_device = host_current_device,
    .buffer_id = host_buffer_id,
    .ipc_export = host_ipc_export,
    .ipc_import_pool = host_ipc_import_pool,
    .ipc_release_pool = host_ipc_release_pool,
    .ipc_import = host_ipc_import,
    .ipc_close = host_ipc_close,
    .peer_access = host_peer_access,
    .copy_queue = host_copy_queue,
};

} // namespace

const Ops &ops(MemKind k) { return k == MemKind::Cuda ? cuda_row() : kHostRow; }

std::string device_bus_id(MemKind k, int ordinal) {
    std::vector<DeviceInfo> devs;
    if (ordinal < 0 || ops(k).devices(&devs) != GDX_OK) return "";
    for (const DeviceInfo &d : devs)
        if (d.ordinal == ordinal) return d.pci_bus_id;
    return "";
}

} // namespace gdx::mem
