// PeerTable: the engine's PeerLink per transport endpoint (one peer each), made when the peer is first used (a
// request of ours, or a control message from it) and dropped at Engine::ep_close. It also owns the flag that makes
// every link queue its control messages instead of sending them while the engine runs inside the transport's
// progress (our handlers run there, and no transport call may be made from inside a transport callback).
// Owned by the Engine; requests and peer jobs hold PeerLink pointers, which stay valid until ep_close (refused
// while any uses the link).
#pragma once

#include "fallback/peer_link.h"

#include <memory>
#include <unordered_map>

namespace gdx::fb {

class PeerTable {
  public:
    explicit PeerTable(uint8_t am_id) : am_id_(am_id) {}
    PeerTable(const PeerTable &) = delete;
    PeerTable &operator=(const PeerTable &) = delete;

    PeerLink &get(tp::Endpoint &ep) {
        auto it = peers_.find(&ep);
        if (it == peers_.end()) it = peers_.emplace(&ep, std::make_unique<PeerLink>(ep, am_id_, defer_)).first;
        return *it->second;
    }
    PeerLink *find(tp::Endpoint &ep) const {
        auto it = peers_.find(&ep);
        return it == peers_.end() ? nullptr : it->second.get();
    }
    void erase(tp::Endpoint &ep) { peers_.erase(&ep); }
    bool empty() const { return peers_.empty(); }
    // Every link, in no particular order: `for (auto &[ep, link] : peers)`.
    auto begin() { return peers_.begin(); }
    auto end() { return peers_.end(); }
    auto begin() const { return peers_.begin(); }
    auto end() const { return peers_.end(); }

    // While on, PeerLink::send queues (Engine::progress turns it on around the interface's progress).
    void defer_sends(bool on) { defer_ = on; }

  private:
    uint8_t am_id_;
    bool defer_ = false;
    std::unordered_map<tp::Endpoint *, std::unique_ptr<PeerLink>> peers_;
};

} // namespace gdx::fb
