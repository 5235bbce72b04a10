// Range cache of memory-type answers: [base, base+size) -> MemInfo for allocations a GPU row classified, so that
// a lookup inside a known allocation costs a tree walk instead of a full driver query. The correctness argument
// (free + reuse of the same address, host answers, races) is in README.md next to this file.
#pragma once

#include "memtype/memory_ops.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <shared_mutex>

namespace gdx::mem {

enum class CacheValidation : uint8_t {
    // Every hit re-reads one driver attribute (buffer id; block id for VMM) and drops the entry when it changed.
    // Safe against frees gdx never sees (the application's cudaFree).
    PerHit,
    // Hits trust the entry: no driver call. Correct only while every free/unmap of cached memory is reported
    // through invalidate(): the CUDA free hooks do that for every driver entry point (free_hooks.h). Stream-ordered
    // pool memory is still validated on every hit: its free runs when the stream gets there, with no call to hook.
    Events,
    // The Detector's choice: Events when the free hooks are installed, PerHit otherwise (never a RangeCache mode).
    Auto,
};
const char *validation_name(CacheValidation v); // "per-hit", "events", "auto"

struct RangeCacheStats {
    uint64_t hits = 0;   // answered from the cache (validated in PerHit mode)
    uint64_t misses = 0; // not found: the caller queried the driver
    uint64_t stale = 0;  // found but revalidation failed: dropped (counted in misses too)
    uint64_t inserts = 0;
    uint64_t rejected = 0;      // insert() dropped: an invalidate() ran while the caller was querying
    uint64_t evictions = 0;     // dropped for capacity (clock)
    uint64_t invalidations = 0; // invalidate()/clear() calls
    size_t entries = 0;
};

namespace detail {
// One per thread: its last hit (cache id, epoch, entry), valid while that cache's epoch is unchanged (no entry
// removed since), so repeated lookups inside one buffer (fragments of a message) skip the lock and the tree walk;
// and its counter shard. Constant-initialized: no guard on access.
struct RangeMemo {
    uint64_t cache_id = 0;
    uint64_t epoch = 0;
    uintptr_t base = 0, end = 0;
    const Ops *owner = nullptr;
    MemInfo info;
    unsigned shard = ~0u;
};
inline thread_local RangeMemo t_range_memo;
} // namespace detail

class RangeCache {
  public:
    RangeCache(size_t capacity, CacheValidation validation);
    ~RangeCache();
    RangeCache(const RangeCache &) = delete;
    RangeCache &operator=(const RangeCache &) = delete;

    // True and *out filled on a (validated) hit. *ticket always receives the token insert() wants: taken before
    // the caller queries the driver, so that an invalidate() during the query keeps that answer out.
    bool lookup(const void *ptr, MemInfo *out, uint64_t *ticket);
    // The hit that needs nothing but this thread's memo (same allocation as its last hit, no entry removed since,
    // no driver check due): inline, no lock, no call. False sends the caller to lookup().
    bool memo_hit(const void *ptr, MemInfo *out) const {
        const detail::RangeMemo &m = detail::t_range_memo;
        const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
        if (m.cache_id != id_ || m.epoch != epoch_.load(std::memory_order_acquire) || p < m.base || p >= m.end ||
            needs_check(m.info))
            return false;
        bump(shards_[m.shard % kCounterShards].hits); // the shard was taken when the memo was filled
        *out = m.info;
        return true;
    }
    // Remembers `info`, answered by row `owner` (whose revalidate() checks later hits), unless it is not
    // cacheable or an invalidate() ran since `ticket`. Overlapping older entries are dropped.
    void insert(const MemInfo &info, const Ops *owner, uint64_t ticket);
    // Drops every entry overlapping [base, base+len) (len 0 counts as 1 byte).
    void invalidate(uintptr_t base, size_t len);
    void clear();

    // Host pageable and unmapped answers never qualify; nor do answers without bounds, nor (PerHit) without an
    // id to revalidate against.
    static bool cacheable(const MemInfo &info, CacheValidation validation);

    size_t size() const;
    size_t capacity() const { return capacity_; }
    CacheValidation validation() const { return validation_; }
    RangeCacheStats stats() const;

  private:
    struct Entry {
        Entry(const MemInfo &i, const Ops *o) : info(i), owner(o) {}
        MemInfo info;
        const Ops *owner;
        mutable std::atomic<bool> referenced{true}; // clock bit: set by hits under the shared lock
    };
    // Statistics only, so a hit pays no locked instruction for them: each thread increments its shard with a
    // plain load and store. Exact while at most kCounterShards threads use a cache; beyond, two threads share a
    // shard and an increment may be lost.
    struct alignas(64) Counters {
        std::atomic<uint64_t> hits{0}, misses{0}, stale{0};
    };
    static constexpr unsigned kCounterShards = 16;
    static void bump(std::atomic<uint64_t> &c) { c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed); }
    // Whether a hit on `info` must ask the driver (PerHit, or pool memory in Events mode).
    bool needs_check(const MemInfo &info) const {
        return validation_ == CacheValidation::PerHit || info.type == MemType::CudaPool;
    }

    Counters &counters() const;
    void erase_locked(std::map<uintptr_t, Entry>::iterator it);
    void drop_overlaps_locked(uintptr_t base, uintptr_t end);
    void evict_one_locked();
    void drop_stale(const MemInfo &seen);
    bool stale(const void *ptr, const MemInfo &seen);

    const size_t capacity_;
    const CacheValidation validation_;
    const uint64_t id_; // process-unique, never reused: keys the per-thread memo
    mutable std::shared_mutex mu_;
    std::map<uintptr_t, Entry> entries_; // by base; entries never overlap
    uintptr_t hand_ = 0;                 // clock hand (a base address)
    // Bumped on every removal (memo validity) and on every invalidate (insert tickets), under the write lock.
    std::atomic<uint64_t> epoch_{1};
    std::atomic<uint64_t> invalidations_{1};
    mutable Counters shards_[kCounterShards];
    std::atomic<uint64_t> inserts_{0}, rejected_{0}, evictions_{0}, invalidate_calls_{0};
};

// Every live RangeCache drops what overlaps [base, base+len). gdx's own free/unmap/IPC-close paths call this
// after the memory is gone; so may anything above that learns of a free (e.g. UCX memory events).
void invalidate(const void *base, size_t len);

} // namespace gdx::mem
