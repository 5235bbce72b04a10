// What each process of the multi-process tests publishes through the bootstrap: its endpoint address, the
// packed remote key of its buffer, and that buffer's address and length (shared by gdx_tcp_peer and tests).
#pragma once

#include "transport/transport.h"
#include "transport/wire.h"

#include <vector>

namespace gdx::test {

inline std::vector<uint8_t> make_blob(tp::Endpoint &ep, const tp::MemHandle &h) {
    std::vector<uint8_t> b = ep.address();
    size_t at = b.size();
    b.resize(at + tp::wire::kPackedRkeySize + 16);
    h.pack_rkey({b.data() + at, tp::wire::kPackedRkeySize});
    tp::wire::store_le64(b.data() + at + tp::wire::kPackedRkeySize, reinterpret_cast<uintptr_t>(h.addr()));
    tp::wire::store_le64(b.data() + at + tp::wire::kPackedRkeySize + 8, h.length());
    return b;
}

struct PeerBlob {
    std::vector<uint8_t> address;
    std::unique_ptr<tp::RemoteKey> rkey;
    uint64_t addr = 0, len = 0;
};

// `address_size` is this transport's Endpoint::address() length.
inline gdx_status_t parse_blob(tp::Interface &iface, const std::vector<uint8_t> &b, size_t address_size,
                               PeerBlob *out) {
    if (b.size() != address_size + tp::wire::kPackedRkeySize + 16) return GDX_ERR_PROTOCOL;
    out->address.assign(b.begin(), b.begin() + address_size);
    gdx_status_t st = iface.md().rkey_unpack({b.data() + address_size, tp::wire::kPackedRkeySize}, &out->rkey);
    if (st != GDX_OK) return st;
    out->addr = tp::wire::load_le64(b.data() + address_size + tp::wire::kPackedRkeySize);
    out->len = tp::wire::load_le64(b.data() + address_size + tp::wire::kPackedRkeySize + 8);
    return GDX_OK;
}

} // namespace gdx::test
