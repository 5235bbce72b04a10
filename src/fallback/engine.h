// gdx::fb::Engine — the per-fragment staging engine over one transport interface. Used by the C API (src/api/),
// which hands a multi-transport endpoint's lanes to fb::submit (lanes.h: the staging layer picks the lane, then
// calls put/get/put_notify here); gdx_perftest and gdx_info reach it only through gdx.h and gdx_ext.h.
//
// A request's range and rights are checked once, where it enters (put/get/put_notify: RegionTable::check_request);
// nothing downstream checks them again. The engine owns its services (Reporter, CopyService, PoolRegistry,
// RegionTable, PeerTable) and its two sides (StagingPipeline: our requests; StagingTarget: serving peers), hands
// each side the services its constructor names, routes control messages to them and drives them from progress()
// (README.md: "Services", "The path of a staged put").
//
// A put or get is cut into fragments (GDX_FRAG_SIZE of the memory kind); each fragment independently goes
//   direct:  the local registration (MemHandle::direct) and the peer's key both say the transport reaches the
//            range: one transport put/get, no copy;
//   staged:  through pinned bounce buffers: the local side copies into (put) or out of (get) its own slot, and/or
//            the remote side copies out of (put) or into (get) one of its slots, granted under credit flow control.
// Small staged messages (≤ GDX_STAGING_THRESH) take a single-copy path through an active message instead.
//
// Usage (one thread at a time, like the interface underneath):
//   std::unique_ptr<fb::Engine> eng;  fb::Engine::create(iface, cfg, &eng);
//   fb::Region *r;                     eng->mem_reg(buf, len, tp::kAccessAll, &r);
//   std::vector<uint8_t> key;          eng->pack_key(*r, &key);             // send `key` to the peer
//   std::unique_ptr<fb::RemoteRegion> rr;  eng->unpack_key(peer_key, &rr);
//   fb::Request req;                   eng->put(ep, *r, 0, *rr, 0, len, &req);
//   while (req.status == GDX_INPROGRESS) eng->progress();
//   req.path.describe();               // "staged[frag 4M depth 4 local+remote; local-unreachable+...] 100.0%"
//
// Completion semantics: a put request completes when every byte is in the destination buffer (staged fragments
// report back after the peer's copy-out; direct ones are flushed), a get when every byte is in the local buffer.
// On any error the request stops issuing fragments, waits for those in flight (so nothing writes into the
// buffers after it completes) and completes with the first error. The PEER MUST CALL progress() too: staged
// fragments are copied out, and slots granted, by the peer's engine.
#pragma once

#include "core/config.h"
#include "fallback/fault_injector.h"
#include "fallback/notify.h"
#include "fallback/path_report.h"
#include "fallback/region.h"
#include "transport/transport.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace gdx::mem {
class Detector;
}

namespace gdx::fb {

struct Params {
    uint64_t frag_host = 512 << 10; // GDX_FRAG_SIZE host
    uint64_t frag_cuda = 4 << 20;   // GDX_FRAG_SIZE cuda
    unsigned depth = 4;             // GDX_STAGING_DEPTH
    unsigned pool_slots = 32;       // GDX_STAGING_POOL
    uint64_t small_thresh = 8192;   // GDX_STAGING_THRESH
    FaultParams fault;              // GDX_FAULT_*
    uint8_t am_id = 31;             // active-message id of the control messages (one per interface user)
    int64_t silence_timeout_ns = INT64_MAX; // GDX_PEER_SILENCE_TIMEOUT: the staging silence clock (peer_liveness.cpp)
    std::string topo_file;          // GDX_TOPO_FILE: the topology pools are placed by ("" = this machine)

    // Reads the GDX_* values above; GDX_ERR_INVALID_CONFIG (logged) when one is out of range.
    static gdx_status_t from_config(const Config &cfg, Params *out);
    uint64_t frag_size(mem::MemKind kind) const { return kind == mem::MemKind::Host ? frag_host : frag_cuda; }
};

class Engine;
struct Op;

// One put or get. The caller owns it and keeps it (and the RemoteRegion it names) alive until it completes:
// status leaves GDX_INPROGRESS, then cb (if set) runs from progress().
struct Request {
    using Callback = void (*)(Request *req);
    Callback cb = nullptr;
    void *user = nullptr;
    gdx_status_t status = GDX_OK;
    PathReport path;
    // Why it failed, set with an error status ("" while in progress or on success): the operation, the stage
    // and the status, so an asynchronous failure is never without its reason (gdx_request_error).
    std::string error;

  private:
    friend class Engine;
    friend class StagingPipeline;
    Op *op_ = nullptr;
};

class StagingPipeline;
class StagingTarget;
class PeerLink;
class Reporter;
class CopyService;
class PoolRegistry;
class RegionTable;
class PeerTable;
struct CtrlMsg;

class Engine {
  public:
    // `iface` (and `detector`, when given) must outlive the engine. Registers the control-message handler
    // (params.am_id) on `iface`. Without a detector the engine makes its own from `cfg`.
    static gdx_status_t create(tp::Interface &iface, const Config &cfg, std::unique_ptr<Engine> *out,
                               mem::Detector *detector = nullptr);
    static gdx_status_t create(tp::Interface &iface, const Params &params, mem::Detector &detector,
                               std::unique_ptr<Engine> *out);
    ~Engine(); // requests still active are completed with GDX_ERR_CANCELED (after their copies finish)
    Engine(const Engine &) = delete;
    Engine &operator=(const Engine &) = delete;

