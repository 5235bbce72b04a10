// gdx_copy's copies (uct_gdx_copy.c): host <-> CUDA memory inside one process, classified by memtype's Detector
// (range cache, validated per hit) and copied with the memtype ops row of the CUDA side.
#include "core/error.h"
#include "memtype/memtype.h"
#include "uct/uct_gdx.h"

#include <cstring>

using namespace gdx;

namespace {
constexpr const char *kComp = "uct";

// One for the process: UCP copies the same staging buffers over and over, and cached answers make that cheap.
mem::Detector &detector() {
    static mem::Detector det;
    return det;
}
} // namespace

extern "C" int gdx_uct_copy_available(void) { return mem::ops(mem::MemKind::Cuda).available() ? 1 : 0; }

extern "C" gdx_status_t gdx_uct_copy(void *dst, const void *src, size_t len) {
    if (len == 0) return GDX_OK;
    if (dst == nullptr || src == nullptr)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "gdx_copy: copy of %zu bytes %p <- %p: null address", len,
                        dst, src);
    mem::MemInfo d, s;
    gdx_status_t st = detector().detect_one(dst, &d);
    if (st == GDX_OK) st = detector().detect_one(src, &s);
    if (st != GDX_OK) return st;
    if (d.kind != mem::MemKind::Cuda && s.kind != mem::MemKind::Cuda) {
        std::memcpy(dst, src, len);
        return GDX_OK;
    }
    return mem::ops(mem::MemKind::Cuda).copy(dst, src, len, d.kind == mem::MemKind::Cuda ? d.device : s.device);
}
