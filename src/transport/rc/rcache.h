// Registration cache: registrations stay registered after their last handle goes, so registering the same
// buffer again (the common case for GPU buffers reused every iteration) is a lookup instead of a pin.
//
// Range-based (a hit is any cached region that covers the requested range with at least the requested
// rights), least-recently-used eviction of idle regions beyond a byte cap (GDX_RCACHE_MAX_SIZE), and
// invalidation by identity: a region remembers the driver's buffer id of its allocation, and a lookup that
// finds a different id at that address (the allocation was freed and the address reused) drops the region.
// Memory without a buffer id (pageable host memory: no free/reuse notification here) is never cached, since
// a stale pin would silently move the wrong pages.
//
// Single-threaded, like the interface that owns it.
#pragma once

#include <cstddef>
#include <array>
#include <cstdint>
#include <list>
#include <map>
#include <memory>

namespace gdx::tp::rc {

// A registration as the cache sees it. Its destructor releases the NIC resources.
class CachedRegion {
  public:
    virtual ~CachedRegion() = default;
    uintptr_t addr = 0;
    size_t length = 0;
    unsigned access = 0;    // gdx access bits it was registered for
    uint64_t buffer_id = 0; // driver identity of the allocation at registration time (never 0 in the cache)
    uint64_t block_id = 0;  // VMM physical block (an unmap + remap keeps the buffer id but not this)
};

struct RcacheStats {
    uint64_t hits = 0, misses = 0, evictions = 0, invalidations = 0;
    size_t regions = 0, bytes = 0;
};

class Rcache {
  public:
    explicit Rcache(size_t max_bytes) : max_bytes_(max_bytes) {}
    bool enabled() const { return max_bytes_ > 0; }

    // A cached region covering [addr, addr+len) with rights ⊇ access and this identity (buffer id, block id),
    // or null. Regions covering addr with another identity are dropped first (stale). buffer_id 0: a miss.
    std::shared_ptr<CachedRegion> lookup(uintptr_t addr, size_t len, unsigned access, uint64_t buffer_id,
                                         uint64_t block_id = 0);
    // Keeps `r` (buffer_id must be nonzero); then evicts idle regions, oldest first, while over the cap.
    void insert(std::shared_ptr<CachedRegion> r);
    // Drops every idle region (those in use are dropped from the cache and die with their last handle).
    void clear();
    const RcacheStats &stats() const { return stats_; }

  private:
    struct Node;
    using ByAddr = std::multimap<uintptr_t, std::list<Node>::iterator>;
    struct Node {
        std::shared_ptr<CachedRegion> region;
        unsigned cls = 0;
        ByAddr::iterator by_addr;
    };
    void erase(std::list<Node>::iterator it);
    void evict();

    size_t max_bytes_;
    std::list<Node> lru_; // front = most recently used
    // Regions by start address, one map per length class floor(log2(length)): a region of class c that covers
    // addr starts in (addr - 2^(c+1), addr], so each class scans a short window however many regions (and of
    // whatever sizes) the cache holds.
    std::array<ByAddr, 64> by_class_;
    RcacheStats stats_;
};

} // namespace gdx::tp::rc
