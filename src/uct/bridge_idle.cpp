// The UCX module's progress, and its lock-free idle look and delivery.
//
// UCP spins on every interface's progress while it waits, and a message that lands mid-call waits for the call to
// end: each instruction of an idle call is latency. A full call takes UCP's worker-async lock (the async thread
// may create or destroy endpoints meanwhile) and walks the engine, the transport and every endpoint. So a call that
// found nothing to do asks the transport for its idle probe (tp::IdleProbe: the shared-memory words peers write
// when they give us work), and later calls look only at those words, without the lock, until one changes, a
// module call touches the interface (touched(): it may have given it work), or the kernel's tick moved since the
// last full progress (read on every kClockEvery-th call), which looks at what no word shows (control sockets,
// clocks, broken endpoints).
//
// Why a tick and not a count of calls: what no word shows is paced by that clock anyway (the shm hub looks at its
// sockets once per tick, peer deadlines are milliseconds), so a full progress between two ticks finds nothing that
// an idle look would miss, and it costs ~470 instructions and the lock against ~40. With one every 32nd idle call
// (before 2026-11-28), 15-23 % of a ping-pong's messages landed while one ran and were delivered through it, ~800
// instructions after their arrival (bench/results/cpu-2026-11-28b/); once per tick that is about one in a thousand.
//
// Why the look is safe without the lock: the probe and its readiness are written only by a full progress, under
// the lock, and progress calls never overlap (UCP serializes them); the memory behind the words outlives any
// endpoint destroyed meanwhile until the next full progress (ShmIface::retire). A touch that races with the probe's
// filling is seen at the latest by the next full progress (one kernel tick): a delay, never lost work.
//
// An idle look that found nothing ends with a PAUSE (GDX_UCT_IDLE_PAUSE, 1 by default). UCP calls progress in a tight
// loop, and without it the CPU runs several looks ahead: when the peer's store lands, loads of the word are already in
// flight against the old line, and the CPU throws that work away (a memory-ordering clear, what Intel documents PAUSE
// against; the guests measured expose no counters to show it) before the look that sees the message retires. A PAUSE
// keeps the next look from being issued early. On the H200 host's Xeon it took UCT am_lat 8 B from 0.227 to 0.209 us
// and UCP tag_lat from 0.262 to 0.247 (posix 0.218 / 0.259, same rounds, bench/results/gpu-2026-11-29c/s14run2); a
// PAUSE costs ~15 ns there, and the whole worker's poll pays it only while this interface is idle. Other waits between
// looks (a chain of dependent instructions, LFENCE) did less in bench/probes/c2c_cell_pingpong.cpp.
//
// When a word changes, the transport first delivers what that word announces (IdleProbe::deliver: shm hands UCP
// the messages in that endpoint's ring) and re-points the word; a full progress runs only when that is not all
// there is. This leaves the probe valid across a ping-pong: the call that delivers a message walks no layer,
// endpoint or queue that has nothing to do, and the idle calls after it stay lock-free.
//
// That delivery runs without the lock too (GDX_UCT_LOCKFREE, where membarrier(2) is available), as UCX's mm
// transports deliver. It reads the endpoint the word names, which only an endpoint's destruction (or the
// interface's) may take away, on any thread, under the lock; so the two meet in an asymmetric Dekker handshake:
//   delivery:   delivering = this thread;  (compiler barrier)  if probe_ready: deliver;  delivering = null
//   quiesce():  probe_ready = false;  membarrier(PRIVATE_EXPEDITED);  wait while delivering (another thread's)
// The barrier makes every running thread of the process execute a full fence, so either the delivery's store is
// visible to quiesce()'s load, or its load of probe_ready comes after the barrier and sees false. The delivery so
// pays two plain stores where the lock cost a locked instruction and its bookkeeping (~25 instructions), and the
// destroyer microseconds once. A destruction from a handler of the delivery itself (on the delivering thread: UCP's
// wire-up or disconnect handlers) waits for nothing, as the recursive lock let it before.
#include "core/clock.h"
#include "core/cpu_relax.h"
#include "core/log.h"
#include "core/membarrier.h"
#include "uct/bridge_engine.h"
#include "uct/bridge_internal.h"

#include <cerrno>
#include <chrono>
#include <cstring>

