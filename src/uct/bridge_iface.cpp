// Bridge, second half: interfaces and endpoints. UCT's completion objects become pooled gdx Completions, UCT's
// pending requests become purgeable nodes on gdx's intrusive queue, and flush without a completion object (UCT
// polls) becomes one probe flush per endpoint at a time.
#include "core/error.h"
#include "core/log.h"
#include "core/membarrier.h"
#include "uct/bridge_engine.h"
#include "uct/bridge_internal.h"
#include "uct/config_vars.h"

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>

using namespace gdx;
using namespace gdx::uct;

namespace {

constexpr size_t kCompChunk = 64;
constexpr size_t kAddrHeader = 2; // little-endian length of the gdx address inside the padded UCT address

// The transport's handler for UCP's ids (its progress() path; the idle look's delivery calls the same receiver
// itself, ShmEp::deliver_probed): the id's entry in the glue's table, read at each message since UCP may replace
// the handler.
[[gnu::hot]] void am_trampoline(void *arg, tp::Endpoint * /*ep*/, const void *data, size_t length) {
    const auto *slot = static_cast<const AmSlot *>(arg);
    // UCT's handler signature takes a mutable pointer; without UCT_CB_PARAM_FLAG_DESC the handler must not keep
    // it, and UCP copies what it keeps. The bytes are the transport's receive buffer.
    tp::call_receiver(slot->table[slot->id], slot->id, const_cast<void *>(data), length);
}

void comp_done(tp::Completion *self) {
    // c is the first member, so the Completion's address is the wrapper's.
    auto *w = reinterpret_cast<GdxUctComp *>(self);
    if (w->probe_of != nullptr) {
        gdx_uct_ep *ep = w->probe_of;
        if (w->c.status == GDX_OK && w->probe_seq > ep->flushed_seq) ep->flushed_seq = w->probe_seq;
        ep->probe = nullptr;
    }
    if (w->uct_comp != nullptr) gdx_uct_glue_complete(w->uct_comp, w->c.status);
    w->owner->put_comp(w);
}

// The gdx endpoint the node was parked on outlived its UCT endpoint (bridge_engine.h, ep_destroyed): drop it.
void orphan_done(GdxUctPending *node) {
    if (node->prev != nullptr) node->prev->next = node->next;
    else *node->orphans = node->next;
    if (node->next != nullptr) node->next->prev = node->prev;
    delete node;
}

void pending_link(GdxUctPending *node) {
    gdx_uct_ep *ep = node->ep;
    node->prev = nullptr;
    node->next = ep->pending;
    if (ep->pending != nullptr) ep->pending->prev = node;
    ep->pending = node;
}

void pending_unlink(GdxUctPending *node) {
    if (node->prev != nullptr) node->prev->next = node->next;
    else node->ep->pending = node->next;
    if (node->next != nullptr) node->next->prev = node->prev;
}

gdx_status_t pending_trampoline(tp::PendingRequest *self) {
    auto *node = reinterpret_cast<GdxUctPending *>(self); // p is the first member
    if (node->orphans != nullptr) {
        orphan_done(node);
        return GDX_OK;
    }
    // Off the list before UCP's callback runs: it may add requests to (or purge) this endpoint.
    pending_unlink(node);
    gdx_uct_ep *ep = node->ep;
    const uint64_t outer = ep->dispatching;
    ep->dispatching = node->seq;
    gdx_status_t st = node->req != nullptr ? gdx_uct_glue_dispatch(node->req) : GDX_OK;
    ep->dispatching = outer;
    if (st == GDX_ERR_NO_RESOURCE) { // gdx keeps it queued and stops dispatching for now
        pending_link(node);
        return st;
    }
    delete node;
    return GDX_OK;
}

// Whether UCT requests wait on this endpoint's pending queue (parked with pending_add, not purged) that a flush
// issued now must cover. They are not issued yet, so gdx's flush does not cover them: UCT's contract is that an
// endpoint flush then answers NO_RESOURCE and the caller parks it behind them (UCX's own transports check their
// pending arbiter the same way). Answering OK let UCP's fence pass before a put parked during wire-up had been
// sent: MPI_Win_fence returned with the first MPI_Put of a window missing at the target (uct.mpi.* on Debian 13's
// UCX 1.18 + Open MPI 5, 5-7 runs in 10). A flush dispatched from the queue itself covers only what was parked
// before it, all of which gdx's FIFO queue has dispatched by then; requests parked behind it are later operations
// (counting them kept the flush at the head of the queue for ever: ucp_put_bw hung on UCP 1.13).
bool has_parked(const gdx_uct_ep *ep) {
    // Held back by an endpoint fence (bridge_order.cpp): behind everything on gdx's queue, so while one of them is
    // being dispatched the others are later operations.
    if (!ep->held_pending.empty() && !ep->dispatching_held) return true;
    for (const GdxUctPending *n = ep->pending; n != nullptr; n = n->next) {
        if (n->req != nullptr && (ep->dispatching == 0 || n->seq < ep->dispatching)) return true;
    }
    return false;
}

// Accepted operations advance ops_seq so flush without a completion knows whether a finished probe still
// covers everything.
gdx_status_t accepted(gdx_uct_ep *ep, gdx_status_t st) {
    if (st == GDX_OK || st == GDX_INPROGRESS) ++ep->ops_seq;
    return st;
}

// An active message the transport wrote into the peer's ring as it returned GDX_OK left nothing for progress to do
// (the small-message path: no touch, so the idle look stays lock-free); any other answer may have.
gdx_status_t accepted_am(gdx_uct_ep *ep, gdx_status_t st) {
    if (st != GDX_OK) ep->iface->touched();
    return accepted(ep, st);
}

// Runs op(comp) with a pooled Completion; releases it unless the operation kept it.
template <typename Op> gdx_status_t with_comp(gdx_uct_ep *ep, void *uct_comp, Op op) {
    GdxUctComp *c = ep->iface->get_comp(uct_comp);
    if (c == nullptr) return GDX_ERR_NO_MEMORY;
    gdx_status_t st = op(&c->c);
    if (st != GDX_INPROGRESS) ep->iface->put_comp(c);
    return accepted(ep, st);
}

// am_zcopy of memory the CPU cannot read (CUDA device, VMM, pool): an engine MD lists those kinds in
// reg_mem_types, so UCP 1.13 sends eager fragments of them by am_zcopy, and the transports copy payloads with the
// CPU. The payload is copied to host memory first (a synchronous copy through gdx's memory ops), which lives until
// the transport is done with it.
gdx_status_t am_zcopy_from_device(gdx_uct_ep *ep, uint8_t id, const void *header, size_t header_len,
                                  const void *payload, size_t len, const mem::MemInfo &info, void *uct_comp) {
    void *host = std::malloc(len);
    if (host == nullptr)
        return GDX_FAIL(GDX_ERR_NO_MEMORY, kComp, "am_zcopy: out of memory for a %zu-byte copy of %s memory", len,
                        mem::type_name(info.type));
    if (gdx_status_t st = mem::ops(info.kind).copy(host, payload, len, info.device); st != GDX_OK) {
        std::free(host);
        return GDX_FAIL(st, kComp, "am_zcopy: copying %zu bytes of %s memory at %p to host memory failed", len,
                        mem::type_name(info.type), payload);
    }
    GdxUctComp *c = ep->iface->get_comp(uct_comp);
    if (c == nullptr) {
        std::free(host);
        return GDX_ERR_NO_MEMORY;
    }
    c->scratch = host; // freed with the completion object
    gdx_status_t st = ep->ep->am_zcopy(id, header, header_len, host, len, nullptr, &c->c);
    if (st != GDX_INPROGRESS) ep->iface->put_comp(c);
    return accepted(ep, st);
}

} // namespace

