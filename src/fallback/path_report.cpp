#include "fallback/path_report.h"

#include "core/config.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <utility>

namespace gdx::fb {

namespace {

// "host", "dma-buf+host": the reaches named in a reach_bit() mask.
std::string reach_text(uint8_t mask) {
    std::string s;
    for (unsigned r = 0; r <= static_cast<unsigned>(tp::Reach::Ipc); ++r) {
        if ((mask & (1u << r)) == 0) continue;
        if (!s.empty()) s += "+";
        s += tp::reach_name(static_cast<tp::Reach>(r));
    }
    return s.empty() ? "?" : s;
}

std::string sides_text(uint8_t sides) {
    if (sides == (kStageSideLocal | kStageSideRemote)) return "local+remote";
    if (sides == kStageSideLocal) return "local";
    if (sides == kStageSideRemote) return "remote";
    return "none";
}

} // namespace

const char *stage_reason_name(unsigned bit_index) {
    static const char *const kNames[kStageReasonCount] = {"local-unreachable", "remote-unreachable",
                                                          "fault-injected", "no-transport-op"};
    return bit_index < kStageReasonCount ? kNames[bit_index] : "unknown";
}

std::string stage_reasons_text(uint8_t reasons) {
    std::string s;
    for (unsigned i = 0; i < kStageReasonCount; ++i) {
        if ((reasons & (1u << i)) == 0) continue;
        if (!s.empty()) s += "+";
        s += stage_reason_name(i);
    }
    return s;
}

// A part's share of the request, "%.1f%%"; a part too small to show there says so, with its bytes ("7 B, <0.1%"),
// and the rest says ">99.9%": a mixed message never reads "100.0% + 0.0%".
static std::string share_text(uint64_t part, uint64_t total) {
    char buf[48];
    const double pct = total != 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(total) : 0.0;
    if (part != 0 && pct < 0.05)
        std::snprintf(buf, sizeof(buf), "%llu B, <0.1%%", static_cast<unsigned long long>(part));
    else if (part != total && pct >= 99.95)
        std::snprintf(buf, sizeof(buf), ">99.9%%");
    else
        std::snprintf(buf, sizeof(buf), "%.1f%%", pct);
    return buf;
}

std::string PathReport::describe() const {
    if (bytes_direct + bytes_staged == 0) return "empty";
    char buf[256];
    std::string out;
    const uint64_t total = bytes_direct + bytes_staged;
    if (bytes_direct > 0) {
        std::snprintf(buf, sizeof(buf), "direct[%s->%s] %s", reach_text(local_reach).c_str(),
                      reach_text(remote_reach).c_str(), share_text(bytes_direct, total).c_str());
        out = buf;
    }
    if (bytes_staged > 0) {
        if (!out.empty()) out += " + ";
        std::string why = stage_reasons_text(reasons);
        const std::string staged = share_text(bytes_staged, total);
        if (small)
            std::snprintf(buf, sizeof(buf), "staged-small[%s; %s] %s", sides_text(stage_sides).c_str(),
                          why.c_str(), staged.c_str());
        else
            std::snprintf(buf, sizeof(buf), "staged[frag %s depth %u %s%s; %s] %s",
                          format_size(frag_size).c_str(), depth, sides_text(stage_sides).c_str(),
                          peer_mapped ? " peer-mapped" : "", why.c_str(), staged.c_str());
        out += buf;
    }
    return out;
}

const char *PathReport::kind() const {
    if (bytes_direct + bytes_staged == 0) return "empty";
    if (bytes_staged == 0) return "direct";
    return bytes_direct == 0 ? "staged" : "mixed";
}

std::string PathReport::via() const { return local_reach == 0 ? "" : reach_text(local_reach); }

void PathReport::merge(const PathReport &o) {
    bytes_direct += o.bytes_direct;
    bytes_staged += o.bytes_staged;
    frags_direct += o.frags_direct;
    frags_staged += o.frags_staged;
    frag_size = std::max(frag_size, o.frag_size);
    depth = std::max(depth, o.depth);
    local_reach |= o.local_reach;
    remote_reach |= o.remote_reach;
    stage_sides |= o.stage_sides;
    reasons |= o.reasons;
    small = small || o.small;
    peer_mapped = peer_mapped || o.peer_mapped;
}

void Stats::merge(const Stats &o) {
    for (auto [a, b] : {std::pair{&bytes_direct, o.bytes_direct}, {&bytes_staged, o.bytes_staged},
                        {&bytes_small, o.bytes_small}, {&frags_direct, o.frags_direct},
                        {&frags_staged, o.frags_staged}, {&msgs_small, o.msgs_small},
                        {&target_bytes_copied, o.target_bytes_copied}, {&pool_waits, o.pool_waits},
                        {&credit_waits, o.credit_waits}, {&frags_peer_mapped, o.frags_peer_mapped},
                        {&copy_failures, o.copy_failures}, {&protocol_errors, o.protocol_errors},
                        {&requests_completed, o.requests_completed}, {&requests_failed, o.requests_failed},
                        {&notify_sent, o.notify_sent}, {&notify_small, o.notify_small},
                        {&notify_received, o.notify_received}, {&slots_total, o.slots_total},
                        {&slots_in_use, o.slots_in_use}, {&slots_lent, o.slots_lent},
                        {&requests_active, o.requests_active}, {&notify_waiting, o.notify_waiting}})
        *a += b;
    for (unsigned i = 0; i < kStageReasonCount; ++i) bytes_staged_by_reason[i] += o.bytes_staged_by_reason[i];
}

std::string Stats::describe() const {
    char buf[640];
    std::snprintf(buf, sizeof(buf),
                  "direct %" PRIu64 " B in %" PRIu64 " frags, staged %" PRIu64 " B in %" PRIu64
                  " frags (small %" PRIu64 " B in %" PRIu64 " msgs; local-unreachable %" PRIu64
                  " B, remote-unreachable %" PRIu64 " B, fault %" PRIu64 " B, no-op %" PRIu64
                  " B), copied for peers %" PRIu64 " B, waits pool %" PRIu64 " credit %" PRIu64
                  " (straight into mapped peer slots: %" PRIu64 " frags), copy failures %" PRIu64
                  ", protocol errors %" PRIu64 ", requests ok %" PRIu64
                  " failed %" PRIu64 " active %" PRIu64 ", slots %" PRIu64 " in use + %" PRIu64 " lent of %" PRIu64
                  ", notifications sent %" PRIu64 " (+%" PRIu64 " with the data) received %" PRIu64
                  " waiting %" PRIu64,
                  bytes_direct, frags_direct, bytes_staged, frags_staged, bytes_small, msgs_small,
                  bytes_staged_by_reason[0], bytes_staged_by_reason[1], bytes_staged_by_reason[2],
                  bytes_staged_by_reason[3], target_bytes_copied, pool_waits, credit_waits, frags_peer_mapped,
                  copy_failures,
                  protocol_errors, requests_completed, requests_failed, requests_active, slots_in_use,
                  slots_lent, slots_total, notify_sent, notify_small, notify_received, notify_waiting);
    return buf;
}

} // namespace gdx::fb
