// gdx_copy's copies (uct_gdx_copy.c): host <-> CUDA memory inside one process, through the memtype ops table.
#include "core/error.h"
#include "memtype/memory_ops.h"
#include "transport/uct/uct_gdx.h"

#include <cstring>

using namespace gdx;

namespace {
constexpr const char *kComp = "uct";

// The CUDA device of p, or -1 when p is not CUDA memory (uncached: gdx_copy is UCP's staging helper, and a
// device-memory query costs about as much as a cache hit validated per use; src/memtype/README.md).
int cuda_device_of(const void *p, bool *is_cuda, gdx_status_t *st) {
    mem::MemInfo info;
    *st = mem::ops(mem::MemKind::Cuda).query(p, &info);
    *is_cuda = *st == GDX_OK && info.kind == mem::MemKind::Cuda;
    if (*st == GDX_ERR_NOT_FOUND) *st = GDX_OK; // not CUDA's: host memory
    return *is_cuda ? info.device : -1;
}
} // namespace

extern "C" int gdx_uct_copy_available(void) { return mem::ops(mem::MemKind::Cuda).available() ? 1 : 0; }

extern "C" gdx_status_t gdx_uct_copy(void *dst, const void *src, size_t len) {
    if (len == 0) return GDX_OK;
    if (dst == nullptr || src == nullptr)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "gdx_copy: copy of %zu bytes %p <- %p: null address", len,
                        dst, src);
    bool dst_cuda = false, src_cuda = false;
    gdx_status_t st;
    int dev = cuda_device_of(dst, &dst_cuda, &st);
    if (st != GDX_OK) return st;
    const int src_dev = cuda_device_of(src, &src_cuda, &st);
    if (st != GDX_OK) return st;
    if (!dst_cuda && !src_cuda) {
        std::memcpy(dst, src, len);
        return GDX_OK;
    }
    if (dev < 0) dev = src_dev;
    return mem::ops(mem::MemKind::Cuda).copy(dst, src, len, dev);
}
