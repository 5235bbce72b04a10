// The staging engine's silence clock per peer (issue 16, class 4), on both sides of staging. A transport declares
// a peer dead when it is silent while *transport* operations are outstanding; staged work mostly waits on control
// messages instead, which complete locally as soon as they are sent, so a stopped (SIGSTOP) or hung peer left
// staged work waiting forever: on the initiator, requests waiting for a GRANT, a DONE or a GET_DONE; on the
// target, slots granted to a peer that never fills them (or never returns them when recalled), and stage-outs
// for its gets. Whatever waits (PeerLink::Wait, computed by Engine::progress) runs the one clock: a peer quiet
// for a quarter of GDX_PEER_SILENCE_TIMEOUT is sent PING (its engine answers PONG from its progress, so a peer
// that is merely slow is not declared dead), and a peer quiet for all of it is declared dead (off by default: a
// rank that computes for minutes without progressing is alive; a peer that is gone fails through its transport):
// requests waiting on it fail with GDX_ERR_TIMEOUT, the engine takes back what it lent it (Engine::progress,
// reclaim_peer) and says BYE, so a peer that resumes learns at once that it was given up. A peer that destroys
// its endpoint says BYE too (class 3): what waits on it fails at once with GDX_ERR_CONNECTION_RESET.
#include "core/error.h"
#include "fallback/peer_link.h"

#include <algorithm>
#include <cstdio>

namespace gdx::fb {

namespace {
constexpr const char *kLivenessComp = "staging";

// "our requests waited on it, it held slots ..." from the Wait bits: the cause named in the one log line.
std::string waits_text(unsigned w) {
    std::string s;
    auto add = [&](const char *t) { s += (s.empty() ? "" : "; ") + std::string(t); };
    if (w & PeerLink::kWaitRequests) add("requests of ours waited on it");
    if (w & PeerLink::kWaitPeerJobs) add("copy-outs or stage-outs we ran for its requests waited on it");
    if (w & PeerLink::kWaitLentSlots)
        add("it held slots of our bounce pools that it asked for and never filled, or was asked to return");
    return s;
}
} // namespace

gdx_status_t PeerLink::failure() const {
    if (dead_ != GDX_OK) return dead_;
    gdx_status_t st = ep_.state();
    return st == GDX_OK || st == GDX_INPROGRESS ? GDX_OK : st;
}

void PeerLink::declare_dead(gdx_status_t st, std::string why) {
    if (dead_ != GDX_OK) return;
    dead_ = st;
    dead_why_ = std::move(why);
    queue_.clear(); // nobody will read them
}

void PeerLink::watch(unsigned waiting, int64_t now_ns, int64_t timeout_ns) {
    // Silence is counted while we listen: each call adds the time since the previous one, at most a quarter of
    // the timeout. A process that did not progress for a while (computing, descheduled, or itself stopped) must
    // not blame the peer for the answers it never read, nor for messages of its own it never sent: after a gap
    // it sends PING and gives the peer the rest of the timeout to answer.
    const int64_t step = last_watch_ns_ != 0 ? std::min(now_ns - last_watch_ns_, timeout_ns / 4) : 0;
    last_watch_ns_ = now_ns;
    if (waiting == 0 || dead_ != GDX_OK || timeout_ns <= 0) {
        // The clock starts with a wait, not at the last word; and the first watch of a wait adds nothing, since
        // watches stop while the engine is quiet (Engine::quiet): an idle stretch is never counted as silence.
        quiet_ns_ = 0;
        last_watch_ns_ = 0;
        return;
    }
    quiet_ns_ = heard_since_watch_ ? 0 : quiet_ns_ + step;
    heard_since_watch_ = false;
    if (quiet_ns_ > timeout_ns) {
        char why[128];
        std::snprintf(why, sizeof(why), "silent for GDX_PEER_SILENCE_TIMEOUT (%.3f s) while ",
                      static_cast<double>(timeout_ns) / 1e9);
        declare_dead(GDX_ERR_TIMEOUT, why + waits_text(waiting));
        return;
    }
    if (quiet_ns_ > timeout_ns / 4 && now_ns - last_ping_ns_ > timeout_ns / 4) {
        last_ping_ns_ = now_ns;
        CtrlMsg m;
        m.type = CtrlType::Ping;
        m.token = static_cast<uint64_t>(now_ns);
        // Back-pressure queues it; a transport error shows in broken() on the next step.
        if (send(m, false) != GDX_OK) GDX_DEBUG(kLivenessComp, "PING not sent: %s", last_error().c_str());
    }
}

gdx_status_t send_bye(tp::Endpoint &ep, uint8_t am_id, gdx_status_t st) {
    gdx_status_t es = ep.state();
    if (es != GDX_OK) return es; // not connected, or already broken: the peer learns from the transport
    CtrlMsg bye;
    bye.type = CtrlType::Bye;
    bye.status = st;
    std::vector<uint8_t> bytes;
    encode_ctrl(bye, &bytes);
    es = ep.am_bcopy(am_id, bytes.data(), bytes.size());
    if (es != GDX_OK)
        GDX_DEBUG(kLivenessComp, "BYE not sent (%s): the peer's silence clock will tell it", gdx_status_string(es));
    return es;
}

void PeerLink::say_bye(gdx_status_t st) {
    if (bye_ != Bye::None) return;
    bye_status_ = st;
    bye_ = Bye::Pending;
    retry_bye();
}

void PeerLink::retry_bye() {
    // Back-pressure (a full ring, a fence behind operations the stopped peer never completes): the next engine
    // progress tries again; any other answer is final (sent, or the transport failed and tells the peer itself).
    if (bye_ == Bye::Pending && send_bye(ep_, am_id_, bye_status_) != GDX_ERR_NO_RESOURCE) bye_ = Bye::Sent;
}

} // namespace gdx::fb
