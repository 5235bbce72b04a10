// What the staging engine did with a request (PathReport: the path its bytes took) and with everything since it
// was created (Stats). gdx_perftest prints PathReport::describe() on every row, so a measured number always says
// whether it was direct (dma-buf, peer memory, IPC, host) or staged (fragment size, depth, share staged).
#pragma once

#include "transport/transport.h"

#include <cstdint>
#include <string>

namespace gdx::fb {

// Why a fragment was staged. Bits: a fragment can be staged for more than one reason (both ends unreachable).
enum StageReason : uint8_t {
    kStageLocalUnreachable = 1u << 0,  // the local registration of this range came back Reach::None
    kStageRemoteUnreachable = 1u << 1, // the peer's key says its range is not directly reachable
    kStageFaultInjected = 1u << 2,     // GDX_FAULT_P2P_EVERY / GDX_FAULT_P2P_PERCENT chose this fragment
    kStageNoTransportOp = 1u << 3,     // the transport lacks the one-sided operation (no kCapGet), or has no
                                       // direct path to this peer (Endpoint::direct_possible: cuda_ipc without P2P)
};
inline constexpr unsigned kStageReasonCount = 4;
const char *stage_reason_name(unsigned bit_index); // "local-unreachable", ...
std::string stage_reasons_text(uint8_t reasons);   // "local-unreachable+fault-injected"; "" for none

// Which side copied through a bounce buffer.
enum StageSide : uint8_t {
    kStageSideLocal = 1u << 0,  // this process copied into (put) or out of (get) its own bounce buffer
    kStageSideRemote = 1u << 1, // the peer copied out of (put) or into (get) one of its bounce buffers
};

inline uint8_t reach_bit(tp::Reach r) { return static_cast<uint8_t>(1u << static_cast<unsigned>(r)); }

struct PathReport {
    uint64_t bytes_direct = 0;
    uint64_t bytes_staged = 0;      // includes the small-message path
    uint32_t frags_direct = 0;
    uint32_t frags_staged = 0;
    uint32_t frag_size = 0;         // the cut used for this request
    uint32_t depth = 0;             // staged fragments allowed in flight
    uint8_t local_reach = 0;        // reach_bit() of the local chunks of direct fragments
    uint8_t remote_reach = 0;       // reach_bit() of the remote chunks of direct fragments
    uint8_t stage_sides = 0;        // StageSide bits
    uint8_t reasons = 0;            // StageReason bits
    bool small = false;             // the single-copy small-message path (below GDX_STAGING_THRESH)
    bool peer_mapped = false;       // staged fragments were copied straight into the peer's slots, mapped here
                                    // (intra-node, kCapPeerMap): no transport copy between the two copy engines

    double staged_share() const {
        uint64_t total = bytes_direct + bytes_staged;
        return total == 0 ? 0.0 : static_cast<double>(bytes_staged) / static_cast<double>(total);
    }
    // "direct[host->host] 66.7% + staged[frag 512K depth 4 local+remote; fault-injected] 33.3%",
    // "staged-small[local+remote; local-unreachable] 100%", "empty".
    std::string describe() const;
    // "direct", "staged", "mixed" or "empty" (gdx_perftest's path column).
    const char *kind() const;
    // How the direct bytes were reached on this side: "dma-buf", "host", "cuda-ipc+host"; "" when none.
    std::string via() const;
    // Adds another request's report (a tally over many requests, e.g. one perftest row).
    void merge(const PathReport &o);
};

struct Stats {
    uint64_t bytes_direct = 0;
    uint64_t bytes_staged = 0;
    uint64_t bytes_small = 0;       // part of bytes_staged that took the small-message path
    uint64_t frags_direct = 0;
    uint64_t frags_staged = 0;
    uint64_t msgs_small = 0;
    uint64_t bytes_staged_by_reason[kStageReasonCount] = {}; // a fragment counts under each of its reasons
    uint64_t target_bytes_copied = 0; // bytes this process copied out of (or into) bounce slots for peers
    uint64_t pool_waits = 0;        // a staged fragment found no free bounce buffer (back-pressure)
    uint64_t credit_waits = 0;      // a staged fragment waited for a slot grant from the peer
    uint64_t frags_peer_mapped = 0; // staged fragments this side copied straight into a peer's mapped slot (a put's
                                    // source, or a stage-out for a peer's get): no transport copy
    uint64_t copy_failures = 0;     // staging copies that failed (injected ones included)
    uint64_t protocol_errors = 0;   // control messages refused on receipt
    uint64_t requests_completed = 0;
    uint64_t requests_failed = 0;
    uint64_t notify_sent = 0;       // NOTIFY messages: a put with notification completed, its value sent after it
    uint64_t notify_small = 0;      // values that rode with their data (SMALL_PUT_NOTIFY) and were accepted
    uint64_t notify_received = 0;   // values the peers' puts delivered here (both kinds)
    // Gauges, read when stats() is called.
    uint64_t slots_total = 0;
    uint64_t slots_in_use = 0;      // initiator slots held by this side's own requests and stage-outs
    uint64_t slots_lent = 0;        // target slots granted to peers (in use or held idle by them)
    uint64_t requests_active = 0;
    uint64_t notify_waiting = 0;    // values delivered here that the user has not taken yet

    std::string describe() const; // one line for logs and tools
    // Adds another engine's counters and gauges (totals over several engines, e.g. the UCX module's per transport).
    void merge(const Stats &o);
};

} // namespace gdx::fb
