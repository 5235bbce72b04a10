#include "transport/transport.h"

#include "core/log.h"

#include <cstdio>

namespace gdx::tp {

const char *reach_name(Reach r) {
    switch (r) {
    case Reach::None: return "none";
    case Reach::Host: return "host";
    case Reach::Dmabuf: return "dma-buf";
    case Reach::PeerMem: return "peer-memory";
    case Reach::Odp: return "odp";
    case Reach::Ipc: return "cuda-ipc";
    }
    return "?";
}

void note_sink_status(int status, uint8_t id) {
    // UCT's contract: a handler called without UCT_CB_PARAM_FLAG_DESC returns UCS_OK (it cannot keep the buffer,
    // which the ring reuses at once). Another answer is the receiver's error, not a reason to stop the delivery.
    GDX_LOG_ONCE(log::Level::Warn, "transport", "am-sink-status",
                 "the receiver of active message %u returned status %d for a buffer it may not keep (expected 0); "
                 "the message counts as delivered", id, status);
}

gdx_status_t Endpoint::am_short_hdr(uint8_t id, uint64_t header, const void *payload, size_t len) {
    const AmSeg segs[2] = {{&header, sizeof(header)}, {payload, len}};
    return am_short_iov(id, segs);
}

bool MemHandle::direct(size_t offset, size_t len) const {
    if (offset > length_ || len > length_ - offset) return false;
    size_t end = offset + len;
    for (const ChunkReg &c : chunks_) {
        if (c.offset + c.length <= offset || c.offset >= end) continue;
        if (c.reach == Reach::None) return false;
    }
    // Chunks tile the registration, so no gap can hide an unreachable byte.
    return true;
}

std::string Capabilities::describe() const {
    char buf[512];
    std::string types;
    for (unsigned t = 0; t <= static_cast<unsigned>(mem::MemType::Unmapped); ++t) {
        if (direct_types & (1u << t)) {
            if (!types.empty()) types += ",";
            types += mem::type_name(static_cast<mem::MemType>(t));
        }
    }
    std::snprintf(buf, sizeof(buf),
                  "put<=%zu get<=%zu am_short<=%zu am_bcopy<=%zu am_zcopy<=%zu lat %.1fus bw %.2fGB/s%s%s "
                  "direct: %s",
                  max_put, max_get, max_am_short, max_am_bcopy, max_am_zcopy, latency_ns / 1e3, bandwidth_Bps / 1e9,
                  (flags & kCapWakeup) ? " wakeup" : "", (flags & kCapIntraNode) ? " intra-node" : "",
                  types.empty() ? "none" : types.c_str());
    return buf;
}

} // namespace gdx::tp
