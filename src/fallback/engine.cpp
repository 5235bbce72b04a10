#include "fallback/engine.h"

#include "core/clock.h"
#include "core/error.h"
#include "fallback/config_vars.h"
#include "fallback/copy_service.h"
#include "fallback/peer_table.h"
#include "fallback/pool_registry.h"
#include "fallback/region_table.h"
#include "fallback/reporter.h"
#include "fallback/staging_pipeline.h"
#include "fallback/staging_target.h"
#include "memtype/memtype.h"
#include "topo/config_vars.h"
#include "transport/config_vars.h"

#include <algorithm>
#include <chrono>

namespace gdx::fb {

// ---- Params --------------------------------------------------------------------------------------------------

gdx_status_t Params::from_config(const Config &cfg, Params *out) {
    Params p;
    const PerKindSize &frag = cfg.per_kind(StagingVar::FRAG_SIZE);
    p.frag_host = frag.get("host", p.frag_host);
    p.frag_cuda = frag.get("cuda", p.frag_cuda);
    p.depth = static_cast<unsigned>(std::min<uint64_t>(cfg.uint(StagingVar::STAGING_DEPTH), 1u << 20));
    p.pool_slots = static_cast<unsigned>(std::min<uint64_t>(cfg.uint(StagingVar::STAGING_POOL), 1u << 20));
    p.small_thresh = cfg.size(StagingVar::STAGING_THRESH);
    p.silence_timeout_ns = cfg.duration(tp::TransportVar::PEER_SILENCE_TIMEOUT).count(); // inf: INT64_MAX, never fires
    p.topo_file = cfg.str(topo::TopoVar::TOPO_FILE);
    p.fault.p2p_every = cfg.uint(StagingVar::FAULT_P2P_EVERY);
    p.fault.p2p_percent = cfg.uint(StagingVar::FAULT_P2P_PERCENT);
    p.fault.copy_every = cfg.uint(StagingVar::FAULT_COPY_EVERY);
    p.fault.pool_limit = cfg.uint(StagingVar::FAULT_POOL_LIMIT);
    p.fault.seed = cfg.uint(StagingVar::FAULT_SEED);
    auto bad = [](const char *var, const std::string &value, const char *accepted) {
        return GDX_FAIL(GDX_ERR_INVALID_CONFIG, kComp, "%s=%s is out of range: %s", var, value.c_str(), accepted);
    };
    for (uint64_t f : {p.frag_host, p.frag_cuda})
        if (f < 4096 || f > (uint64_t(1) << 30))
            return bad("GDX_FRAG_SIZE", cfg.text(StagingVar::FRAG_SIZE), "each size must be in [4K, 1G]");
    if (p.depth == 0 || p.depth > 1024)
        return bad("GDX_STAGING_DEPTH", cfg.text(StagingVar::STAGING_DEPTH), "1 to 1024");
    if (p.pool_slots < 3 || p.pool_slots > kMaxPoolSlots)
        return bad("GDX_STAGING_POOL", cfg.text(StagingVar::STAGING_POOL), "3 to 4096 (a slot per partition at least)");
    if (p.fault.p2p_percent > 100)
        return bad("GDX_FAULT_P2P_PERCENT", cfg.text(StagingVar::FAULT_P2P_PERCENT), "0 to 100");
    *out = p;
    return GDX_OK;
}

// ---- Engine --------------------------------------------------------------------------------------------------

namespace {

using clock::now_ns;

void ignore_am(void *, tp::Endpoint *, const void *, size_t) {}

} // namespace

gdx_status_t Engine::create(tp::Interface &iface, const Config &cfg, std::unique_ptr<Engine> *out,
                            mem::Detector *detector) {
    Params p;
    if (gdx_status_t st = Params::from_config(cfg, &p); st != GDX_OK) return st;
    std::unique_ptr<mem::Detector> own;
    if (detector == nullptr) {
        if (gdx_status_t st = mem::Detector::create(cfg, &own); st != GDX_OK) return st;
        detector = own.get();
    }
    if (gdx_status_t st = create(iface, p, *detector, out); st != GDX_OK) return st;
    (*out)->own_detector_ = std::move(own);
    return GDX_OK;
}

Engine::Engine(tp::Interface &iface, const Params &params, mem::Detector &detector)
    : iface_(iface), params_(params), detector_(detector) {
    // The services, then the two sides that use them; each constructor names what it uses (README: "Services").
    const tp::Capabilities &caps = iface.caps();
    const SmallLimits small = SmallLimits::of(caps, params_);
    report_ = std::make_unique<Reporter>();
    copies_ = std::make_unique<CopyService>(params_.fault, small.put, *report_);
    pools_ = std::make_unique<PoolRegistry>(iface.md(), params_);
    regions_ = std::make_unique<RegionTable>();
    peers_ = std::make_unique<PeerTable>(params_.am_id);
    pipeline_ = std::make_unique<StagingPipeline>(caps, params_, small, *pools_, *copies_, *report_);
    target_ = std::make_unique<StagingTarget>(caps, iface.md(), params_, *regions_, *pools_, *copies_, *report_);
}

gdx_status_t Engine::create(tp::Interface &iface, const Params &params, mem::Detector &detector,
                            std::unique_ptr<Engine> *out) {
    if (out == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "engine create: null output");
    if (params.am_id >= tp::kMaxAmId)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "engine create: active-message id %u >= %u", params.am_id,
                        tp::kMaxAmId);
    const tp::Capabilities &caps = iface.caps();
    if ((caps.flags & tp::kCapPut) == 0)
        return GDX_FAIL(GDX_ERR_UNSUPPORTED, kComp, "the %.*s transport has no put: the staging engine needs it",
                        static_cast<int>(iface.transport_name().size()), iface.transport_name().data());
    std::unique_ptr<Engine> e(new Engine(iface, params, detector));
    if ((caps.flags & tp::kCapAmBcopy) == 0)
        GDX_INFO(kComp, "the %.*s transport has no am_bcopy: only direct fragments can move over it",
                 static_cast<int>(iface.transport_name().size()), iface.transport_name().data());
    if (gdx_status_t st = iface.set_am_handler(params.am_id, on_am, e.get()); st != GDX_OK)
        return GDX_FAIL(st, kComp, "engine create: registering active-message handler %u failed", params.am_id);
    if (params.fault.any())
        GDX_INFO(kComp, "fault injection on: p2p every %llu / %llu%% (seed %llu), copy every %llu, pool limit %llu",
                 static_cast<unsigned long long>(params.fault.p2p_every),
                 static_cast<unsigned long long>(params.fault.p2p_percent),
                 static_cast<unsigned long long>(params.fault.seed),
                 static_cast<unsigned long long>(params.fault.copy_every),
                 static_cast<unsigned long long>(params.fault.pool_limit));
    *out = std::move(e);
    return GDX_OK;
}