GdxUctComp *gdx_uct_iface::get_comp(void *uct_comp) {
    if (free_comps == nullptr) {
        std::unique_ptr<GdxUctComp[]> chunk(new (std::nothrow) GdxUctComp[kCompChunk]);
        if (!chunk) {
            GDX_FAIL(GDX_ERR_NO_MEMORY, kComp, "out of memory for %zu completion objects", kCompChunk);
            return nullptr;
        }
        for (size_t i = 0; i < kCompChunk; ++i) put_comp(&chunk[i]);
        comp_chunks.push_back(std::move(chunk));
    }
    GdxUctComp *c = free_comps;
    free_comps = c->next_free;
    c->c.cb = comp_done;
    c->c.count = 1;
    c->c.status = GDX_OK;
    c->uct_comp = uct_comp;
    c->owner = this;
    c->probe_of = nullptr;
    return c;
}

void gdx_uct_iface::put_comp(GdxUctComp *c) {
    std::free(c->scratch); // a device payload's host copy (am_zcopy_from_device)
    c->scratch = nullptr;
    c->next_free = free_comps;
    free_comps = c;
}

// ---- interface -------------------------------------------------------------------------------------------

extern "C" gdx_status_t gdx_uct_iface_open(gdx_uct_md_t *md, const char *dev_name, void *glue,
                                           gdx_uct_iface_t **out) {
    if (md == nullptr || dev_name == nullptr || out == nullptr)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "iface open: null argument");
    auto iface = std::unique_ptr<gdx_uct_iface>(new (std::nothrow) gdx_uct_iface);
    if (!iface) return GDX_FAIL(GDX_ERR_NO_MEMORY, kComp, "iface open: out of memory");
    const char *tl = gdx_uct_tl_name(md->tl);
    if (!md->anchor_lent && md->anchor_dev.name == dev_name) {
        iface->itf = md->anchor.get();
        iface->ue = md->ue.get();
        md->anchor_lent = true;
    } else {
        const tp::DeviceDesc *dev = nullptr;
        for (const tp::DeviceDesc &d : md->devices)
            if (d.name == dev_name) dev = &d;
        if (dev == nullptr)
            return GDX_FAIL(GDX_ERR_NO_DEVICE, kComp, "iface open: gdx_%s offers no device '%s'", tl, dev_name);
        gdx_status_t st = md->comp->open(*dev, md->cfg, &iface->owned);
        if (st != GDX_OK) return st;
        iface->itf = iface->owned.get();
        // Registrations live in the anchor's MemoryDomain; this interface has its own (transport.h gives every
        // Interface one), so keys registered through the UCT MD may not open memory served here.
        GDX_LOG_ONCE(log::Level::Warn, kComp, std::string("uct-second-iface:") + tl,
                     "gdx_%s: a second interface (%s) does not share the UCT memory domain's registrations; "
                     "one interface per transport and process is what works until gdx::tp::Component opens "
                     "memory domains itself (src/uct/README.md)",
                     tl, dev_name);
    }
    iface->md = md;
    iface->glue = glue;
    iface->fault_barrier = md->cfg.boolean(UctVar::FAULT_UCT_MEMBARRIER);
    iface->idle_pauses = static_cast<unsigned>(md->cfg.uint(UctVar::UCT_IDLE_PAUSE));
    GDX_LOG_ONCE(log::Level::Debug, kComp, "uct-idle-pause", "an idle look that finds nothing ends with %u PAUSE%s "
                 "(GDX_UCT_IDLE_PAUSE)", iface->idle_pauses, iface->idle_pauses == 1 ? "" : "s");
    if (md->cfg.boolean(UctVar::UCT_LOCKFREE)) {
        std::string why;
        iface->lockfree.store(sys::membarrier_register(sys::Barrier::Private, &why) == GDX_OK,
                              std::memory_order_relaxed);
        if (!iface->lockfree.load(std::memory_order_relaxed))
            GDX_LOG_ONCE(log::Level::Debug, kComp, "uct-lockfree", "probed deliveries take the async lock: %s",
                         why.c_str());
    }
    const tp::Capabilities &caps = iface->itf->caps();
    iface->in_place = (caps.flags & tp::kCapAmInPlace) != 0;
    if (!iface->in_place) {
        iface->scratch_len = std::max(caps.max_am_short, caps.max_am_bcopy);
        iface->scratch.reset(new (std::nothrow) uint8_t[std::max<size_t>(iface->scratch_len, 1)]);
        if (!iface->scratch) {
            if (iface->owned == nullptr) md->anchor_lent = false;
            return GDX_FAIL(GDX_ERR_NO_MEMORY, kComp, "iface open: out of memory for a %zu-byte send buffer",
                            iface->scratch_len);
        }
    }
    // UCP's handlers, which am_trampoline and the idle look's delivery call, for the ids below. The same fields
    // and callback (the glue checks them against UCT's).
    static_assert(std::is_same_v<decltype(tp::AmSinkHandler::fn), decltype(gdx_uct_am_handler_t::cb)> &&
                  sizeof(tp::AmSinkHandler) == sizeof(gdx_uct_am_handler_t) &&
                  offsetof(tp::AmSinkHandler, fn) == offsetof(gdx_uct_am_handler_t, cb) &&
                  offsetof(tp::AmSinkHandler, arg) == offsetof(gdx_uct_am_handler_t, arg) &&
                  offsetof(tp::AmSinkHandler, flags) == offsetof(gdx_uct_am_handler_t, flags) &&
                  tp::kMaxAmId == GDX_UCT_AM_IDS);
    iface->am_sink.table = reinterpret_cast<const tp::AmSinkHandler *>(gdx_uct_glue_am_table(iface->glue));
    for (unsigned id = 0; id < tp::kMaxAmId; ++id) {
        if (id == kEngineAmId && md->ue) continue; // the engine's control messages: never UCP's
        iface->am_sink.ids |= uint32_t{1} << id;   // UCP's: the idle look may deliver them (bridge_idle.cpp)
        iface->slots[id] = AmSlot{iface->am_sink.table, static_cast<uint8_t>(id)};
        gdx_status_t st = iface->itf->set_am_handler(static_cast<uint8_t>(id), am_trampoline, &iface->slots[id]);
        if (st != GDX_OK) {
            if (iface->owned == nullptr) md->anchor_lent = false;
            return st;
        }
    }
    ++md->ifaces;
    *out = iface.release();
    return GDX_OK;
}

