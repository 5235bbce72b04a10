// The C++ side of libuct_gdx: the objects behind the opaque handles of uct_gdx.h. They only adapt UCT's calling
// conventions to gdx::tp (completion objects, pending requests, address padding, lazily unpacked remote keys);
// every decision about bytes, registration and connections stays in the gdx transport.
#pragma once

#include "core/config.h"
#include "fallback/engine.h"
#include "memtype/memtype.h"
#include "transport/transport.h"
#include "uct/uct_gdx.h"

#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace gdx::uct {

inline constexpr const char *kComp = "uct";

tp::Component *tl_component(unsigned tl); // nullptr when out of range

class UctEngine; // bridge_engine.h: the staging engine of one MD's anchor interface and what UCT needs around it

} // namespace gdx::uct

struct GdxUctReq; // bridge_engine.h

// ---- the handles (global names: they complete the C typedefs of uct_gdx.h) -------------------------------

struct gdx_uct_iface;

struct gdx_uct_md {
    unsigned tl = 0;
    gdx::tp::Component *comp = nullptr;
    gdx::Config cfg;
    std::unique_ptr<gdx::mem::Detector> detector; // memory types for mem_reg and mem_query (GDX_CUDA, GDX_MEMTYPE_*)
    // transport.h hands out a MemoryDomain only through an Interface (Interface::md()), while UCT opens, queries
    // and registers with an MD before any interface exists. Until gdx::tp::Component can open an MD on its own
    // (GAPS.md), the MD opens one Interface on the first device and uses its md(). The
    // first UCT interface on that device borrows this Interface, so registrations, remote keys and the endpoints
    // that serve them share one gdx MemoryDomain.
    std::unique_ptr<gdx::tp::Interface> anchor;
    gdx::tp::DeviceDesc anchor_dev;
    // The device offered to UCX: the anchor's, the one the transport could open with this configuration (UCP
    // opens an interface on every device it is offered and fails outright when one refuses, while
    // Component::query_devices cannot see the configuration: tcp lists every network device but opens only the
    // one holding GDX_TCP_ADDR). Only one: a second would not share the anchor's MemoryDomain.
    std::vector<gdx::tp::DeviceDesc> devices;
    bool anchor_lent = false;
    gdx::tp::MemoryDomain *md = nullptr;
    unsigned ifaces = 0; // open UCT interfaces, for the close-order check
    // The staging engine over the anchor (GDX_UCT_ENGINE=yes and a transport that can stage): registrations, keys
    // and put/get zcopy go through it. Declared after `anchor`, so it is destroyed before the interface it uses.
    std::unique_ptr<gdx::uct::UctEngine> ue;
};

namespace gdx::uct {
// What the allocation holding addr is, by `det`. GDX_ERR_INVALID_PARAM for a null addr or len 0.
gdx_status_t classify(mem::Detector &det, const void *addr, size_t len, mem::MemInfo *out);
// What UCT's mem_query reports of `info`, the memory at addr..addr+len as `det` classified it (gdx_uct_mem_detect
// for a transport's MD, gdx_uct_copy_mem_detect for gdx_copy's). GDX_ERR_INVALID_PARAM for a null addr or len 0.
gdx_status_t mem_detect(mem::Detector &det, const void *addr, size_t len, gdx_uct_mem_info_t *out);
} // namespace gdx::uct

struct gdx_uct_memh {
    gdx_uct_md *md = nullptr;
    std::unique_ptr<gdx::tp::MemHandle> h; // pass-through registration (no engine)
    gdx::fb::Region *region = nullptr;     // the engine's registration (it owns it until mem_dereg)
    // The transport's registration either way (am_zcopy and pass-through operations use it).
    const gdx::tp::MemHandle *handle() const { return h ? h.get() : region != nullptr ? &region->memh() : nullptr; }
};

// A peer's packed key (bridge_key.cpp). Version 1 is the transport's key behind our header (pass-through MDs),
// version 2 the engine's fallback key in compact form, kept here expanded back to the engine's format.
struct gdx_uct_rkey {
    unsigned tl = 0;
    uint8_t version = 0;
    std::vector<uint8_t> packed;   // v1: the transport's bytes; v2: the engine's (fallback) key
    size_t transport_at = 0;       // where the transport's key starts inside `packed`
    gdx::tp::MemoryDomain *unpacked_by = nullptr; // MD that made `key`
    std::unique_ptr<gdx::tp::RemoteKey> key;
    // v2: the RemoteRegion per engine that unpacked it (one in practice: UCP unpacks a key for one context).
    std::vector<std::pair<const gdx::fb::Engine *, std::unique_ptr<gdx::fb::RemoteRegion>>> remotes;
    // The transport's RemoteKey for `md`, unpacked on first use (UCT unpacks keys per component, gdx per MD).
    gdx_status_t resolve(gdx::tp::MemoryDomain &md, const gdx::tp::RemoteKey **out);
    // v2 only: the engine's RemoteRegion, unpacked (and validated field by field) on first use.
    gdx_status_t resolve(gdx::fb::Engine &eng, const gdx::fb::RemoteRegion **out);
};

