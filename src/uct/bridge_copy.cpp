// gdx_copy's copies and memory-type detection (uct_gdx_copy.c): host <-> CUDA memory inside one process,
// classified by memtype's Detector (range cache, validated per hit) and copied with the memtype ops row of the CUDA
// side.
#include "core/error.h"
#include "core/log.h"
#include "memtype/memtype.h"
#include "uct/bridge_internal.h"

#include <cstring>

using namespace gdx;
using gdx::uct::kComp;

namespace {

// One for the process, configured by GDX_* (GDX_CUDA, GDX_MEMTYPE_*): UCP copies the same staging buffers over and
// over and asks about the same buffers on every send, and cached answers make that cheap. gdx_copy has no memory
// domain settings of its own, so UCX_GDX_* (gdx_<tl>'s) do not reach it; a bad GDX_* value, which makes every
// gdx_<tl> MD refuse to open with its reason, leaves it on the defaults.
mem::Detector &detector() {
    static const std::unique_ptr<mem::Detector> det = [] {
        Config cfg;
        std::string err;
        std::unique_ptr<mem::Detector> d;
        if (Config::load({}, &cfg, &err) != GDX_OK) {
            GDX_WARN(kComp, "gdx_copy: %s: detecting memory types with the defaults", err.c_str());
        } else if (mem::Detector::create(cfg, &d) != GDX_OK) {
            GDX_WARN(kComp, "gdx_copy: memory-type detector: %s: using the defaults", last_error().c_str());
        }
        return d ? std::move(d) : std::make_unique<mem::Detector>();
    }();
    return *det;
}
} // namespace

extern "C" int gdx_uct_copy_available(void) { return detector().gpu_enabled() ? 1 : 0; }

extern "C" gdx_status_t gdx_uct_copy_mem_detect(const void *addr, size_t len, gdx_uct_mem_info_t *out) {
    return uct::mem_detect(detector(), addr, len, out);
}

extern "C" gdx_status_t gdx_uct_copy(void *dst, const void *src, size_t len) {
    if (len == 0) return GDX_OK;
    if (dst == nullptr || src == nullptr)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "gdx_copy: copy of %zu bytes %p <- %p: null address", len,
                        dst, src);
    mem::MemInfo d, s;
    gdx_status_t st = uct::classify(detector(), dst, len, &d);
    if (st == GDX_OK) st = uct::classify(detector(), src, len, &s);
    if (st != GDX_OK) return st;
    if (d.kind != mem::MemKind::Cuda && s.kind != mem::MemKind::Cuda) {
        std::memcpy(dst, src, len);
        return GDX_OK;
    }
    return mem::ops(mem::MemKind::Cuda).copy(dst, src, len, d.kind == mem::MemKind::Cuda ? d.device : s.device);
}
