#include "fallback/engine.h"

#include "core/error.h"
#include "fallback/config_vars.h"
#include "fallback/engine_core.h"
#include "fallback/staging_pipeline.h"
#include "fallback/staging_target.h"
#include "memtype/access_probe.h"
#include "memtype/memtype.h"
#include "topo/config_vars.h"
#include "transport/config_vars.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <sys/random.h>
#include <time.h>

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
    p.peer_timeout_ns = cfg.duration(tp::TransportVar::PEER_TIMEOUT).count(); // inf: INT64_MAX, the clock never fires
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

// ---- EngineCore ----------------------------------------------------------------------------------------------

gdx_status_t EngineCore::pool(mem::MemKind kind, int device, BouncePool **out) {
    uint16_t id = pool_id_for(kind, device);
    auto it = pools.find(id);
    if (it == pools.end()) {
        BouncePool::Layout layout;
        layout.slot_size = params.frag_size(kind);
        // Half the pool is lent to peers, a quarter serves their gets, a quarter our own operations (the
        // partitions are what keeps staging deadlock-free: bounce_pool.h).
        unsigned n = params.pool_slots;
        layout.target_slots = fault.cap_slots(std::max(1u, n / 2));
        layout.responder_slots = fault.cap_slots(std::max(1u, n / 4));
        layout.initiator_slots = fault.cap_slots(std::max(1u, n - n / 2 - n / 4));
        std::unique_ptr<BouncePool> p;
        layout.topo_file = params.topo_file;
        if (gdx_status_t st = BouncePool::create(iface.md(), kind, kind == mem::MemKind::Host ? -1 : std::max(device, 0),
                                                 id, layout, &p);
            st != GDX_OK)
            return st;
        it = pools.emplace(id, std::move(p)).first;
    }
    *out = it->second.get();
    return GDX_OK;
}

gdx_status_t EngineCore::grantor(uint16_t pool_id, CreditGrantor **out) {
    auto it = grantors.find(pool_id);
    if (it == grantors.end()) {
        BouncePool *p = nullptr;
        mem::MemKind kind = pool_id == 0 ? mem::MemKind::Host : mem::MemKind::Cuda;
        if (kind == mem::MemKind::Cuda && !mem::ops(kind).available())
            return GDX_FAIL(GDX_ERR_NO_DEVICE, kComp, "a peer asked for slots of GPU %d's pool, but no GPU is usable here",
                            pool_id - 1);
        if (gdx_status_t st = pool(kind, pool_id - 1, &p); st != GDX_OK) return st;
        it = grantors.emplace(pool_id, std::make_unique<CreditGrantor>(*p)).first;
    }
    *out = it->second.get();
    return GDX_OK;
}

PeerLink &EngineCore::peer(tp::Endpoint &ep) {
    auto it = peers.find(&ep);
    if (it == peers.end()) it = peers.emplace(&ep, std::make_unique<PeerLink>(ep, params.am_id, in_progress)).first;
    return *it->second;
}

Region *EngineCore::region(uint64_t id) const {
    auto it = regions.find(id);
    return it == regions.end() ? nullptr : it->second.get();
}

gdx_status_t EngineCore::copy_async(void *dst, const void *src, size_t len, mem::MemKind kind, int device,
                                    mem::CopyDir dir, mem::CopyHandle *h, bool peer_named) {
    if (fault.fail_copy()) {
        ++stats.copy_failures;
        return fail(GDX_ERR_IO, log::Level::Debug, kComp,
                    "staging copy of %zu bytes failed: injected by GDX_FAULT_COPY_EVERY", len);
    }
    if (peer_named && kind == mem::MemKind::Host) return guarded_host_copy(dst, src, len);
    gdx_status_t st = mem::ops(kind).copy_async(dst, src, len, device, dir, h);
    if (st != GDX_OK && st != GDX_INPROGRESS) ++stats.copy_failures; // the row logged what failed
    return st;
}

gdx_status_t EngineCore::guarded_host_copy(void *dst, const void *src, size_t len) {
    if (int e = mem::guarded_copy(dst, src, len); e != 0) {
        ++stats.copy_failures;
        return fail_errno(GDX_ERR_INVALID_ADDR, e, kComp,
                          "target copy of %zu bytes: registered memory is no longer accessible (unmapped or protected "
                          "after registration)", len);
    }
    return GDX_OK;
}

gdx_status_t EngineCore::copy_test(mem::CopyHandle *h) {
    gdx_status_t st = mem::ops(h->kind).copy_test(h);
    if (st != GDX_OK && st != GDX_INPROGRESS) ++stats.copy_failures;
    return st;
}

