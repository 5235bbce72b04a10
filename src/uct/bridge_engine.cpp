// The staging engine of one gdx MD (bridge_engine.h): registration, keys, put/get zcopy as engine requests, and
// progress, which hands finished requests to UCT after the engine's own progress returned (a UCT completion may
// issue the next operation, which must not re-enter the engine from inside its progress).
#include "uct/bridge_engine.h"

#include "core/error.h"
#include "core/log.h"
#include "uct/config_vars.h"

#include <algorithm>
#include <cstdio>
#include <new>

using namespace gdx;

namespace gdx::uct {

namespace {

constexpr size_t kReqChunk = 64;

} // namespace

gdx_status_t UctEngine::create(gdx_uct_md &md, std::unique_ptr<UctEngine> *out) {
    out->reset();
    const std::string tl = std::string("gdx_") + gdx_uct_tl_name(md.tl);
    if (!md.cfg.boolean(UctVar::UCT_ENGINE)) {
        GDX_LOG_ONCE(log::Level::Info, kComp, "uct-engine-off:" + tl,
                     "%s: GDX_UCT_ENGINE=no: put/get zcopy pass straight to the transport, and GPU memory is "
                     "registered only where it reaches it (UCP stages the rest through gdx_copy)", tl.c_str());
        return GDX_OK;
    }
    const tp::Capabilities &caps = md.anchor->caps();
    if (!fb::Engine::can_stage(caps)) {
        GDX_DEBUG(kComp, "%s: no staging engine in the UCX module (the transport cannot stage): put/get zcopy pass "
                  "straight to the transport", tl.c_str());
        return GDX_OK;
    }
    fb::Params p;
    if (gdx_status_t st = fb::Params::from_config(md.cfg, &p); st != GDX_OK) return st;
    p.am_id = kEngineAmId;
    std::unique_ptr<UctEngine> ue(new (std::nothrow) UctEngine);
    if (!ue) return GDX_FAIL(GDX_ERR_NO_MEMORY, kComp, "%s: out of memory for the staging engine", tl.c_str());
    ue->tl_ = tl;
    ue->key_size_ = engine_key_size(md.md->rkey_packed_size());
    if (gdx_status_t st = fb::Engine::create(*md.anchor, p, *md.detector, &ue->eng_); st != GDX_OK)
        return GDX_FAIL(st, kComp, "%s: the staging engine could not start", tl.c_str());
    stats_register(ue.get(), md.cfg.boolean(UctVar::UCT_STATS));
    *out = std::move(ue);
    return GDX_OK;
}

UctEngine::~UctEngine() {
    if (!eng_) return;
    stats_unregister(this);
    // Requests still active are cancelled by the engine (their UCT completions are not delivered: UCP is closing
    // the memory domain); the engine waits, bounded, for copies and transport operations still in flight.
    eng_.reset();
    graveyard_.clear();
    while (orphans_ != nullptr) {
        GdxUctPending *n = orphans_;
        orphans_ = n->next;
        delete n;
    }
    if (!done_.empty() || !cancelled_.empty())
        GDX_DEBUG(kComp, "%s: %zu UCT completions dropped at memory-domain close", tl_.c_str(),
                  done_.size() + cancelled_.size());
}

// ---- registration and keys -----------------------------------------------------------------------------------

gdx_status_t UctEngine::mem_reg(void *addr, size_t len, unsigned access, fb::Region **out,
                                size_t gpu_tail_slack) {
    gdx_status_t st = eng_->mem_reg(addr, len, access, out, gpu_tail_slack);
    if (st != GDX_OK) return st;
    for (const tp::ChunkReg &c : (*out)->memh().chunks()) {
        if (c.reach == tp::Reach::None)
            GDX_LOG_ONCE(log::Level::Info, kComp, "uct-staged-reg:" + tl_,
                         "%s does not reach part of %s memory at %p+%zu directly (%s): the engine stages it",
                         tl_.c_str(), mem::type_name((*out)->info().type), addr, len, c.reason.c_str());
    }
    return GDX_OK;
}

void UctEngine::mem_dereg(fb::Region *region) {
    gdx_status_t st = eng_->mem_dereg(region);
    if (st == GDX_ERR_BUSY) {
        // A transfer (ours, or a peer's staged one) still uses it: UCT's handle goes now, the registration once
        // the engine lets go (progress retries).
        hand_over_later(deregs_, region);
    } else if (st != GDX_OK) {
        GDX_ERROR(kComp, "%s: mem_dereg failed: %s (%s)", tl_.c_str(), gdx_status_string(st), last_error().c_str());
    }
}

void UctEngine::retry_deregs() {
    std::erase_if(deregs_, [this](fb::Region *r) { return eng_->mem_dereg(r) != GDX_ERR_BUSY; });
}

gdx_status_t UctEngine::pack_key(const fb::Region &region, std::span<uint8_t> out) {
    std::vector<uint8_t> key;
    if (gdx_status_t st = eng_->pack_key(region, &key); st != GDX_OK) return st;
    bool degraded = false;
    if (gdx_status_t st = compact_key(key, out, &degraded); st != GDX_OK) return st;
    if (degraded)
        GDX_LOG_ONCE(log::Level::Info, kComp, "uct-key-degraded:" + tl_,
                     "%s: a registration of %zu bytes has more chunks than UCP's 255-byte key holds: peers stage "
                     "their side of it", tl_.c_str(), region.length());
    return GDX_OK;
}

// ---- requests ------------------------------------------------------------------------------------------------

GdxUctReq *UctEngine::get_req() {
    if (free_ == nullptr) {
        std::unique_ptr<GdxUctReq[]> chunk(new (std::nothrow) GdxUctReq[kReqChunk]);
        if (!chunk) {
            GDX_FAIL(GDX_ERR_NO_MEMORY, kComp, "%s: out of memory for %zu request objects", tl_.c_str(), kReqChunk);
            return nullptr;
        }
        for (size_t i = 0; i < kReqChunk; ++i) put_req(&chunk[i]);
        chunks_.push_back(std::move(chunk));
    }
    GdxUctReq *q = free_;
    free_ = q->next;
    q->next = q->prev = nullptr;
    return q;
}

void UctEngine::put_req(GdxUctReq *q) {
    q->r.status = GDX_OK;
    q->r.error.clear();
    q->ep = nullptr;
    q->submitted = false;
    q->early = GDX_OK;
    q->prev = nullptr;
    q->next = free_;
    free_ = q;
}

void UctEngine::on_done(fb::Request *r) {
    auto *q = static_cast<GdxUctReq *>(r->user);
    q->owner->hand_over_later(q->owner->done_, q);
}

gdx_status_t UctEngine::xfer(bool is_put, gdx_uct_ep *ep, void *buf, size_t len, gdx_uct_memh *memh,
                             uint64_t remote_addr, gdx_uct_rkey *rkey, void *uct_comp) {
    const char *op = is_put ? "put_zcopy" : "get_zcopy";
    if (memh == nullptr || memh->region == nullptr)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "%s: %s of %zu bytes at %p without a memory handle of this "
                        "memory domain (the engine needs the registration)", tl_.c_str(), op, len, buf);
    fb::Region &local = *memh->region;
    const uintptr_t b = reinterpret_cast<uintptr_t>(buf), base = reinterpret_cast<uintptr_t>(local.ptr());
    if (b < base || b - base > local.length() || len > local.length() - (b - base))
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "%s: %s buffer %p+%zu lies outside its registration %p+%zu",
                        tl_.c_str(), op, buf, len, static_cast<void *>(local.ptr()), local.length());
    const fb::RemoteRegion *remote = nullptr;
    if (gdx_status_t st = rkey->resolve(*eng_, &remote); st != GDX_OK) return st;
    if (remote_addr < remote->base() || remote_addr - remote->base() > remote->length() ||
        len > remote->length() - (remote_addr - remote->base()))
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "%s: %s of %zu bytes at remote %#llx lies outside the remote "
                        "registration %#llx+%llu", tl_.c_str(), op, len, static_cast<unsigned long long>(remote_addr),
                        static_cast<unsigned long long>(remote->base()),
                        static_cast<unsigned long long>(remote->length()));
    if (len == 0) return GDX_OK;
    GdxUctReq *q = get_req();
    if (q == nullptr) return GDX_ERR_NO_MEMORY;
    q->r.cb = on_done;
    q->r.user = q;
    q->r.path = fb::PathReport{};
    q->uct_comp = uct_comp;
    q->owner = this;
    q->ep = ep;
    q->tep = ep->ep.get();
    q->peer_tag = ep->peer_tag;
    q->seq = ++ep->eng_seq;
    q->is_put = is_put;
    q->local = &local;
    q->loff = b - base;
    q->remote = remote;
    q->roff = remote_addr - remote->base();
    q->len = len;
    if (ordered_after_fence(ep)) {
        hold(ep, q); // an interface fence: it goes to the engine once the earlier requests completed
        return GDX_INPROGRESS;
    }
    gdx_status_t st = submit(q);
    if (st != GDX_INPROGRESS) put_req(q);
    return st;
}

