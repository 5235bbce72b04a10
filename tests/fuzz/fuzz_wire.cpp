// libFuzzer target: everything a peer controls before the transport acts on it. Each input is read as a
// stream of frames the way the tcp receive path walks it (header, then HELLO body or payload bytes), and
// its prefix is also decoded as a packed remote key and as a tcp address blob. Whatever decodes must
// re-encode to the same bytes and satisfy the invariants the transport relies on; anything else must be
// refused with a reason. A violated invariant traps (the fuzzer reports it as a crash).
#include "transport/tcp/tcp_address.h"
#include "transport/transport.h"
#include "transport/wire.h"

#include <cstring>
#include <string>

using namespace gdx::tp;

namespace {

void require(bool ok) {
    if (!ok) __builtin_trap();
}

// The limits the tcp transport enforces.
const wire::Limits kLimits{uint64_t{1} << 40, 1u << 20, kMaxAmId};

void walk_stream(const uint8_t *p, size_t n) {
    size_t off = 0;
    while (n - off >= wire::kHeaderSize) {
        wire::FrameHeader h;
        std::string why;
        if (wire::decode_header({p + off, wire::kHeaderSize}, kLimits, &h, &why) != GDX_OK) {
            require(!why.empty()); // every refusal says why
            return;
        }
        uint8_t again[wire::kHeaderSize];
        wire::encode_header(h, again);
        require(std::memcmp(again, p + off, wire::kHeaderSize) == 0);
        // What the receive path trusts after a successful decode.
        if (h.type == wire::MsgType::Put || h.type == wire::MsgType::GetReq || h.type == wire::MsgType::GetReply)
            require(h.length <= kLimits.max_bulk && h.addr <= UINT64_MAX - h.length);
        if (h.type == wire::MsgType::Am) require(h.key_id < kMaxAmId && h.length <= kLimits.max_am);
        if (h.type == wire::MsgType::GetReply && h.status != GDX_OK) require(h.length == 0);
        off += wire::kHeaderSize;
        if (h.type == wire::MsgType::Hello || h.type == wire::MsgType::HelloAck) {
            if (n - off < wire::kHelloBodySize) return;
            wire::HelloBody b;
            if (wire::decode_hello_body({p + off, wire::kHelloBodySize}, &b, &why) != GDX_OK) return;
            require(b.max_requests >= 1 && b.max_requests <= wire::kMaxRequestsLimit);
            off += wire::kHelloBodySize;
        } else if (h.type != wire::MsgType::GetReq) {
            off += static_cast<size_t>(std::min<uint64_t>(h.length, n - off)); // the payload
        }
    }
}

void decode_key(const uint8_t *p, size_t n) {
    if (n < wire::kPackedRkeySize) return;
    for (auto t : {wire::TransportId::Tcp, wire::TransportId::Shm}) {
        wire::PackedRkey k;
        std::string why;
        if (wire::decode_rkey({p, wire::kPackedRkeySize}, t, &k, &why) != GDX_OK) {
            require(!why.empty());
            continue;
        }
        require((k.access & ~static_cast<uint32_t>(kAccessRemoteRead | kAccessRemoteWrite)) == 0);
        require(k.base <= UINT64_MAX - k.length);
        uint8_t again[wire::kPackedRkeySize];
        wire::encode_rkey(k, again);
        require(std::memcmp(again, p, wire::kPackedRkeySize) == 0);
        // range_inside agrees with exact arithmetic on what the input supplies.
        if (n >= wire::kPackedRkeySize + 16) {
            uint64_t addr = wire::load_le64(p + 32), len = wire::load_le64(p + 40);
            unsigned __int128 end = static_cast<unsigned __int128>(addr) + len;
            bool inside = addr >= k.base && end <= static_cast<unsigned __int128>(k.base) + k.length;
            require(wire::range_inside(addr, len, k.base, k.length) == inside);
        }
    }
}

void decode_tcp_address(const uint8_t *p, size_t n) {
    if (n < tcp::kAddressSize) return;
    tcp::TcpAddress a;
    std::string why;
    if (tcp::decode_address({p, tcp::kAddressSize}, &a, &why) != GDX_OK) {
        require(!why.empty());
        return;
    }
    require(a.port != 0 && a.iface_id != 0 && a.ep_id != 0 && (a.family == 4 || a.family == 6));
    uint8_t again[tcp::kAddressSize];
    tcp::encode_address(a, again);
    require(std::memcmp(again, p, tcp::kAddressSize) == 0);
    require(!a.ip_text().empty());
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    walk_stream(data, size);
    decode_key(data, size);
    decode_tcp_address(data, size);
    // Truncations of a valid prefix must be refused, never read past the end (ASan watches).
    wire::FrameHeader h;
    std::string why;
    if (size < wire::kHeaderSize) require(wire::decode_header({data, size}, kLimits, &h, &why) == GDX_ERR_PROTOCOL);
    return 0;
}
