#include "fallback/notify.h"

#include "core/error.h"
#include "fallback/path_report.h"
#include "fallback/peer_link.h"

#include <algorithm>
#include <atomic>

namespace gdx::fb {

namespace {

constexpr const char *kComp = "fallback";

// One counter for the whole process: gdx_ep_notify_poll merges the lanes of an endpoint (one engine each) by it.
std::atomic<uint64_t> g_arrivals{0};

} // namespace

void NotifyOutbox::add(uint32_t op, uint64_t value, bool embedded) {
    tickets_.push_back({op, value, embedded ? State::Embedded : State::Waiting});
}

void NotifyOutbox::complete(PeerLink &peer, uint32_t op, bool ok, Stats &stats) {
    auto it = std::find_if(tickets_.begin(), tickets_.end(), [op](const Ticket &t) { return t.op == op; });
    if (it == tickets_.end()) return; // not a request with notification
    if (it->state == State::Embedded) {
        // The value went with the data: the peer queued it before answering DONE, or refused it with the data.
        if (ok) ++stats.notify_small;
        it->state = State::Drop;
    } else {
        it->state = ok ? State::Send : State::Drop;
    }
    while (!tickets_.empty() && tickets_.front().state != State::Waiting && tickets_.front().state != State::Embedded) {
        Ticket t = tickets_.front();
        tickets_.pop_front();
        if (t.state != State::Send) continue;
        if (peer.broken()) continue; // nobody left to tell; the peer's endpoint reports why
        CtrlMsg m;
        m.type = CtrlType::Notify;
        m.value = t.value;
        // Not fenced: the request completed, so every byte is at the peer already (staged ones confirmed by DONE,
        // direct ones flushed); the transport's order puts NOTIFY after everything sent before it.
        if (peer.send(m, false) != GDX_OK) {
            GDX_DEBUG(kComp, "NOTIFY not sent (the put completed, the peer is unreachable): %s", last_error().c_str());
            continue;
        }
        ++stats.notify_sent;
    }
}

void NotifyInbox::push(uint64_t value, Stats &stats) {
    values_.push_back({value, g_arrivals.fetch_add(1, std::memory_order_relaxed)});
    ++stats.notify_received;
    if (values_.size() >= kWarnAt && !warned_) {
        warned_ = true;
        GDX_WARN(kComp,
                 "%zu notifications from one peer wait to be taken (gdx_ep_notify_poll): the queue grows by 16 bytes "
                 "for each value nobody takes",
                 values_.size());
    }
}

} // namespace gdx::fb