gdx_status_t EngineCore::copy_sync(void *dst, const void *src, size_t len, mem::MemKind kind, int device,
                                   mem::CopyDir dir, bool peer_named) {
    if (fault.fail_copy()) {
        ++stats.copy_failures;
        return fail(GDX_ERR_IO, log::Level::Debug, kComp,
                    "small-message copy of %zu bytes failed: injected by GDX_FAULT_COPY_EVERY", len);
    }
    if (peer_named && kind == mem::MemKind::Host) return guarded_host_copy(dst, src, len);
    const mem::Ops &row = mem::ops(kind);
    void *scratch = nullptr;
    if (kind != mem::MemKind::Host && dir != mem::CopyDir::Unknown && len <= small_max) {
        auto [it, fresh] = small_scratch.try_emplace(device, nullptr);
        if (fresh && row.host_alloc(std::max<size_t>(small_max, 1), device, &it->second) != GDX_OK)
            it->second = nullptr; // said by host_alloc; the copies below then go straight (slower, still right)
        scratch = it->second;
    }
    gdx_status_t st;
    if (scratch == nullptr) {
        st = row.copy(dst, src, len, device);
    } else if (dir == mem::CopyDir::ToHost) {
        st = row.copy_pinned(scratch, src, len, device, dir);
        if (st == GDX_OK) std::memcpy(dst, scratch, len);
    } else {
        std::memcpy(scratch, src, len);
        st = row.copy_pinned(dst, scratch, len, device, dir);
    }
    if (st != GDX_OK) ++stats.copy_failures;
    return st;
}

EngineCore::~EngineCore() {
    for (auto &[device, p] : small_scratch)
        if (p != nullptr) mem::ops(mem::MemKind::Cuda).host_free(p);
}

void EngineCore::protocol_error(const char *what, const std::string &why) {
    ++stats.protocol_errors;
    GDX_WARN(kComp, "refused %s from a peer: %s", what, why.c_str());
}

// ---- Engine --------------------------------------------------------------------------------------------------

namespace {

int64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts); // cannot fail with a valid clock id and pointer
    return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

} // namespace

namespace {
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
    std::unique_ptr<Engine> e(new Engine);
    e->core_ = std::make_unique<EngineCore>(iface, params, detector);
    EngineCore &c = *e->core_;
    if ((caps.flags & tp::kCapAmBcopy) != 0 && caps.max_am_bcopy > kSmallPutOverhead)
        c.small_max = std::min<uint64_t>(params.small_thresh, caps.max_am_bcopy - kSmallPutOverhead);
    if ((caps.flags & tp::kCapAmBcopy) != 0 && caps.max_am_bcopy > kSmallPutNotifyOverhead)
        c.small_max_notify = std::min<uint64_t>(params.small_thresh, caps.max_am_bcopy - kSmallPutNotifyOverhead);
    if ((caps.flags & tp::kCapAmBcopy) == 0)
        GDX_INFO(kComp, "the %.*s transport has no am_bcopy: only direct fragments can move over it",
                 static_cast<int>(iface.transport_name().size()), iface.transport_name().data());
    e->pipeline_ = std::make_unique<StagingPipeline>(c);
    e->target_ = std::make_unique<StagingTarget>(c);
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
    if (core_ == nullptr) return;
    EngineCore &c = *core_;
    if (pipeline_->active() != 0)
        GDX_WARN(kComp, "engine destroyed with %zu requests active: they complete with GDX_ERR_CANCELED",
                 pipeline_->active());
    pipeline_->cancel_all();
    // Copies and transport operations in flight still point into our buffers: let them finish (bounded).
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while ((pipeline_->active() != 0 || target_->active() != 0) && std::chrono::steady_clock::now() < deadline)
        progress();
    c.iface.set_am_handler(c.params.am_id, ignore_am, nullptr);
    if (pipeline_->active() != 0 || target_->active() != 0) {
        // Freeing now could let a late completion write into freed memory: keep everything (a bounded leak).
        GDX_ERROR(kComp, "engine teardown: %zu requests and %zu peer jobs did not finish in 5 s; leaking their state",
                  pipeline_->active(), target_->active());
        (void)pipeline_.release();
        (void)target_.release();
        (void)core_.release();
        return;
    }
    pipeline_.reset();
    target_.reset();
    c.grantors.clear();
    c.regions.clear(); // deregisters before the pools and the interface go
    c.pools.clear();
}

