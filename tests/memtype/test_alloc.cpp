#include "test_alloc.h"

#include "core/error.h"

#if GDX_HAVE_CUDA_H
#include "memtype/cuda_driver.h"
#endif

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef GDX_IPC_PEER_PATH
#define GDX_IPC_PEER_PATH ""
#endif

extern char **environ;

namespace gdx::mem::test {

const char *alloc_kind_name(AllocKind k) {
    switch (k) {
    case AllocKind::HostMalloc:
        return "host_malloc";
    case AllocKind::HostPinned:
        return "host_pinned";
    case AllocKind::HostRegistered:
        return "host_registered";
    case AllocKind::CudaDevice:
        return "cuda_device";
    case AllocKind::CudaManaged:
        return "cuda_managed";
    case AllocKind::CudaVmm:
        return "cuda_vmm";
    case AllocKind::CudaVmmHost:
        return "cuda_vmm_host";
    case AllocKind::CudaPool:
        return "cuda_pool";
    case AllocKind::CudaIpcImported:
        return "cuda_ipc_imported";
    }
    return "unknown";
}

MemType expected_type(AllocKind k) {
    switch (k) {
    case AllocKind::HostMalloc:
        return MemType::HostPageable;
    case AllocKind::HostPinned:
        return MemType::HostPinned;
    case AllocKind::HostRegistered:
        return MemType::HostRegistered;
    case AllocKind::CudaDevice:
        return MemType::CudaDevice;
    case AllocKind::CudaManaged:
        return MemType::CudaManaged;
    case AllocKind::CudaVmm:
        return MemType::CudaVmm;
    case AllocKind::CudaVmmHost:
        return MemType::CudaVmmHost;
    case AllocKind::CudaPool:
        return MemType::CudaPool;
    case AllocKind::CudaIpcImported:
        return MemType::CudaIpcImported;
    }
    return MemType::Unmapped;
}

bool needs_cuda(AllocKind k) { return k != AllocKind::HostMalloc; }

std::string gpu_skip_reason() {
#if GDX_HAVE_CUDA_H
    if (cuda::driver() != nullptr) return "";
    std::string why = cuda::why_unavailable(); // e.g. "no CUDA driver (dlopen libcuda.so.1: ...)"
    const std::string lead = "no CUDA driver (";
    if (why.rfind(lead, 0) == 0 && why.back() == ')') why = why.substr(lead.size(), why.size() - lead.size() - 1);
    return "no CUDA driver: " + why;
#else
    return "no CUDA driver: gdx was built without cuda.h";
#endif
}

#if GDX_HAVE_CUDA_H

namespace {

bool cu_ok(CUresult r, const std::string &what, std::string *why) {
    if (r == CUDA_SUCCESS) return true;
    if (why != nullptr) *why = what + ": " + cuda::error_text(r);
    return false;
}

bool refused(CUresult r) {
    return r == CUDA_ERROR_NOT_SUPPORTED || r == CUDA_ERROR_INVALID_VALUE || r == CUDA_ERROR_INVALID_DEVICE;
}

CUmemAllocationProp vmm_prop(int device, bool host_located, bool numa) {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    if (host_located) {
        // HOST allocations must request no handle types (cuMemCreate documentation).
        prop.location.type = numa ? CU_MEM_LOCATION_TYPE_HOST_NUMA : CU_MEM_LOCATION_TYPE_HOST;
        prop.location.id = 0;
        return prop;
    }
    const cuda::DriverApi *api = cuda::driver();
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR; // exportable, as PyTorch and NCCL do
    CUdevice dev;
    int gdr = 0;
    if (api->cuDeviceGet(&dev, device) == CUDA_SUCCESS)
        api->cuDeviceGetAttribute(&gdr, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, dev);
    prop.allocFlags.gpuDirectRDMACapable = gdr != 0 ? 1 : 0;
    return prop;
}

} // namespace

size_t VmmSpace::granularity_for(int device, std::string *why) {
    const cuda::DriverApi *api = cuda::driver();
    if (api == nullptr) {
        *why = gpu_skip_reason();
        return 0;
    }
    if (api->cuMemCreate == nullptr || api->cuMemMap == nullptr || api->cuMemAddressReserve == nullptr ||
        api->cuMemSetAccess == nullptr || api->cuMemGetAllocationGranularity == nullptr) {
        *why = "the CUDA driver lacks the VMM entry points";
        return 0;
    }
    CUdevice dev;
    int vmm = 0;
    if (api->cuDeviceGet(&dev, device) == CUDA_SUCCESS)
        api->cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev);
    if (vmm == 0) {
        *why = "GPU " + std::to_string(device) + " has no virtual memory management support";
        return 0;
    }
    size_t g = 0, gh = 0;
    CUmemAllocationProp prop = vmm_prop(device, false, false);
    if (!cu_ok(api->cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
               "cuMemGetAllocationGranularity", why))
        return 0;
    prop = vmm_prop(device, true, false);
    if (api->cuMemGetAllocationGranularity(&gh, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS) gh = 0;
    return std::max(g, gh); // both powers of two: the larger is a multiple of the smaller
}

bool VmmSpace::reserve(int device, size_t chunks, std::string *why) {
    device_ = device;
    if (!cu_ok(cuda::bind_device(device), "bind_device", why)) return false;
    gran_ = granularity_for(device, why);
    if (gran_ == 0) return false;
    CUdeviceptr va = 0;
    if (!cu_ok(cuda::driver()->cuMemAddressReserve(&va, chunks * gran_, gran_, 0, 0), "cuMemAddressReserve", why))
        return false;
    base_ = va;
    chunks_ = chunks;
    return true;
}

bool VmmSpace::map(size_t first, size_t n, bool host_located, std::string *why) {
    const cuda::DriverApi *api = cuda::driver();
    if (base_ == 0 || first + n > chunks_) {
        *why = "VmmSpace::map outside the reservation";
        return false;
    }
    const size_t bytes = n * gran_;
    CUmemAllocationProp prop = vmm_prop(device_, host_located, false);
    CUmemGenericAllocationHandle h = 0;
    CUresult r = api->cuMemCreate(&h, bytes, &prop, 0);
    if (host_located && refused(r)) { // a NUMA-less HOST location is refused on some drivers: name node 0
        prop = vmm_prop(device_, true, true);
        r = api->cuMemCreate(&h, bytes, &prop, 0);
    }
    if (!cu_ok(r, host_located ? "cuMemCreate(host-located)" : "cuMemCreate(device)", why)) return false;
    if (!cu_ok(api->cuMemMap(chunk(first), bytes, 0, h, 0), "cuMemMap", why)) {
        api->cuMemRelease(h);
        return false;
    }
    CUmemAccessDesc access[2] = {};
    access[0].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access[0].location.id = device_;
    access[0].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    access[1].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    bool cpu = false; // the CPU, named as a NUMA node (id ignored for access) or as plain host
    for (CUmemLocationType t : {CU_MEM_LOCATION_TYPE_HOST_NUMA, CU_MEM_LOCATION_TYPE_HOST}) {
        access[1].location.type = t;
        if (host_located && !cpu) cpu = api->cuMemSetAccess(chunk(first), bytes, access, 2) == CUDA_SUCCESS;
    }
    if (!cpu && !cu_ok(api->cuMemSetAccess(chunk(first), bytes, access, 1), "cuMemSetAccess", why)) {
        api->cuMemUnmap(chunk(first), bytes);
        api->cuMemRelease(h);
        return false;
    }
    maps_.push_back(Mapping{first, n, h, cpu});
    return true;
}

bool VmmSpace::unmap(size_t first, std::string *why) {
    const cuda::DriverApi *api = cuda::driver();
    auto it = std::find_if(maps_.begin(), maps_.end(), [&](const Mapping &m) { return m.first == first; });
    if (it == maps_.end()) {
        *why = "no mapping at chunk " + std::to_string(first);
        return false;
    }
    bool ok = cu_ok(api->cuMemUnmap(chunk(first), it->n * gran_), "cuMemUnmap", why);
    ok = cu_ok(api->cuMemRelease(it->handle), "cuMemRelease", why) && ok;
    maps_.erase(it);
    return ok;
}

bool VmmSpace::cpu_access(size_t first) const {
    for (const Mapping &m : maps_)
        if (m.first == first) return m.cpu;
    return false;
}

VmmSpace::~VmmSpace() {
    std::string why;
    while (!maps_.empty())
        unmap(maps_.back().first, &why);
    if (base_ != 0) cuda::driver()->cuMemAddressFree(base_, chunks_ * gran_);
}

bool TestBuffer::allocate(AllocKind kind, size_t size, int device, std::string *why) {
    release();
    kind_ = kind;
    device_ = device;
    size_ = size;
    if (kind == AllocKind::HostMalloc) {
        ptr_ = std::malloc(size);
        if (ptr_ == nullptr) *why = "malloc failed";
        return ptr_ != nullptr;
    }
    const cuda::DriverApi *api = cuda::driver();
    if (api == nullptr) {
        *why = gpu_skip_reason();
        return false;
    }
    if (device >= api->device_count) {
        *why = "needs GPU " + std::to_string(device) + ", this machine has " + std::to_string(api->device_count);
        return false;
    }
    if (!cu_ok(cuda::bind_device(device), "bind_device", why)) return false;
    CUdeviceptr d = 0;
    CUresult r = CUDA_SUCCESS;
    switch (kind) {
    case AllocKind::HostMalloc:
        break;
    case AllocKind::HostPinned:
        r = api->cuMemHostAlloc(&ptr_, size, CU_MEMHOSTALLOC_PORTABLE);
        return cu_ok(r, "cuMemHostAlloc", why);
    case AllocKind::HostRegistered: {
        const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
        size_ = (size + page - 1) / page * page;
        void *p = nullptr;
        if (posix_memalign(&p, page, size_) != 0) {
            *why = "posix_memalign failed";
            return false;
        }
        if (!cu_ok(api->cuMemHostRegister(p, size_, CU_MEMHOSTREGISTER_PORTABLE), "cuMemHostRegister", why)) {
            std::free(p);
            return false;
        }
        ptr_ = p;
        return true;
    }
    case AllocKind::CudaDevice:
    case AllocKind::CudaIpcImported:
        if (!cu_ok(api->cuMemAlloc(&d, size), "cuMemAlloc", why)) return false;
        ptr_ = reinterpret_cast<void *>(d);
        if (kind == AllocKind::CudaIpcImported && // the peer checks this pattern through its mapping
            (!cu_ok(api->cuMemsetD8(d, 0x5A, size), "cuMemsetD8", why) ||
             !cu_ok(api->cuCtxSynchronize(), "cuCtxSynchronize", why))) {
            release();
            return false;
        }
        return true;
    case AllocKind::CudaManaged:
        if (!cu_ok(api->cuMemAllocManaged(&d, size, CU_MEM_ATTACH_GLOBAL), "cuMemAllocManaged", why)) return false;
        ptr_ = reinterpret_cast<void *>(d);
        return true;
    case AllocKind::CudaVmm:
    case AllocKind::CudaVmmHost: {
        size_t gran = VmmSpace::granularity_for(device, why);
        if (gran == 0) return false;
        size_t chunks = (size + gran - 1) / gran;
        vmm_ = std::make_unique<VmmSpace>();
        if (!vmm_->reserve(device, chunks, why) || !vmm_->map(0, chunks, kind == AllocKind::CudaVmmHost, why)) {
            vmm_.reset();
            return false;
        }
        size_ = chunks * gran;
        ptr_ = reinterpret_cast<void *>(vmm_->base());
        return true;
    }
    case AllocKind::CudaPool: {
        if (api->cuMemAllocAsync == nullptr || api->cuMemFreeAsync == nullptr) {
            *why = "the CUDA driver lacks cuMemAllocAsync";
            return false;
        }
        CUstream s = nullptr;
        if (!cu_ok(api->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate", why)) return false;
        r = api->cuMemAllocAsync(&d, size, s);
        if (r == CUDA_SUCCESS) r = api->cuStreamSynchronize(s);
        if (!cu_ok(r, "cuMemAllocAsync", why)) {
            api->cuStreamDestroy(s);
            return false;
        }
        stream_ = s;
        ptr_ = reinterpret_cast<void *>(d);
        return true;
    }
    }
    *why = "unknown allocation kind";
    return false;
}

void TestBuffer::release() {
    if (ptr_ == nullptr) return;
    if (kind_ == AllocKind::HostMalloc) {
        std::free(ptr_);
        ptr_ = nullptr;
        return;
    }
    const cuda::DriverApi *api = cuda::driver();
    cuda::bind_device(device_);
    const CUdeviceptr d = reinterpret_cast<CUdeviceptr>(ptr_);
    switch (kind_) {
    case AllocKind::HostMalloc:
        break;
    case AllocKind::HostPinned:
        api->cuMemFreeHost(ptr_);
        break;
    case AllocKind::HostRegistered:
        api->cuMemHostUnregister(ptr_);
        std::free(ptr_);
        break;
    case AllocKind::CudaDevice:
    case AllocKind::CudaIpcImported:
    case AllocKind::CudaManaged:
        api->cuMemFree(d);
        break;
    case AllocKind::CudaVmm:
    case AllocKind::CudaVmmHost:
        vmm_.reset();
        break;
    case AllocKind::CudaPool: {
        CUstream s = static_cast<CUstream>(stream_);
        api->cuMemFreeAsync(d, s);
        api->cuStreamSynchronize(s);
        api->cuStreamDestroy(s);
        stream_ = nullptr;
        break;
    }
    }
    ptr_ = nullptr;
}

bool TestBuffer::cpu_access() const {
    switch (kind_) {
    case AllocKind::HostMalloc:
    case AllocKind::HostPinned:
    case AllocKind::HostRegistered:
    case AllocKind::CudaManaged:
        return true;
    case AllocKind::CudaVmmHost:
        return vmm_ != nullptr && vmm_->cpu_access(0);
    default:
        return false;
    }
}

namespace {

// The handle as 128 hex digits: cuIpcGetMemHandle's, or the ops table's ipc_export (then *size is the allocation's).
bool ipc_handle_line(const TestBuffer &exported, bool via_ops, std::string *line, size_t *size, std::string *why) {
    const cuda::DriverApi *api = cuda::driver();
    unsigned char bytes[kIpcHandleSize] = {};
    static_assert(sizeof(CUipcMemHandle) == kIpcHandleSize);
    if (via_ops) {
        MemInfo info;
        if (ops(MemKind::Cuda).query(exported.ptr(), &info) != GDX_OK) return *why = "query: " + last_error(), false;
        IpcHandle h;
        int fd = -1;
        std::string no;
        if (ops(MemKind::Cuda).ipc_export(info, &h, &fd, &no) != GDX_OK || h.kind != IpcKind::Legacy || fd != -1)
            return *why = "ipc_export of device memory did not give a legacy handle: " + no, false;
        std::memcpy(bytes, h.bytes, sizeof(bytes));
        *size = info.size;
    } else {
        cuda::bind_device(exported.device());
        CUipcMemHandle h{};
        CUresult r = api->cuIpcGetMemHandle(&h, reinterpret_cast<CUdeviceptr>(exported.ptr()));
        if (r != CUDA_SUCCESS) return *why = "cuIpcGetMemHandle: " + cuda::error_text(r), false;
        std::memcpy(bytes, h.reserved, sizeof(bytes));
        *size = exported.size();
    }
    static const char hex[] = "0123456789abcdef";
    for (unsigned char c : bytes) {
        *line += hex[c >> 4];
        *line += hex[c & 15];
    }
    *line += '\n';
    return true;
}

} // namespace

int run_ipc_peer(const TestBuffer &exported, std::string *output, bool via_ops) {
    output->clear();
    const cuda::DriverApi *api = cuda::driver();
    if (api == nullptr || std::strlen(GDX_IPC_PEER_PATH) == 0) {
        *output = api == nullptr ? gpu_skip_reason() : "memtype_ipc_peer was not built";
        return -1;
    }
    std::string line;
    size_t size = 0;
    if (!ipc_handle_line(exported, via_ops, &line, &size, output)) return -1;
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0) return -1;
    if (pipe2(out, O_CLOEXEC) != 0) {
        close(in[0]);
        close(in[1]);
        return -1;
    }
    std::signal(SIGPIPE, SIG_IGN); // a peer that dies early must fail the test, not kill it
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0); // dup2 clears O_CLOEXEC on 0, 1, 2
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_adddup2(&fa, out[1], 2);
    std::string size_s = std::to_string(size), dev_s = std::to_string(exported.device());
    std::string path = GDX_IPC_PEER_PATH;
    char *argv[] = {path.data(),   const_cast<char *>("--size"),
                    size_s.data(), const_cast<char *>("--device"),
                    dev_s.data(),  via_ops ? const_cast<char *>("--via-ops") : nullptr,
                    nullptr};
    pid_t pid = -1;
    int rc = posix_spawn(&pid, path.c_str(), &fa, nullptr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    if (rc != 0) {
        close(in[1]);
        close(out[0]);
        *output = "posix_spawn " + path + ": " + std::strerror(rc);
        return -1;
    }
    if (write(in[1], line.data(), line.size()) != static_cast<ssize_t>(line.size()))
        *output += "(writing the handle to the peer failed)\n";
    close(in[1]);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    char buf[4096];
    for (;;) {
        pollfd pfd{out[0], POLLIN, 0};
        if (poll(&pfd, 1, 1000) > 0) {
            ssize_t n = read(out[0], buf, sizeof(buf));
            if (n <= 0) break;
            output->append(buf, static_cast<size_t>(n));
        }
        if (std::chrono::steady_clock::now() > deadline) {
            *output += "(peer timed out: killed)\n";
            kill(pid, SIGKILL);
            break;
        }
    }
    close(out[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

#else // !GDX_HAVE_CUDA_H

size_t VmmSpace::granularity_for(int, std::string *why) {
    *why = gpu_skip_reason();
    return 0;
}
bool VmmSpace::reserve(int, size_t, std::string *why) {
    *why = gpu_skip_reason();
    return false;
}
bool VmmSpace::map(size_t, size_t, bool, std::string *why) {
    *why = gpu_skip_reason();
    return false;
}
bool VmmSpace::unmap(size_t, std::string *why) {
    *why = gpu_skip_reason();
    return false;
}
VmmSpace::~VmmSpace() = default;
bool VmmSpace::cpu_access(size_t) const { return false; }
bool TestBuffer::cpu_access() const { return kind_ == AllocKind::HostMalloc; }

bool TestBuffer::allocate(AllocKind kind, size_t size, int device, std::string *why) {
    release();
    kind_ = kind;
    device_ = device;
    size_ = size;
    if (kind != AllocKind::HostMalloc) {
        *why = gpu_skip_reason();
        return false;
    }
    ptr_ = std::malloc(size);
    return ptr_ != nullptr;
}

void TestBuffer::release() {
    std::free(ptr_);
    ptr_ = nullptr;
}

int run_ipc_peer(const TestBuffer &, std::string *output, bool) {
    *output = gpu_skip_reason();
    return -1;
}

#endif // GDX_HAVE_CUDA_H

} // namespace gdx::mem::test