extern "C" void gdx_uct_iface_close(gdx_uct_iface_t *iface) {
    if (iface == nullptr) return;
    iface->quiesce();
    if (iface->eps != nullptr)
        GDX_ERROR(kComp, "gdx_%s interface closed with endpoints still open: destroying them",
                  gdx_uct_tl_name(iface->md->tl));
    while (iface->eps != nullptr) gdx_uct_ep_destroy(iface->eps);
    gdx_uct_md *md = iface->md;
    if (iface->owned == nullptr) {
        // The borrowed anchor outlives this UCT interface: stop it calling into the glue.
        for (unsigned id = 0; id < tp::kMaxAmId; ++id)
            if (id != kEngineAmId || !md->ue) iface->itf->set_am_handler(static_cast<uint8_t>(id), nullptr, nullptr);
        md->anchor_lent = false;
    }
    iface->owned.reset(); // may complete outstanding operations, which still need the completion pool
    --md->ifaces;
    delete iface;
}

extern "C" void gdx_uct_iface_attr(gdx_uct_iface_t *iface, gdx_uct_iface_attr_t *a) {
    const tp::Capabilities &c = iface->itf->caps();
    std::memset(a, 0, sizeof(*a));
    a->connect_to_ep = 1;
    a->am_short = (c.flags & tp::kCapAmShort) != 0 && c.max_am_short >= sizeof(uint64_t);
    a->am_bcopy = (c.flags & tp::kCapAmBcopy) != 0;
    a->am_zcopy = (c.flags & tp::kCapAmZcopy) != 0;
    a->put_zcopy = (c.flags & tp::kCapPut) != 0;
    a->get_zcopy = (c.flags & tp::kCapGet) != 0;
    a->wakeup = (c.flags & tp::kCapWakeup) != 0 && iface->itf->wakeup_fd() >= 0;
    a->intra_node = (c.flags & tp::kCapIntraNode) != 0;
    a->max_am_short = c.max_am_short;
    a->max_am_bcopy = c.max_am_bcopy;
    a->max_am_zcopy = c.max_am_zcopy;
    a->max_put = c.max_put;
    a->max_get = c.max_get;
    if (iface->ue != nullptr) {
        // One UCT operation of any size: the engine cuts it into fragments (each within the transport's limits),
        // and stages a get the transport cannot do.
        a->put_zcopy = a->get_zcopy = 1;
        a->max_put = a->max_get = SIZE_MAX;
        a->engine = 1;
    }
    a->latency_s = c.latency_ns * 1e-9;
    a->bandwidth_Bps = c.bandwidth_Bps;
}