gdx_status_t Engine::mem_reg(void *addr, size_t len, unsigned access, Region **out) {
    EngineCore &c = *core_;
    if (addr == nullptr || len == 0 || out == nullptr)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "mem_reg(%p, %zu): null address, zero length or null output",
                        addr, len);
    if ((access & ~static_cast<unsigned>(tp::kAccessAll)) != 0 || access == 0)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "mem_reg(%p, %zu): bad access flags %#x", addr, len, access);
    std::vector<mem::MemSegment> segs;
    if (gdx_status_t st = c.detector.detect(addr, len, &segs); st != GDX_OK)
        return GDX_FAIL(st, kComp, "mem_reg(%p, %zu): memory detection failed", addr, len);
    const mem::MemInfo &info = segs.front().info;
    for (const mem::MemSegment &s : segs)
        if (s.info.kind != info.kind || s.info.device != info.device)
            return GDX_FAIL(GDX_ERR_UNSUPPORTED, kComp,
                            "mem_reg(%p, %zu): the range spans %s memory of device %d and %s memory of device %d; "
                            "register each allocation separately",
                            addr, len, mem::kind_name(info.kind), info.device, mem::kind_name(s.info.kind),
                            s.info.device);
    std::unique_ptr<tp::MemHandle> memh;
    if (gdx_status_t st = c.iface.md().mem_reg(addr, len, info, access, &memh); st == GDX_ERR_INVALID_ADDR)
        return st; // the access probe's message names the cause (transport/reg_check.h): keep it
    else if (st != GDX_OK)
        return GDX_FAIL(st, kComp, "mem_reg(%p, %zu): the %.*s memory domain refused %s", addr, len,
                        static_cast<int>(c.iface.md().name().size()), c.iface.md().name().data(),
                        mem::type_name(info.type));
    uint64_t id = 0;
    while (id == 0 || c.regions.count(id) != 0) {
        // Unguessable: a peer names regions by id in control messages, and a forged one must not hit.
        if (getrandom(&id, sizeof(id), 0) != static_cast<ssize_t>(sizeof(id)))
            return fail_errno(GDX_ERR_IO, errno, kComp, "mem_reg: getrandom for the region id");
    }
    auto region = std::make_unique<Region>(addr, len, info, access, id, std::move(memh));
    const bool may_stage = !region->fully_direct() || c.fault.params().denies_direct();
    if (may_stage && (c.iface.caps().direct_types & tp::type_bit(mem::MemType::HostPinned)) == 0) {
        // The pool itself is made on first use (pinned memory is not spent on transports that never stage), but a
        // transport that cannot reach pinned host memory can never stage: say so here, not mid-transfer.
        return GDX_FAIL(GDX_ERR_UNREACHABLE, kComp,
                        "mem_reg(%p, %zu): the %.*s transport cannot stage %s memory it does not reach directly (it "
                        "does not reach pinned host memory)%s",
                        addr, len, static_cast<int>(c.iface.transport_name().size()), c.iface.transport_name().data(),
                        mem::type_name(info.type),
                        region->fully_direct() ? " and GDX_FAULT_P2P_* denies fragments the direct path" : "");
    }
    if (log::enabled(log::Level::Debug)) {
        for (const tp::ChunkReg &ch : region->memh().chunks())
            GDX_DEBUG(kComp, "region %#llx %s [%zu, +%zu): %s%s%s", static_cast<unsigned long long>(id),
                      mem::type_name(info.type), ch.offset, ch.length, tp::reach_name(ch.reach),
                      ch.reason.empty() ? "" : " — ", ch.reason.c_str());
    }
    *out = region.get();
    c.regions.emplace(id, std::move(region));
    return GDX_OK;
}

gdx_status_t Engine::mem_dereg(Region *region) {
    EngineCore &c = *core_;
    if (region == nullptr || c.region(region->id()) != region)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "mem_dereg: not a region of this engine");
    if (region->busy != 0)
        return fail(GDX_ERR_BUSY, log::Level::Debug, kComp, "mem_dereg: region %#llx is used by %u requests or peer transfers",
                        static_cast<unsigned long long>(region->id()), region->busy);
    c.regions.erase(region->id());
    return GDX_OK;
}

gdx_status_t Engine::pack_key(const Region &region, std::vector<uint8_t> *out) const {
    if (out == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "pack_key: null output");
    return pack_region_key(region, core_->params.frag_size(region.info().kind), core_->iface.md().rkey_packed_size(),
                           out);
}