Engine::~Engine() {
    if (pipeline_->active() != 0)
        GDX_WARN(kComp, "engine destroyed with %zu requests active: they complete with GDX_ERR_CANCELED",
                 pipeline_->active());
    pipeline_->cancel_all();
    // Copies and transport operations in flight still point into our buffers: let them finish (bounded).
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while ((pipeline_->active() != 0 || target_->active() != 0) && std::chrono::steady_clock::now() < deadline)
        progress();
    iface_.set_am_handler(params_.am_id, ignore_am, nullptr);
    if (pipeline_->active() != 0 || target_->active() != 0) {
        // Freeing now could let a late completion write into freed memory: keep everything (a bounded leak).
        GDX_ERROR(kComp, "engine teardown: %zu requests and %zu peer jobs did not finish in 5 s; leaking their state",
                  pipeline_->active(), target_->active());
        (void)target_.release();
        (void)pipeline_.release();
        (void)peers_.release();
        (void)regions_.release();
        (void)pools_.release();
        (void)copies_.release();
        (void)report_.release();
        return;
    }
    pipeline_.reset();
    target_.reset();
    pools_->drop_grantors();
    regions_->clear(); // deregisters before the pools and the interface go
    pools_->drop_pools();
}

gdx_status_t Engine::mem_reg(void *addr, size_t len, unsigned access, Region **out, size_t gpu_tail_slack) {
    if (addr == nullptr || len == 0 || out == nullptr)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "mem_reg(%p, %zu): null address, zero length or null output",
                        addr, len);
    if ((access & ~static_cast<unsigned>(tp::kAccessAll)) != 0 || access == 0)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "mem_reg(%p, %zu): bad access flags %#x", addr, len, access);
    std::vector<mem::MemSegment> segs;
    if (gdx_status_t st = detector_.detect(addr, len, &segs); st != GDX_OK)
        return GDX_FAIL(st, kComp, "mem_reg(%p, %zu): memory detection failed", addr, len);
    if (segs.size() >= 2 && segs.back().info.kind == mem::MemKind::Host &&
        segs[segs.size() - 2].info.kind != mem::MemKind::Host && segs.back().length <= gpu_tail_slack) {
        GDX_LOG_ONCE(log::Level::Debug, kComp, "reg-gpu-tail",
                     "mem_reg(%p, %zu): the last %zu bytes lie past the end of a GPU allocation (a caller's rounding); "
                     "registering the allocation's part only", addr, len, static_cast<size_t>(segs.back().length));
        len -= segs.back().length;
        segs.pop_back();
    }
    const mem::MemInfo &info = segs.front().info;
    for (const mem::MemSegment &s : segs)
        if (s.info.kind != info.kind || s.info.device != info.device)
            return GDX_FAIL(GDX_ERR_UNSUPPORTED, kComp,
                            "mem_reg(%p, %zu): the range spans %s memory of device %d (%s) and, from %#zx, %s memory "
                            "of device %d (%s); register each allocation separately",
                            addr, len, mem::kind_name(info.kind), info.device, mem::describe(info).c_str(),
                            static_cast<size_t>(s.addr), mem::kind_name(s.info.kind), s.info.device,
                            mem::describe(s.info).c_str());
    std::unique_ptr<tp::MemHandle> memh;
    if (gdx_status_t st = iface_.md().mem_reg(addr, len, info, access, &memh); st == GDX_ERR_INVALID_ADDR)
        return st; // the access probe's message names the cause (transport/reg_check.h): keep it
    else if (st != GDX_OK)
        return GDX_FAIL(st, kComp, "mem_reg(%p, %zu): the %.*s memory domain refused %s", addr, len,
                        static_cast<int>(iface_.md().name().size()), iface_.md().name().data(),
                        mem::type_name(info.type));
    uint64_t id = 0;
    if (gdx_status_t st = regions_->new_id(&id); st != GDX_OK) return st;
    auto region = std::make_unique<Region>(addr, len, info, access, id, std::move(memh));
    const bool may_stage = !region->fully_direct() || params_.fault.denies_direct();
    if (may_stage && !can_stage()) {
        // The pool itself is made on first use (pinned memory is not spent on transports that never stage), but a
        // transport that cannot stage (can_stage) never will: say so here, not mid-transfer.
        return GDX_FAIL(GDX_ERR_UNREACHABLE, kComp,
                        "mem_reg(%p, %zu): the %.*s transport cannot stage %s memory it does not reach directly (it "
                        "does not reach pinned host memory and shares no pools with its peers, or carries no active "
                        "messages)%s",
                        addr, len, static_cast<int>(iface_.transport_name().size()), iface_.transport_name().data(),
                        mem::type_name(info.type),
                        region->fully_direct() ? " and GDX_FAULT_P2P_* denies fragments the direct path" : "");
    }
    if (log::enabled(log::Level::Debug)) {
        for (const tp::ChunkReg &ch : region->memh().chunks())
            GDX_DEBUG(kComp, "region %#llx %s [%zu, +%zu): %s%s%s", static_cast<unsigned long long>(id),
                      mem::type_name(info.type), ch.offset, ch.length, tp::reach_name(ch.reach),
                      ch.reason.empty() ? "" : " — ", ch.reason.c_str());
    }
    *out = &regions_->insert(std::move(region));
    return GDX_OK;
}

