// gdx_ext.h's test buffers: memory of every kind gdx_perftest measures. The GPU kinds are made by the memtype layer
// (typed_alloc.h: the CUDA driver gdx opened at run time; the tools cannot link libcuda). On a machine without a
// driver they fail with the reason.
#include "api/ext_util.h"
#include "api/handles.h"
#include "gdx/gdx_ext.h"
#include "memtype/typed_alloc.h"

#include <cstdlib>
#include <cstring>

struct gdx_ext_buffer {
    gdx_ext_mem_kind_t kind = GDX_EXT_MEM_HOST;
    int gpu = 0;
    void *ptr = nullptr;
    size_t len = 0;
    gdx::mem::TypedAlloc gpu_alloc; // GPU and pinned kinds: made and released by the memtype layer
    ~gdx_ext_buffer();
};

namespace {

using gdx::api::guarded;

std::string kind_text(gdx_ext_mem_kind_t kind, int gpu) {
    static const char *const kNames[] = {"host", "host-pinned", "cuda", "cuda-managed", "cuda-vmm"};
    if (kind == GDX_EXT_MEM_HOST) return "host";
    return std::string(kNames[kind]) + ":" + std::to_string(gpu);
}

gdx::mem::MemType mem_type(gdx_ext_mem_kind_t kind) {
    switch (kind) {
    case GDX_EXT_MEM_HOST_PINNED: return gdx::mem::MemType::HostPinned;
    case GDX_EXT_MEM_CUDA: return gdx::mem::MemType::CudaDevice;
    case GDX_EXT_MEM_CUDA_MANAGED: return gdx::mem::MemType::CudaManaged;
    case GDX_EXT_MEM_CUDA_VMM: return gdx::mem::MemType::CudaVmm;
    case GDX_EXT_MEM_HOST: break;
    }
    return gdx::mem::MemType::HostPageable;
}

// The memtype layer's error (it names the driver call), with the buffer it was for.
gdx_status_t gpu_failed(const gdx_ext_buffer &b, gdx_status_t st) {
    return GDX_EXT_FAIL(st, "%s: %s", kind_text(b.kind, b.gpu).c_str(), gdx::last_error().c_str());
}

bool host_kind(gdx_ext_mem_kind_t k) { return k == GDX_EXT_MEM_HOST || k == GDX_EXT_MEM_HOST_PINNED; }

gdx_status_t check_range(const gdx_ext_buffer *b, size_t offset, size_t len, const void *host, const char *what) {
    if (b == nullptr || host == nullptr)
        return GDX_EXT_FAIL(GDX_ERR_INVALID_PARAM, "%s: NULL %s", what, b == nullptr ? "buffer" : "host pointer");
    if (offset > b->len || len > b->len - offset)
        return GDX_EXT_FAIL(GDX_ERR_INVALID_PARAM, "%s of %zu bytes at %zu exceeds the %zu-byte buffer", what, len, offset,
                    b->len);
    return GDX_OK;
}

} // namespace

gdx_ext_buffer::~gdx_ext_buffer() {
    if (kind == GDX_EXT_MEM_HOST) std::free(ptr);
    else gdx::mem::typed_free(&gpu_alloc);
}

