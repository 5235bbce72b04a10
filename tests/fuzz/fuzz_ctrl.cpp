// libFuzzer target: the staging engine's control messages (src/fallback/control_msg.*), which a peer controls
// entirely. Whatever decode_ctrl accepts must satisfy what the handlers trust (counts, rkey and slot bounds, the
// status range, no trailing bytes) and re-encode to the very same bytes; whatever it refuses must say why, and
// only a header of another version may be refused as a version mismatch. A violated invariant traps (reported as
// a crash).
#include "fallback/control_msg.h"

#include <cstring>
#include <string>

using namespace gdx::fb;

namespace {

void require(bool ok) {
    if (!ok) __builtin_trap();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    CtrlMsg m;
    std::string why;
    if (gdx_status_t st = decode_ctrl({data, size}, &m, &why); st != GDX_OK) {
        require(!why.empty());
        // Another protocol version is told apart from a malformed message, and only by the version byte.
        require(st == GDX_ERR_PROTOCOL || (st == GDX_ERR_UNSUPPORTED && size >= 4 && data[0] != kCtrlVersion));
        return 0;
    }
    require(static_cast<uint8_t>(m.type) >= 1 && static_cast<uint8_t>(m.type) <= kMaxCtrlType);
    require(m.status == GDX_OK || (m.status < 0 && m.status >= GDX_ERR_INTERNAL));
    require(m.slots.size() <= kMaxCtrlSlots);
    require(m.rkey.size() <= kMaxCtrlRkey);
    // Spans point inside the input.
    if (!m.rkey.empty()) require(m.rkey.data() >= data && m.rkey.data() + m.rkey.size() <= data + size);
    if (!m.data.empty()) require(m.data.data() >= data && m.data.data() + m.data.size() <= data + size);
    if (m.type == CtrlType::Grant) require(m.slots.size() == m.count);
    if (m.type == CtrlType::Return) require(m.slots.size() == m.count);
    // Only the two notification types carry a value; a small put's length is its data (the handlers copy
    // m.length bytes of m.data, so a mismatch would read past the message).
    const bool notify = m.type == CtrlType::SmallPutNotify || m.type == CtrlType::Notify;
    if (!notify) require(m.value == 0);
    if (m.type == CtrlType::SmallPut || m.type == CtrlType::SmallPutNotify) require(m.length == m.data.size());
    if (m.type == CtrlType::Notify) require(m.data.empty() && m.rkey.empty() && m.token == 0 && m.region == 0);
    // Round trip: the encoder writes exactly what was accepted (reserved fields zero, nothing dropped).
    std::vector<uint8_t> again;
    encode_ctrl(m, &again);
    require(again.size() == size && std::memcmp(again.data(), data, size) == 0);
    return 0;
}