gdx_status_t Engine::unpack_key(std::span<const uint8_t> packed, std::unique_ptr<RemoteRegion> *out) const {
    return RemoteRegion::unpack(packed, core_->iface.md(), out);
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
    auto it = core_->peers.find(&ep);
    if (it == core_->peers.end() || it->second->inbox.empty()) return false;
    *out = it->second->inbox.front();
    return true;
}

void Engine::notify_pop(tp::Endpoint &ep) {
    auto it = core_->peers.find(&ep);
    if (it != core_->peers.end() && !it->second->inbox.empty()) it->second->inbox.pop();
}

gdx_status_t Engine::submit(bool is_put, tp::Endpoint &ep, Region &local, size_t local_off,
                            const RemoteRegion &remote, size_t remote_off, size_t len, Request *req,
                            const uint64_t *notify) {
    EngineCore &c = *core_;
    const char *op = is_put ? "put" : "get";
    if (req == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "%s: null request", op);
    if (req->op_ != nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "%s: the request is still active", op);
    if (c.region(local.id()) != &local)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "%s: the local region is not registered with this engine", op);
    if (local_off > local.length() || len > local.length() - local_off)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "%s: local [%zu, +%zu) is outside the region of %zu bytes", op,
                        local_off, len, local.length());
    if (remote_off > remote.length() || len > remote.length() - remote_off)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "%s: remote [%zu, +%zu) is outside the region of %llu bytes",
                        op, remote_off, len, static_cast<unsigned long long>(remote.length()));
    unsigned lneed = is_put ? tp::kAccessLocalRead : tp::kAccessLocalWrite;
    unsigned rneed = is_put ? tp::kAccessRemoteWrite : tp::kAccessRemoteRead;
    if ((local.access() & lneed) == 0 || (remote.access() & rneed) == 0)
        return GDX_FAIL(GDX_ERR_ACCESS_DENIED, kComp, "%s: the %s region was not registered for %s", op,
                        (local.access() & lneed) == 0 ? "local" : "remote",
                        (local.access() & lneed) == 0 ? (is_put ? "local read" : "local write")
                                                      : (is_put ? "remote write" : "remote read"));
    if (len == 0 && notify == nullptr) { // nothing to move; with a notification the value still goes, in order
        req->status = GDX_OK;
        req->path = PathReport{};
        return GDX_OK;
    }
    return pipeline_->submit(is_put, c.peer(ep), local, local_off, remote, remote_off, len, req, notify);
}

void Engine::on_am(void *arg, tp::Endpoint *ep, const void *data, size_t length) {
    auto *e = static_cast<Engine *>(arg);
    EngineCore &c = *e->core_;
    CtrlMsg m;
    std::string why;
    gdx_status_t st = ep == nullptr ? GDX_ERR_PROTOCOL : decode_ctrl({static_cast<const uint8_t *>(data), length}, &m, &why);
    if (st == GDX_ERR_UNSUPPORTED) {
        // Another version of the control protocol: nothing it sends can be read, nothing we send will be. Give the
        // peer up now, with that reason, rather than refuse message after message or wait for a timeout.
        c.peer(*ep).declare_dead(GDX_ERR_UNSUPPORTED, why);
        return;
    }
    if (st != GDX_OK) {
        c.protocol_error("a control message", ep == nullptr ? "no endpoint" : why);
        return;
    }
    PeerLink &peer = c.peer(*ep);
    peer.heard(); // any word from the peer's engine resets the silence clock (peer_liveness.cpp)
    if (peer.dead()) {
        // Given up: what it asks is not served and what it answers is too late (its requests here failed).
        // A peer that resumes after we declared it dead learns it from BYE, instead of waiting for answers.
        if (m.type != CtrlType::Bye) peer.say_bye(GDX_ERR_TIMEOUT);
        return;
    }
    switch (m.type) {
    case CtrlType::Want: e->target_->on_want(peer, m); break;
    case CtrlType::Return: e->target_->on_return(peer, m); break;
    case CtrlType::Filled: e->target_->on_filled(peer, m); break;
    case CtrlType::GetReq: e->target_->on_get_req(peer, m); break;
    case CtrlType::SmallPut:
    case CtrlType::SmallPutNotify: e->target_->on_small_put(peer, m); break;
    case CtrlType::Notify: peer.inbox.push(m.value, c.stats); break; // the put completed at the peer: bytes here
    case CtrlType::SmallGetReq: e->target_->on_small_get_req(peer, m); break;
    case CtrlType::Grant:
        if (peer.wallet(m.pool).on_grant(m, c.iface.md(), &why) != GDX_OK) c.protocol_error("GRANT", why);
        break;
    case CtrlType::Recall: peer.wallet(m.pool).on_recall(peer, m.pool); break;
    case CtrlType::Done: e->pipeline_->on_done(peer, m); break;
    case CtrlType::GetDone: e->pipeline_->on_get_done(peer, m); break;
    case CtrlType::SmallGetData: e->pipeline_->on_small_get_data(peer, m); break;
    case CtrlType::Ping: {
        CtrlMsg pong;
        pong.type = CtrlType::Pong;
        pong.token = m.token;
        peer.send(pong, false); // queued (we are inside the transport's progress); errors show in broken()
        break;
    }
    case CtrlType::Pong: break; // heard() above is all it is for
    case CtrlType::Bye:
        peer.declare_dead(GDX_ERR_CONNECTION_RESET, m.status == GDX_ERR_TIMEOUT
                                                        ? "it declared this process dead (silent for its GDX_PEER_TIMEOUT)"
                                                        : "it destroyed its endpoint");
        break;
    }
}

