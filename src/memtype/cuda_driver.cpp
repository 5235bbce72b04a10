#include "memtype/cuda_driver.h"

#if GDX_HAVE_CUDA_H
#include "core/log.h"

#include <cstring>
#include <dlfcn.h>
#include <mutex>

namespace gdx::cuda {

std::string error_text_with(const DriverApi *api, CUresult r);

namespace {

std::string g_why;

using GetProcAddressV2 = CUresult (*)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
using GetProcAddressV1 = CUresult (*)(const char *, void **, int, cuuint64_t);

// cuGetProcAddress returns the newest ABI of a name up to the version asked for, which is not always the one cuda.h
// declares under that name: CUDA 13.0 turned cuCtxSynchronize into (CUcontext) and cuCtxGetDevice into
// (CUdevice *, CUcontext) while cuda.h kept the old declarations (the new ones are the _v2 names). gdx calls
// the declarations of cuda.h (decltype in DriverApi), so those names are asked for at the last version with
// that signature; calling the 13.0 entry point without its context argument fails ("context is destroyed").
int abi_version(const char *name) {
    static constexpr const char *kBefore13[] = {"cuCtxSynchronize", "cuCtxGetDevice"};
    for (const char *n : kBefore13)
        if (std::strcmp(n, name) == 0) return CUDA_VERSION < 12090 ? CUDA_VERSION : 12090;
    return CUDA_VERSION;
}

DriverApi *load() {
    // RTLD_NODELETE: entry points stay valid for static destructors that free CUDA memory at exit.
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (lib == nullptr) {
        const char *e = dlerror();
        g_why = std::string("no CUDA driver (dlopen libcuda.so.1: ") + (e ? e : "unknown error") + ")";
        return nullptr;
    }
    auto gpa2 = reinterpret_cast<GetProcAddressV2>(dlsym(lib, "cuGetProcAddress_v2"));
    auto gpa1 = reinterpret_cast<GetProcAddressV1>(dlsym(lib, "cuGetProcAddress"));
    if (gpa2 == nullptr && gpa1 == nullptr) {
        g_why = "CUDA driver too old: libcuda.so.1 has no cuGetProcAddress";
        return nullptr;
    }
    auto *api = new DriverApi;
    api->lib = lib;
    api->get_proc_v2 = reinterpret_cast<void *>(gpa2);
    api->get_proc_v1 = reinterpret_cast<void *>(gpa1);
    bool ok = true;
    auto resolve = [&](const char *name, void **slot, bool required) {
        *slot = entry_point(*api, name, abi_version(name), false);
        if (*slot == nullptr) {
            GDX_DEBUG("cuda", "driver entry point %s not available", name);
            if (required) {
                ok = false;
                if (g_why.empty()) g_why = std::string("CUDA driver lacks required entry point ") + name;
            }
        }
    };
#define GDX_CUDA_RESOLVE(name, required) resolve(#name, reinterpret_cast<void **>(&api->name), required);
    GDX_CUDA_DRIVER_FUNCS(GDX_CUDA_RESOLVE)
#undef GDX_CUDA_RESOLVE
    if (!ok) {
        delete api;
        return nullptr;
    }
    CUresult r = api->cuInit(0);
    if (r != CUDA_SUCCESS) {
        // CUDA_ERROR_NO_DEVICE is the normal answer on a GPU-less machine with a driver installed.
        g_why = "CUDA driver present but cuInit failed: " + error_text_with(api, r);
        delete api;
        return nullptr;
    }
    api->cuDriverGetVersion(&api->driver_version);
    api->cuDeviceGetCount(&api->device_count);
    if (api->device_count == 0) {
        g_why = "CUDA driver present but no GPU";
        delete api;
        return nullptr;
    }
    return api;
}

} // namespace

void *entry_point(const DriverApi &api, const char *name, int version, bool per_thread_stream) {
    const cuuint64_t flags =
        per_thread_stream ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : CU_GET_PROC_ADDRESS_DEFAULT;
    void *fn = nullptr;
    CUresult r;
    if (api.get_proc_v2 != nullptr) {
        CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
        r = reinterpret_cast<GetProcAddressV2>(api.get_proc_v2)(name, &fn, version, flags, &status);
        if (status != CU_GET_PROC_ADDRESS_SUCCESS) r = CUDA_ERROR_NOT_FOUND;
    } else if (api.get_proc_v1 != nullptr) {
        r = reinterpret_cast<GetProcAddressV1>(api.get_proc_v1)(name, &fn, version, flags);
    } else {
        return nullptr;
    }
    return r == CUDA_SUCCESS ? fn : nullptr;
}

const DriverApi *driver() {
    static std::once_flag once;
    static DriverApi *api = nullptr;
    std::call_once(once, [] {
        api = load();
        if (api == nullptr) {
            GDX_INFO("cuda", "%s: every pointer is host memory", g_why.c_str());
        } else {
            GDX_INFO("cuda", "CUDA driver %d.%d, %d GPU(s)", api->driver_version / 1000,
                     (api->driver_version % 1000) / 10, api->device_count);
        }
    });
    return api;
}

const std::string &why_unavailable() {
    driver();
    return g_why;
}

std::string error_text_with(const DriverApi *api, CUresult r) {
    const char *name = nullptr, *desc = nullptr;
    if (api && api->cuGetErrorName) api->cuGetErrorName(r, &name);
    if (api && api->cuGetErrorString) api->cuGetErrorString(r, &desc);
    std::string s = name ? name : "CUDA error " + std::to_string(static_cast<int>(r));
    if (desc) s += std::string(" (") + desc + ")";
    return s;
}

std::string error_text(CUresult r) { return error_text_with(driver(), r); }

std::vector<DeviceInfo> list_devices() {
    std::vector<DeviceInfo> out;
    const DriverApi *api = driver();
    if (api == nullptr) return out;
    for (int i = 0; i < api->device_count; ++i) {
        CUdevice dev;
        if (api->cuDeviceGet(&dev, i) != CUDA_SUCCESS) continue;
        DeviceInfo d;
        d.ordinal = i;
        char buf[256] = {};
        if (api->cuDeviceGetName(buf, sizeof(buf) - 1, dev) == CUDA_SUCCESS) d.name = buf;
        char bus[64] = {};
        if (api->cuDeviceGetPCIBusId(bus, sizeof(bus) - 1, dev) == CUDA_SUCCESS) d.pci_bus_id = bus;
        for (char &c : d.pci_bus_id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        api->cuDeviceTotalMem(&d.total_mem, dev);
        auto attr = [&](CUdevice_attribute a) {
            int v = 0;
            return api->cuDeviceGetAttribute(&v, a, dev) == CUDA_SUCCESS ? v : 0;
        };
        d.cc_major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
        d.cc_minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
        d.integrated = attr(CU_DEVICE_ATTRIBUTE_INTEGRATED) != 0;
        d.dmabuf_supported = attr(CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED) != 0;
        d.gdr_supported = attr(CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED) != 0;
        d.gdr_with_vmm = attr(CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED) != 0;
        d.vmm_supported = attr(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED) != 0;
        d.posix_fd_handles = attr(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED) != 0;
        d.async_engines = attr(CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT);
        out.push_back(std::move(d));
    }
    return out;
}

CUresult bind_device(int ordinal) {
    const DriverApi *api = driver();
    if (api == nullptr) return CUDA_ERROR_NO_DEVICE;
    if (ordinal < 0 || ordinal >= api->device_count) return CUDA_ERROR_INVALID_DEVICE;
    static std::mutex m;
    static std::vector<CUcontext> ctxs;
    CUcontext ctx = nullptr;
    {
        std::lock_guard<std::mutex> g(m);
        if (ctxs.empty()) ctxs.resize(api->device_count, nullptr);
        if (ctxs[ordinal] == nullptr) {
            CUdevice dev;
            CUresult r = api->cuDeviceGet(&dev, ordinal);
            if (r == CUDA_SUCCESS) r = api->cuDevicePrimaryCtxRetain(&ctxs[ordinal], dev);
            if (r != CUDA_SUCCESS) return r;
        }
        ctx = ctxs[ordinal];
    }
    CUcontext cur = nullptr;
    api->cuCtxGetCurrent(&cur);
    return cur == ctx ? CUDA_SUCCESS : api->cuCtxSetCurrent(ctx);
}

DeviceScope::DeviceScope(int ordinal) {
    const DriverApi *api = driver();
    if (api == nullptr) return;
    // Without knowing what was current we could not restore it: then bind nothing.
    if (api->cuCtxGetCurrent(&prev_) != CUDA_SUCCESS) {
        status_ = CUDA_ERROR_INVALID_CONTEXT;
        return;
    }
    restore_ = true;
    status_ = bind_device(ordinal);
}

DeviceScope::~DeviceScope() {
    if (!restore_) return;
    const DriverApi *api = driver();
    CUcontext cur = nullptr;
    // cuCtxSetCurrent(nullptr) pops: right when the thread had no context before.
    if (api->cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur != prev_) api->cuCtxSetCurrent(prev_);
}

} // namespace gdx::cuda

#endif // GDX_HAVE_CUDA_H