    // Detects what [addr, addr+len) is (one memory kind and device) and registers it with the transport's memory
    // domain (per-chunk outcomes: which ranges are direct, and why not). GDX_ERR_UNREACHABLE when part of it is not
    // reachable and the transport cannot stage either. The region belongs to the engine until mem_dereg.
    // `gpu_tail_slack`: a caller that rounds GPU allocations up (UCX's memory-type cache, to 16 bytes) may pass up
    // to this many bytes past the end of one; they are left out of the region instead of refusing the range.
    gdx_status_t mem_reg(void *addr, size_t len, unsigned access, Region **out, size_t gpu_tail_slack = 0);
    // GDX_ERR_BUSY while a request or a peer's staged transfer uses the region.
    gdx_status_t mem_dereg(Region *region);

    gdx_status_t pack_key(const Region &region, std::vector<uint8_t> *out) const;
    gdx_status_t unpack_key(std::span<const uint8_t> packed, std::unique_ptr<RemoteRegion> *out) const;

    // GDX_INPROGRESS: accepted, `req` completes later (GDX_OK at once for len 0). Errors (nothing queued): bad
    // range or rights (GDX_ERR_INVALID_PARAM / GDX_ERR_ACCESS_DENIED), no staging possible (GDX_ERR_UNSUPPORTED).
    gdx_status_t put(tp::Endpoint &ep, Region &local, size_t local_off, const RemoteRegion &remote,
                     size_t remote_off, size_t len, Request *req);
    gdx_status_t get(tp::Endpoint &ep, Region &local, size_t local_off, const RemoteRegion &remote,
                     size_t remote_off, size_t len, Request *req);
    // A put whose `value` the peer's engine queues (notify_peek there) once every byte is in its buffer: with the
    // data on the small path (SMALL_PUT_NOTIFY, queued right after the copy, before DONE), else by NOTIFY once the
    // request completed successfully. Nothing is queued for a put that fails. Values reach the peer in the order
    // the puts were issued on `ep` (notify.h). The request completes as put()'s does. len 0: the value alone, in
    // order after the earlier ones.
    gdx_status_t put_notify(tp::Endpoint &ep, Region &local, size_t local_off, const RemoteRegion &remote,
                            size_t remote_off, size_t len, uint64_t value, Request *req);
    // The oldest notification that came from the peer behind `ep` and was not taken yet (false when none), and
    // taking it. Values stay queued, unbounded, until taken or until ep_close.
    bool notify_peek(tp::Endpoint &ep, Notification *out) const;
    void notify_pop(tp::Endpoint &ep);

    // Drives the transport, the copies and every request; returns how many events it processed.
    unsigned progress();
    // progress() would do nothing now: no copy-out, stage-out or request is active, no peer has anything pending
    // (PeerLink::quiet) or holds slots of our pools, and the transport is quiet (tp::Interface::quiet). Loads only:
    // callers spin on it (the UCX module's progress), also after large transfers used the peers.
    bool quiet();
    // quiet() without the transport's part: what the UCX module asks before it looks at the transport's idle
    // probe (tp::IdleProbe) instead of progressing it.
    bool quiet_but_transport();

    // Drops the engine's state for an endpoint about to be destroyed (slots it holds of our pools come back).
    // GDX_ERR_BUSY while requests or peer jobs on it are active.
    // Also tells the peer (BYE), so its staged requests waiting on us fail at once.
    gdx_status_t ep_close(tp::Endpoint &ep);
    // GDX_OK, or why staging declared the peer behind `ep` dead (silent for GDX_PEER_TIMEOUT, or it said BYE).
    gdx_status_t peer_state(tp::Endpoint &ep) const;

    Stats stats() const;
    const Params &params() const;
    tp::Interface &iface();
    // A transport with these capabilities can carry staged fragments: it reaches pinned host memory or shares its
    // bounce pools with its peers (kCapPeerMap), and carries active messages. The one answer for fb::submit's lane
    // choice, mem_reg's refusal and the UCX module's choice of an engine.
    static bool can_stage(const tp::Capabilities &caps);
    bool can_stage() const { return can_stage(iface_.caps()); }

  private:
    Engine(tp::Interface &iface, const Params &params, mem::Detector &detector);
    gdx_status_t submit(bool is_put, tp::Endpoint &ep, Region &local, size_t local_off, const RemoteRegion &remote,
                        size_t remote_off, size_t len, Request *req, const uint64_t *notify = nullptr);
    static void on_am(void *arg, tp::Endpoint *ep, const void *data, size_t length);
    [[gnu::noinline]] unsigned progress_busy();
    void dispatch(PeerLink &peer, const CtrlMsg &m);
    unsigned waits_on(const PeerLink &link) const;
    void reclaim_peer(PeerLink &link);
    tp::Interface &iface_;
    const Params params_;
    mem::Detector &detector_;
    std::unique_ptr<mem::Detector> own_detector_; // when create() made the detector from the configuration
    // The services (one header each; README "Services"): the engine owns them and hands each part the ones its
    // constructor names. Nothing else holds them all.
    std::unique_ptr<Reporter> report_;       // counters, refused control messages
    std::unique_ptr<CopyService> copies_;    // every staging copy, copy faults, small-path scratch
    std::unique_ptr<PoolRegistry> pools_;    // bounce pools and their grantors, by pool id
    std::unique_ptr<RegionTable> regions_;   // registrations by id; the initiator's and the target's range checks
    std::unique_ptr<PeerTable> peers_;       // a PeerLink per transport endpoint
    // The two sides of staging.
    std::unique_ptr<StagingPipeline> pipeline_; // initiator: our puts and gets, fragment by fragment
    std::unique_ptr<StagingTarget> target_;     // target: serving peers' staged requests
};

} // namespace gdx::fb
