#include "transport/rc/rcache.h"

#include <vector>

namespace gdx::tp::rc {

std::shared_ptr<CachedRegion> Rcache::lookup(uintptr_t addr, size_t len, unsigned access, uint64_t buffer_id,
                                             uint64_t block_id) {
    if (!enabled() || buffer_id == 0) return nullptr;
    // Candidates start at or below addr and at most max_len_ below it.
    uintptr_t lo = addr >= max_len_ ? addr - max_len_ : 0;
    std::vector<std::list<Node>::iterator> stale;
    std::list<Node>::iterator hit = lru_.end();
    for (auto it = by_addr_.upper_bound(addr); it != by_addr_.begin();) {
        --it;
        if (it->first < lo) break;
        const CachedRegion &r = *it->second->region;
        if (addr >= r.addr + r.length) continue; // ends before addr
        if (r.buffer_id != buffer_id || r.block_id != block_id) {
            stale.push_back(it->second);
            continue;
        }
        if (hit == lru_.end() && addr + len <= r.addr + r.length && (r.access & access) == access) hit = it->second;
    }
    for (auto s : stale) {
        if (s == hit) continue; // cannot happen (ids differ), kept for clarity
        erase(s);
        ++stats_.invalidations;
    }
    if (hit == lru_.end()) {
        ++stats_.misses;
        return nullptr;
    }
    ++stats_.hits;
    lru_.splice(lru_.begin(), lru_, hit);
    return hit->region;
}

void Rcache::insert(std::shared_ptr<CachedRegion> r) {
    if (!enabled() || r == nullptr || r->buffer_id == 0) return;
    if (r->length > max_len_) max_len_ = r->length;
    stats_.bytes += r->length;
    ++stats_.regions;
    lru_.push_front(Node{std::move(r), {}});
    lru_.front().by_addr = by_addr_.emplace(lru_.front().region->addr, lru_.begin());
    evict();
}

void Rcache::erase(std::list<Node>::iterator it) {
    stats_.bytes -= it->region->length;
    --stats_.regions;
    by_addr_.erase(it->by_addr);
    lru_.erase(it); // the region dies here unless a handle still holds it
}

void Rcache::evict() {
    // Oldest first; regions a handle still uses cannot be released and are skipped.
    for (auto it = lru_.end(); stats_.bytes > max_bytes_ && it != lru_.begin();) {
        --it;
        if (it->region.use_count() > 1) continue;
        auto victim = it++;
        erase(victim);
        ++stats_.evictions;
    }
}

void Rcache::clear() {
    while (!lru_.empty()) erase(lru_.begin());
}

} // namespace gdx::tp::rc