// A gdx Completion carrying the UCT completion it stands for. Pooled per interface: the data path allocates
// nothing once the pool has warmed up.
struct GdxUctComp {
    gdx::tp::Completion c;
    void *uct_comp = nullptr;    // uct_completion_t*, or NULL
    gdx_uct_iface *owner = nullptr;
    struct gdx_uct_ep *probe_of = nullptr; // set while this is the ep's flush probe (flush without completion)
    uint64_t probe_seq = 0;
    void *scratch = nullptr;     // malloc'd host copy of a device payload, freed with this object
    GdxUctComp *next_free = nullptr;
};

// A UCT pending request parked on a gdx endpoint. gdx's queue is intrusive and has no purge; UCT purges, and
// the request memory returns to UCP at that moment. So the queue holds this node, not the request: a purged
// node is marked cancelled and dropped (without touching the request) when gdx next dispatches it.
struct GdxUctPending {
    gdx::tp::PendingRequest p;
    void *req = nullptr; // uct_pending_req_t*, NULL once purged
    struct gdx_uct_ep *ep = nullptr; // NULL once orphaned (below)
    // Set when UCT destroyed the endpoint while its gdx endpoint lives on in the engine's teardown list (the
    // engine still had work on it): the node stays with the gdx queue that holds it, on this list, until gdx
    // drops or dispatches it.
    GdxUctPending **orphans = nullptr;
    uint64_t seq = 0;    // order of parking on ep (gdx's queue is FIFO: it dispatches lower ones first)
    GdxUctPending *prev = nullptr, *next = nullptr; // ep's list of live nodes
};

// What am_trampoline needs to hand a message to UCP: the glue's table of receivers (gdx_uct_glue_am_table) and the id.
struct AmSlot {
    const gdx::tp::AmSinkHandler *table = nullptr;
    uint8_t id = 0;
};

struct gdx_uct_ep {
    gdx_uct_iface *iface = nullptr;
    void *glue = nullptr; // the UCT endpoint, named in failure reports (gdx_uct_iface_take_failure)
    std::unique_ptr<gdx::tp::Endpoint> ep;
    // Failure reports: only an endpoint that was connected can break; each is reported to UCT once.
    enum class Watch : uint8_t { Unconnected, Connected, Reported } watch = Watch::Unconnected;
    // UCP connects a process's endpoint to itself (its own address) for messages to self; a gdx endpoint pairs
    // with another endpoint, so the glue pairs it with this hidden one on the same interface, which only
    // receives.
    std::unique_ptr<gdx::tp::Endpoint> mirror;
    uint64_t ops_seq = 0;       // operations accepted so far
    uint64_t flushed_seq = 0;   // every operation up to this one is known complete (a probe said so)
    GdxUctComp *probe = nullptr; // in-flight flush probe
    GdxUctPending *pending = nullptr; // live pending nodes (including cancelled ones gdx still holds)
    uint64_t parked_seq = 0;     // last GdxUctPending::seq handed out
    uint64_t dispatching = 0;    // seq of the node whose request gdx is dispatching now, 0 outside a dispatch
    gdx_uct_ep *prev = nullptr, *next = nullptr; // interface's endpoint list

    // Engine path (bridge_order.cpp). Requests go to the engine in seq order; an interface fence holds later ones
    // back until the earlier ones completed; an endpoint fence answered NO_RESOURCE holds UCT's pending requests.
    GdxUctReq *eng_head = nullptr, *eng_tail = nullptr;   // submitted to the engine, oldest first
    GdxUctReq *held_head = nullptr, *held_tail = nullptr; // accepted, waiting for order_after
    uint64_t eng_seq = 0;          // engine requests accepted on this endpoint
    uint64_t order_after = 0;      // held requests wait until every request up to this seq completed
    uint64_t hold_pending = 0;     // UCT pending requests wait until every request up to this seq completed
    std::deque<void *> held_pending; // uct_pending_req_t*, FIFO (behind everything on gdx's queue)
    bool dispatching_held = false; // a held pending request is being dispatched (has_parked ignores the rest)
    struct FlushWait {
        uint64_t seq;   // flush covers engine requests up to this one
        void *uct_comp;
    };
    std::deque<FlushWait> flush_waits;
    uint32_t peer_tag = 0;         // hash of the peer's endpoint address: names the peer in log lines
};