extern "C" int gdx_uct_iface_wakeup_fd(gdx_uct_iface_t *iface) { return iface->itf->wakeup_fd(); }
extern "C" gdx_status_t gdx_uct_iface_set_socket_buffers(gdx_uct_iface_t *iface, size_t sndbuf, size_t rcvbuf) {
    return iface->itf->set_socket_buffers(sndbuf, rcvbuf);
}
extern "C" gdx_status_t gdx_uct_iface_arm(gdx_uct_iface_t *iface) {
    iface->touched();
    // Copies, credits and finished requests move on in progress() only, whatever the transport's fd says.
    if (iface->ue != nullptr && iface->ue->busy()) return GDX_ERR_BUSY;
    // A broken endpoint UCT has not heard of: the fd may never fire again for it, so progress must report it
    // before the process sleeps (UCP's wait would otherwise outlast the request that waits on that peer).
    for (const gdx_uct_ep *ep = iface->eps; ep != nullptr; ep = ep->next) {
        bool by_staging;
        if (gdx_uct_ep_failure(ep, &by_staging) != GDX_OK) {
            iface->failure_due = true;
            return GDX_ERR_BUSY;
        }
    }
    return iface->itf->arm_wakeup();
}

// An endpoint whose connection broke has nothing left to flush: its operations completed with the error, and the
// failure goes to UCT's error handler. An interface flush passes over it, as UCX's transports' do (UCX's gtest
// test_uct_peer_failure flushes the survivor's interface after the peer died and expects UCS_OK).
static bool connection_broke(const gdx_uct_ep *ep) {
    const gdx_status_t st = ep->ep->state();
    return st != GDX_OK && st != GDX_INPROGRESS;
}

