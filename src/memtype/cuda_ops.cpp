// The CUDA row of the ops table: the per-GPU state its parts share, the table itself, and the row of a build
// without cuda.h (never available), and the device slots (lists, the current device, buffer ids). The other slots
// live by concern in files of their own (cuda_internal.h lists them).
#include "memtype/cuda_internal.h"

#include "core/error.h"

#include <atomic>

namespace gdx::mem {

namespace cudarow {

namespace {
std::atomic<bool> g_pcie_first{true};
std::atomic<size_t> g_small_write_max{256}; // GDX_CUDA_SMALL_WRITE's default (src/memtype/config_vars.inc)
} // namespace

bool dmabuf_pcie_first() { return g_pcie_first.load(std::memory_order_relaxed); }
size_t small_write_max() { return g_small_write_max.load(std::memory_order_relaxed); }

#if GDX_HAVE_CUDA_H

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

bool available() { return cuda::driver() != nullptr; }

const std::string &why_unavailable() {
    static const std::string none;
    return cuda::driver() != nullptr ? none : cuda::why_unavailable();
}

int driver_version() { return cuda::driver() != nullptr ? cuda::driver()->driver_version : 0; }

int device_count() { return cuda::driver() != nullptr ? cuda::driver()->device_count : 0; }

gdx_status_t devices(std::vector<DeviceInfo> *out) {
    if (out == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "devices: null output");
    *out = cuda::list_devices();
    return GDX_OK;
}

int current_device() {
    const cuda::DriverApi *api = cuda::driver();
    if (api == nullptr) return -1;
    CUcontext ctx = nullptr;
    CUdevice dev = 0;
    if (api->cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || ctx == nullptr || api->cuCtxGetDevice(&dev) != CUDA_SUCCESS)
        return -1;
    return static_cast<int>(dev);
}

gdx_status_t buffer_id(const void *ptr, uint64_t *id) {
    const cuda::DriverApi *api = cuda::driver();
    if (api == nullptr || id == nullptr) return GDX_ERR_NOT_FOUND;
    unsigned long long v = 0;
    CUresult r = api->cuPointerGetAttribute(&v, CU_POINTER_ATTRIBUTE_BUFFER_ID, reinterpret_cast<CUdeviceptr>(ptr));
    if (r != CUDA_SUCCESS)
        return fail(GDX_ERR_NOT_FOUND, log::Level::Debug, kComp, "cuPointerGetAttribute(BUFFER_ID, %p): %s", ptr,
                    cuda::error_text(r).c_str());
    *id = v;
    return GDX_OK;
}

#else // !GDX_HAVE_CUDA_H: a row that is never available

namespace {
gdx_status_t no_cuda() { return GDX_FAIL(GDX_ERR_UNSUPPORTED, kComp, "gdx was built without cuda.h"); }
} // namespace

bool available() { return false; }
gdx_status_t query(const void *, MemInfo *) { return GDX_ERR_NOT_FOUND; }
gdx_status_t revalidate(const void *, const MemInfo &) { return GDX_ERR_NOT_FOUND; }
gdx_status_t copy(void *, const void *, size_t, int) { return no_cuda(); }
gdx_status_t copy_pinned(void *, const void *, size_t, int, CopyDir, MemType) { return no_cuda(); }
gdx_status_t copy_async(void *, const void *, size_t, int, CopyDir, CopyHandle *) { return no_cuda(); }
gdx_status_t copy_test(CopyHandle *) { return no_cuda(); }
gdx_status_t host_alloc(size_t, int, void **) { return no_cuda(); }
void host_free(void *) {}
gdx_status_t host_register(void *, size_t, int) { return no_cuda(); }
void host_unregister(void *) {}
gdx_status_t dmabuf_fd(const void *, size_t, int *fd, uint64_t *) {
    if (fd != nullptr) *fd = -1;
    return GDX_ERR_UNSUPPORTED;
}
const std::string &why_unavailable() {
    static const std::string why = "gdx was built without CUDA headers";
    return why;
}
int driver_version() { return 0; }
int device_count() { return 0; }
gdx_status_t devices(std::vector<DeviceInfo> *out) {
    if (out != nullptr) out->clear();
    return GDX_OK;
}
int current_device() { return -1; }
gdx_status_t buffer_id(const void *, uint64_t *) { return GDX_ERR_NOT_FOUND; }
gdx_status_t ipc_export(const MemInfo &, IpcHandle *h, int *fd, std::string *why) {
    if (h != nullptr) *h = IpcHandle{};
    if (fd != nullptr) *fd = -1;
    if (why != nullptr) *why = why_unavailable();
    return GDX_OK;
}
gdx_status_t ipc_import_pool(int, int, void **) { return no_cuda(); }
void ipc_release_pool(void *, int) {}
gdx_status_t ipc_import(const IpcHandle &, size_t, int, void *, int, IpcMapping *) { return no_cuda(); }
gdx_status_t ipc_close(IpcMapping *) { return GDX_OK; }
gdx_status_t peer_access(int, int, std::string *why) {
    if (why != nullptr) *why = why_unavailable();
    return GDX_ERR_UNREACHABLE;
}
gdx_status_t copy_queue(int, const CopyQueueOptions &, std::unique_ptr<CopyQueue> *) { return no_cuda(); }

#endif // GDX_HAVE_CUDA_H

} // namespace cudarow

namespace {

const Ops kCudaRow = {
    .name = "cuda",
    .available = cudarow::available,
    .query = cudarow::query,
    .copy = cudarow::copy,
    .copy_pinned = cudarow::copy_pinned,
    .copy_async = cudarow::copy_async,
    .copy_test = cudarow::copy_test,
    .host_alloc = cudarow::host_alloc,
    .host_free = cudarow::host_free,
    .host_register = cudarow::host_register,
    .host_unregister = cudarow::host_unregister,
    .dmabuf_fd = cudarow::dmabuf_fd,
    .revalidate = cudarow::revalidate,
    .why_unavailable = cudarow::why_unavailable,
    .driver_version = cudarow::driver_version,
    .device_count = cudarow::device_count,
    .devices = cudarow::devices,
    .current_device = cudarow::current_device,
    .buffer_id = cudarow::buffer_id,
    .ipc_export = cudarow::ipc_export,
    .ipc_import_pool = cudarow::ipc_import_pool,
    .ipc_release_pool = cudarow::ipc_release_pool,
    .ipc_import = cudarow::ipc_import,
    .ipc_close = cudarow::ipc_close,
    .peer_access = cudarow::peer_access,
    .copy_queue = cudarow::copy_queue,
};

} // namespace

const Ops &cuda_row() { return kCudaRow; }

void set_dmabuf_pcie_first(bool on) { cudarow::g_pcie_first.store(on, std::memory_order_relaxed); }

void set_small_write_max(size_t bytes) { cudarow::g_small_write_max.store(bytes, std::memory_order_relaxed); }

} // namespace gdx::mem
