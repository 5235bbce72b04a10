#include "transport/rc/rcache.h"

#include <cstdint>
#include <vector>

namespace gdx::tp::rc {

namespace {
unsigned length_class(size_t len) { return len <= 1 ? 0 : 63 - static_cast<unsigned>(__builtin_clzll(len)); }
} // namespace

std::shared_ptr<CachedRegion> Rcache::lookup(uintptr_t addr, size_t len, unsigned access, uint64_t buffer_id,
                                             uint64_t block_id) {
    if (!enabled() || buffer_id == 0) return nullptr;
    std::vector<std::list<Node>::iterator> stale;
    std::list<Node>::iterator hit = lru_.end();
    for (unsigned c = 0; c < by_class_.size(); ++c) {
        ByAddr &m = by_class_[c];
        if (m.empty()) continue;
        uintptr_t span = c >= 63 ? UINTPTR_MAX : (uintptr_t(2) << c); // longer than any region of this class
        uintptr_t lo = addr >= span ? addr - span : 0;
        for (auto it = m.upper_bound(addr); it != m.begin();) {
            --it;
            if (it->first <= lo && lo != 0) break;
            const CachedRegion &r = *it->second->region;
            if (addr >= r.addr + r.length) continue; // ends before addr
            if (r.buffer_id != buffer_id || r.block_id != block_id) {
                stale.push_back(it->second);
                continue;
            }
            if (hit == lru_.end() && addr + len <= r.addr + r.length && (r.access & access) == access) hit = it->second;
        }
    }
    for (auto s : stale) {
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
    stats_.bytes += r->length;
    ++stats_.regions;
    unsigned c = length_class(r->length);
    lru_.push_front(Node{std::move(r), c, {}});
    lru_.front().by_addr = by_class_[c].emplace(lru_.front().region->addr, lru_.begin());
    evict();
}

void Rcache::erase(std::list<Node>::iterator it) {
    stats_.bytes -= it->region->length;
    --stats_.regions;
    by_class_[it->cls].erase(it->by_addr);
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
