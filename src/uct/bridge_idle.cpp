// The UCX module's progress, and its lock-free idle look.
//
// UCP spins on every interface's progress while it waits, and a message that lands mid-call waits for the call to
// end: each instruction of an idle call is latency. A full call takes UCP's worker-async lock (the async thread
// may create or destroy endpoints meanwhile) and walks the engine, the transport and every endpoint. So a call that
// found nothing to do asks the transport for its idle probe (tp::IdleProbe: the shared-memory words peers write
// when they give us work), and later calls look only at those words, without the lock, until one changes, a
// module call touches the interface (touched(): it may have given it work), or every kFullEvery-th call, which
// looks at what no word shows (control sockets, clocks, broken endpoints).
//
// Why it is safe without the lock: the probe and its readiness are written only by a full progress, under the lock,
// and progress calls never overlap (UCP serializes them); the memory behind the words outlives any endpoint
// destroyed meanwhile until the next full progress (ShmIface::retire). A touch that races with the probe's filling
// is seen at the latest by the next kFullEvery-th call: a delay, never lost work.
//
// When a word changes, the call that follows (under the lock) first lets the transport deliver what that word
// announces (IdleProbe::deliver: shm hands UCP the messages in that endpoint's ring) and re-point the word;
// a full progress runs only when that is not all there is. This leaves the probe valid across a ping-pong: the
// call that delivers a message walks no layer, endpoint or queue that has nothing to do, and the idle calls after
// it stay lock-free (before, each message cost a full delivering call and a full idle call that refilled the
// probe).
#include "uct/bridge_engine.h"
#include "uct/bridge_internal.h"

namespace {
// Every this-many-th idle call progresses in full (a power of two).
constexpr unsigned kFullEvery = 32;
} // namespace

extern "C" int gdx_uct_iface_idle(gdx_uct_iface_t *iface) {
    if (!iface->probe_ready.load(std::memory_order_relaxed)) return 0;
    if ((++iface->probe_calls & (kFullEvery - 1)) == 0) return 0;
    if (iface->ue != nullptr && iface->ue->has_hand_over()) return 0;
    iface->probe_hit = iface->probe.changed();
    return iface->probe_hit < 0 ? 1 : 0;
}

extern "C" unsigned gdx_uct_iface_progress(gdx_uct_iface_t *iface, int *failure_due) {
    const int hit = iface->probe_hit;
    iface->probe_hit = -1;
    if (hit >= 0 && iface->probe_ready.load(std::memory_order_relaxed)) {
        // The idle look saw word `hit` change, and no module call touched the interface since (an endpoint's
        // destruction among them: it takes this lock, so the probe's endpoints all live). What that word announces
        // is most often just UCP's next message: the transport hands it over without the walk of a full progress,
        // and the probe stays valid for the next idle look (the latency path: callgrind, bench/results/).
        bool valid = false;
        const unsigned n = iface->probe.deliver(static_cast<unsigned>(hit), iface->probed_am_ids, &valid);
        if (valid || n != 0) {
            if (!valid) iface->probe_ready.store(false, std::memory_order_relaxed);
            *failure_due = 0;
            return n;
        }
        // Nothing it could deliver (a grant, another record): progress in full now.
    }
    iface->probe_ready.store(false, std::memory_order_relaxed);
    if ((++iface->failure_tick & 127) == 0) iface->failure_due = true;
    const unsigned n = iface->ue != nullptr ? iface->ue->progress() : iface->itf->progress();
    *failure_due = iface->failure_due ? 1 : 0; // after progress: it may have broken an endpoint
    // Nothing done, nothing due: what would wake this interface up now is in the probe's words (if the transport
    // can say so). Not after a call that did something: that call's caller is about to answer (the latency path),
    // and the next call fills it.
    if (n == 0 && !iface->failure_due &&
        (iface->ue == nullptr || (!iface->ue->has_hand_over() && iface->ue->engine().quiet_but_transport())) &&
        iface->itf->fill_idle_probe(&iface->probe))
        iface->probe_ready.store(true, std::memory_order_relaxed);
    return n;
}