gdx_status_t Engine::mem_dereg(Region *region) {
    if (region == nullptr || regions_->find(region->id()) != region)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "mem_dereg: not a region of this engine");
    if (region->busy != 0)
        return fail(GDX_ERR_BUSY, log::Level::Debug, kComp, "mem_dereg: region %#llx is used by %u requests or peer transfers",
                        static_cast<unsigned long long>(region->id()), region->busy);
    regions_->erase(*region);
    return GDX_OK;
}

gdx_status_t Engine::pack_key(const Region &region, std::vector<uint8_t> *out) const {
    if (out == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "pack_key: null output");
    return pack_region_key(region, params_.frag_size(region.info().kind), iface_.md().rkey_packed_size(), out);
}

gdx_status_t Engine::unpack_key(std::span<const uint8_t> packed, std::unique_ptr<RemoteRegion> *out) const {
    return RemoteRegion::unpack(packed, iface_.md(), out);
}

gdx_status_t Engine::put(tp::Endpoint &ep, Region &local, size_t local_off, const RemoteRegion &remote,
                         size_t remote_off, size_t len, Request *req) {
    return submit(true, ep, local, local_off, remote, remote_off, len, req);
}

gdx_status_t Engine::get(tp::Endpoint &ep, Region &local, size_t local_off, const RemoteRegion &remote,
                         size_t remote_off, size_t len, Request *req) {
    return submit(false, ep, local, local_off, remote, remote_off, len, req);
}

