// EngineCore: what the parts of the staging engine share (internal to src/fallback/). The initiator side
// (StagingPipeline), the target side (StagingTarget) and the credit flow (CreditWallet in PeerLink, CreditGrantor)
// reach pools, regions, peers, counters and the copy helpers through it.
#pragma once

#include "fallback/bounce_pool.h"
#include "fallback/credit_grantor.h"
#include "fallback/engine.h"
#include "fallback/fault_injector.h"
#include "fallback/peer_link.h"
#include "fallback/region.h"

#include <map>
#include <memory>
#include <unordered_map>

namespace gdx::fb {

inline constexpr const char *kComp = "fallback";

struct EngineCore {
    EngineCore(tp::Interface &i, const Params &p, mem::Detector &d) : iface(i), params(p), detector(d), fault(p.fault) {}

    tp::Interface &iface;
    Params params;
    mem::Detector &detector;
    FaultInjector fault;
    Stats stats;
    size_t small_max = 0; // largest staged message that takes the small path (0 = none)
    size_t small_max_notify = 0; // the same for a put with notification (its value takes 8 bytes of the message)
    bool in_progress = false; // inside iface.progress(): control messages are queued, sent after it returns

    std::map<uint16_t, std::unique_ptr<BouncePool>> pools;      // by pool id
    std::map<uint16_t, std::unique_ptr<CreditGrantor>> grantors; // by pool id, one per pool
    std::unordered_map<uint64_t, std::unique_ptr<Region>> regions; // by region id
    std::unordered_map<tp::Endpoint *, std::unique_ptr<PeerLink>> peers;

    // The pool for memory of this kind on this device, made on first use (GDX_STAGING_POOL slots of
    // GDX_FRAG_SIZE[kind], split between the initiator and the target partitions, capped by GDX_FAULT_POOL_LIMIT).
    gdx_status_t pool(mem::MemKind kind, int device, BouncePool **out);
    // The pool a peer names by id in WANT (0 = host, n = GPU n-1), made on first use; its grantor.
    gdx_status_t grantor(uint16_t pool_id, CreditGrantor **out);
    PeerLink &peer(tp::Endpoint &ep);
    Region *region(uint64_t id) const;

    // A staging copy (into or out of a bounce slot) with the ops row of `kind` (fault injection applies).
    // GDX_OK: done; GDX_INPROGRESS: poll copy_test(); errors are logged and counted. `peer_named`: one side is
    // user memory a peer's message named (the target side): host memory is then copied with mem::guarded_copy,
    // so memory unmapped after registration fails that request (GDX_ERR_INVALID_ADDR), not the process.
    gdx_status_t copy_async(void *dst, const void *src, size_t len, mem::MemKind kind, int device, mem::CopyDir dir,
                            mem::CopyHandle *h, bool peer_named = false);
    gdx_status_t copy_test(mem::CopyHandle *h);
    // Synchronous copy for the small-message path. `dir` says which side is the row's memory: between GPU memory
    // and pageable memory (a message being built, the transport's ring) it goes through a pinned scratch buffer of
    // the device, because the driver stages pageable copies itself, several microseconds slower per copy.
    // `peer_named`: host memory a peer's request named is copied with a guarded copy (a fault fails the request).
    gdx_status_t copy_sync(void *dst, const void *src, size_t len, mem::MemKind kind, int device, mem::CopyDir dir,
                           bool peer_named = false);
    ~EngineCore();

    gdx_status_t guarded_host_copy(void *dst, const void *src, size_t len);

    std::map<int, void *> small_scratch; // pinned, small_max bytes, by device (made on first use)

    // Logs a refused control message and counts it.
    void protocol_error(const char *what, const std::string &why);
};

} // namespace gdx::fb