gdx_status_t UctEngine::submit(GdxUctReq *q) {
    gdx_status_t st = q->is_put ? eng_->put(*q->tep, *q->local, q->loff, *q->remote, q->roff, q->len, &q->r)
                                : eng_->get(*q->tep, *q->local, q->loff, *q->remote, q->roff, q->len, &q->r);
    if (st != GDX_INPROGRESS) return st; // an error (logged by the engine: bad range or rights), or nothing to do
    q->submitted = true;
    gdx_uct_ep *ep = q->ep;
    q->next = nullptr;
    q->prev = ep->eng_tail;
    if (ep->eng_tail != nullptr) ep->eng_tail->next = q;
    else ep->eng_head = q;
    ep->eng_tail = q;
    return st;
}

// ---- progress ------------------------------------------------------------------------------------------------

unsigned UctEngine::hand_over() {
    // The three lists borrow the vectors of the last call (their capacity), so a progress with work allocates
    // nothing in the steady state; they are given back at the end (a nested call would only find them empty).
    Completions comps;
    std::vector<GdxUctReq *> done;
    std::vector<gdx_uct_ep *> touched;
    comps.swap(scratch_comps_);
    done.swap(scratch_done_);
    touched.swap(scratch_touched_);
    done.swap(done_); // done_ keeps the spare capacity for on_done
    for (GdxUctReq *q : done) {
        if (q->ep != nullptr) touched.push_back(q->ep);
        finish(q, &comps);
    }
    for (GdxUctReq *q : cancelled_) {
        comps.emplace_back(q->uct_comp, GDX_ERR_CANCELED);
        put_req(q);
    }
    cancelled_.clear();
    for (gdx_uct_ep *ep : waiting_eps_) touched.push_back(ep);
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    // State first (no callback into UCP), then parked UCT requests (callbacks), then the completions: a callback
    // may destroy an endpoint, so each one is looked up again before it is touched.
    waiting_eps_.clear();
    for (gdx_uct_ep *ep : touched) release_ep(ep, &comps);
    for (gdx_uct_ep *ep : touched)
        if (live_eps_.count(ep) != 0) release_pending(ep);
    retry_deregs();
    reap_graveyard();
    for (const auto &[comp, st] : comps)
        if (comp != nullptr) gdx_uct_glue_complete(comp, st);
    const unsigned finished = static_cast<unsigned>(done.size());
    comps.clear();
    done.clear();
    touched.clear();
    scratch_comps_.swap(comps);
    scratch_done_.swap(done);
    scratch_touched_.swap(touched);
    // Callbacks above may have pushed again (each push sets the flag): clear it only when all five are empty.
    hand_over_.store(!done_.empty() || !cancelled_.empty() || !waiting_eps_.empty() || !deregs_.empty() ||
                         !graveyard_.empty(),
                     std::memory_order_relaxed);
    return finished;
}

