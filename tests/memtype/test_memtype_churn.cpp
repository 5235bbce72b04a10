// GPU set (label gpu): churn. Two threads allocate, look up and free thousands of times at addresses the
// driver recycles, and check every answer against what they just allocated: never a stale answer, in both
// cache validation modes. GDX_TEST_CHURN_CYCLES sets the cycles per thread (default 3000).
#include "memtype/memtype.h"
#include "test_alloc.h"
#if GDX_HAVE_CUDA_H
#include "memtype/cuda_driver.h"
#endif

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <random>
#include <thread>

namespace gdx::mem {
inline void PrintTo(CacheValidation v, std::ostream *os) { *os << validation_name(v); }
} // namespace gdx::mem

using namespace gdx;
using namespace gdx::mem;
using namespace gdx::mem::test;

namespace {

int cycles() {
    const char *e = std::getenv("GDX_TEST_CHURN_CYCLES");
    return e != nullptr && std::atoi(e) > 0 ? std::atoi(e) : 3000;
}

struct Tally {
    std::atomic<long> checked{0}, wrong{0};
    std::mutex mu;
    std::string first; // the first wrong answer, for the failure message
    void bad(const std::string &what) {
        if (wrong.fetch_add(1) == 0) {
            std::lock_guard<std::mutex> g(mu);
            first = what;
        }
    }
};

DetectorOptions with(CacheValidation v) {
    DetectorOptions o;
    o.validation = v;
    o.cache_entries = 64;
    return o;
}

// The Events contract for a free gdx performs itself: invalidate before (drops what was cached) and after (drops
// what a racing lookup of the dying buffer may have re-inserted). Auto is the default: nobody invalidates by hand,
// so with the free hooks on (Events) only they keep the cache right; with them off it is PerHit.
template <class Free> void release(CacheValidation v, const void *p, size_t n, Free &&free_it) {
    if (v == CacheValidation::Events) mem::invalidate(p, n);
    free_it();
    if (v == CacheValidation::Events) mem::invalidate(p, n);
}

void check(Detector &det, Tally &t, const TestBuffer &b, size_t off) {
    MemInfo info;
    const void *p = static_cast<const char *>(b.ptr()) + off;
    const MemType want = expected_type(b.kind());
    t.checked.fetch_add(1);
    if (det.detect_one(p, &info) != GDX_OK || info.type != want ||
        (info.size != 0 && (info.base > b.addr() || info.base + info.size < b.addr() + b.size())))
        t.bad(std::string(alloc_kind_name(b.kind())) + " at +" + std::to_string(off) + " detected as " +
              describe(info));
}

void churn(Detector &det, CacheValidation v, int seed, Tally &t) {
#if GDX_HAVE_CUDA_H
    cuda::bind_device(0);
#endif
    std::mt19937 rng(seed);
    const size_t sizes[] = {64 << 10, 256 << 10, 1 << 20, (2 << 20) + 4096, 4 << 20};
    const AllocKind kinds[] = {AllocKind::CudaDevice, AllocKind::HostMalloc, AllocKind::CudaDevice,
                               AllocKind::HostPinned};
    for (int i = 0; i < cycles(); ++i) {
        TestBuffer b;
        std::string why;
        if (!b.allocate(kinds[i % 4], sizes[rng() % 5], 0, &why)) {
            t.bad("allocation failed: " + why);
            continue;
        }
        for (size_t off : {size_t(0), size_t(rng() % b.size()), b.size() - 1})
            check(det, t, b, off);
        release(v, b.ptr(), b.size(), [&] { b.release(); });
    }
}

class Churn : public ::testing::TestWithParam<CacheValidation> {
  protected:
    void SetUp() override {
        const std::string reason = gpu_skip_reason();
        if (!reason.empty()) GTEST_SKIP() << reason;
    }
};

} // namespace

