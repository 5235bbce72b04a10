// An in-process transport for the staging-engine tests and the pipeline-overhead bench: interfaces of one
// LoopFabric reach each other through FIFO queues. Everything an initiator posts (put, get, flush, active message)
// is performed when the target's interface progresses, in order, and completes at the initiator's next progress,
// so the engine sees asynchronous completions and ordering like over a byte stream (tcp).
//
// What makes it a test tool:
//   - reachability is a policy: memory types it reaches (direct_types), registrations cut into chunks, and a
//     `refuse` predicate that makes chosen chunks Reach::None, so tests get local-only, remote-only and mixed
//     staging at will;
//   - the target checks every put/get against the registration its key names (range, rights, and that every
//     chunk touched is directly reachable), and the initiator checks its local handle the same way: an engine
//     that moved bytes directly where it must stage fails the test instead of passing silently;
//   - back-pressure (max_inflight) and a broken peer (break_link) on demand;
//   - move_bytes=false turns it into the "null" transport of bench/staging_bench: puts and gets move nothing.
#pragma once

#include "transport/transport.h"

#include <functional>
#include <memory>

namespace gdx::test {

struct LoopOptions {
    bool move_bytes = true;
    uint32_t direct_types = tp::type_bit(mem::MemType::HostPageable) | tp::type_bit(mem::MemType::HostPinned) |
                            tp::type_bit(mem::MemType::HostRegistered);
    size_t chunk = 0;                                              // registration chunk size (0: one chunk)
    std::function<bool(uintptr_t addr, size_t len)> refuse;        // true: that chunk is Reach::None
    size_t max_am_bcopy = 8192;
    unsigned max_inflight = 0; // per endpoint: posted but not yet performed by the peer (0: no limit)
    bool no_get = false;       // advertise no kCapGet
    // Endpoint::direct_possible() false, as cuda_ipc without a peer-to-peer path says (its puts/gets of GPU memory
    // would fail): the tests check that the engine then stages every fragment on both sides.
    bool no_direct = false;
    // Advertise kCapPeerMap (pools in segments the peer maps, as cuda_ipc does) without implementing it: for tests
    // of what the engine decides from the flag alone; a staged transfer over such a loop would fail.
    bool advertise_peer_map = false;
};

class LoopFabric;

std::shared_ptr<LoopFabric> make_loop_fabric();
gdx_status_t open_loop_iface(const std::shared_ptr<LoopFabric> &fabric, const LoopOptions &opt,
                             std::unique_ptr<tp::Interface> *out);
// Makes the endpoint and its peer report GDX_ERR_CONNECTION_RESET; queued operations fail with it.
void break_link(tp::Endpoint &ep);
// Operations the fabric refused because they broke a rule above (each is also logged): tests expect 0.
uint64_t loop_violations(const LoopFabric &fabric);

} // namespace gdx::test