void UctEngine::finish(GdxUctReq *q, Completions *comps) {
    gdx_uct_ep *ep = q->ep;
    if (ep != nullptr && q->submitted) {
        if (q->prev != nullptr) q->prev->next = q->next;
        else ep->eng_head = q->next;
        if (q->next != nullptr) q->next->prev = q->prev;
        else ep->eng_tail = q->prev;
    }
    gdx_status_t st = q->early != GDX_OK ? q->early : q->r.status;
    if (st == GDX_OK) {
        report_path(*q);
    } else {
        // UCP passes the status on without a word: say why here, once per peer and status (a dead peer fails
        // every request it had), the rest at debug.
        char key[96];
        std::snprintf(key, sizeof(key), "uct-failed:%s:%08x:%d", tl_.c_str(), q->peer_tag, static_cast<int>(st));
        GDX_LOG_ONCE(log::Level::Warn, kComp, key, "%s to peer %08x: a %s of %zu bytes failed (%s): %s", tl_.c_str(),
                     q->peer_tag, q->is_put ? "put" : "get", q->len, gdx_status_string(st),
                     q->r.error.empty() ? "refused when it was issued" : q->r.error.c_str());
        GDX_DEBUG(kComp, "%s: %s of %zu bytes failed: %s", tl_.c_str(), q->is_put ? "put" : "get", q->len,
                  q->r.error.empty() ? gdx_status_string(st) : q->r.error.c_str());
    }
    comps->emplace_back(q->uct_comp, st);
    put_req(q);
}

