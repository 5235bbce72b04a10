#include "memtype/range_cache.h"

#include "core/log.h"

#include <algorithm>
#include <mutex>
#include <vector>

namespace gdx::mem {

namespace {

std::atomic<uint64_t> g_next_cache_id{1};

// Caches that invalidate() reaches. Lock order: registry, then a cache's own lock (never the reverse).
std::mutex &registry_mutex() {
    static auto *m = new std::mutex; // never destroyed: caches may be destroyed by static destructors
    return *m;
}
std::vector<RangeCache *> &registry() {
    static auto *v = new std::vector<RangeCache *>;
    return *v;
}

unsigned counter_shard() {
    static std::atomic<unsigned> next{0};
    unsigned &s = detail::t_range_memo.shard;
    if (s == ~0u) s = next.fetch_add(1, std::memory_order_relaxed);
    return s;
}

} // namespace

const char *validation_name(CacheValidation v) {
    switch (v) {
    case CacheValidation::PerHit: return "per-hit";
    case CacheValidation::Events: return "events";
    case CacheValidation::Auto: return "auto";
    }
    return "?";
}

RangeCache::RangeCache(size_t capacity, CacheValidation validation)
    : capacity_(capacity == 0 ? 1 : capacity),
      validation_(validation == CacheValidation::Auto ? CacheValidation::PerHit : validation),
      id_(g_next_cache_id.fetch_add(1, std::memory_order_relaxed)) {
    std::lock_guard<std::mutex> g(registry_mutex());
    registry().push_back(this);
}

RangeCache::~RangeCache() {
    std::lock_guard<std::mutex> g(registry_mutex());
    auto &r = registry();
    r.erase(std::remove(r.begin(), r.end(), this), r.end());
}

RangeCache::Counters &RangeCache::counters() const { return shards_[counter_shard() % kCounterShards]; }

bool RangeCache::cacheable(const MemInfo &info, CacheValidation validation) {
    if (info.type == MemType::HostPageable || info.type == MemType::Unmapped) return false;
    if (info.size == 0 || info.base + info.size < info.base) return false;
    // An entry that is checked on hits needs an id to check against.
    bool checked = validation != CacheValidation::Events || info.type == MemType::CudaPool;
    if (checked && info.buffer_id == 0 && info.block_id == 0) return false;
    return true;
}

bool RangeCache::lookup(const void *ptr, MemInfo *out, uint64_t *ticket) {
    const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
    // Before anything else: an invalidate() from here on makes the caller's insert() a no-op.
    *ticket = invalidations_.load(std::memory_order_acquire);
    detail::RangeMemo &m = detail::t_range_memo;
    const uint64_t now = epoch_.load(std::memory_order_acquire);
    if (m.cache_id == id_ && m.epoch == now && p >= m.base && p < m.end) {
        if (!needs_check(m.info) || m.owner->revalidate(ptr, m.info) == GDX_OK) {
            bump(counters().hits);
            *out = m.info;
            return true;
        }
        return stale(ptr, MemInfo(m.info));
    }
    MemInfo info;
    const Ops *owner = nullptr;
    uint64_t epoch = 0;
    {
        std::shared_lock<std::shared_mutex> lock(mu_);
        auto it = entries_.upper_bound(p);
        if (it == entries_.begin() || p >= std::prev(it)->first + std::prev(it)->second.info.size) {
            lock.unlock();
            bump(counters().misses);
            return false;
        }
        const Entry &e = std::prev(it)->second;
        e.referenced.store(true, std::memory_order_relaxed);
        info = e.info;
        owner = e.owner;
        epoch = epoch_.load(std::memory_order_relaxed); // stable here: removals hold the write lock
    }
    if (needs_check(info) && owner->revalidate(ptr, info) != GDX_OK) return stale(ptr, info);
    m.cache_id = id_;
    m.epoch = epoch;
    m.base = info.base;
    m.end = info.base + info.size;
    m.owner = owner;
    m.info = info;
    bump(counters().hits);
    *out = info;
    return true;
}

// The allocation we remembered is gone (freed, unmapped, or the address now belongs to another one).
bool RangeCache::stale(const void *ptr, const MemInfo &seen) {
    detail::t_range_memo.cache_id = 0;
    drop_stale(seen);
    Counters &c = counters();
    bump(c.stale);
    bump(c.misses);
    GDX_DEBUG("memtype", "cache: %s entry [0x%zx, +%zu) is stale at %p: dropped", type_name(seen.type),
              static_cast<size_t>(seen.base), seen.size, ptr);
    return false;
}

void RangeCache::drop_stale(const MemInfo &seen) {
    std::unique_lock<std::shared_mutex> lock(mu_);
    auto it = entries_.find(seen.base);
    // Only the entry we saw: another thread may already have replaced it with a fresh answer.
    if (it != entries_.end() && it->second.info.buffer_id == seen.buffer_id &&
        it->second.info.block_id == seen.block_id && it->second.info.size == seen.size)
        erase_locked(it);
}

void RangeCache::erase_locked(std::map<uintptr_t, Entry>::iterator it) {
    if (it->first == hand_) hand_ = std::next(it) == entries_.end() ? 0 : std::next(it)->first;
    entries_.erase(it);
    epoch_.fetch_add(1, std::memory_order_release);
}

void RangeCache::drop_overlaps_locked(uintptr_t base, uintptr_t end) {
    auto it = entries_.upper_bound(base);
    if (it != entries_.begin() && std::prev(it)->first + std::prev(it)->second.info.size > base) --it;
    while (it != entries_.end() && it->first < end) {
        auto next = std::next(it);
        erase_locked(it);
        it = next;
    }
}

// Clock: the hand sweeps in address order; an entry hit since the last sweep gets a second chance.
void RangeCache::evict_one_locked() {
    if (entries_.empty()) return;
    auto it = entries_.lower_bound(hand_);
    for (size_t step = 0; step <= 2 * entries_.size(); ++step) {
        if (it == entries_.end()) it = entries_.begin();
        if (!it->second.referenced.exchange(false, std::memory_order_relaxed)) break;
        ++it;
    }
    if (it == entries_.end()) it = entries_.begin();
    erase_locked(it);
    evictions_.fetch_add(1, std::memory_order_relaxed);
}

void RangeCache::insert(const MemInfo &info, const Ops *owner, uint64_t ticket) {
    if (owner == nullptr || !cacheable(info, validation_)) return;
    if (needs_check(info) && owner->revalidate == nullptr) return; // a row that cannot check
    std::unique_lock<std::shared_mutex> lock(mu_);
    if (invalidations_.load(std::memory_order_relaxed) != ticket) {
        // An invalidate() ran while the caller queried: its answer may describe memory that is gone by now.
        rejected_.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    // A fresh answer wins over older overlapping entries (an address reused by a differently sized allocation).
    drop_overlaps_locked(info.base, info.base + info.size);
    while (entries_.size() >= capacity_)
        evict_one_locked();
    entries_.try_emplace(info.base, info, owner);
    inserts_.fetch_add(1, std::memory_order_relaxed);
}

void RangeCache::invalidate(uintptr_t base, size_t len) {
    uintptr_t end = base + std::max<size_t>(len, 1);
    if (end < base) end = UINTPTR_MAX;
    std::unique_lock<std::shared_mutex> lock(mu_);
    drop_overlaps_locked(base, end);
    // Always, even when nothing was cached: a query in flight must not insert what it read before this call.
    invalidations_.fetch_add(1, std::memory_order_release);
    epoch_.fetch_add(1, std::memory_order_release);
    invalidate_calls_.fetch_add(1, std::memory_order_relaxed);
}

void RangeCache::clear() {
    std::unique_lock<std::shared_mutex> lock(mu_);
    entries_.clear();
    hand_ = 0;
    invalidations_.fetch_add(1, std::memory_order_release);
    epoch_.fetch_add(1, std::memory_order_release);
    invalidate_calls_.fetch_add(1, std::memory_order_relaxed);
}

size_t RangeCache::size() const {
    std::shared_lock<std::shared_mutex> lock(mu_);
    return entries_.size();
}

RangeCacheStats RangeCache::stats() const {
    RangeCacheStats s;
    for (const Counters &c : shards_) {
        s.hits += c.hits.load(std::memory_order_relaxed);
        s.misses += c.misses.load(std::memory_order_relaxed);
        s.stale += c.stale.load(std::memory_order_relaxed);
    }
    s.inserts = inserts_.load(std::memory_order_relaxed);
    s.rejected = rejected_.load(std::memory_order_relaxed);
    s.evictions = evictions_.load(std::memory_order_relaxed);
    s.invalidations = invalidate_calls_.load(std::memory_order_relaxed);
    s.entries = size();
    return s;
}

void invalidate(const void *base, size_t len) {
    std::lock_guard<std::mutex> g(registry_mutex());
    for (RangeCache *c : registry())
        c->invalidate(reinterpret_cast<uintptr_t>(base), len);
}

} // namespace gdx::mem
