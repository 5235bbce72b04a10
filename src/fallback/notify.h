// Put with notification (gdx_put_notify): a value the initiator attaches to a put, delivered to the target's user
// once every byte of the put is in the target's buffer. Both halves live in PeerLink, one per transport endpoint:
//
//   NotifyOutbox (initiator)  the notifications this side owes the peer, one ticket per put_notify in issue order.
//                             A ticket leaves the front once its request completed: with success it sends NOTIFY
//                             {value} (completion already means every byte is at the peer), with an error nothing
//                             (no notification for a failed put). A later ticket waits for the earlier ones, so the
//                             peer sees the values in issue order even when a later, smaller put completes first.
//   NotifyInbox (target)      the values that arrived, oldest first, until the user takes them.
//
// The small staged path needs no NOTIFY: when no earlier ticket is waiting, the value rides in the SMALL_PUT_NOTIFY
// itself and the target queues it right after its copy succeeded, before it answers DONE (the ticket then only
// holds later notifications back until that DONE, which proves the value was queued or refused).
#pragma once

#include "gdx/status.h"

#include <cstddef>
#include <cstdint>
#include <deque>

namespace gdx::fb {

class PeerLink;
struct Stats;

struct Notification {
    uint64_t value = 0;
    uint64_t seq = 0; // arrival order across every engine of the process (merging lanes: oldest first)
};

class NotifyOutbox {
  public:
    // Nothing issued earlier still owes the peer a notification: a new value may ride with its data.
    bool empty() const { return tickets_.empty(); }
    // A put with notification was accepted (`embedded`: its value travels in its SMALL_PUT_NOTIFY).
    void add(uint32_t op, uint64_t value, bool embedded);
    // Its request completed; then every ticket at the front whose request completed leaves (NOTIFY for a
    // successful one that was not embedded). Counted in stats.
    void complete(PeerLink &peer, uint32_t op, bool ok, Stats &stats);

  private:
    enum class State : uint8_t { Waiting, Embedded, Send, Drop };
    struct Ticket {
        uint32_t op = 0;
        uint64_t value = 0;
        State state = State::Waiting;
    };
    std::deque<Ticket> tickets_; // bounded by this side's requests in flight
};

class NotifyInbox {
  public:
    // A value whose put's bytes are all in this process's buffer. Not bounded: 16 bytes per value until it is
    // taken (said once, at WARN, when a peer's queue passes kWarnAt values nobody took).
    void push(uint64_t value, Stats &stats);
    bool empty() const { return values_.empty(); }
    const Notification &front() const { return values_.front(); }
    void pop() { values_.pop_front(); }
    size_t size() const { return values_.size(); }

    static constexpr size_t kWarnAt = size_t(1) << 20;

  private:
    std::deque<Notification> values_;
    bool warned_ = false;
};

} // namespace gdx::fb