extern "C" gdx_status_t gdx_uct_iface_flush(gdx_uct_iface_t *iface, void *uct_comp) {
    iface->touched();
    // Requests parked on an endpoint are not covered either, but an interface flush has no NO_RESOURCE answer
    // (UCP takes one as an error: ucp_worker_flush failed in ucx_perftest's setup): "still in progress", as UCX's
    // rc interface flush says for its endpoints' NO_RESOURCE; UCP polls again. A completion could not be
    // honoured before they are issued: NO_RESOURCE then (UCP never passes one; UCX's transports refuse it).
    for (gdx_uct_ep *ep = iface->eps; ep != nullptr; ep = ep->next) {
        if (connection_broke(ep)) continue;
        // Engine requests too: they complete in progress(), and the transport's flush comes after them.
        if (has_parked(ep) || (iface->ue != nullptr && iface->ue->outstanding(ep)))
            return (uct_comp == nullptr) ? GDX_INPROGRESS : GDX_ERR_NO_RESOURCE;
    }
    if (uct_comp == nullptr) {
        gdx_status_t result = GDX_OK;
        for (gdx_uct_ep *ep = iface->eps; ep != nullptr; ep = ep->next) {
            if (connection_broke(ep)) continue;
            gdx_status_t st = gdx_uct_ep_flush(ep, nullptr);
            if (st == GDX_ERR_NO_RESOURCE) st = GDX_INPROGRESS; // purged nodes gdx still holds (pending_queue.h)
            if (st != GDX_OK && result == GDX_OK) result = st;
        }
        return result;
    }
    // One Completion counts every endpoint flush still running; it starts at 1 so it cannot fire while
    // endpoints are being visited.
    GdxUctComp *agg = iface->get_comp(uct_comp);
    if (agg == nullptr) return GDX_ERR_NO_MEMORY;
    for (gdx_uct_ep *ep = iface->eps; ep != nullptr; ep = ep->next) {
        if (connection_broke(ep)) continue;
        ++agg->c.count;
        gdx_status_t st = ep->ep->flush(&agg->c);
        if (st == GDX_ERR_NO_RESOURCE) st = GDX_OK; // only purged nodes are parked there (has_parked said so)
        if (st != GDX_INPROGRESS) {
            --agg->c.count;
            if (st != GDX_OK && agg->c.status == GDX_OK) agg->c.status = st;
        }
    }
    if (--agg->c.count == 0) {
        gdx_status_t st = agg->c.status;
        iface->put_comp(agg);
        return st;
    }
    return GDX_INPROGRESS;
}

extern "C" gdx_status_t gdx_uct_iface_fence(gdx_uct_iface_t *iface) {
    iface->touched();
    if (iface->ue != nullptr) iface->ue->iface_fence(iface->eps);
    for (gdx_uct_ep *ep = iface->eps; ep != nullptr; ep = ep->next) {
        gdx_status_t st = ep->ep->fence();
        if (st != GDX_OK) return st;
    }
    return GDX_OK;
}

// ---- endpoint --------------------------------------------------------------------------------------------

extern "C" gdx_status_t gdx_uct_ep_create(gdx_uct_iface_t *iface, void *glue_ep, gdx_uct_ep_t **out) {
    iface->touched();
    auto ep = std::unique_ptr<gdx_uct_ep>(new (std::nothrow) gdx_uct_ep);
    if (!ep) return GDX_FAIL(GDX_ERR_NO_MEMORY, kComp, "ep create: out of memory");
    gdx_status_t st = iface->itf->ep_create(&ep->ep);
    if (st != GDX_OK) return st;
    ep->iface = iface;
    ep->glue = glue_ep;
    ep->next = iface->eps;
    if (iface->eps != nullptr) iface->eps->prev = ep.get();
    iface->eps = ep.get();
    *out = ep.release();
    return GDX_OK;
}

extern "C" void gdx_uct_ep_destroy(gdx_uct_ep_t *ep) {
    if (ep == nullptr) return;
    gdx_uct_iface *iface = ep->iface;
    iface->quiesce(); // an idle probe may name this endpoint, and a delivery without the lock may be using it
    if (ep->probe != nullptr) ep->probe->probe_of = nullptr; // a late completion must not touch this ep
    // The engine lets go of the gdx endpoints, or keeps one it still uses (then the gdx queue that holds our
    // pending nodes lives on, and so must they). Destroying a gdx endpoint drops its pending queue; our nodes are
    // freed here, after it.
    const bool kept = iface->ue != nullptr && iface->ue->ep_destroyed(ep);
    ep->ep.reset();
    ep->mirror.reset();
    while (ep->pending != nullptr) {
        GdxUctPending *n = ep->pending;
        ep->pending = n->next;
        if (kept) iface->ue->add_orphan(n);
        else delete n;
    }
    if (ep->prev != nullptr) ep->prev->next = ep->next;
    else iface->eps = ep->next;
    if (ep->next != nullptr) ep->next->prev = ep->prev;
    delete ep;
}

