// FakeCudaOpsForTest: a fault-injection stand-in for the CUDA row, so that the range cache's invalidation logic
// and the detector's range walk run in CI without a GPU. For that only: everything else about CUDA memory is
// tested against the real driver (label gpu). Allocations are bookkeeping: no memory lies behind the addresses
// (the detector never dereferences what it classifies).
#pragma once

#include "memtype/memory_ops.h"

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>

namespace gdx::mem::test {

class FakeCudaOpsForTest {
  public:
    static FakeCudaOpsForTest &get(); // one instance: the row's entries are plain function pointers
    const Ops *row() const;

    // Adds an allocation and returns its buffer id (unique, never reused, like CUDA's). `known_bounds` false
    // answers size 0, as for memory the driver gives no range for. `block_id` as the VMM attribute.
    uint64_t alloc(uintptr_t base, size_t size, MemType type, int device = 0, bool known_bounds = true,
                   uint64_t block_id = 0);
    void free(uintptr_t base);
    void reset(); // forgets every allocation and zeroes the counters and faults

    std::atomic<uint64_t> queries{0};          // query() calls
    std::atomic<uint64_t> revalidations{0};    // revalidate() calls
    std::atomic<int> fail_next_queries{0};     // fault: that many next queries fail with GDX_ERR_DRIVER
    std::atomic<bool> trust_revalidate{false}; // fault: revalidate() says "same allocation" whatever the truth

  private:
    struct Alloc {
        uintptr_t base;
        size_t size;
        MemType type;
        int device;
        bool known_bounds;
        uint64_t buffer_id, block_id;
    };
    static gdx_status_t query(const void *ptr, MemInfo *out);
    static gdx_status_t revalidate(const void *ptr, const MemInfo &cached);
    bool find(uintptr_t p, Alloc *out);

    std::mutex mu_;
    std::map<uintptr_t, Alloc> allocs_;
    uint64_t next_id_ = 1000;
};

} // namespace gdx::mem::test
