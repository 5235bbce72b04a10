#include "transport/wire.h"

#include "transport/transport.h"

#include <cinttypes>
#include <cstdarg>
#include <cstdio>

namespace gdx::tp::wire {

namespace {

gdx_status_t bad(std::string *why, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
gdx_status_t bad(std::string *why, const char *fmt, ...) {
    if (why != nullptr) {
        char buf[256];
        va_list ap;
        va_start(ap, fmt);
        std::vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        *why = buf;
    }
    return GDX_ERR_PROTOCOL;
}

// Error codes a reply may carry: GDX_OK or a defined error. INPROGRESS or an unknown value is malformed.
bool valid_reply_status(int32_t s) { return s == GDX_OK || (s <= GDX_ERR_NO_RESOURCE && s >= GDX_ERR_INTERNAL); }

} // namespace

const char *transport_id_name(uint8_t id) {
    switch (id) {
    case static_cast<uint8_t>(TransportId::Tcp): return "tcp";
    case static_cast<uint8_t>(TransportId::Shm): return "shm";
    case static_cast<uint8_t>(TransportId::CudaIpc): return "cuda_ipc";
    case static_cast<uint8_t>(TransportId::Rc): return "rc";
    }
    return "unknown";
}

const char *msg_type_name(uint8_t type) {
    static const char *const names[] = {"?",   "HELLO",     "HELLO_ACK", "PUT",   "PUT_ACK",
                                        "GET_REQ", "GET_REPLY", "AM",       "FLUSH", "FLUSH_ACK",
                                        "FENCE", "LANE_HELLO", "LANE_WANT"};
    return type >= 1 && type <= kMaxMsgType ? names[type] : "unknown";
}

void encode_header(const FrameHeader &h, uint8_t out[kHeaderSize]) {
    store_le16(out + 0, kMagic);
    out[2] = kWireVersion;
    out[3] = static_cast<uint8_t>(h.type);
    store_le32(out + 4, static_cast<uint32_t>(h.status));
    store_le64(out + 8, h.op_id);
    store_le64(out + 16, h.key_id);
    store_le64(out + 24, h.addr);
    store_le64(out + 32, h.length);
}

gdx_status_t decode_header(std::span<const uint8_t> in, const Limits &limits, FrameHeader *out, std::string *why) {
    if (in.size() != kHeaderSize) return bad(why, "header of %zu bytes (expected %zu)", in.size(), kHeaderSize);
    const uint8_t *p = in.data();
    uint16_t magic = load_le16(p);
    if (magic != kMagic) return bad(why, "bad magic 0x%04x (expected 0x%04x)", magic, kMagic);
    if (p[2] != kWireVersion)
        return bad(why, "peer speaks wire version %u, this build speaks %u", p[2], kWireVersion);
    uint8_t type = p[3];
    if (type < 1 || type > kMaxMsgType) return bad(why, "unknown message type %u", type);
    FrameHeader h;
    h.type = static_cast<MsgType>(type);
    h.status = static_cast<int32_t>(load_le32(p + 4));
    h.op_id = load_le64(p + 8);
    h.key_id = load_le64(p + 16);
    h.addr = load_le64(p + 24);
    h.length = load_le64(p + 32);
    const char *name = msg_type_name(type);

    if (is_reply(h.type)) {
        if (!valid_reply_status(h.status)) return bad(why, "%s carries invalid status %d", name, h.status);
    } else if (h.status != GDX_OK) {
        return bad(why, "%s request carries status %d (must be 0)", name, h.status);
    }

    switch (h.type) {
    case MsgType::Hello:
    case MsgType::HelloAck:
    case MsgType::LaneHello:
        if (h.length != kHelloBodySize)
            return bad(why, "%s body of %" PRIu64 " bytes (expected %zu)", name, h.length, kHelloBodySize);
        if (h.op_id == 0 || h.key_id == 0 || h.addr == 0)
            return bad(why, "%s with a zero interface or endpoint id", name);
        break;
    case MsgType::Put:
    case MsgType::GetReq:
        if (h.op_id == 0) return bad(why, "%s with op id 0", name);
        if (h.length > limits.max_bulk)
            return bad(why, "%s of %" PRIu64 " bytes exceeds the limit of %" PRIu64, name, h.length,
                       limits.max_bulk);
        if (h.addr > UINT64_MAX - h.length)
            return bad(why, "%s range 0x%" PRIx64 "+%" PRIu64 " wraps around", name, h.addr, h.length);
        break;
    case MsgType::GetReply:
        if (h.op_id == 0) return bad(why, "%s with op id 0", name);
        if (h.key_id != 0 || h.addr != 0) return bad(why, "%s with non-zero key or address field", name);
        if (h.length > limits.max_bulk)
            return bad(why, "%s of %" PRIu64 " bytes exceeds the limit of %" PRIu64, name, h.length,
                       limits.max_bulk);
        if (h.status != GDX_OK && h.length != 0)
            return bad(why, "%s with error status %d carries %" PRIu64 " payload bytes", name, h.status, h.length);
        break;
    case MsgType::PutAck:
    case MsgType::Flush:
    case MsgType::FlushAck:
        if (h.op_id == 0) return bad(why, "%s with op id 0", name);
        if (h.key_id != 0 || h.addr != 0 || h.length != 0)
            return bad(why, "%s with non-zero key, address or length field", name);
        break;
    case MsgType::Am:
        if (h.op_id != 0 || h.addr != 0) return bad(why, "AM with non-zero op or address field");
        if (h.key_id >= limits.max_am_id)
            return bad(why, "AM id %" PRIu64 " out of range (< %u)", h.key_id, limits.max_am_id);
        if (h.length > limits.max_am)
            return bad(why, "AM of %" PRIu64 " bytes exceeds the limit of %" PRIu64, h.length, limits.max_am);
        break;
    case MsgType::LaneWant:
        if (h.op_id != 0 || h.key_id != 0 || h.addr != 0 || h.length != 0)
            return bad(why, "LANE_WANT with a non-zero field");
        break;
    case MsgType::Fence:
        if (h.op_id != 0 || h.key_id != 0 || h.addr != 0) return bad(why, "FENCE with non-zero op, key or address field");
        if (h.length == 0 || h.length % 8 != 0 || h.length > 8u * kMaxLanes)
            return bad(why, "FENCE body of %" PRIu64 " bytes (8 per lane, 1..%u lanes)", h.length, kMaxLanes);
        break;
    }
    *out = h;
    return GDX_OK;
}

void encode_hello_body(const HelloBody &b, uint8_t out[kHelloBodySize]) {
    store_le32(out, b.max_requests);
    store_le16(out + 4, b.lanes);
    store_le16(out + 6, 0);
}

gdx_status_t decode_hello_body(std::span<const uint8_t> in, HelloBody *out, std::string *why) {
    if (in.size() != kHelloBodySize) return bad(why, "HELLO body of %zu bytes (expected %zu)", in.size(), kHelloBodySize);
    uint32_t max_requests = load_le32(in.data());
    if (max_requests == 0 || max_requests > kMaxRequestsLimit)
        return bad(why, "HELLO announces %u outstanding requests (must be 1..%u)", max_requests, kMaxRequestsLimit);
    uint16_t lanes = load_le16(in.data() + 4);
    if (lanes > kMaxLanes) return bad(why, "HELLO names %u lanes (at most %u)", lanes, kMaxLanes);
    if (load_le16(in.data() + 6) != 0) return bad(why, "HELLO body reserved field is not zero");
    out->max_requests = max_requests;
    out->lanes = lanes;
    return GDX_OK;
}

void encode_rkey(const PackedRkey &k, uint8_t out[kPackedRkeySize]) {
    out[0] = kRkeyVersion;
    out[1] = static_cast<uint8_t>(k.transport);
    store_le16(out + 2, 0);
    store_le32(out + 4, k.access);
    store_le64(out + 8, k.key_id);
    store_le64(out + 16, k.base);
    store_le64(out + 24, k.length);
}

gdx_status_t decode_rkey(std::span<const uint8_t> in, TransportId expect, PackedRkey *out, std::string *why) {
    if (in.size() != kPackedRkeySize)
        return bad(why, "remote key of %zu bytes (expected %zu)", in.size(), kPackedRkeySize);
    const uint8_t *p = in.data();
    if (p[0] != kRkeyVersion) return bad(why, "remote key version %u (expected %u)", p[0], kRkeyVersion);
    if (p[1] != static_cast<uint8_t>(expect))
        return bad(why, "remote key issued by transport '%s', not '%s'", transport_id_name(p[1]),
                   transport_id_name(static_cast<uint8_t>(expect)));
    if (load_le16(p + 2) != 0) return bad(why, "remote key reserved field is not zero");
    PackedRkey k;
    k.transport = expect;
    k.access = load_le32(p + 4);
    if ((k.access & ~static_cast<uint32_t>(kAccessRemoteRead | kAccessRemoteWrite)) != 0)
        return bad(why, "remote key grants unknown or local access bits 0x%x", k.access);
    k.key_id = load_le64(p + 8);
    k.base = load_le64(p + 16);
    k.length = load_le64(p + 24);
    if (k.base > UINT64_MAX - k.length)
        return bad(why, "remote key range 0x%" PRIx64 "+%" PRIu64 " wraps around", k.base, k.length);
    if (k.key_id == 0 && k.access != 0) return bad(why, "remote key with id 0 grants access 0x%x", k.access);
    *out = k;
    return GDX_OK;
}

} // namespace gdx::tp::wire