extern "C" gdx_status_t gdx_uct_ep_get_address(gdx_uct_ep_t *ep, void *buffer) {
    std::vector<uint8_t> a = ep->ep->address();
    if (a.empty() || a.size() > GDX_UCT_EP_ADDR_MAX - kAddrHeader)
        return GDX_FAIL(GDX_ERR_INTERNAL, kComp, "gdx_%s endpoint address of %zu bytes does not fit UCT's fixed %d",
                        gdx_uct_tl_name(ep->iface->md->tl), a.size(), GDX_UCT_EP_ADDR_MAX - (int)kAddrHeader);
    auto *p = static_cast<uint8_t *>(buffer);
    std::memset(p, 0, GDX_UCT_EP_ADDR_MAX);
    p[0] = static_cast<uint8_t>(a.size());
    p[1] = static_cast<uint8_t>(a.size() >> 8);
    std::memcpy(p + kAddrHeader, a.data(), a.size());
    return GDX_OK;
}

// Connects, and from then on watches the endpoint for failure reports. A connect refused here was answered to UCT
// as an error already: it does not start the watch (nor end one a first connect started).
static gdx_status_t ep_connect(gdx_uct_ep *ep, const void *address);

extern "C" gdx_status_t gdx_uct_ep_connect(gdx_uct_ep_t *ep, const void *address) {
    ep->iface->touched();
    const gdx_status_t st = ep_connect(ep, address);
    if ((st == GDX_OK || st == GDX_INPROGRESS) && ep->watch == gdx_uct_ep::Watch::Unconnected)
        ep->watch = gdx_uct_ep::Watch::Connected;
    return st;
}

static gdx_status_t ep_connect(gdx_uct_ep *ep, const void *address) {
    const auto *p = static_cast<const uint8_t *>(address);
    size_t n = static_cast<size_t>(p[0]) | (static_cast<size_t>(p[1]) << 8);
    if (n == 0 || n > GDX_UCT_EP_ADDR_MAX - kAddrHeader)
        return GDX_FAIL(GDX_ERR_INVALID_ADDR, kComp, "gdx_%s: peer endpoint address claims %zu bytes (1..%d)",
                        gdx_uct_tl_name(ep->iface->md->tl), n, GDX_UCT_EP_ADDR_MAX - (int)kAddrHeader);
    std::span<const uint8_t> remote(p + kAddrHeader, n);
    ep->peer_tag = 2166136261u; // FNV-1a of the peer's address: names the peer in the engine's log lines
    for (uint8_t b : remote) ep->peer_tag = (ep->peer_tag ^ b) * 16777619u;
    std::vector<uint8_t> own = ep->ep->address();
    if (own.size() != n || std::memcmp(own.data(), remote.data(), n) != 0) return ep->ep->connect(remote);
    if (ep->mirror)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "gdx_%s: endpoint connected to itself twice",
                        gdx_uct_tl_name(ep->iface->md->tl));
    gdx_status_t st = ep->iface->itf->ep_create(&ep->mirror);
    if (st != GDX_OK) return st;
    std::vector<uint8_t> mirror = ep->mirror->address();
    st = ep->mirror->connect(own);
    if (st == GDX_OK || st == GDX_INPROGRESS) st = ep->ep->connect(mirror);
    if (st != GDX_OK && st != GDX_INPROGRESS) ep->mirror.reset();
    GDX_DEBUG(kComp, "gdx_%s: endpoint connected to itself through a hidden peer endpoint: %s",
              gdx_uct_tl_name(ep->iface->md->tl), gdx_status_string(st));
    return st;
}