gdx_status_t Engine::put_notify(tp::Endpoint &ep, Region &local, size_t local_off, const RemoteRegion &remote,
                                size_t remote_off, size_t len, uint64_t value, Request *req) {
    return submit(true, ep, local, local_off, remote, remote_off, len, req, &value);
}

bool Engine::notify_peek(tp::Endpoint &ep, Notification *out) const {
    const PeerLink *link = peers_->find(ep);
    if (link == nullptr || link->inbox.empty()) return false;
    *out = link->inbox.front();
    return true;
}

void Engine::notify_pop(tp::Endpoint &ep) {
    PeerLink *link = peers_->find(ep);
    if (link != nullptr && !link->inbox.empty()) link->inbox.pop();
}

// Where a put or get enters the staging layer, and the one place its range and rights are checked
// (RegionTable::check_request); nothing after this checks them again for the request (README: "One range check
// per request").
gdx_status_t Engine::submit(bool is_put, tp::Endpoint &ep, Region &local, size_t local_off,
                            const RemoteRegion &remote, size_t remote_off, size_t len, Request *req,
                            const uint64_t *notify) {
    const char *op = is_put ? "put" : "get";
    if (req == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "%s: null request", op);
    if (req->op_ != nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "%s: the request is still active", op);
    if (gdx_status_t st = regions_->check_request(is_put, local, local_off, remote, remote_off, len); st != GDX_OK)
        return st;
    if (len == 0 && notify == nullptr) { // nothing to move; with a notification the value still goes, in order
        req->status = GDX_OK;
        req->path = PathReport{};
        return GDX_OK;
    }
    return pipeline_->submit(is_put, peers_->get(ep), local, local_off, remote, remote_off, len, req, notify);
}

void Engine::on_am(void *arg, tp::Endpoint *ep, const void *data, size_t length) {
    auto *e = static_cast<Engine *>(arg);
    CtrlMsg m;
    std::string why;
    gdx_status_t st = ep == nullptr ? GDX_ERR_PROTOCOL : decode_ctrl({static_cast<const uint8_t *>(data), length}, &m, &why);
    if (st == GDX_ERR_UNSUPPORTED) {
        // Another version of the control protocol: nothing it sends can be read, nothing we send will be. Give the
        // peer up now, with that reason, rather than refuse message after message or wait for a timeout.
        e->peers_->get(*ep).declare_dead(GDX_ERR_UNSUPPORTED, why);
        return;
    }
    if (st != GDX_OK) {
        e->report_->protocol_error("a control message", ep == nullptr ? "no endpoint" : why);
        return;
    }
    PeerLink &peer = e->peers_->get(*ep);
    peer.heard(); // any word from the peer's engine resets the silence clock (peer_liveness.cpp)
    if (peer.dead()) {
        // Given up: what it asks is not served and what it answers is too late (its requests here failed).
        // A peer that resumes after we declared it dead learns it from BYE, instead of waiting for answers.
        if (m.type != CtrlType::Bye) peer.say_bye(GDX_ERR_TIMEOUT);
        return;
    }
    e->dispatch(peer, m);
}

