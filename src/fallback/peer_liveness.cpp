// The staging engine's silence clock per peer (issue 16, class 4). A transport declares a peer dead when it is
// silent while *transport* operations are outstanding; staged work mostly waits on control messages instead — a
// GRANT for a credit, a DONE for a copy-out, a GET_DONE for a stage-out — which complete locally as soon as they
// are sent, so a stopped (SIGSTOP) or hung peer left every staged request INPROGRESS forever. Here every request
// waiting on a peer counts: while one waits, a peer quiet for a quarter of GDX_PEER_TIMEOUT is sent PING (its
// engine answers PONG from its progress, so a live peer that is merely slow to grant is never declared dead), and
// a peer quiet for the whole GDX_PEER_TIMEOUT is declared dead: its requests fail with GDX_ERR_TIMEOUT within
// GDX_PEER_TIMEOUT plus one progress call. A peer that destroys its endpoint says BYE (class 3): requests waiting
// on it fail at once with GDX_ERR_CONNECTION_RESET instead of waiting for the clock.
#include "core/error.h"
#include "fallback/peer_link.h"

namespace gdx::fb {

namespace {
constexpr const char *kComp = "staging";
}

gdx_status_t PeerLink::failure() const {
    if (dead_ != GDX_OK) return dead_;
    gdx_status_t st = ep_.state();
    return st == GDX_OK || st == GDX_INPROGRESS ? GDX_OK : st;
}

void PeerLink::declare_dead(gdx_status_t st, const char *why) {
    if (dead_ != GDX_OK) return;
    dead_ = st;
    queue_.clear(); // nobody will read them
    // One line per peer, at the level it deserves: a peer that said goodbye is news, a silent one an error.
    fail(st, st == GDX_ERR_TIMEOUT ? log::Level::Error : log::Level::Info, kComp,
         "peer declared dead for staging: %s; its outstanding staged requests fail with %s", why,
         gdx_status_string(st));
}

void PeerLink::watch(bool waiting, int64_t now_ns, int64_t timeout_ns) {
    if (!waiting || dead_ != GDX_OK || timeout_ns <= 0) {
        waiting_since_ns_ = -1;
        return;
    }
    if (waiting_since_ns_ < 0) waiting_since_ns_ = now_ns; // the clock starts with the wait, not at the last word
    const int64_t since = std::max(last_heard_ns_, waiting_since_ns_);
    const int64_t quiet = now_ns - since;
    if (quiet > timeout_ns) {
        char why[160];
        std::snprintf(why, sizeof(why), "silent for GDX_PEER_TIMEOUT (%.3f s) while requests waited on it",
                      static_cast<double>(timeout_ns) / 1e9);
        declare_dead(GDX_ERR_TIMEOUT, why);
        return;
    }
    if (quiet > timeout_ns / 4 && now_ns - last_ping_ns_ > timeout_ns / 4) {
        last_ping_ns_ = now_ns;
        CtrlMsg m;
        m.type = CtrlType::Ping;
        m.token = static_cast<uint64_t>(now_ns);
        // Back-pressure queues it; a transport error shows in broken() on the next step.
        if (send(m, false) != GDX_OK) GDX_DEBUG(kComp, "PING not sent: %s", last_error().c_str());
    }
}

} // namespace gdx::fb
