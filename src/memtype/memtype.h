// gdx::mem::Detector: what memory a (pointer, length) is, sub-range by sub-range. The entry point of the memtype
// layer for everything above it; one per context, thread-safe. Rows of the ops table answer, the range cache
// remembers GPU allocations (README.md: design, costs, correctness).
#pragma once

#include "core/config.h"
#include "memtype/memory_ops.h"
#include "memtype/range_cache.h"

#include <memory>
#include <string>
#include <vector>

namespace gdx::mem {

struct DetectorOptions {
    bool use_cuda = true;        // GDX_CUDA != no
    bool cache = true;           // GDX_MEMTYPE_CACHE
    size_t cache_entries = 4096; // GDX_MEMTYPE_CACHE_ENTRIES (0 = no cache)
    // Auto: Events when the CUDA free hooks are installed (GDX_MEMTYPE_HOOKS, free_hooks.h), PerHit otherwise.
    // Tests set PerHit or Events to exercise one mode.
    CacheValidation validation = CacheValidation::Auto;
    Ternary hooks = Ternary::Try; // GDX_MEMTYPE_HOOKS
    // Stretches without known bounds (pageable host) are probed at multiples of this for the start of other
    // memory. GPU device mappings start on 2 MiB boundaries (README: 'Host gaps').
    size_t probe_step = size_t(2) << 20;
    // Tests only: a fake GPU row (FakeCudaOpsForTest) in place of the CUDA row, to exercise the cache and the
    // range walk without a GPU.
    const Ops *gpu_row = nullptr;
};

class Detector {
  public:
    explicit Detector(const DetectorOptions &opts = {});
    Detector(const Detector &) = delete;
    Detector &operator=(const Detector &) = delete;

    // Options from GDX_CUDA, GDX_MEMTYPE_CACHE, GDX_MEMTYPE_CACHE_ENTRIES and GDX_MEMTYPE_HOOKS.
    static DetectorOptions options(const Config &cfg);
    // As the constructor, but GDX_CUDA=yes without a usable driver and GPU fails (GDX_ERR_NO_DEVICE), and so does
    // GDX_MEMTYPE_HOOKS=yes when the free hooks cannot be installed (GDX_ERR_UNSUPPORTED, with the reason).
    static gdx_status_t create(const Config &cfg, std::unique_ptr<Detector> *out);

    // The allocation containing `ptr` (cache first). GDX_ERR_INVALID_PARAM for null; driver errors pass through.
    // Inline for the common hit: the same allocation as this thread's last lookup (RangeCache::memo_hit).
    gdx_status_t detect_one(const void *ptr, MemInfo *out) {
        if (cache_ != nullptr && ptr != nullptr && out != nullptr && cache_->memo_hit(ptr, out)) return GDX_OK;
        return detect_one_slow(ptr, out);
    }
    // [ptr, ptr+len) cut into segments, one per allocation (and one per stretch of pageable host memory between
    // them), in address order, covering the range exactly. GDX_ERR_INVALID_PARAM for null, zero length or a
    // range that wraps around the address space. Memory freed before the call is classified as whatever the
    // driver says now (usually host): never a crash.
    gdx_status_t detect(const void *ptr, size_t len, std::vector<MemSegment> *out);

    bool gpu_enabled() const { return gpu_ != nullptr; }
    RangeCache *cache() { return cache_.get(); } // nullptr when caching is off
    const DetectorOptions &options() const { return opts_; } // validation: the mode chosen (never Auto)

  private:
    gdx_status_t detect_one_slow(const void *ptr, MemInfo *out);
    gdx_status_t classify(const void *ptr, MemInfo *out);

    DetectorOptions opts_;
    const Ops *gpu_ = nullptr; // the CUDA row, a test row, or none (every pointer is host)
    std::unique_ptr<RangeCache> cache_;
};

// "cuda-device GPU0 [0x7f0000000000, +1048576) id 42" (logs, test failure messages).
std::string describe(const MemInfo &info);

} // namespace gdx::mem
