#include "fallback/control_msg.h"

#include "fallback/byte_codec.h"

#include <cstdio>

namespace gdx::fb {

const char *ctrl_type_name(CtrlType t) {
    switch (t) {
    case CtrlType::Want: return "WANT";
    case CtrlType::Grant: return "GRANT";
    case CtrlType::Filled: return "FILLED";
    case CtrlType::Done: return "DONE";
    case CtrlType::Recall: return "RECALL";
    case CtrlType::Return: return "RETURN";
    case CtrlType::GetReq: return "GET_REQ";
    case CtrlType::GetDone: return "GET_DONE";
    case CtrlType::SmallPut: return "SMALL_PUT";
    case CtrlType::SmallGetReq: return "SMALL_GET_REQ";
    case CtrlType::SmallGetData: return "SMALL_GET_DATA";
    case CtrlType::Ping: return "PING";
    case CtrlType::Pong: return "PONG";
    case CtrlType::Bye: return "BYE";
    case CtrlType::SmallPutNotify: return "SMALL_PUT_NOTIFY";
    case CtrlType::Notify: return "NOTIFY";
    }
    return "unknown";
}

// One case per message type, each the body control_msg.h lists for it (decode_ctrl mirrors it): longer than
// the ~80-line rule, kept whole so each message's bytes read top to bottom beside its decoder.
void encode_ctrl(const CtrlMsg &m, std::vector<uint8_t> *out) {
    out->clear();
    ByteWriter w(out);
    w.u8(kCtrlVersion);
    w.u8(static_cast<uint8_t>(m.type));
    w.u16(0);
    switch (m.type) {
    case CtrlType::Want:
    case CtrlType::Recall:
        w.u16(m.pool);
        w.u16(m.count);
        break;
    case CtrlType::Grant:
        w.u16(m.pool);
        w.u16(static_cast<uint16_t>(m.slots.size()));
        w.i32(m.status);
        w.u32(m.nslots);
        w.u16(static_cast<uint16_t>(m.rkey.size()));
        w.u16(0);
        w.u64(m.addr);
        w.u64(m.slot_size);
        for (uint16_t s : m.slots) w.u16(s);
        w.bytes(m.rkey);
        break;
    case CtrlType::Filled:
        w.u16(m.pool);
        w.u16(m.slot);
        w.u32(0);
        w.u64(m.token);
        w.u64(m.region);
        w.u64(m.offset);
        w.u64(m.length);
        break;
    case CtrlType::Done:
        w.u16(m.pool);
        w.u16(m.slot);
        w.i32(m.status);
        w.u8(m.keep ? 1 : 0);
        w.u8(0);
        w.u16(0);
        w.u64(m.token);
        break;
    case CtrlType::Return:
        w.u16(m.pool);
        w.u16(static_cast<uint16_t>(m.slots.size()));
        for (uint16_t s : m.slots) w.u16(s);
        break;
    case CtrlType::GetReq:
        w.u16(static_cast<uint16_t>(m.rkey.size()));
        w.u16(0);
        w.u64(m.token);
        w.u64(m.region);
        w.u64(m.offset);
        w.u64(m.length);
        w.u64(m.addr);
        w.bytes(m.rkey);
        break;
    case CtrlType::GetDone:
        w.i32(m.status);
        w.u64(m.token);
        break;
    case CtrlType::SmallPut:
    case CtrlType::SmallPutNotify:
        w.u32(0);
        w.u64(m.token);
        w.u64(m.region);
        w.u64(m.offset);
        if (m.type == CtrlType::SmallPutNotify) w.u64(m.value);
        w.bytes(m.data);
        break;
    case CtrlType::SmallGetReq:
        w.u32(0);
        w.u64(m.token);
        w.u64(m.region);
        w.u64(m.offset);
        w.u64(m.length);
        break;
    case CtrlType::SmallGetData:
        w.i32(m.status);
        w.u64(m.token);
        w.bytes(m.data);
        break;
    case CtrlType::Ping:
    case CtrlType::Pong:
        w.u32(0);
        w.u64(m.token);
        break;
    case CtrlType::Bye: w.i32(m.status); break;
    case CtrlType::Notify:
        w.u32(0);
        w.u64(m.value);
        break;
    }
}

namespace {

bool valid_status(int32_t s) { return s == GDX_OK || (s < 0 && s >= GDX_ERR_INTERNAL); }

} // namespace

// The mirror of encode_ctrl, one case per type, then the checks every type shares (truncation, trailing bytes,
// reserved fields, status range): longer than the ~80-line rule for the same reason.
gdx_status_t decode_ctrl(std::span<const uint8_t> in, CtrlMsg *out, std::string *why) {
    char buf[128];
    auto bad = [&](const char *what, uint64_t value) {
        std::snprintf(buf, sizeof(buf), "%s (%#llx)", what, static_cast<unsigned long long>(value));
        *why = buf;
        return GDX_ERR_PROTOCOL;
    };
    ByteReader r(in);
    uint8_t version = r.u8();
    uint8_t type = r.u8();
    uint16_t reserved = r.u16();
    if (!r.ok()) return bad("shorter than the control header", in.size());
    if (version != kCtrlVersion) {
        std::snprintf(buf, sizeof(buf), "protocol version mismatch: peer %u, we %u (control messages of staging; "
                      "both sides must run compatible gdx builds)", version, kCtrlVersion);
        *why = buf;
        return GDX_ERR_UNSUPPORTED;
    }
    if (type == 0 || type > kMaxCtrlType) return bad("unknown control type", type);
    if (reserved != 0) return bad("reserved header field not zero", reserved);
    CtrlMsg m;
    m.type = static_cast<CtrlType>(type);
    uint32_t reserved32 = 0;
    int32_t status = GDX_OK;
    switch (m.type) {
    case CtrlType::Want:
    case CtrlType::Recall:
        m.pool = r.u16();
        m.count = r.u16();
        break;
    case CtrlType::Grant: {
        m.pool = r.u16();
        m.count = r.u16();
        status = r.i32();
        m.nslots = r.u32();
        uint16_t rkey_len = r.u16();
        reserved32 = r.u16();
        m.addr = r.u64();
        m.slot_size = r.u64();
        if (m.count > kMaxCtrlSlots) return bad("GRANT names too many slots", m.count);
        if (rkey_len > kMaxCtrlRkey) return bad("GRANT rkey too long", rkey_len);
        m.slots.resize(m.count);
        for (uint16_t &s : m.slots) s = r.u16();
        m.rkey = r.bytes(rkey_len);
        break;
    }
    case CtrlType::Filled:
        m.pool = r.u16();
        m.slot = r.u16();
        reserved32 = r.u32();
        m.token = r.u64();
        m.region = r.u64();
        m.offset = r.u64();
        m.length = r.u64();
        break;
    case CtrlType::Done: {
        m.pool = r.u16();
        m.slot = r.u16();
        status = r.i32();
        uint8_t keep = r.u8();
        reserved32 = r.u8();
        reserved32 |= r.u16();
        m.token = r.u64();
        if (keep > 1) return bad("DONE keep flag not 0/1", keep);
        m.keep = keep == 1;
        break;
    }
    case CtrlType::Return:
        m.pool = r.u16();
        m.count = r.u16();
        if (m.count > kMaxCtrlSlots) return bad("RETURN names too many slots", m.count);
        m.slots.resize(m.count);
        for (uint16_t &s : m.slots) s = r.u16();
        break;
    case CtrlType::GetReq: {
        uint16_t rkey_len = r.u16();
        reserved32 = r.u16();
        m.token = r.u64();
        m.region = r.u64();
        m.offset = r.u64();
        m.length = r.u64();
        m.addr = r.u64();
        if (rkey_len > kMaxCtrlRkey) return bad("GET_REQ rkey too long", rkey_len);
        m.rkey = r.bytes(rkey_len);
        break;
    }
    case CtrlType::GetDone:
        status = r.i32();
        m.token = r.u64();
        break;
    case CtrlType::SmallPut:
    case CtrlType::SmallPutNotify:
        reserved32 = r.u32();
        m.token = r.u64();
        m.region = r.u64();
        m.offset = r.u64();
        if (m.type == CtrlType::SmallPutNotify) m.value = r.u64();
        m.data = r.bytes(r.remaining());
        m.length = m.data.size();
        break;
    case CtrlType::SmallGetReq:
        reserved32 = r.u32();
        m.token = r.u64();
        m.region = r.u64();
        m.offset = r.u64();
        m.length = r.u64();
        break;
    case CtrlType::SmallGetData:
        status = r.i32();
        m.token = r.u64();
        m.data = r.bytes(r.remaining());
        m.length = m.data.size();
        break;
    case CtrlType::Ping:
    case CtrlType::Pong:
        reserved32 = r.u32();
        m.token = r.u64();
        break;
    case CtrlType::Bye: status = r.i32(); break;
    case CtrlType::Notify:
        reserved32 = r.u32();
        m.value = r.u64();
        break;
    }
    if (!r.ok()) {
        std::snprintf(buf, sizeof(buf), "%s truncated (%zu bytes)", ctrl_type_name(m.type), in.size());
        *why = buf;
        return GDX_ERR_PROTOCOL;
    }
    if (r.remaining() != 0) return bad("trailing bytes after the message", r.remaining());
    if (reserved32 != 0) return bad("reserved field not zero", reserved32);
    if (!valid_status(status)) return bad("status out of range", static_cast<uint32_t>(status));
    m.status = static_cast<gdx_status_t>(status);
    *out = std::move(m);
    return GDX_OK;
}

} // namespace gdx::fb