unsigned Engine::progress() {
    EngineCore &c = *core_;
    c.in_progress = true; // our handlers run in here: their answers are queued and go out below
    unsigned n = c.iface.progress();
    c.in_progress = false;
    n += target_->progress();
    const int64_t now = now_ns();
    for (auto &[ep, link] : c.peers) {
        link->watch(waits_on(*link), now, c.params.peer_timeout_ns);
        if (!link->reclaimed && link->broken()) reclaim_peer(*link);
        link->retry_bye();
    }
    n += pipeline_->progress();
    for (auto &[ep, link] : c.peers) {
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
    for (const auto &[id, g] : core_->grantors)
        if (g->owes(link)) {
            w |= PeerLink::kWaitLentSlots;
            break;
        }
    return w;
}

// The peer behind `link` broke (declared dead here, said BYE, or its transport failed): it is owed nothing more.
// Stage-outs for it stop before their next step (StagingTarget::step), our requests on it fail in the pipeline,
// and the grantors stop granting to it and waiting on it; the slots it holds come back when its endpoint is
// destroyed (CreditGrantor::reclaim says why not now), which no longer waits on it. Logged once, with the cause,
// where staging itself gave the peer up (a transport logs its own failures).
void Engine::reclaim_peer(PeerLink &link) {
    EngineCore &c = *core_;
    link.reclaimed = true;
    unsigned slots = 0;
    for (auto &[id, g] : c.grantors) slots += g->reclaim(link);
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
    EngineCore &c = *core_;
    auto it = c.peers.find(&ep);
    if (it == c.peers.end()) {
        // The peer may have posted staged work we never heard of (no progress yet).
        send_bye(ep, c.params.am_id, GDX_ERR_CONNECTION_RESET);
        return GDX_OK;
    }
    PeerLink &link = *it->second;
    if (link.users != 0 || pipeline_->uses_peer(link) || target_->uses_peer(link))
        return fail(GDX_ERR_BUSY, log::Level::Debug, kComp, "ep_close: %u requests or peer transfers still use the endpoint",
                        link.users);
    // Tell the peer, so its requests waiting on us (a staged put whose data we will never copy out, a credit we
    // will never grant) fail now rather than at GDX_PEER_TIMEOUT. Best effort: the silence clock is the backstop.
    if (!link.broken()) {
        link.flush(); // what was queued goes first: the peer must not read BYE before an answer it waits for
        link.say_bye(GDX_ERR_CONNECTION_RESET);
    }
    for (auto &[id, g] : c.grantors) g->forget(link);
    c.peers.erase(it);
    return GDX_OK;
}

gdx_status_t Engine::peer_state(tp::Endpoint &ep) const {
    auto it = core_->peers.find(&ep);
    return it == core_->peers.end() ? GDX_OK : it->second->failure();
}

Stats Engine::stats() const {
    Stats s = core_->stats;
    for (const auto &[id, p] : core_->pools) {
        s.slots_total += p->nslots();
        for (SlotRole r : {SlotRole::Initiator, SlotRole::Responder})
            s.slots_in_use += p->slots(r) - p->free_count(r);
        s.slots_lent += p->slots(SlotRole::Target) - p->free_count(SlotRole::Target);
    }
    s.requests_active = pipeline_->active();
    for (const auto &[ep, link] : core_->peers) s.notify_waiting += link->inbox.size();
    return s;
}

const Params &Engine::params() const { return core_->params; }
tp::Interface &Engine::iface() { return core_->iface; }

} // namespace gdx::fb
