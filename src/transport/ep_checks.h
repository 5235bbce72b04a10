// The argument checks every endpoint makes before it queues anything, written once so a bad call is refused with
// the same status and the same words whatever the transport: active messages against the interface's
// Capabilities, put/get's local buffer, and the early refusal from what a remote key claims. Each is a few
// compares inline (they run on every small message); the message that says what failed is formatted out of line,
// only when one fails. Checks that depend on a transport's own objects (is this handle or key one of mine, which
// chunk holds this byte) stay in the transport.
#pragma once

#include "transport/iface_base.h"
#include "transport/wire.h"

namespace gdx::tp {

namespace detail {
gdx_status_t refuse_am(const InterfaceBase &iface, const char *op, unsigned id, const void *header, size_t header_len,
                       const void *payload, size_t len, size_t max_header, size_t max_total);
gdx_status_t refuse_buffer(const InterfaceBase &iface, const char *op, const void *buf, size_t len, size_t max);
gdx_status_t refuse_key(const InterfaceBase &iface, const char *op, uint64_t addr, size_t len, const RemoteKey &k,
                        unsigned need);
} // namespace detail

// am_short: id < kMaxAmId, data non-null unless len is 0, len <= caps().max_am_short. GDX_ERR_INVALID_PARAM.
inline gdx_status_t check_am_short(const InterfaceBase &iface, unsigned id, const void *data, size_t len) {
    const size_t max = iface.caps().max_am_short;
    if (id < kMaxAmId && (data != nullptr || len == 0) && len <= max) [[likely]]
        return GDX_OK;
    return detail::refuse_am(iface, "am_short", id, nullptr, 0, data, len, 0, max);
}

// am_bcopy: as am_short, against caps().max_am_bcopy.
inline gdx_status_t check_am_bcopy(const InterfaceBase &iface, unsigned id, const void *data, size_t len) {
    const size_t max = iface.caps().max_am_bcopy;
    if (id < kMaxAmId && (data != nullptr || len == 0) && len <= max) [[likely]]
        return GDX_OK;
    return detail::refuse_am(iface, "am_bcopy", id, nullptr, 0, data, len, 0, max);
}

// am_zcopy: header_len <= caps().max_am_short and header_len + len <= caps().max_am_zcopy, null pointers only with
// zero lengths. GDX_ERR_INVALID_PARAM. (Where the payload may live is the transport's question.)
inline gdx_status_t check_am_zcopy(const InterfaceBase &iface, unsigned id, const void *header, size_t header_len,
                                   const void *payload, size_t len) {
    const Capabilities &c = iface.caps();
    if (id < kMaxAmId && (header != nullptr || header_len == 0) && (payload != nullptr || len == 0) &&
        header_len <= c.max_am_short && header_len <= c.max_am_zcopy && len <= c.max_am_zcopy - header_len) [[likely]]
        return GDX_OK;
    return detail::refuse_am(iface, "am_zcopy", id, header, header_len, payload, len, c.max_am_short, c.max_am_zcopy);
}

// put/get's local side: `buf` non-null unless len is 0, and len <= max (the transport's per-operation limit:
// caps().max_put / max_get where the transport enforces them). GDX_ERR_INVALID_PARAM.
inline gdx_status_t check_rma_buffer(const InterfaceBase &iface, const char *op, const void *buf, size_t len,
                                     size_t max) {
    if ((buf != nullptr || len == 0) && len <= max) [[likely]]
        return GDX_OK;
    return detail::refuse_buffer(iface, op, buf, len, max);
}

// The initiator's early refusal, from what the remote key itself claims: it grants every right in `need` and
// [addr, addr+len) lies inside it. GDX_ERR_ACCESS_DENIED (logged at WARN: the caller's request, not a fault of
// ours) without a round trip. Not a protection: the target (or its NIC) checks again against its own record,
// which a forged key does not change.
inline gdx_status_t check_key_claims(const InterfaceBase &iface, const char *op, uint64_t addr, size_t len,
                                     const RemoteKey &k, unsigned need) {
    if ((k.access() & need) == need && wire::range_inside(addr, len, k.base(), k.length())) [[likely]]
        return GDX_OK;
    return detail::refuse_key(iface, op, addr, len, k, need);
}

// An endpoint whose am_zcopy copies the bytes out before it returns (shm and cuda_ipc: into the peer's ring), so
// am_short and am_bcopy are am_zcopy after their own checks: the bytes as the header (short) or the payload (bcopy).
class RingAmEndpoint : public Endpoint {
  public:
    gdx_status_t am_short(uint8_t id, const void *data, size_t len) final {
        if (gdx_status_t st = check_am_short(am_iface_, id, data, len); st != GDX_OK) return st;
        return am_zcopy(id, data, len, nullptr, 0, nullptr, nullptr);
    }
    gdx_status_t am_bcopy(uint8_t id, const void *data, size_t len) final {
        if (gdx_status_t st = check_am_bcopy(am_iface_, id, data, len); st != GDX_OK) return st;
        return am_zcopy(id, nullptr, 0, data, len, nullptr, nullptr);
    }

  protected:
    explicit RingAmEndpoint(const InterfaceBase &iface) : am_iface_(iface) {}

  private:
    const InterfaceBase &am_iface_; // whose caps() limit the messages
};

} // namespace gdx::tp
