// The refusals of ep_checks.h: which check failed, in words (cold path).
#include "transport/ep_checks.h"

#include "core/error.h"

#include <cinttypes>
#include <string>

namespace gdx::tp::detail {

namespace {
const char *rights_needed(unsigned need) {
    switch (need & (kAccessRemoteRead | kAccessRemoteWrite)) {
    case kAccessRemoteRead: return "remote read";
    case kAccessRemoteWrite: return "remote write";
    default: return "remote read and write";
    }
}
} // namespace

gdx_status_t refuse_am(const InterfaceBase &iface, const char *op, unsigned id, const void *header, size_t header_len,
                       const void *payload, size_t len, size_t max_header, size_t max_total) {
    const std::string dev(iface.device_name());
    const char *tl = iface.log_component();
    if (id >= kMaxAmId)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, tl, "%s: %s: active-message id %u out of range (< %u)", dev.c_str(), op,
                        id, kMaxAmId);
    if (header == nullptr && header_len > 0)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, tl, "%s: %s: null header of %zu bytes", dev.c_str(), op, header_len);
    if (payload == nullptr && len > 0)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, tl, "%s: %s: null data of %zu bytes", dev.c_str(), op, len);
    if (header_len > max_header)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, tl, "%s: %s: a %zu-byte header exceeds this transport's %zu (max_am_short)",
                        dev.c_str(), op, header_len, max_header);
    return GDX_FAIL(GDX_ERR_INVALID_PARAM, tl, "%s: %s of %zu bytes exceeds this transport's limit of %zu",
                    dev.c_str(), op, header_len + len, max_total);
}

gdx_status_t refuse_buffer(const InterfaceBase &iface, const char *op, const void *buf, size_t len, size_t max) {
    const std::string dev(iface.device_name());
    const char *tl = iface.log_component();
    if (buf == nullptr && len > 0)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, tl, "%s: %s: null buffer of %zu bytes", dev.c_str(), op, len);
    return GDX_FAIL(GDX_ERR_INVALID_PARAM, tl, "%s: %s of %zu bytes exceeds this transport's limit of %zu", dev.c_str(),
                    op, len, max);
}

gdx_status_t refuse_key(const InterfaceBase &iface, const char *op, uint64_t addr, size_t len, const RemoteKey &k,
                        unsigned need) {
    const std::string dev(iface.device_name());
    const char *tl = iface.log_component();
    if ((k.access() & need) != need)
        return fail(GDX_ERR_ACCESS_DENIED, log::Level::Warn, tl, "%s: %s refused: the remote key grants no %s",
                    dev.c_str(), op, rights_needed(need & ~k.access()));
    return fail(GDX_ERR_ACCESS_DENIED, log::Level::Warn, tl,
                "%s: %s refused: [0x%" PRIx64 ", +%zu) lies outside the remote key's [0x%" PRIx64 ", +%" PRIu64 ")",
                dev.c_str(), op, addr, len, k.base(), k.length());
}

} // namespace gdx::tp::detail