TEST_P(Churn, TwoThreadsAllocFreeLookupNeverStale) {
    Detector det(with(GetParam()));
    Tally t;
    std::thread a(churn, std::ref(det), GetParam(), 1, std::ref(t));
    std::thread b(churn, std::ref(det), GetParam(), 2, std::ref(t));
    a.join();
    b.join();
    const RangeCacheStats s = det.cache()->stats();
    std::printf("[ churn ] %s (%s): %ld checks, %ld wrong; cache hits %llu misses %llu stale %llu evictions %llu\n",
                validation_name(GetParam()), validation_name(det.options().validation), t.checked.load(),
                t.wrong.load(), static_cast<unsigned long long>(s.hits),
                static_cast<unsigned long long>(s.misses), static_cast<unsigned long long>(s.stale),
                static_cast<unsigned long long>(s.evictions));
    EXPECT_EQ(t.wrong.load(), 0) << "first: " << t.first;
    EXPECT_GT(s.hits, 0u);
}

// The same address changes kind and size: unmap + remap inside one VMM reservation, per thread.
TEST_P(Churn, VmmRemapAtOneAddressNeverStale) {
    Detector det(with(GetParam()));
    Tally t;
    std::atomic<bool> skipped{false};
    std::string skip_why;
    auto worker = [&](int seed) {
        VmmSpace vs;
        std::string why;
        if (!vs.reserve(0, 2, &why)) {
            skipped = true;
            skip_why = why;
            return;
        }
        std::mt19937 rng(seed);
        bool host_ok = true;
        const size_t g = vs.granularity();
        for (int i = 0; i < cycles() / 4; ++i) {
            const size_t n = 1 + rng() % 2;
            bool host = host_ok && rng() % 2 == 0;
            if (!vs.map(0, n, host, &why)) {
                if (!host) {
                    t.bad("cuMemMap: " + why);
                    return;
                }
                host_ok = host = false; // this GPU has no host-located VMM: keep going with device mappings
                if (!vs.map(0, n, false, &why)) {
                    t.bad("cuMemMap: " + why);
                    return;
                }
            }
            for (uintptr_t a : {vs.chunk(0) + rng() % g, vs.chunk(1) + rng() % g}) {
                MemInfo info;
                t.checked.fetch_add(1);
                const bool mapped = a < vs.chunk(0) + n * g;
                const MemType want = host ? MemType::CudaVmmHost : MemType::CudaVmm;
                if (det.detect_one(reinterpret_cast<void *>(a), &info) != GDX_OK ||
                    (mapped && (info.type != want || info.base != vs.chunk(0) || info.size != n * g)) ||
                    (!mapped && (info.type == MemType::CudaVmm || info.type == MemType::CudaVmmHost)))
                    t.bad("VMM " + std::to_string(n) + (host ? " host" : " device") + " chunk(s), probe at +" +
                          std::to_string(a - vs.base()) + ": " + describe(info));
            }
            release(GetParam(), reinterpret_cast<void *>(vs.base()), 2 * g, [&] { vs.unmap(0, &why); });
        }
    };
    std::thread a(worker, 3), b(worker, 4);
    a.join();
    b.join();
    if (skipped) GTEST_SKIP() << "VMM unavailable: " << skip_why;
    std::printf("[ churn ] VMM %s (%s): %ld checks, %ld wrong\n", validation_name(GetParam()),
                validation_name(det.options().validation), t.checked.load(), t.wrong.load());
    EXPECT_EQ(t.wrong.load(), 0) << "first: " << t.first;
}

INSTANTIATE_TEST_SUITE_P(Validation, Churn,
                         ::testing::Values(CacheValidation::PerHit, CacheValidation::Events, CacheValidation::Auto),
                         [](const ::testing::TestParamInfo<CacheValidation> &i) {
                             return std::string(i.param == CacheValidation::PerHit   ? "per_hit"
                                                : i.param == CacheValidation::Events ? "events"
                                                                                     : "auto_hooks");
                         });