struct gdx_uct_iface {
    gdx_uct_md *md = nullptr;
    gdx::uct::UctEngine *ue = nullptr; // the MD's engine when this interface is its anchor, else null
    std::unique_ptr<gdx::tp::Interface> owned; // null when the MD's anchor is borrowed
    gdx::tp::Interface *itf = nullptr;
    void *glue = nullptr;
    // Active messages: written in place by the transport (kCapAmInPlace), or gathered / packed into `scratch`
    // (max(max_am_short, max_am_bcopy) bytes, made at open only for such transports) and handed over from there.
    bool in_place = false;
    std::unique_ptr<uint8_t[]> scratch;
    size_t scratch_len = 0;
    AmSlot slots[gdx::tp::kMaxAmId];
    gdx_uct_ep *eps = nullptr;
    // Broken endpoints are looked for every 128th full progress and every 10 ms of the coarse clock (a scan of
    // every endpoint costs more than a full progress, against a peer timeout of seconds), and at once after arm
    // found one (a process about to sleep must hear of it first).
    unsigned failure_tick = 0;
    int64_t failure_scan_tick = 0; // clock::coarse_ns() of the last scan
    bool failure_due = false;
    // The lock-free idle look (bridge_idle.cpp): filled by a progress that found nothing to do, trusted while
    // probe_ready holds. Every module call that may leave the interface work (an operation, a flush or fence, a
    // pending request, an endpoint created, connected, checked or destroyed, arm) calls touched() first, from any
    // thread, so that the next progress runs in full; only progress, under the async lock, sets it. An active
    // message the transport wrote into the peer's ring leaves nothing (accepted_am).
    gdx::tp::IdleProbe probe;
    std::atomic<bool> probe_ready{false};
    unsigned probe_calls = 0;
    unsigned idle_pauses = 0; // GDX_UCT_IDLE_PAUSE: PAUSEs that end an idle look that found nothing
    int64_t full_tick = 0; // clock::coarse_ns() at the last full progress (the idle look's pacing)
    // The word the last idle look saw change (progress's thread only), or -1. Stored, not looked up again by
    // progress: an idle call that returned -1 because the tick moved leaves it -1, so the full progress still
    // comes once per tick while words change on every call (a stream of messages).
    int probe_hit = -1;
    // A probed delivery hands UCP's active messages (not the engine's: they stay with Engine::progress) straight to
    // UCP's handlers in the glue's table, where the transport's handler table goes through am_trampoline to them.
    gdx::tp::AmSink am_sink;
    void touched() { probe_ready.store(false, std::memory_order_relaxed); }
    // A probed delivery without the async lock (bridge_idle.cpp): on where GDX_UCT_LOCKFREE and this process's
    // membarrier(PRIVATE_EXPEDITED) registration allow. `delivering` names the thread (its TLS pointer) while one is
    // under way; quiesce() makes the probe unusable and waits for it, before anything it may use goes away.
    std::atomic<bool> lockfree{false}; // cleared by quiesce(), on any thread, if the barrier is refused later
    bool fault_barrier = false;         // GDX_FAULT_UCT_MEMBARRIER (testing aid)
    std::atomic<void *> delivering{nullptr};
    void quiesce();
    GdxUctComp *free_comps = nullptr;
    std::vector<std::unique_ptr<GdxUctComp[]>> comp_chunks;

    GdxUctComp *get_comp(void *uct_comp); // nullptr only when out of memory (logged)
    void put_comp(GdxUctComp *c);
};

// bridge_iface.cpp, for the engine's ordering (bridge_order.cpp): the transport's flush of `ep` with a UCT
// completion (GDX_OK, GDX_INPROGRESS, GDX_ERR_NO_RESOURCE while UCT requests are parked on gdx's queue), and
// parking a UCT pending request on gdx's queue (GDX_OK; GDX_ERR_BUSY: resources are free now, nothing queued).
gdx_status_t gdx_uct_ep_transport_flush(gdx_uct_ep *ep, void *uct_comp);
gdx_status_t gdx_uct_ep_transport_pending_add(gdx_uct_ep *ep, void *uct_req);
// Why the peer behind `ep` is gone, or GDX_OK (bridge_failure.cpp); *by_staging: the staging engine's verdict.
gdx_status_t gdx_uct_ep_failure(const gdx_uct_ep *ep, bool *by_staging);