extern "C" gdx_status_t gdx_uct_ep_am_short_iov(gdx_uct_ep_t *ep, uint8_t id, const gdx_uct_seg_t *segs,
                                                size_t count) {
    gdx_uct_iface *iface = ep->iface;
    if (count > GDX_UCT_MAX_SEGS)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "am_short of %zu pieces (at most %d)", count, GDX_UCT_MAX_SEGS);
    if (iface->in_place) {
        tp::AmSeg v[GDX_UCT_MAX_SEGS];
        for (size_t i = 0; i < count; ++i) v[i] = tp::AmSeg{segs[i].data, segs[i].length};
        return accepted_am(ep, ep->ep->am_short_iov(id, std::span<const tp::AmSeg>(v, count)));
    }
    size_t total = 0;
    for (size_t i = 0; i < count; ++i) {
        if (segs[i].length > iface->scratch_len - total)
            return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "am_short of more than %zu bytes (max_am_short %zu)",
                            iface->scratch_len, iface->itf->caps().max_am_short);
        if (segs[i].length != 0) std::memcpy(iface->scratch.get() + total, segs[i].data, segs[i].length);
        total += segs[i].length;
    }
    iface->touched(); // a transport that copies from a buffer may queue it for progress to send
    return accepted(ep, ep->ep->am_short(id, iface->scratch.get(), total));
}

// am_short where the transport does not write in place: the two pieces through am_short_iov's gathering. Out of
// line, so that the in-place path (every small UCP message over shm) sets up no frame for it.
[[gnu::noinline]] static gdx_status_t am_short_gathered(gdx_uct_ep_t *ep, uint8_t id, uint64_t header,
                                                        const void *payload, size_t length) {
    const gdx_uct_seg_t segs[2] = {{&header, sizeof(header)}, {payload, length}};
    return gdx_uct_ep_am_short_iov(ep, id, segs, 2);
}

extern "C" [[gnu::hot]] gdx_status_t gdx_uct_ep_am_short(gdx_uct_ep_t *ep, uint8_t id, uint64_t header,
                                                         const void *payload, size_t length) {
    if (ep->iface->in_place) [[likely]] return accepted_am(ep, ep->ep->am_short_hdr(id, header, payload, length));
    return am_short_gathered(ep, id, header, payload, length);
}

extern "C" gdx_status_t gdx_uct_ep_am_bcopy_pack(gdx_uct_ep_t *ep, uint8_t id, gdx_uct_pack_cb_t pack, void *arg,
                                                 size_t *len) {
    gdx_uct_iface *iface = ep->iface;
    if (iface->in_place) return accepted_am(ep, ep->ep->am_bcopy_pack(id, pack, arg, len));
    // The transport copies from a buffer: UCT's pack callback fills the interface's first. On back-pressure the
    // packing is wasted; UCP restores its send state and packs again later.
    size_t n = pack(iface->scratch.get(), arg);
    if (n > iface->itf->caps().max_am_bcopy)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "am_bcopy: the pack callback wrote %zu bytes (max_am_bcopy %zu)",
                        n, iface->itf->caps().max_am_bcopy);
    iface->touched(); // a transport that copies from a buffer may queue it for progress to send
    gdx_status_t st = accepted(ep, ep->ep->am_bcopy(id, iface->scratch.get(), n));
    if (st == GDX_OK) *len = n;
    return st;
}

extern "C" gdx_status_t gdx_uct_ep_am_zcopy(gdx_uct_ep_t *ep, uint8_t id, const void *header, size_t header_len,
                                            const void *payload, size_t len, gdx_uct_memh_t *memh, void *comp) {
    ep->iface->touched();
    const tp::MemHandle *h = memh != nullptr ? memh->handle() : nullptr;
    if (h != nullptr && !h->info().host_accessible && len > 0)
        return am_zcopy_from_device(ep, id, header, header_len, payload, len, h->info(), comp);
    return with_comp(ep, comp, [&](tp::Completion *c) {
        return ep->ep->am_zcopy(id, header, header_len, payload, len, h, c);
    });
}

extern "C" gdx_status_t gdx_uct_ep_put(gdx_uct_ep_t *ep, const void *buf, size_t len, gdx_uct_memh_t *memh,
                                       uint64_t remote_addr, gdx_uct_rkey_t *rkey, void *comp) {
    ep->iface->touched();
    if (ep->iface->ue != nullptr)
        return accepted(ep, ep->iface->ue->xfer(true, ep, const_cast<void *>(buf), len, memh, remote_addr, rkey, comp));
    const tp::RemoteKey *key = nullptr;
    gdx_status_t st = rkey->resolve(ep->iface->itf->md(), &key);
    if (st != GDX_OK) return st;
    const tp::MemHandle *h = memh != nullptr ? memh->handle() : nullptr;
    return with_comp(ep, comp, [&](tp::Completion *c) { return ep->ep->put(buf, len, h, remote_addr, *key, c); });
}