// A control message from a live peer, to the side it is for: requests to the target side, answers to the
// initiator side (the pipeline), credits and notifications to the peer's link, liveness here.
void Engine::dispatch(PeerLink &peer, const CtrlMsg &m) {
    std::string why;
    switch (m.type) {
    case CtrlType::Want: target_->on_want(peer, m); break;
    case CtrlType::Return: target_->on_return(peer, m); break;
    case CtrlType::Filled: target_->on_filled(peer, m); break;
    case CtrlType::GetReq: target_->on_get_req(peer, m); break;
    case CtrlType::SmallPut:
    case CtrlType::SmallPutNotify: target_->on_small_put(peer, m); break;
    case CtrlType::Notify: peer.inbox.push(m.value, report_->stats()); break; // the put completed at the peer
    case CtrlType::SmallGetReq: target_->on_small_get_req(peer, m); break;
    case CtrlType::Grant:
        if (peer.wallet(m.pool).on_grant(m, iface_.md(), &why) != GDX_OK) report_->protocol_error("GRANT", why);
        break;
    case CtrlType::Recall: peer.wallet(m.pool).on_recall(peer, m.pool); break;
    case CtrlType::Done: pipeline_->on_done(peer, m); break;
    case CtrlType::GetDone: pipeline_->on_get_done(peer, m); break;
    case CtrlType::SmallGetData: pipeline_->on_small_get_data(peer, m); break;
    case CtrlType::Ping: {
        CtrlMsg pong;
        pong.type = CtrlType::Pong;
        pong.token = m.token;
        peer.send(pong, false); // queued (we are inside the transport's progress); errors show in broken()
        break;
    }
    case CtrlType::Pong: break; // heard() in on_am is all it is for
    case CtrlType::Bye:
        peer.declare_dead(GDX_ERR_CONNECTION_RESET, m.status == GDX_ERR_TIMEOUT
                                                        ? "it declared this process dead (silent for its GDX_PEER_SILENCE_TIMEOUT)"
                                                        : "it destroyed its endpoint");
        break;
    }
}

// The engine's own part of quiet(): no copy-out, stage-out or request active, no peer with anything pending.
bool Engine::quiet_but_transport() {
    if (!target_->idle() || !pipeline_->idle()) return false;
    // With no request or job active a peer is waited on only for slots it holds of our pools (waits_on); the
    // silence clock, BYE retries, credit returns and queued messages are PeerLink::quiet's.
    for (auto &[ep, link] : *peers_)
        if (!link->quiet() || pools_->owed_by(*link)) return false;
    return true;
}

bool Engine::quiet() {
    return quiet_but_transport() && iface_.quiet(); // last: shm counts the calls it answers (its control-socket look)
}

unsigned Engine::progress() {
    // Callers spin on this (UCP's worker progress through the UCX module, gdx_progress): every instruction of an
    // idle call is latency, since a message that lands mid-call waits for the call to end. The transport is driven
    // first and asks itself, per endpoint and inline, whether it has anything to do (shm: a few loads per
    // endpoint); asking it through quiet() before that made a call that delivers a message walk every endpoint's
    // state twice (callgrind, UCX 1.22 tag_lat: bench/results/cpu-2026-11-26e/).
    peers_->defer_sends(true); // our handlers run in here: their answers are queued and go out below
    unsigned n = iface_.progress();
    peers_->defer_sends(false);
    return quiet_but_transport() ? n : n + progress_busy();
}

// progress() past the transport, when the engine has work of its own (out of line: the idle call stays small).
unsigned Engine::progress_busy() {
    unsigned n = 0;
    if (!target_->idle()) n += target_->progress(); // asked inline: a call that only delivered a message calls nothing
    // Until a peer is used (the UCX module's small messages never are: they bypass the engine) there is no silence
    // clock to run: no clock read, which costs as much as the rest of an idle progress (bench/results/uct-small-*).
    if (!peers_->empty()) {
        const int64_t now = now_ns();
        for (auto &[ep, link] : *peers_) {
            link->watch(waits_on(*link), now, params_.silence_timeout_ns);
            if (!link->reclaimed && link->broken()) reclaim_peer(*link);
            link->retry_bye();
        }
    }
    if (!pipeline_->idle()) n += pipeline_->progress();
    for (auto &[ep, link] : *peers_) {
        if (!link->broken() && !pipeline_->uses_peer(*link)) link->return_unfilled_credits();
        n += link->flush();
    }
    return n;
}

