#include "memory.h"

#include "memtype/cuda_driver.h"

#include <cstdlib>
#include <cstring>
#include <sys/mman.h>

namespace gdx::perf {

namespace {

inline uint64_t mix(uint64_t x) { // splitmix64 finalizer
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

inline uint64_t word(uint64_t key, uint64_t index) { return mix(key ^ (index * 0xd6e8feb86659fd93ull)); }

#if GDX_HAVE_CUDA_H
std::string cu_err(const char *call, CUresult r) { return std::string(call) + ": " + cuda::error_text(r); }

bool bind(int gpu, std::string *why) {
    CUresult r = cuda::bind_device(gpu);
    if (r != CUDA_SUCCESS) {
        *why = "cannot make GPU " + std::to_string(gpu) + "'s context current: " + cuda::error_text(r);
        return false;
    }
    return true;
}
#endif

} // namespace

uint8_t pattern_byte(uint64_t seed, size_t offset) {
    uint64_t w = word(mix(seed), offset / 8);
    return static_cast<uint8_t>(w >> (8 * (offset % 8)));
}

void pattern_fill(uint64_t seed, size_t offset, uint8_t *dst, size_t len) {
    uint64_t key = mix(seed);
    size_t i = 0;
    while (i < len && (offset + i) % 8 != 0) {
        dst[i] = pattern_byte(seed, offset + i);
        ++i;
    }
    for (; i + 8 <= len; i += 8) {
        uint64_t w = word(key, (offset + i) / 8);
        std::memcpy(dst + i, &w, 8); // little-endian byte order matches pattern_byte
    }
    for (; i < len; ++i) dst[i] = pattern_byte(seed, offset + i);
}

size_t pattern_find_mismatch(uint64_t seed, size_t offset, const uint8_t *src, size_t len) {
    uint64_t key = mix(seed);
    size_t i = 0;
    while (i < len && (offset + i) % 8 != 0) {
        if (src[i] != pattern_byte(seed, offset + i)) return i;
        ++i;
    }
    for (; i + 8 <= len; i += 8) {
        uint64_t w = word(key, (offset + i) / 8), got;
        std::memcpy(&got, src + i, 8);
        if (got != w) {
            for (size_t j = 0; j < 8; ++j)
                if (src[i + j] != pattern_byte(seed, offset + i + j)) return i + j;
        }
    }
    for (; i < len; ++i)
        if (src[i] != pattern_byte(seed, offset + i)) return i;
    return SIZE_MAX;
}

int gpu_count(std::string *why) {
#if GDX_HAVE_CUDA_H
    const cuda::DriverApi *api = cuda::driver();
    if (api == nullptr) {
        *why = cuda::why_unavailable();
        return 0;
    }
    return api->device_count;
#else
    *why = "gdx was built without CUDA headers";
    return 0;
#endif
}

gdx_status_t Buffer::allocate(const MemSpec &spec, size_t len, std::unique_ptr<Buffer> *out, std::string *why) {
    std::unique_ptr<Buffer> b(new Buffer);
    b->spec_ = spec;
    b->len_ = len;
    const std::string what = spec.text();
    if (spec.kind == MemKindOpt::Host) {
        // Page-aligned, touched: the first iteration must not pay for page faults.
        size_t rounded = (len + 4095) & ~size_t{4095};
        b->ptr_ = std::aligned_alloc(4096, rounded);
        if (b->ptr_ == nullptr) {
            *why = what + ": cannot allocate " + size_text(len) + " of host memory";
            return GDX_ERR_NO_MEMORY;
        }
        std::memset(b->ptr_, 0, len);
        *out = std::move(b);
        return GDX_OK;
    }
#if GDX_HAVE_CUDA_H
    std::string reason;
    int n = gpu_count(&reason);
    if (n == 0) {
        *why = "memory kind '" + what + "' needs a GPU, and there is none here: " + reason;
        return GDX_ERR_NO_DEVICE;
    }
    if (spec.gpu >= n) {
        *why = "memory kind '" + what + "': GPU " + std::to_string(spec.gpu) + " does not exist (this machine has " +
               std::to_string(n) + " GPU" + (n == 1 ? "" : "s") + ")";
        return GDX_ERR_NO_DEVICE;
    }
    if (!bind(spec.gpu, why)) return GDX_ERR_DRIVER;
    const cuda::DriverApi *api = cuda::driver();
    CUresult r = CUDA_SUCCESS;
    switch (spec.kind) {
    case MemKindOpt::HostPinned: {
        r = api->cuMemHostAlloc(&b->ptr_, len, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
        if (r != CUDA_SUCCESS) {
            *why = what + ": " + cu_err("cuMemHostAlloc", r);
            return GDX_ERR_DRIVER;
        }
        std::memset(b->ptr_, 0, len);
        break;
    }
    case MemKindOpt::Cuda: {
        CUdeviceptr d = 0;
        r = api->cuMemAlloc(&d, len);
        if (r != CUDA_SUCCESS) {
            *why = what + ": " + cu_err("cuMemAlloc", r);
            return GDX_ERR_DRIVER;
        }
        b->ptr_ = reinterpret_cast<void *>(d);
        break;
    }
    case MemKindOpt::CudaManaged: {
        CUdeviceptr d = 0;
        r = api->cuMemAllocManaged(&d, len, CU_MEM_ATTACH_GLOBAL);
        if (r != CUDA_SUCCESS) {
            *why = what + ": " + cu_err("cuMemAllocManaged", r);
            return GDX_ERR_DRIVER;
        }
        b->ptr_ = reinterpret_cast<void *>(d);
        break;
    }
    case MemKindOpt::CudaVmm: {
        if (!api->cuMemCreate || !api->cuMemMap || !api->cuMemAddressReserve || !api->cuMemSetAccess ||
            !api->cuMemGetAllocationGranularity) {
            *why = what + ": this CUDA driver lacks the virtual memory management API (cuMemCreate)";
            return GDX_ERR_UNSUPPORTED;
        }
        auto devs = cuda::list_devices();
        const cuda::DeviceInfo *info = nullptr;
        for (const auto &d : devs)
            if (d.ordinal == spec.gpu) info = &d;
        if (info == nullptr || !info->vmm_supported) {
            *why = what + ": GPU " + std::to_string(spec.gpu) + " does not support virtual memory management";
            return GDX_ERR_UNSUPPORTED;
        }
        CUmemAllocationProp prop{};
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = spec.gpu;
        if (info->posix_fd_handles) prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
        if (info->gdr_with_vmm) prop.allocFlags.gpuDirectRDMACapable = 1;
        size_t gran = 0;
        r = api->cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
        if (r != CUDA_SUCCESS || gran == 0) {
            *why = what + ": " + cu_err("cuMemGetAllocationGranularity", r);
            return GDX_ERR_DRIVER;
        }
        b->map_len_ = (len + gran - 1) / gran * gran;
        CUmemGenericAllocationHandle h = 0;
        r = api->cuMemCreate(&h, b->map_len_, &prop, 0);
        if (r != CUDA_SUCCESS) {
            *why = what + ": " + cu_err("cuMemCreate", r);
            return GDX_ERR_DRIVER;
        }
        CUdeviceptr d = 0;
        r = api->cuMemAddressReserve(&d, b->map_len_, gran, 0, 0);
        if (r != CUDA_SUCCESS) {
            api->cuMemRelease(h);
            *why = what + ": " + cu_err("cuMemAddressReserve", r);
            return GDX_ERR_DRIVER;
        }
        r = api->cuMemMap(d, b->map_len_, 0, h, 0);
        if (r != CUDA_SUCCESS) {
            api->cuMemAddressFree(d, b->map_len_);
            api->cuMemRelease(h);
            *why = what + ": " + cu_err("cuMemMap", r);
            return GDX_ERR_DRIVER;
        }
        b->vmm_handle_ = h;
        b->ptr_ = reinterpret_cast<void *>(d); // from here the destructor unmaps and releases
        CUmemAccessDesc access{};
        access.location = prop.location;
        access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        r = api->cuMemSetAccess(d, b->map_len_, &access, 1);
        if (r != CUDA_SUCCESS) {
            *why = what + ": " + cu_err("cuMemSetAccess", r);
            return GDX_ERR_DRIVER;
        }
        break;
    }
    case MemKindOpt::Host: break;
    }
    if (spec.kind != MemKindOpt::HostPinned) {
        r = api->cuMemsetD8(reinterpret_cast<CUdeviceptr>(b->ptr_), 0, len);
        if (r == CUDA_SUCCESS) r = api->cuCtxSynchronize();
        if (r != CUDA_SUCCESS) {
            *why = what + ": " + cu_err("cuMemsetD8", r);
            return GDX_ERR_DRIVER;
        }
    }
    *out = std::move(b);
    return GDX_OK;
#else
    *why = "memory kind '" + what + "' needs a GPU: gdx was built without CUDA headers";
    return GDX_ERR_NO_DEVICE;
#endif
}

Buffer::~Buffer() {
    if (ptr_ == nullptr) return;
    if (spec_.kind == MemKindOpt::Host) {
        std::free(ptr_);
        return;
    }
#if GDX_HAVE_CUDA_H
    const cuda::DriverApi *api = cuda::driver();
    if (api == nullptr || cuda::bind_device(spec_.gpu) != CUDA_SUCCESS) return;
    auto d = reinterpret_cast<CUdeviceptr>(ptr_);
    switch (spec_.kind) {
    case MemKindOpt::HostPinned: api->cuMemFreeHost(ptr_); break;
    case MemKindOpt::Cuda:
    case MemKindOpt::CudaManaged: api->cuMemFree(d); break;
    case MemKindOpt::CudaVmm:
        api->cuMemUnmap(d, map_len_);
        api->cuMemAddressFree(d, map_len_);
        api->cuMemRelease(vmm_handle_);
        break;
    case MemKindOpt::Host: break;
    }
#endif
}

gdx_status_t Buffer::write_from_host(size_t offset, const void *src, size_t len, std::string *why) {
    if (offset > len_ || len > len_ - offset) {
        *why = "write of " + std::to_string(len) + " bytes at " + std::to_string(offset) + " exceeds the " +
               std::to_string(len_) + "-byte buffer";
        return GDX_ERR_INVALID_PARAM;
    }
    if (host_accessible()) {
        std::memcpy(static_cast<uint8_t *>(ptr_) + offset, src, len);
        return GDX_OK;
    }
#if GDX_HAVE_CUDA_H
    if (!bind(spec_.gpu, why)) return GDX_ERR_DRIVER;
    CUresult r = cuda::driver()->cuMemcpyHtoD(reinterpret_cast<CUdeviceptr>(ptr_) + offset, src, len);
    if (r != CUDA_SUCCESS) {
        *why = spec_.text() + ": " + cu_err("cuMemcpyHtoD", r);
        return GDX_ERR_DRIVER;
    }
    // From pageable memory cuMemcpyHtoD may return before its DMA lands, and gdx's copies run on non-blocking
    // streams that do not wait for it: the bytes must be in place before anything reads them.
    r = cuda::driver()->cuCtxSynchronize();
    if (r != CUDA_SUCCESS) {
        *why = spec_.text() + ": " + cu_err("cuCtxSynchronize", r);
        return GDX_ERR_DRIVER;
    }
    return GDX_OK;
#else
    *why = "no CUDA support";
    return GDX_ERR_UNSUPPORTED;
#endif
}

gdx_status_t Buffer::fill(uint64_t seed, size_t offset, size_t len, std::string *why) {
    if (offset > len_ || len > len_ - offset) {
        *why = "fill range exceeds the buffer";
        return GDX_ERR_INVALID_PARAM;
    }
    if (host_accessible()) {
        pattern_fill(seed, 0, static_cast<uint8_t *>(ptr_) + offset, len);
        return GDX_OK;
    }
    if (scratch_.size() < len) scratch_.resize(len);
    pattern_fill(seed, 0, scratch_.data(), len);
    return write_from_host(offset, scratch_.data(), len, why);
}

bool Buffer::check(uint64_t seed, size_t offset, size_t len, size_t *bad_offset, std::string *why) {
    const uint8_t *src = static_cast<const uint8_t *>(ptr_) + offset;
    if (offset > len_ || len > len_ - offset) {
        *why = "check range exceeds the buffer";
        *bad_offset = 0;
        return false;
    }
    if (!host_accessible()) {
#if GDX_HAVE_CUDA_H
        if (scratch_.size() < len) scratch_.resize(len);
        if (!bind(spec_.gpu, why)) return false;
        CUresult r = cuda::driver()->cuMemcpyDtoH(scratch_.data(), reinterpret_cast<CUdeviceptr>(ptr_) + offset, len);
        if (r != CUDA_SUCCESS) {
            *why = "cannot read back " + spec_.text() + " memory: " + cu_err("cuMemcpyDtoH", r);
            *bad_offset = 0;
            return false;
        }
        src = scratch_.data();
#endif
    }
    // Test aid: GDX_PERFTEST_CORRUPT_AT=N flips byte N of every message checked, so the tests can prove a
    // corrupted transfer is caught and its offset named. Never set outside tests.
    static const long long corrupt_at = [] {
        const char *e = std::getenv("GDX_PERFTEST_CORRUPT_AT");
        return e != nullptr ? std::atoll(e) : -1;
    }();
    if (corrupt_at >= 0 && static_cast<size_t>(corrupt_at) < len) {
        uint8_t *w = host_accessible() ? static_cast<uint8_t *>(ptr_) + offset : scratch_.data();
        w[corrupt_at] ^= 0x5a;
        src = w;
    }
    size_t bad = pattern_find_mismatch(seed, 0, src, len);
    if (bad == SIZE_MAX) return true;
    *bad_offset = bad;
    char msg[160];
    std::snprintf(msg, sizeof(msg), "first bad byte at offset %zu of the %zu-byte message: expected 0x%02x, found 0x%02x",
                  bad, len, pattern_byte(seed, bad), src[bad]);
    *why = msg;
    return false;
}

} // namespace gdx::perf