extern "C" gdx_status_t gdx_uct_ep_get(gdx_uct_ep_t *ep, void *buf, size_t len, gdx_uct_memh_t *memh,
                                       uint64_t remote_addr, gdx_uct_rkey_t *rkey, void *comp) {
    ep->iface->touched();
    if (ep->iface->ue != nullptr)
        return accepted(ep, ep->iface->ue->xfer(false, ep, buf, len, memh, remote_addr, rkey, comp));
    const tp::RemoteKey *key = nullptr;
    gdx_status_t st = rkey->resolve(ep->iface->itf->md(), &key);
    if (st != GDX_OK) return st;
    const tp::MemHandle *h = memh != nullptr ? memh->handle() : nullptr;
    return with_comp(ep, comp, [&](tp::Completion *c) { return ep->ep->get(buf, len, h, remote_addr, *key, c); });
}

gdx_status_t gdx_uct_ep_transport_flush(gdx_uct_ep *ep, void *uct_comp) {
    GdxUctComp *c = ep->iface->get_comp(uct_comp);
    if (c == nullptr) return GDX_ERR_NO_MEMORY;
    gdx_status_t st = ep->ep->flush(&c->c);
    if (st != GDX_INPROGRESS) ep->iface->put_comp(c);
    return st;
}

extern "C" gdx_status_t gdx_uct_ep_flush(gdx_uct_ep_t *ep, void *uct_comp) {
    ep->iface->touched();
    if (has_parked(ep)) return GDX_ERR_NO_RESOURCE;
    // Engine requests first (their completion is their bytes in place), then the transport's flush.
    if (ep->iface->ue != nullptr && ep->iface->ue->outstanding(ep)) return ep->iface->ue->flush(ep, uct_comp);
    if (uct_comp != nullptr) return gdx_uct_ep_transport_flush(ep, uct_comp);
    // UCT polls flush without a completion object. Keep one probe flush in flight; once a probe covering every
    // accepted operation has finished, the endpoint is flushed.
    if (ep->flushed_seq == ep->ops_seq) return GDX_OK;
    if (ep->probe != nullptr) return GDX_INPROGRESS;
    GdxUctComp *c = ep->iface->get_comp(nullptr);
    if (c == nullptr) return GDX_ERR_NO_MEMORY;
    c->probe_of = ep;
    c->probe_seq = ep->ops_seq;
    ep->probe = c;
    gdx_status_t st = ep->ep->flush(&c->c);
    if (st == GDX_INPROGRESS) return st;
    ep->probe = nullptr;
    if (st == GDX_OK) ep->flushed_seq = c->probe_seq;
    ep->iface->put_comp(c);
    return st;
}

extern "C" gdx_status_t gdx_uct_ep_fence(gdx_uct_ep_t *ep) {
    ep->iface->touched();
    if (ep->iface->ue != nullptr) {
        gdx_status_t st = ep->iface->ue->ep_fence(ep); // NO_RESOURCE while engine requests are outstanding
        if (st != GDX_OK) return st;
    }
    return ep->ep->fence();
}

extern "C" gdx_status_t gdx_uct_ep_pending_add(gdx_uct_ep_t *ep, void *req) {
    ep->iface->touched();
    // Behind an endpoint fence that waits for engine requests: held, in order, by the engine's ordering.
    if (ep->iface->ue != nullptr && ep->iface->ue->hold_pending(ep, req)) return GDX_OK;
    return gdx_uct_ep_transport_pending_add(ep, req);
}

gdx_status_t gdx_uct_ep_transport_pending_add(gdx_uct_ep *ep, void *req) {
    auto *node = new (std::nothrow) GdxUctPending;
    if (node == nullptr) return GDX_FAIL(GDX_ERR_NO_MEMORY, kComp, "pending_add: out of memory");
    node->p.func = pending_trampoline;
    node->req = req;
    node->ep = ep;
    node->seq = ++ep->parked_seq;
    pending_link(node); // before gdx can dispatch it
    gdx_status_t st = ep->ep->pending_add(&node->p);
    if (st != GDX_OK) { // GDX_ERR_BUSY (send now) or an error: not queued
        pending_unlink(node);
        delete node;
    }
    return st;
}

extern "C" void gdx_uct_ep_pending_purge(gdx_uct_ep_t *ep, void (*cb)(void *req, void *arg), void *arg) {
    ep->iface->touched();
    while (!ep->held_pending.empty()) { // held behind an endpoint fence (bridge_order.cpp)
        void *req = ep->held_pending.front();
        ep->held_pending.pop_front();
        if (cb != nullptr) cb(req, arg);
    }
    for (GdxUctPending *n = ep->pending; n != nullptr; n = n->next) {
        if (n->req == nullptr) continue;
        void *req = n->req;
        n->req = nullptr; // gdx still holds the node; it is dropped when dispatched or when the ep goes
        if (cb != nullptr) cb(req, arg);
    }
}