// What this process waits for from the peer behind `link` now (PeerLink::Wait): the one silence clock runs on
// both sides of staging.
unsigned Engine::waits_on(const PeerLink &link) const {
    unsigned w = 0;
    if (pipeline_->uses_peer(link)) w |= PeerLink::kWaitRequests;
    if (target_->uses_peer(link)) w |= PeerLink::kWaitPeerJobs;
    if (pools_->owed_by(link)) w |= PeerLink::kWaitLentSlots;
    return w;
}

// The peer behind `link` broke (declared dead here, said BYE, or its transport failed): it is owed nothing more.
// Stage-outs for it stop before their next step (StagingTarget::step), our requests on it fail in the pipeline,
// and the grantors stop granting to it and waiting on it; the slots it holds come back when its endpoint is
// destroyed (CreditGrantor::reclaim says why not now), which no longer waits on it. Logged once, with the cause,
// where staging itself gave the peer up (a transport logs its own failures).
void Engine::reclaim_peer(PeerLink &link) {
    link.reclaimed = true;
    const unsigned slots = pools_->reclaim(link);
    if (!link.dead()) {
        GDX_DEBUG(kComp, "the endpoint to a peer failed (%s): the %u slots of our pools it holds come back when the "
                  "endpoint is destroyed", gdx_status_string(link.failure()), slots);
        return;
    }
    const gdx_status_t st = link.failure();
    // One line per peer, at the level it deserves: a peer that said goodbye is news, a silent or incompatible
    // one an error.
    fail(st, st == GDX_ERR_CONNECTION_RESET ? log::Level::Info : log::Level::Error, "staging",
         "peer declared dead for staging: %s; its outstanding staged work fails with %s; the %u slots of our "
         "bounce pools it holds come back when the endpoint to it is destroyed",
         link.dead_why().c_str(), gdx_status_string(st), slots);
    // Tell it, in case it resumes: it then fails its requests at once instead of waiting for answers.
    if (st == GDX_ERR_TIMEOUT) link.say_bye(GDX_ERR_TIMEOUT);
}

gdx_status_t Engine::ep_close(tp::Endpoint &ep) {
    PeerLink *found = peers_->find(ep);
    if (found == nullptr) {
        // The peer may have posted staged work we never heard of (no progress yet).
        send_bye(ep, params_.am_id, GDX_ERR_CONNECTION_RESET);
        return GDX_OK;
    }
    PeerLink &link = *found;
    if (link.users != 0 || pipeline_->uses_peer(link) || target_->uses_peer(link))
        return fail(GDX_ERR_BUSY, log::Level::Debug, kComp, "ep_close: %u requests or peer transfers still use the endpoint",
                        link.users);
    // Tell the peer, so its requests waiting on us (a staged put whose data we will never copy out, a credit we
    // will never grant) fail now rather than at GDX_PEER_TIMEOUT. Best effort: the silence clock is the backstop.
    if (!link.broken()) {
        link.flush(); // what was queued goes first: the peer must not read BYE before an answer it waits for
        link.say_bye(GDX_ERR_CONNECTION_RESET);
    }
    pools_->forget(link);
    peers_->erase(ep);
    return GDX_OK;
}

gdx_status_t Engine::peer_state(tp::Endpoint &ep) const {
    const PeerLink *link = peers_->find(ep);
    return link == nullptr ? GDX_OK : link->failure();
}

Stats Engine::stats() const {
    Stats s = report_->stats();
    pools_->add_gauges(&s);
    s.requests_active = pipeline_->active();
    for (const auto &[ep, link] : *peers_) s.notify_waiting += link->inbox.size();
    return s;
}

bool Engine::can_stage(const tp::Capabilities &caps) {
    // Staged fragments cross through pinned bounce buffers: ones the transport reaches like any registration, or,
    // with kCapPeerMap (cuda_ipc), pools in shared segments the peer maps, which the transport never has to reach.
    const bool pools = (caps.direct_types & tp::type_bit(mem::MemType::HostPinned)) != 0 ||
                       (caps.flags & tp::kCapPeerMap) != 0;
    return pools && (caps.flags & tp::kCapAmBcopy) != 0;
}

const Params &Engine::params() const { return params_; }
tp::Interface &Engine::iface() { return iface_; }

} // namespace gdx::fb