bool UctEngine::busy() const {
    if (has_hand_over()) return true;
    fb::Stats s = eng_->stats();
    return s.requests_active != 0 || s.slots_in_use != 0;
}

// ---- endpoints -----------------------------------------------------------------------------------------------

void UctEngine::ep_used(gdx_uct_ep *ep) { live_eps_.insert(ep); }

bool UctEngine::ep_destroyed(gdx_uct_ep *ep) {
    live_eps_.erase(ep);
    std::erase(waiting_eps_, ep);
    for (GdxUctReq *q = ep->eng_head; q != nullptr; q = q->next) q->ep = nullptr; // they still complete
    ep->eng_head = ep->eng_tail = nullptr;
    while (ep->held_head != nullptr) { // never reached the engine: their UCT completions say cancelled
        GdxUctReq *q = ep->held_head;
        ep->held_head = q->next;
        q->ep = nullptr;
        hand_over_later(cancelled_, q);
    }
    ep->held_tail = nullptr;
    for (const gdx_uct_ep::FlushWait &w : ep->flush_waits) {
        GdxUctReq *q = get_req();
        if (q == nullptr) continue; // logged; the flush's requester is gone with the endpoint anyway
        q->uct_comp = w.uct_comp;
        hand_over_later(cancelled_, q);
    }
    ep->flush_waits.clear();
    ep->held_pending.clear(); // UCP purged them before destroying the endpoint
    bool kept = false;
    for (std::unique_ptr<tp::Endpoint> *tep : {&ep->ep, &ep->mirror}) {
        if (!*tep) continue;
        // Tells the peer (BYE), so its staged requests waiting on us fail now rather than at its timeout.
        gdx_status_t st = eng_->ep_close(**tep);
        if (st == GDX_ERR_BUSY) {
            hand_over_later(graveyard_, std::move(*tep));
            kept = true;
        }
    }
    return kept;
}

void UctEngine::reap_graveyard() {
    std::erase_if(graveyard_, [this](const std::unique_ptr<tp::Endpoint> &tep) {
        return eng_->ep_close(*tep) != GDX_ERR_BUSY;
    });
}

void UctEngine::add_orphan(GdxUctPending *node) {
    node->ep = nullptr;
    node->req = nullptr;
    node->orphans = &orphans_;
    node->prev = nullptr;
    node->next = orphans_;
    if (orphans_ != nullptr) orphans_->prev = node;
    orphans_ = node;
}

} // namespace gdx::uct
