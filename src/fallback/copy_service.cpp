#include "fallback/copy_service.h"

#include "core/error.h"
#include "memtype/access_probe.h"

#include <algorithm>
#include <cstring>

namespace gdx::fb {

gdx_status_t CopyService::copy_async(void *dst, const void *src, size_t len, mem::MemKind kind, int device,
                                     mem::CopyDir dir, mem::CopyHandle *h, bool peer_named) {
    if (faults_.fail_copy()) {
        ++report_.stats().copy_failures;
        return fail(GDX_ERR_IO, log::Level::Debug, kComp,
                    "staging copy of %zu bytes failed: injected by GDX_FAULT_COPY_EVERY", len);
    }
    if (peer_named && kind == mem::MemKind::Host) return guarded_host_copy(dst, src, len);
    gdx_status_t st = mem::ops(kind).copy_async(dst, src, len, device, dir, h);
    if (st != GDX_OK && st != GDX_INPROGRESS) ++report_.stats().copy_failures; // the row logged what failed
    return st;
}

gdx_status_t CopyService::guarded_host_copy(void *dst, const void *src, size_t len) {
    if (int e = mem::guarded_copy(dst, src, len); e != 0) {
        ++report_.stats().copy_failures;
        return fail_errno(GDX_ERR_INVALID_ADDR, e, kComp,
                          "target copy of %zu bytes: registered memory is no longer accessible (unmapped or protected "
                          "after registration)", len);
    }
    return GDX_OK;
}

gdx_status_t CopyService::copy_test(mem::CopyHandle *h) {
    gdx_status_t st = mem::ops(h->kind).copy_test(h);
    if (st != GDX_OK && st != GDX_INPROGRESS) ++report_.stats().copy_failures;
    return st;
}

gdx_status_t CopyService::copy_sync(void *dst, const void *src, size_t len, const mem::MemInfo &mem,
                                    mem::CopyDir dir, bool peer_named) {
    const mem::MemKind kind = mem.kind;
    const int device = mem.device;
    if (faults_.fail_copy()) {
        ++report_.stats().copy_failures;
        return fail(GDX_ERR_IO, log::Level::Debug, kComp,
                    "small-message copy of %zu bytes failed: injected by GDX_FAULT_COPY_EVERY", len);
    }
    if (peer_named && kind == mem::MemKind::Host) return guarded_host_copy(dst, src, len);
    const mem::Ops &row = mem::ops(kind);
    void *scratch = nullptr;
    if (kind != mem::MemKind::Host && dir != mem::CopyDir::Unknown && len <= scratch_size_) {
        auto [it, fresh] = scratch_.try_emplace(device, nullptr);
        if (fresh && row.host_alloc(std::max<size_t>(scratch_size_, 1), device, &it->second) != GDX_OK)
            it->second = nullptr; // said by host_alloc; the copies below then go straight (slower, still right)
        scratch = it->second;
    }
    gdx_status_t st;
    if (scratch == nullptr) {
        st = row.copy(dst, src, len, device);
    } else if (dir == mem::CopyDir::ToHost) {
        st = row.copy_pinned(scratch, src, len, device, dir, mem.type);
        if (st == GDX_OK) std::memcpy(dst, scratch, len);
    } else {
        std::memcpy(scratch, src, len);
        st = row.copy_pinned(dst, scratch, len, device, dir, mem.type);
    }
    if (st != GDX_OK) ++report_.stats().copy_failures;
    return st;
}

CopyService::~CopyService() {
    for (auto &[device, p] : scratch_)
        if (p != nullptr) mem::ops(mem::MemKind::Cuda).host_free(p);
}

} // namespace gdx::fb
