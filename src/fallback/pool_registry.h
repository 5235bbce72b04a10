// PoolRegistry: the engine's bounce pools, one per memory kind and device (pool_id_for: 0 = host, n = GPU n-1),
// and the CreditGrantor of each pool a peer asked for, which lends the pool's target slots to peers. Both are made
// on first use: a pool when a fragment of ours stages (or a peer's WANT names it), so transports that never stage
// spend no pinned memory. Owned by the Engine; the initiator side takes slots from it (StagingPipeline), the target
// side grants and stages out through it (StagingTarget), and the engine asks it across every grantor about one
// peer (is a wait on it running, it died, its endpoint goes).
#pragma once

#include "fallback/bounce_pool.h"
#include "fallback/credit_grantor.h"

#include <map>
#include <memory>

namespace gdx::fb {

struct Params;
struct Stats;

class PoolRegistry {
  public:
    // `md` registers every pool (one rkey per pool); `params` sizes them (GDX_STAGING_POOL, GDX_FRAG_SIZE,
    // GDX_FAULT_POOL_LIMIT). Both must outlive the registry.
    PoolRegistry(tp::MemoryDomain &md, const Params &params) : md_(md), params_(params) {}
    ~PoolRegistry(); // grantors before the pools they lend

    // The pool for memory of this kind on this device, made on first use (GDX_STAGING_POOL slots of
    // GDX_FRAG_SIZE[kind], split between the initiator, responder and target partitions, capped by
    // GDX_FAULT_POOL_LIMIT).
    gdx_status_t pool(mem::MemKind kind, int device, BouncePool **out);
    // The grantor of the pool a peer names by id in WANT, made (with its pool) on first use. GDX_ERR_NO_DEVICE when
    // the id names a GPU and no GPU is usable here.
    gdx_status_t grantor(uint16_t pool_id, CreditGrantor **out);
    // The grantor of that pool if a peer asked for it before (RETURN, FILLED refer to an existing one), else nullptr.
    CreditGrantor *find_grantor(uint16_t pool_id) const;

    // Across every grantor, for one peer (CreditGrantor has each one's meaning):
    bool owed_by(const PeerLink &p) const; // owes: the target waits on p for slots it lent
    unsigned reclaim(PeerLink &p);          // p was declared dead: slots quarantined until forget
    void forget(PeerLink &p);               // p's endpoint goes: every slot it holds comes back

    // Adds the pools' gauges (slots_total, slots_in_use, slots_lent) to *s.
    void add_gauges(Stats *s) const;
    // Engine teardown: the grantors go first (they refer to peers and pools), the pools after the regions
    // (Engine::~Engine keeps that order).
    void drop_grantors() { grantors_.clear(); }
    void drop_pools() { pools_.clear(); }

  private:
    tp::MemoryDomain &md_;
    const Params &params_;
    std::map<uint16_t, std::unique_ptr<BouncePool>> pools_;       // by pool id
    std::map<uint16_t, std::unique_ptr<CreditGrantor>> grantors_; // by pool id, one per pool
};

} // namespace gdx::fb
