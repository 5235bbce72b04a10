// Fault injection for the staging engine (GDX_FAULT_*, all off by default): a testing aid that makes the rare
// paths ordinary. Forcing fragments off the direct path exercises mixed direct/staged messages on machines where
// everything is reachable; failing copies proves a request fails cleanly (an error status, never wrong bytes);
// capping the pool proves exhaustion only slows things down (back-pressure), never deadlocks.
//
// Each kind of fault has one owner, the part that makes the decision it perturbs: DirectFaults the pipeline (its
// per-fragment direct/staged decision), CopyFaults the copy service, FaultParams::cap_slots the pool registry. Their
// counters are independent, so "every Nth" counts what it names and nothing else.
#pragma once

#include <cstdint>
#include <random>

namespace gdx::fb {

struct FaultParams {
    uint64_t p2p_every = 0;   // GDX_FAULT_P2P_EVERY: every Nth fragment is denied the direct path
    uint64_t p2p_percent = 0; // GDX_FAULT_P2P_PERCENT: this share of fragments, drawn from a seeded generator
    uint64_t copy_every = 0;  // GDX_FAULT_COPY_EVERY: every Nth staging copy fails
    uint64_t pool_limit = 0;  // GDX_FAULT_POOL_LIMIT: at most N bounce buffers per pool partition
    uint64_t seed = 1;        // GDX_FAULT_SEED

    bool denies_direct() const { return p2p_every != 0 || p2p_percent != 0; } // some fragments must stage
    bool any() const { return denies_direct() || copy_every != 0 || pool_limit != 0; }
    // Slots a pool partition may use when the pool would have `n`.
    unsigned cap_slots(unsigned n) const {
        return pool_limit != 0 && pool_limit < n ? static_cast<unsigned>(pool_limit) : n;
    }
};

// GDX_FAULT_P2P_EVERY / GDX_FAULT_P2P_PERCENT.
class DirectFaults {
  public:
    explicit DirectFaults(const FaultParams &p) : p_(p), rng_(p.seed) {}
    // Asked once per fragment of every request (direct-capable or not), in submission order, so that "every
    // Nth" is deterministic for a test: true = treat this fragment as unreachable.
    bool deny_direct() {
        ++fragments_;
        if (p_.p2p_every != 0 && fragments_ % p_.p2p_every == 0) return true;
        return p_.p2p_percent != 0 && rng_() % 100 < p_.p2p_percent;
    }

  private:
    FaultParams p_;
    std::mt19937_64 rng_;
    uint64_t fragments_ = 0;
};

// GDX_FAULT_COPY_EVERY.
class CopyFaults {
  public:
    explicit CopyFaults(const FaultParams &p) : every_(p.copy_every) {}
    // Asked once per staging copy (into or out of a bounce buffer, small-message copies included).
    bool fail_copy() { return every_ != 0 && ++copies_ % every_ == 0; }

  private:
    uint64_t every_;
    uint64_t copies_ = 0;
};

} // namespace gdx::fb
