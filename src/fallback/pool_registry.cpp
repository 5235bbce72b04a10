#include "fallback/pool_registry.h"

#include "core/error.h"
#include "fallback/engine.h"
#include "fallback/reporter.h"

#include <algorithm>

namespace gdx::fb {

PoolRegistry::~PoolRegistry() {
    grantors_.clear();
    pools_.clear();
}

gdx_status_t PoolRegistry::pool(mem::MemKind kind, int device, BouncePool **out) {
    uint16_t id = pool_id_for(kind, device);
    auto it = pools_.find(id);
    if (it == pools_.end()) {
        BouncePool::Layout layout;
        layout.slot_size = params_.frag_size(kind);
        // Half the pool is lent to peers, a quarter serves their gets, a quarter our own operations (the
        // partitions are what keeps staging deadlock-free: bounce_pool.h).
        unsigned n = params_.pool_slots;
        layout.target_slots = params_.fault.cap_slots(std::max(1u, n / 2));
        layout.responder_slots = params_.fault.cap_slots(std::max(1u, n / 4));
        layout.initiator_slots = params_.fault.cap_slots(std::max(1u, n - n / 2 - n / 4));
        layout.topo_file = params_.topo_file; // NUMA placement reads the same topology as everything else
        std::unique_ptr<BouncePool> p;
        if (gdx_status_t st = BouncePool::create(md_, kind, kind == mem::MemKind::Host ? -1 : std::max(device, 0), id,
                                                 layout, &p);
            st != GDX_OK)
            return st;
        it = pools_.emplace(id, std::move(p)).first;
    }
    *out = it->second.get();
    return GDX_OK;
}

gdx_status_t PoolRegistry::grantor(uint16_t pool_id, CreditGrantor **out) {
    auto it = grantors_.find(pool_id);
    if (it == grantors_.end()) {
        BouncePool *p = nullptr;
        mem::MemKind kind = pool_id == 0 ? mem::MemKind::Host : mem::MemKind::Cuda;
        if (kind == mem::MemKind::Cuda && !mem::ops(kind).available())
            return GDX_FAIL(GDX_ERR_NO_DEVICE, kComp, "a peer asked for slots of GPU %d's pool, but no GPU is usable here",
                            pool_id - 1);
        if (gdx_status_t st = pool(kind, pool_id - 1, &p); st != GDX_OK) return st;
        it = grantors_.emplace(pool_id, std::make_unique<CreditGrantor>(*p)).first;
    }
    *out = it->second.get();
    return GDX_OK;
}

CreditGrantor *PoolRegistry::find_grantor(uint16_t pool_id) const {
    auto it = grantors_.find(pool_id);
    return it == grantors_.end() ? nullptr : it->second.get();
}

bool PoolRegistry::owed_by(const PeerLink &p) const {
    for (const auto &[id, g] : grantors_)
        if (g->owes(p)) return true;
    return false;
}

unsigned PoolRegistry::reclaim(PeerLink &p) {
    unsigned slots = 0;
    for (auto &[id, g] : grantors_) slots += g->reclaim(p);
    return slots;
}

void PoolRegistry::forget(PeerLink &p) {
    for (auto &[id, g] : grantors_) g->forget(p);
}

void PoolRegistry::add_gauges(Stats *s) const {
    for (const auto &[id, p] : pools_) {
        s->slots_total += p->nslots();
        for (SlotRole r : {SlotRole::Initiator, SlotRole::Responder})
            s->slots_in_use += p->slots(r) - p->free_count(r);
        s->slots_lent += p->slots(SlotRole::Target) - p->free_count(SlotRole::Target);
    }
}

} // namespace gdx::fb
