#include "memtype/ipc_registry.h"

#include "core/error.h"
#include "core/log.h"
#include "memtype/memory_ops.h"
#include "memtype/range_cache.h"

#if GDX_HAVE_CUDA_H
#include "memtype/cuda_driver.h"
#endif

#include <atomic>
#include <map>
#include <mutex>
#include <shared_mutex>

namespace gdx::mem {

namespace {

constexpr const char *kComp = "memtype";

struct Registry {
    std::shared_mutex mu;
    std::map<uintptr_t, ipc::Range> ranges;
    std::atomic<size_t> count{0}; // lets queries skip the lock in the usual case: nothing imported
};

Registry &registry() {
    static auto *r = new Registry; // never destroyed: static destructors may still classify memory
    return *r;
}

} // namespace

bool ipc::find(uintptr_t p, uint64_t buffer_id, Range *out) {
    Registry &r = registry();
    if (r.count.load(std::memory_order_relaxed) == 0) return false;
    std::shared_lock<std::shared_mutex> lock(r.mu);
    auto it = r.ranges.upper_bound(p);
    if (it == r.ranges.begin()) return false;
    const Range &e = std::prev(it)->second;
    if (p - e.base >= e.size) return false;
    if (e.buffer_id != 0 && buffer_id != 0 && e.buffer_id != buffer_id) return false;
    *out = e;
    return true;
}

void note_ipc_import(const void *base, size_t size, int device) {
    const uintptr_t b = reinterpret_cast<uintptr_t>(base);
    if (base == nullptr || size == 0 || size > UINTPTR_MAX - b) {
        GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "note_ipc_import(%p, %zu): null base, zero or wrapping size", base,
                 size);
        return;
    }
    uint64_t id = 0;
#if GDX_HAVE_CUDA_H
    if (const cuda::DriverApi *api = cuda::driver()) {
        unsigned long long v = 0;
        if (api->cuPointerGetAttribute(&v, CU_POINTER_ATTRIBUTE_BUFFER_ID, static_cast<CUdeviceptr>(b)) == CUDA_SUCCESS)
            id = v;
    }
#endif
    {
        Registry &r = registry();
        std::unique_lock<std::shared_mutex> lock(r.mu);
        auto it = r.ranges.upper_bound(b);
        if (it != r.ranges.begin() && std::prev(it)->second.base + std::prev(it)->second.size > b) --it;
        while (it != r.ranges.end() && it->first < b + size)
            it = r.ranges.erase(it); // older, overlapping notes
        r.ranges[b] = ipc::Range{b, size, device, id};
        r.count.store(r.ranges.size(), std::memory_order_relaxed);
    }
    invalidate(base, size); // a lookup between the open and this note may have cached it as plain device memory
    GDX_DEBUG(kComp, "IPC import noted: [%p, +%zu) GPU %d buffer id %llu", base, size, device,
              static_cast<unsigned long long>(id));
}

void note_ipc_close(const void *base) {
    size_t size = 0;
    {
        Registry &r = registry();
        std::unique_lock<std::shared_mutex> lock(r.mu);
        auto it = r.ranges.find(reinterpret_cast<uintptr_t>(base));
        if (it != r.ranges.end()) {
            size = it->second.size;
            r.ranges.erase(it);
            r.count.store(r.ranges.size(), std::memory_order_relaxed);
        }
    }
    invalidate(base, size == 0 ? 1 : size);
    GDX_DEBUG(kComp, "IPC close noted: %p (%s)", base, size != 0 ? "known" : "was not noted");
}

} // namespace gdx::mem