namespace {
// Every this-many-th idle call reads the coarse clock (a power of two): ~20 instructions, so ~1 per call.
constexpr unsigned kClockEvery = 32;
// Broken endpoints are looked for at least this often (and on every 128th full progress): a scan of every endpoint
// costs more than a full progress, against a peer timeout of seconds.
constexpr int64_t kFailureScanNs = 10'000'000;

// The tick moved since the last full progress: what no probe word shows is due for a look.
[[gnu::noinline]] bool full_due(const gdx_uct_iface *iface) { return gdx::clock::coarse_ns() != iface->full_tick; }

// This thread's identity, without a TLS lookup: the thread pointer (%fs base on x86-64) is unique per thread.
inline void *this_thread() { return __builtin_thread_pointer(); }


// Delivers what word `hit` announces; false when the caller must progress in full instead.
inline bool deliver_probed(gdx_uct_iface *iface, int hit, unsigned *count) {
    const gdx::tp::IdleProbe::Delivered d = iface->probe.deliver(static_cast<unsigned>(hit), iface->am_sink);
    if (!d.valid) iface->probe_ready.store(false, std::memory_order_relaxed);
    *count = d.n;
    return d.valid || d.n != 0; // else nothing it could deliver (another record)
}
} // namespace

void gdx_uct_iface::quiesce() {
    touched();
    if (!lockfree.load(std::memory_order_relaxed)) return;
    void *d = delivering.load(std::memory_order_acquire);
    if (d == this_thread()) return; // called from a handler of that delivery
    if (int e = fault_barrier ? EPERM : gdx::sys::membarrier_issue(gdx::sys::Barrier::Private); e != 0) {
        // Registered, then refused (a seccomp filter added since): later deliveries take the lock. One that may be
        // under way has stored `delivering` before it loaded probe_ready, but without the barrier that store may
        // still sit in its CPU's store buffer, which drains within well under a microsecond: after a fence here,
        // `delivering` must read null for kQuiet on end before the endpoint may go.
        lockfree.store(false, std::memory_order_relaxed);
        GDX_LOG_ONCE(gdx::log::Level::Warn, gdx::uct::kComp, "uct-lockfree-barrier",
                     "membarrier(PRIVATE_EXPEDITED) failed (%s): probed deliveries take the async lock from now on",
                     std::strerror(e));
        std::atomic_thread_fence(std::memory_order_seq_cst);
        constexpr auto kQuiet = std::chrono::microseconds(50);
        auto quiet_since = std::chrono::steady_clock::now();
        while (std::chrono::steady_clock::now() - quiet_since < kQuiet) {
            if (delivering.load(std::memory_order_acquire) != nullptr) quiet_since = std::chrono::steady_clock::now();
            gdx::cpu_relax();
        }
        return;
    }
    while (delivering.load(std::memory_order_acquire) != nullptr) gdx::cpu_relax();
}

// What word `hit` announces, for gdx_uct_iface_progress_unlocked (its return value). Out of line: the idle call
// before it then sets up no stack frame.
[[gnu::noinline, gnu::hot]] static int deliver_unlocked(gdx_uct_iface *iface, int hit) {
    if (!iface->lockfree.load(std::memory_order_relaxed)) {
        iface->probe_hit = hit; // delivered under the lock (gdx_uct_iface_progress)
        return -1;
    }
    iface->delivering.store(this_thread(), std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst); // the store above before the load below; quiesce()'s
                                                         // membarrier supplies the CPU's half
    unsigned count = 0;
    bool done = iface->probe_ready.load(std::memory_order_relaxed) && deliver_probed(iface, hit, &count);
    iface->delivering.store(nullptr, std::memory_order_release);
    return done ? static_cast<int>(count) : -1;
}

extern "C" [[gnu::hot]] int gdx_uct_iface_progress_unlocked(gdx_uct_iface_t *iface) {
    if (!iface->probe_ready.load(std::memory_order_relaxed)) return -1;
    if ((++iface->probe_calls & (kClockEvery - 1)) == 0 && full_due(iface)) return -1;
    if (iface->ue != nullptr && iface->ue->has_hand_over()) return -1;
    const int hit = iface->probe.changed();
    if (hit >= 0) [[unlikely]] return deliver_unlocked(iface, hit);
    for (unsigned i = iface->idle_pauses; i != 0; --i) gdx::cpu_relax(); // see GDX_UCT_IDLE_PAUSE
    return 0; // nothing to do: the common idle call
}

extern "C" unsigned gdx_uct_iface_progress(gdx_uct_iface_t *iface, int *failure_due) {
    const int hit = iface->probe_hit;
    iface->probe_hit = -1;
    unsigned n = 0;
    // The idle look saw word `hit` change, and no module call touched the interface since (an endpoint's destruction
    // among them: it takes this lock, so the probe's endpoints all live): deliver without the full walk.
    if (hit >= 0 && iface->probe_ready.load(std::memory_order_relaxed) && deliver_probed(iface, hit, &n)) {
        *failure_due = 0;
        return n;
    }
    iface->probe_ready.store(false, std::memory_order_relaxed);
    const int64_t tick = gdx::clock::coarse_ns();
    iface->full_tick = tick;
    if ((++iface->failure_tick & 127) == 0 || tick - iface->failure_scan_tick >= kFailureScanNs) {
        iface->failure_due = true;
        iface->failure_scan_tick = tick;
    }
    n = iface->ue != nullptr ? iface->ue->progress() : iface->itf->progress();
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