extern "C" {

gdx_status_t gdx_ext_gpu_count(int *count) {
    if (count == nullptr) return GDX_EXT_FAIL(GDX_ERR_INVALID_PARAM, "gdx_ext_gpu_count: NULL count");
    const gdx::mem::Ops &gpu = gdx::mem::ops(gdx::mem::MemKind::Cuda);
    *count = gpu.device_count();
    if (*count == 0) return GDX_EXT_FAIL(GDX_ERR_NO_DEVICE, "%s", gpu.why_unavailable().c_str());
    return GDX_OK;
}

gdx_status_t gdx_ext_mem_check(gdx_ext_mem_kind_t kind, int gpu) {
    if (kind == GDX_EXT_MEM_HOST) return GDX_OK;
    return guarded("gdx_ext_mem_check", [&] {
        int n = 0;
        if (gdx_ext_gpu_count(&n) != GDX_OK)
            return GDX_EXT_FAIL(GDX_ERR_NO_DEVICE, "memory kind '%s' needs a GPU, and there is none here: %s",
                        kind_text(kind, gpu).c_str(), gdx::last_error().c_str());
        if (gpu < 0 || gpu >= n)
            return GDX_EXT_FAIL(GDX_ERR_NO_DEVICE, "memory kind '%s': GPU %d does not exist (this machine has %d GPU%s)",
                        kind_text(kind, gpu).c_str(), gpu, n, n == 1 ? "" : "s");
        return GDX_OK;
    });
}

gdx_status_t gdx_ext_buffer_alloc(gdx_ext_mem_kind_t kind, int gpu, size_t len, gdx_ext_buffer_t **buf_p) {
    return guarded("gdx_ext_buffer_alloc", [&] {
        if (buf_p == nullptr || len == 0 || kind < GDX_EXT_MEM_HOST || kind > GDX_EXT_MEM_CUDA_VMM)
            return GDX_EXT_FAIL(GDX_ERR_INVALID_PARAM, "gdx_ext_buffer_alloc: NULL output, zero length or unknown kind %d",
                        static_cast<int>(kind));
        auto b = std::make_unique<gdx_ext_buffer>();
        b->kind = kind;
        b->gpu = kind == GDX_EXT_MEM_HOST ? 0 : gpu;
        b->len = len;
        if (kind == GDX_EXT_MEM_HOST) {
            // Page-aligned and touched: the first iteration must not pay for page faults.
            b->ptr = std::aligned_alloc(4096, (len + 4095) & ~size_t{4095});
            if (b->ptr == nullptr) return GDX_EXT_FAIL(GDX_ERR_NO_MEMORY, "host: cannot allocate %zu bytes of host memory", len);
            std::memset(b->ptr, 0, len);
        } else {
            if (gdx_status_t st = gdx_ext_mem_check(kind, gpu); st != GDX_OK) return st;
            if (gdx_status_t st = gdx::mem::typed_alloc(mem_type(kind), gpu, len, &b->gpu_alloc); st != GDX_OK)
                return gpu_failed(*b, st);
            b->ptr = b->gpu_alloc.ptr;
        }
        *buf_p = b.release();
        return GDX_OK;
    });
}

void *gdx_ext_buffer_ptr(const gdx_ext_buffer_t *buf) { return buf == nullptr ? nullptr : buf->ptr; }

gdx_status_t gdx_ext_buffer_write(gdx_ext_buffer_t *buf, size_t offset, const void *src, size_t len) {
    if (gdx_status_t st = check_range(buf, offset, len, src, "gdx_ext_buffer_write"); st != GDX_OK) return st;
    if (host_kind(buf->kind)) {
        std::memcpy(static_cast<uint8_t *>(buf->ptr) + offset, src, len);
        return GDX_OK;
    }
    if (gdx_status_t st = gdx::mem::typed_write(buf->gpu_alloc, offset, src, len); st != GDX_OK)
        return gpu_failed(*buf, st);
    return GDX_OK;
}

gdx_status_t gdx_ext_buffer_read(const gdx_ext_buffer_t *buf, size_t offset, void *dst, size_t len) {
    if (gdx_status_t st = check_range(buf, offset, len, dst, "gdx_ext_buffer_read"); st != GDX_OK) return st;
    if (host_kind(buf->kind)) {
        std::memcpy(dst, static_cast<const uint8_t *>(buf->ptr) + offset, len);
        return GDX_OK;
    }
    if (gdx_status_t st = gdx::mem::typed_read(buf->gpu_alloc, offset, dst, len); st != GDX_OK)
        return gpu_failed(*buf, st);
    return GDX_OK;
}

void gdx_ext_buffer_free(gdx_ext_buffer_t *buf) { delete buf; }

} // extern "C"
