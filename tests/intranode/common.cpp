#include "common.h"

#include "core/error.h"
#include "transport/open_interfaces.h"
#include "memtype/cuda_driver.h"
#include "memtype/memtype.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <poll.h>
#include <spawn.h>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

namespace gdx::test {

uint8_t pattern(uint64_t seed, uint64_t i) {
    // Not periodic over small strides, so a byte landing at the wrong offset is caught.
    uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ (seed * 0xD1B54A32D192ED03ull);
    x ^= x >> 29;
    return static_cast<uint8_t>(x ^ (x >> 17));
}

void fill_pattern(uint8_t *p, size_t len, uint64_t seed, uint64_t first) {
    for (size_t i = 0; i < len; ++i) p[i] = pattern(seed, first + i);
}

long long check_pattern(const uint8_t *p, size_t len, uint64_t seed, uint64_t first) {
    for (size_t i = 0; i < len; ++i)
        if (p[i] != pattern(seed, first + i)) return static_cast<long long>(i);
    return -1;
}

size_t mapped_segments(const std::string &prefix) {
    std::ifstream f("/proc/self/maps");
    size_t n = 0;
    for (std::string line; std::getline(f, line);)
        if (line.find(prefix) != std::string::npos) ++n;
    return n;
}

const char *kind_name(Kind k) {
    switch (k) {
    case Kind::Host: return "host";
    case Kind::Cuda: return "cuda";
    case Kind::Managed: return "managed";
    case Kind::Vmm: return "vmm";
    case Kind::Pool: return "pool";
    }
    return "?";
}

bool parse_kind(const std::string &s, Kind *out) {
    for (Kind k : {Kind::Host, Kind::Cuda, Kind::Managed, Kind::Vmm, Kind::Pool})
        if (s == kind_name(k)) {
            *out = k;
            return true;
        }
    return false;
}

std::string kind_unavailable(Kind k, int device) {
    if (k == Kind::Host) return "";
#if GDX_HAVE_CUDA_H
    const cuda::DriverApi *api = cuda::driver();
    if (api == nullptr) return "no CUDA: " + cuda::why_unavailable();
    if (device < 0 || device >= api->device_count)
        return "GPU " + std::to_string(device) + " absent (" + std::to_string(api->device_count) + " GPU(s))";
    auto devs = cuda::list_devices();
    if (k == Kind::Vmm && (!api->cuMemCreate || !devs[device].vmm_supported)) return "no VMM support";
    if (k == Kind::Pool && !api->cuMemPoolCreate) return "no stream-ordered allocator";
    return "";
#else
    (void)device;
    return "built without cuda.h";
#endif
}

#if GDX_HAVE_CUDA_H
namespace {
CUresult vmm_alloc(const cuda::DriverApi *api, int device, size_t want, CUdeviceptr *ptr, size_t *size,
                   unsigned long long *handle) {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    size_t gran = 0;
    CUresult r = api->cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (r != CUDA_SUCCESS) return r;
    *size = (want + gran - 1) / gran * gran;
    CUmemGenericAllocationHandle h;
    if ((r = api->cuMemCreate(&h, *size, &prop, 0)) != CUDA_SUCCESS) return r;
    if ((r = api->cuMemAddressReserve(ptr, *size, gran, 0, 0)) != CUDA_SUCCESS) return r;
    if ((r = api->cuMemMap(*ptr, *size, 0, h, 0)) != CUDA_SUCCESS) return r;
    CUmemAccessDesc acc{};
    acc.location = prop.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if ((r = api->cuMemSetAccess(*ptr, *size, &acc, 1)) != CUDA_SUCCESS) return r;
    *handle = h;
    return CUDA_SUCCESS;
}

CUmemoryPool exportable_pool(const cuda::DriverApi *api, int device) {
    static CUmemoryPool pools[64] = {};
    if (pools[device] == nullptr) {
        CUmemPoolProps p{};
        p.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
        p.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
        p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        p.location.id = device;
        if (api->cuMemPoolCreate(&pools[device], &p) != CUDA_SUCCESS) pools[device] = nullptr;
    }
    return pools[device];
}
} // namespace
#endif

gdx_status_t Buffer::make(Kind k, int device, size_t size, size_t offset, std::unique_ptr<Buffer> *out) {
    std::unique_ptr<Buffer> b(new Buffer);
    b->kind_ = k;
    b->device_ = k == Kind::Host ? -1 : device;
    b->size_ = size;
    b->offset_ = offset;
    b->alloc_ = size + offset;
    if (k == Kind::Host) {
        b->base_ = static_cast<uint8_t *>(std::malloc(b->alloc_ ? b->alloc_ : 1));
        if (b->base_ == nullptr) return GDX_ERR_NO_MEMORY;
        *out = std::move(b);
        return GDX_OK;
    }
#if GDX_HAVE_CUDA_H
    std::string why = kind_unavailable(k, device);
    if (!why.empty()) return GDX_FAIL(GDX_ERR_UNSUPPORTED, "test", "%s memory: %s", kind_name(k), why.c_str());
    const cuda::DriverApi *api = cuda::driver();
    cuda::DeviceScope scope(device);
    CUdeviceptr p = 0;
    CUresult r = CUDA_SUCCESS;
    switch (k) {
    case Kind::Cuda: r = api->cuMemAlloc(&p, b->alloc_); break;
    case Kind::Managed: r = api->cuMemAllocManaged(&p, b->alloc_, CU_MEM_ATTACH_GLOBAL); break;
    case Kind::Vmm: r = vmm_alloc(api, device, b->alloc_, &p, &b->alloc_, &b->vmm_handle_); break;
    case Kind::Pool: {
        CUmemoryPool pool = exportable_pool(api, device);
        if (pool == nullptr) return GDX_FAIL(GDX_ERR_UNSUPPORTED, "test", "cuMemPoolCreate(POSIX_FD) failed");
        r = api->cuMemAllocFromPoolAsync(&p, b->alloc_, pool, nullptr);
        if (r == CUDA_SUCCESS) r = api->cuStreamSynchronize(nullptr);
        break;
    }
    default: break;
    }
    if (r != CUDA_SUCCESS)
        return GDX_FAIL(GDX_ERR_DRIVER, "test", "allocating %zu bytes of %s memory: %s", b->alloc_, kind_name(k),
                        cuda::error_text(r).c_str());
    b->base_ = reinterpret_cast<uint8_t *>(p);
    *out = std::move(b);
    return GDX_OK;
#else
    return GDX_ERR_UNSUPPORTED;
#endif
}

Buffer::~Buffer() {
    if (kind_ == Kind::Host) {
        std::free(base_);
        return;
    }
#if GDX_HAVE_CUDA_H
    const cuda::DriverApi *api = cuda::driver();
    cuda::DeviceScope scope(device_);
    CUdeviceptr p = reinterpret_cast<CUdeviceptr>(base_);
    if (kind_ == Kind::Vmm) {
        api->cuMemUnmap(p, alloc_);
        api->cuMemAddressFree(p, alloc_);
        api->cuMemRelease(vmm_handle_);
    } else if (kind_ == Kind::Pool) {
        api->cuMemFreeAsync(p, nullptr);
        api->cuStreamSynchronize(nullptr);
    } else {
        api->cuMemFree(p);
    }
#endif
}

mem::MemInfo Buffer::info() const {
    mem::MemInfo mi;
    if (kind_ == Kind::Host) return mi;
    static mem::Detector det; // the memtype layer's answer, as a context would give it
    det.detect_one(ptr(), &mi);
    return mi;
}

gdx_status_t Buffer::write(size_t off, const uint8_t *src, size_t len) {
    if (off > size_ || len > size_ - off) return GDX_ERR_INVALID_PARAM;
    if (kind_ == Kind::Host) {
        std::memcpy(ptr() + off, src, len);
        return GDX_OK;
    }
#if GDX_HAVE_CUDA_H
    cuda::DeviceScope scope(device_);
    CUresult r = cuda::driver()->cuMemcpy(reinterpret_cast<CUdeviceptr>(ptr() + off),
                                          reinterpret_cast<CUdeviceptr>(src), len);
    // From pageable memory cuMemcpy may return before its DMA lands; gdx copies on streams of its own, which do
    // not wait for it. An application synchronizes before handing a buffer over, and so does the test.
    if (r == CUDA_SUCCESS) r = cuda::driver()->cuCtxSynchronize();
    return r == CUDA_SUCCESS ? GDX_OK : GDX_ERR_DRIVER;
#else
    return GDX_ERR_UNSUPPORTED;
#endif
}

gdx_status_t Buffer::read(size_t off, uint8_t *dst, size_t len) const {
    if (off > size_ || len > size_ - off) return GDX_ERR_INVALID_PARAM;
    if (kind_ == Kind::Host) {
        std::memcpy(dst, ptr() + off, len);
        return GDX_OK;
    }
#if GDX_HAVE_CUDA_H
    cuda::DeviceScope scope(device_);
    CUresult r = cuda::driver()->cuMemcpy(reinterpret_cast<CUdeviceptr>(dst),
                                          reinterpret_cast<CUdeviceptr>(ptr() + off), len);
    return r == CUDA_SUCCESS ? GDX_OK : GDX_ERR_DRIVER;
#else
    return GDX_ERR_UNSUPPORTED;
#endif
}

gdx_status_t Buffer::fill(uint64_t seed) {
    if (kind_ == Kind::Host) {
        fill_pattern(ptr(), size_, seed);
        return GDX_OK;
    }
    constexpr size_t kChunk = 64u << 20; // GPU kinds go through a bounded host staging buffer
    std::vector<uint8_t> tmp(std::min(size_, kChunk));
    for (size_t off = 0; off < size_; off += kChunk) {
        size_t n = std::min(kChunk, size_ - off);
        fill_pattern(tmp.data(), n, seed, off);
        gdx_status_t st = write(off, tmp.data(), n);
        if (st != GDX_OK) return st;
    }
    return GDX_OK;
}

long long Buffer::check(size_t off, size_t len, uint64_t seed, uint64_t first) const {
    if (off > size_ || len > size_ - off) return 0;
    if (kind_ == Kind::Host) {
        long long i = check_pattern(ptr() + off, len, seed, first);
        return i < 0 ? -1 : i;
    }
    constexpr size_t kChunk = 64u << 20;
    std::vector<uint8_t> tmp(std::min(len, kChunk));
    for (size_t done = 0; done < len; done += kChunk) {
        size_t n = std::min(kChunk, len - done);
        if (read(off + done, tmp.data(), n) != GDX_OK) return static_cast<long long>(done);
        long long i = check_pattern(tmp.data(), n, seed, first + done);
        if (i >= 0) return static_cast<long long>(done) + i;
    }
    return -1;
}

gdx_status_t open_transport(const std::string &transport, const std::string &device,
                            const Config::Overrides &overrides, Opened *out) {
    std::string err;
    gdx_status_t st = Config::load(overrides, &out->cfg, &err);
    if (st != GDX_OK) return GDX_FAIL(st, "test", "config: %s", err.c_str());
    config_apply_logging(out->cfg, &err); // GDX_LOG_LEVEL=debug in the environment debugs both processes
    tp::Component *c = tp::find_component(transport);
    if (c == nullptr) return GDX_FAIL(GDX_ERR_NOT_FOUND, "test", "no transport %s", transport.c_str());
    tp::OpenRequest req;
    req.device = device;
    tp::OpenOutcome o = tp::open_interface(*c, out->cfg, req);
    out->iface = std::move(o.iface);
    if (o.status != GDX_ERR_NO_DEVICE || o.devices != 0) return o.status; // opened, or its own error
    return GDX_FAIL(o.status, "test", "transport %s has no device %s", transport.c_str(), device.c_str());
}

gdx_status_t run_op(tp::Interface &ifc, const std::function<gdx_status_t(tp::Completion *)> &issue,
                    std::chrono::milliseconds limit) {
    tp::Completion c;
    c.count = 1;
    auto end = std::chrono::steady_clock::now() + limit;
    gdx_status_t st;
    while ((st = issue(&c)) == GDX_ERR_NO_RESOURCE) {
        ifc.progress();
        if (std::chrono::steady_clock::now() > end) return GDX_ERR_TIMEOUT;
    }
    if (st != GDX_INPROGRESS) return st;
    if (!progress_until(ifc, [&] { return c.count == 0; }, limit)) return GDX_ERR_TIMEOUT;
    return c.status;
}

// ---- Link -----------------------------------------------------------------------------------------------

std::string peer_binary() { return std::string(GDX_TEST_BINARY_DIR) + "/tests/intranode/intranode_peer"; }

gdx_status_t Link::spawn(const std::vector<std::string> &argv, const std::vector<std::string> &env,
                         std::unique_ptr<Link> *out) {
    int to_child[2], from_child[2];
    if (pipe2(to_child, O_CLOEXEC) != 0) return fail_errno(GDX_ERR_IO, errno, "test", "pipe2 (the peer's stdin)");
    if (pipe2(from_child, O_CLOEXEC) != 0) {
        int e = errno;
        close(to_child[0]);
        close(to_child[1]);
        return fail_errno(GDX_ERR_IO, e, "test", "pipe2 (the peer's stdout)");
    }
    posix_spawn_file_actions_t fa;
    int rc = posix_spawn_file_actions_init(&fa);
    if (rc == 0) rc = posix_spawn_file_actions_adddup2(&fa, to_child[0], 0);
    if (rc == 0) rc = posix_spawn_file_actions_adddup2(&fa, from_child[1], 1);
    std::vector<std::string> envs;
    for (char **e = environ; *e; ++e) envs.emplace_back(*e);
    for (const std::string &e : env) envs.push_back(e);
    std::vector<char *> av, ev;
    for (const std::string &a : argv) av.push_back(const_cast<char *>(a.c_str()));
    av.push_back(nullptr);
    for (std::string &e : envs) ev.push_back(e.data());
    ev.push_back(nullptr);
    pid_t pid = -1;
    if (rc == 0) rc = posix_spawn(&pid, av[0], &fa, nullptr, av.data(), ev.data());
    posix_spawn_file_actions_destroy(&fa);
    close(to_child[0]);
    close(from_child[1]);
    if (rc != 0) {
        close(to_child[1]);
        close(from_child[0]);
        return GDX_FAIL(GDX_ERR_IO, "test", "posix_spawn(%s): %s", av[0], std::strerror(rc));
    }
    std::unique_ptr<Link> l(new Link);
    l->pid_ = pid;
    l->in_ = to_child[1];
    l->out_ = from_child[0];
    *out = std::move(l);
    return GDX_OK;
}

Link::~Link() {
    if (in_ >= 0) close(in_);
    if (out_ >= 0) close(out_);
    if (!reaped_ && pid_ > 0) {
        for (int i = 0; i < 200 && !reaped_; ++i) { // closing stdin makes the peer exit on its own
            int st;
            if (waitpid(pid_, &st, WNOHANG) == pid_) reaped_ = true;
            else usleep(10000);
        }
        if (!reaped_) {
            ::kill(pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
        }
    }
}

bool Link::send(const std::string &line) {
    std::string s = line + "\n";
    return write(in_, s.data(), s.size()) == static_cast<ssize_t>(s.size());
}

std::string Link::recv(std::chrono::milliseconds limit, const std::function<void()> &tick) {
    auto end = std::chrono::steady_clock::now() + limit;
    for (;;) {
        size_t nl = buf_.find('\n');
        if (nl != std::string::npos) {
            std::string line = buf_.substr(0, nl);
            buf_.erase(0, nl + 1);
            return line;
        }
        if (std::chrono::steady_clock::now() > end) return "";
        pollfd p{out_, POLLIN, 0};
        int r = poll(&p, 1, tick ? 0 : 10);
        if (r > 0) {
            char b[4096];
            ssize_t n = read(out_, b, sizeof(b));
            if (n <= 0) return "";
            buf_.append(b, static_cast<size_t>(n));
        } else if (tick) {
            tick();
        }
    }
}

std::string Link::call(const std::string &line, std::chrono::milliseconds limit, const std::function<void()> &tick) {
    if (!send(line)) return "";
    return recv(limit, tick);
}

void Link::kill9() {
    if (pid_ > 0 && !reaped_) ::kill(pid_, SIGKILL);
}

bool Link::signal(int sig) { return pid_ > 0 && !reaped_ && ::kill(pid_, sig) == 0; }

bool Link::look(int flags) {
    if (reaped_) return false;
    int st = 0;
    pid_t w = waitpid(pid_, &st, WNOHANG | flags);
    if (w != pid_) return false; // still running (0), or EINTR: look again
    if (WIFSTOPPED(st)) return true;
    if (WIFEXITED(st) || WIFSIGNALED(st)) {
        reaped_ = true;
        status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    return false;
}

bool Link::wait_stopped(std::chrono::milliseconds limit, const std::function<void()> &tick) {
    for (auto end = std::chrono::steady_clock::now() + limit; !reaped_ && std::chrono::steady_clock::now() < end;) {
        if (look(WUNTRACED)) return true;
        if (tick) tick();
        else usleep(1000);
    }
    return false;
}

int Link::wait_exit(std::chrono::milliseconds limit, const std::function<void()> &tick) {
    for (auto end = std::chrono::steady_clock::now() + limit; !reaped_ && std::chrono::steady_clock::now() < end;) {
        look(0);
        if (reaped_) break;
        if (tick) tick();
        else usleep(1000);
    }
    return reaped_ ? status_ : -1;
}

void Link::close_stdin() {
    if (in_ >= 0) close(in_);
    in_ = -1;
}

int Link::wait_exit() {
    if (!reaped_) {
        int st = 0;
        waitpid(pid_, &st, 0);
        reaped_ = true;
        status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    return status_;
}

} // namespace gdx::test
