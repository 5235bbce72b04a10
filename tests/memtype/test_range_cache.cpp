// CPU set (label cpu): the range cache's invalidation logic and the detector's range walk, against
// FakeCudaOpsForTest (fake allocations at addresses nothing is mapped at: the detector never dereferences).
#include "core/config.h"
#include "fake_cuda_ops.h"
#include "memtype/memtype.h"

#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

using namespace gdx;
using namespace gdx::mem;
using namespace gdx::mem::test;

namespace {

constexpr uintptr_t kBase = 0x7e0000000000; // fake GPU addresses
constexpr size_t kMiB = size_t(1) << 20;

const void *at(uintptr_t a) { return reinterpret_cast<const void *>(a); }

class FakeRow : public ::testing::Test {
  protected:
    void SetUp() override { fake().reset(); }
    void TearDown() override { fake().reset(); }
    static FakeCudaOpsForTest &fake() { return FakeCudaOpsForTest::get(); }
    static DetectorOptions opts(CacheValidation v = CacheValidation::PerHit, size_t entries = 4096) {
        DetectorOptions o;
        o.gpu_row = fake().row();
        o.validation = v;
        o.cache_entries = entries;
        o.probe_step = 64 * 1024;
        return o;
    }
    static MemInfo one(Detector &d, uintptr_t a) {
        MemInfo info;
        EXPECT_EQ(d.detect_one(at(a), &info), GDX_OK);
        return info;
    }
};

} // namespace

TEST_F(FakeRow, HitInsideAnAllocationNeedsNoQuery) {
    Detector det(opts());
    const uint64_t id = fake().alloc(kBase, kMiB, MemType::CudaDevice, 1);
    MemInfo info = one(det, kBase + 100);
    EXPECT_EQ(info.type, MemType::CudaDevice);
    EXPECT_EQ(info.buffer_id, id);
    EXPECT_EQ(fake().queries.load(), 1u);
    for (uintptr_t a : {kBase, kBase + 5000, kBase + kMiB - 1}) {
        info = one(det, a);
        EXPECT_EQ(info.type, MemType::CudaDevice);
        EXPECT_EQ(info.device, 1);
        EXPECT_EQ(info.base, kBase);
        EXPECT_EQ(info.size, kMiB);
    }
    EXPECT_EQ(fake().queries.load(), 1u);       // answered by the cache...
    EXPECT_EQ(fake().revalidations.load(), 3u); // ...each hit checked by one id read (PerHit)
    EXPECT_EQ(det.cache()->stats().hits, 3u);
    EXPECT_EQ(one(det, kBase + kMiB).type, MemType::HostPageable); // just past the end
    EXPECT_EQ(fake().queries.load(), 2u);
}

TEST_F(FakeRow, FreeAndReuseAsAnotherKindIsNeverStale) {
    Detector det(opts());
    fake().alloc(kBase, kMiB, MemType::CudaDevice);
    EXPECT_EQ(one(det, kBase + 10).type, MemType::CudaDevice);
    fake().free(kBase); // the application's cudaFree: gdx is not told
    fake().alloc(kBase, 64 * 1024, MemType::HostPinned);
    MemInfo info = one(det, kBase + 10);
    EXPECT_EQ(info.type, MemType::HostPinned) << describe(info);
    EXPECT_EQ(info.size, 64 * 1024u);
    EXPECT_EQ(det.cache()->stats().stale, 1u);
    // Beyond the smaller new allocation: not the old device memory.
    EXPECT_EQ(one(det, kBase + 512 * 1024).type, MemType::HostPageable);
    fake().free(kBase);
    EXPECT_EQ(one(det, kBase + 10).type, MemType::HostPageable);
}

TEST_F(FakeRow, ReuseBySameKindOfDifferentSizeGetsNewBounds) {
    Detector det(opts());
    fake().alloc(kBase, 4 * kMiB, MemType::CudaDevice);
    EXPECT_EQ(one(det, kBase + 3 * kMiB).size, 4 * kMiB);
    fake().free(kBase);
    const uint64_t id = fake().alloc(kBase, kMiB, MemType::CudaDevice);
    MemInfo info = one(det, kBase + 100);
    EXPECT_EQ(info.buffer_id, id);
    EXPECT_EQ(info.size, kMiB);
    EXPECT_EQ(one(det, kBase + 3 * kMiB).type, MemType::HostPageable);
}

TEST_F(FakeRow, VmmEntriesAreCheckedByBlockId) {
    Detector det(opts());
    fake().alloc(kBase, 2 * kMiB, MemType::CudaVmm, 0, true, /*block_id=*/77);
    EXPECT_EQ(one(det, kBase + 1).block_id, 77u);
    fake().free(kBase); // unmap + remap of another physical allocation at the same address
    fake().alloc(kBase, 2 * kMiB, MemType::CudaVmmHost, 0, true, 78);
    MemInfo info = one(det, kBase + 1);
    EXPECT_EQ(info.type, MemType::CudaVmmHost);
    EXPECT_EQ(info.block_id, 78u);
}

TEST_F(FakeRow, EventsModeTrustsEntriesUntilInvalidated) {
    Detector det(opts(CacheValidation::Events));
    fake().alloc(kBase, kMiB, MemType::CudaDevice);
    EXPECT_EQ(one(det, kBase).type, MemType::CudaDevice);
    fake().free(kBase);
    fake().alloc(kBase, kMiB, MemType::HostPinned);
    // The documented contract of Events mode: a free gdx is not told about leaves the old answer.
    EXPECT_EQ(one(det, kBase).type, MemType::CudaDevice);
    EXPECT_EQ(fake().revalidations.load(), 0u);
    mem::invalidate(at(kBase), kMiB); // what gdx's own free paths (and note_ipc_close) do
    EXPECT_EQ(one(det, kBase).type, MemType::HostPinned);
}

TEST_F(FakeRow, EventsModeStillChecksPoolMemoryOnEveryHit) {
    // Stream-ordered pool memory is freed when its stream gets to cuMemFreeAsync: after the call the free hooks
    // saw, so a lookup in between could have re-cached it. Events mode therefore checks pool entries like PerHit.
    Detector det(opts(CacheValidation::Events));
    fake().alloc(kBase, kMiB, MemType::CudaPool);
    fake().alloc(kBase + 4 * kMiB, kMiB, MemType::CudaDevice);
    EXPECT_EQ(one(det, kBase + 1).type, MemType::CudaPool);
    EXPECT_EQ(one(det, kBase + 4 * kMiB + 1).type, MemType::CudaDevice);
    const uint64_t checks = fake().revalidations.load();
    EXPECT_EQ(one(det, kBase + 2).type, MemType::CudaPool);
    EXPECT_EQ(fake().revalidations.load(), checks + 1); // pool: checked
    EXPECT_EQ(one(det, kBase + 4 * kMiB + 2).type, MemType::CudaDevice);
    EXPECT_EQ(fake().revalidations.load(), checks + 1); // device: trusted
    fake().free(kBase); // the stream reached the free; nothing was hooked at that moment
    fake().alloc(kBase, 64 * 1024, MemType::CudaPool);
    MemInfo info = one(det, kBase + 2);
    EXPECT_EQ(info.size, 64 * 1024u) << describe(info);
    EXPECT_EQ(det.cache()->stats().stale, 1u);
}

TEST_F(FakeRow, AutoValidationIsPerHitWithoutTheDriverHooks) {
    // Auto picks Events only for the real CUDA row with its free hooks in place; a test row never has them.
    DetectorOptions o = opts(CacheValidation::Auto);
    Detector det(o);
    EXPECT_EQ(det.options().validation, CacheValidation::PerHit);
    fake().alloc(kBase, kMiB, MemType::CudaDevice);
    one(det, kBase);
    one(det, kBase + 1);
    EXPECT_EQ(fake().revalidations.load(), 1u);
}

TEST_F(FakeRow, BrokenValidationServesStaleAnswers) {
    // Fault injection: shows that the per-hit id check is what keeps reuse from being served stale.
    Detector det(opts());
    fake().alloc(kBase, kMiB, MemType::CudaDevice);
    EXPECT_EQ(one(det, kBase).type, MemType::CudaDevice);
    fake().free(kBase);
    fake().trust_revalidate = true;
    EXPECT_EQ(one(det, kBase).type, MemType::CudaDevice);
    fake().trust_revalidate = false;
    EXPECT_EQ(one(det, kBase).type, MemType::HostPageable);
}

TEST_F(FakeRow, HostAndBoundlessAnswersAreNotCached) {
    Detector det(opts());
    int x = 0;
    for (int i = 0; i < 3; ++i)
        EXPECT_EQ(one(det, reinterpret_cast<uintptr_t>(&x)).type, MemType::HostPageable);
    EXPECT_EQ(fake().queries.load(), 3u);
    fake().alloc(kBase, kMiB, MemType::CudaManaged, 0, /*known_bounds=*/false);
    for (int i = 0; i < 3; ++i)
        EXPECT_EQ(one(det, kBase + 8).type, MemType::CudaManaged);
    EXPECT_EQ(fake().queries.load(), 6u);
    EXPECT_EQ(det.cache()->size(), 0u);
    fake().alloc(kBase + 4 * kMiB, kMiB, MemType::HostRegistered); // pinned/registered: a CUDA allocation, cached
    one(det, kBase + 4 * kMiB);
    one(det, kBase + 4 * kMiB + 1);
    EXPECT_EQ(fake().queries.load(), 7u);
    EXPECT_EQ(det.cache()->size(), 1u);
}

TEST_F(FakeRow, DriverErrorsPassThroughNeverBecomeHost) {
    Detector det(opts());
    fake().alloc(kBase, kMiB, MemType::CudaDevice);
    fake().fail_next_queries = 1;
    MemInfo info;
    EXPECT_EQ(det.detect_one(at(kBase), &info), GDX_ERR_DRIVER);
    std::vector<MemSegment> segs;
    fake().fail_next_queries = 1;
    EXPECT_EQ(det.detect(at(kBase), 10, &segs), GDX_ERR_DRIVER);
    EXPECT_TRUE(segs.empty());
    EXPECT_EQ(one(det, kBase).type, MemType::CudaDevice);
}

TEST_F(FakeRow, CapacityIsBoundedAndHotEntriesSurvive) {
    Detector det(opts(CacheValidation::PerHit, 8));
    fake().alloc(kBase, kMiB, MemType::CudaDevice); // the hot one
    one(det, kBase);
    for (uintptr_t i = 1; i <= 64; ++i) {
        fake().alloc(kBase + i * 2 * kMiB, kMiB, MemType::CudaDevice);
        one(det, kBase + i * 2 * kMiB);
        one(det, kBase + 5); // keeps its clock bit set
        EXPECT_LE(det.cache()->size(), 8u);
    }
    const uint64_t q = fake().queries.load();
    one(det, kBase + 7);
    EXPECT_EQ(fake().queries.load(), q); // still cached
    EXPECT_GE(det.cache()->stats().evictions, 57u);
}

TEST_F(FakeRow, CacheOffByConfigQueriesEveryTime) {
    Config cfg;
    std::string err;
    ASSERT_EQ(Config::load({{"GDX_MEMTYPE_CACHE", "no"}}, &cfg, &err), GDX_OK) << err;
    DetectorOptions o = Detector::options(cfg);
    o.gpu_row = fake().row();
    Detector det(o);
    EXPECT_EQ(det.cache(), nullptr);
    fake().alloc(kBase, kMiB, MemType::CudaDevice);
    for (int i = 0; i < 4; ++i)
        EXPECT_EQ(one(det, kBase + i).type, MemType::CudaDevice);
    EXPECT_EQ(fake().queries.load(), 4u);
}

TEST_F(FakeRow, InsertAfterAnInvalidateDuringTheQueryIsDropped) {
    RangeCache cache(16, CacheValidation::Events);
    MemInfo info, out;
    info.type = MemType::CudaDevice;
    info.kind = MemKind::Cuda;
    info.base = kBase;
    info.size = kMiB;
    info.buffer_id = 5;
    uint64_t ticket = 0;
    EXPECT_FALSE(cache.lookup(at(kBase), &out, &ticket));
    cache.invalidate(kBase, kMiB); // e.g. the memory was freed while the caller was asking the driver
    cache.insert(info, fake().row(), ticket);
    EXPECT_EQ(cache.size(), 0u);
    EXPECT_EQ(cache.stats().rejected, 1u);
    EXPECT_FALSE(cache.lookup(at(kBase), &out, &ticket));
    cache.insert(info, fake().row(), ticket);
    EXPECT_TRUE(cache.lookup(at(kBase + 1), &out, &ticket));
}

TEST_F(FakeRow, OverlapsAndRangesAreDroppedExactly) {
    RangeCache a(16, CacheValidation::Events), b(16, CacheValidation::Events);
    auto put = [](RangeCache &c, uintptr_t base, size_t size) {
        MemInfo i, o;
        i.type = MemType::CudaDevice;
        i.base = base;
        i.size = size;
        uint64_t t = 0;
        c.lookup(at(base), &o, &t);
        c.insert(i, FakeCudaOpsForTest::get().row(), t);
    };
    for (uintptr_t i = 0; i < 3; ++i)
        put(a, kBase + i * kMiB, kMiB);
    EXPECT_EQ(a.size(), 3u);
    put(a, kBase + kMiB / 2, kMiB); // newer answer overlapping the first two: both dropped
    EXPECT_EQ(a.size(), 2u);
    a.invalidate(kBase + 2 * kMiB + kMiB - 1, 0); // zero length counts as one byte
    EXPECT_EQ(a.size(), 1u);
    put(a, kBase + 8 * kMiB, kMiB);
    put(b, kBase + 8 * kMiB, kMiB);
    mem::invalidate(at(kBase + 8 * kMiB + 100), 1); // every live cache
    EXPECT_EQ(a.size(), 1u);
    EXPECT_EQ(b.size(), 0u);
    put(b, kBase + 9 * kMiB, kMiB);
    note_ipc_close(at(kBase + 9 * kMiB)); // closing an IPC mapping drops what was cached there
    EXPECT_EQ(b.size(), 0u);
    a.clear();
    EXPECT_EQ(a.size(), 0u);
}

// ---- the range walk ---------------------------------------------------------------------------------------------

TEST_F(FakeRow, RangeIsCutPerAllocationWithHostGaps) {
    Detector det(opts());
    const uint64_t a = fake().alloc(kBase + kMiB, kMiB, MemType::CudaDevice);
    const uint64_t b = fake().alloc(kBase + 2 * kMiB, kMiB / 2, MemType::CudaDevice); // adjacent, same kind
    std::vector<MemSegment> segs;
    ASSERT_EQ(det.detect(at(kBase + kMiB / 2), 3 * kMiB, &segs), GDX_OK);
    ASSERT_EQ(segs.size(), 4u);
    EXPECT_EQ(segs[0].info.type, MemType::HostPageable);
    EXPECT_EQ(segs[0].addr, kBase + kMiB / 2);
    EXPECT_EQ(segs[0].length, kMiB / 2);
    EXPECT_EQ(segs[1].info.buffer_id, a);
    EXPECT_EQ(segs[1].addr, kBase + kMiB);
    EXPECT_EQ(segs[1].length, kMiB);
    EXPECT_EQ(segs[2].info.buffer_id, b);
    EXPECT_EQ(segs[2].addr, kBase + 2 * kMiB);
    EXPECT_EQ(segs[2].length, kMiB / 2);
    EXPECT_EQ(segs[3].info.type, MemType::HostPageable);
    EXPECT_EQ(segs[3].addr, kBase + 2 * kMiB + kMiB / 2);
    EXPECT_EQ(segs[3].addr + segs[3].length, kBase + kMiB / 2 + 3 * kMiB);
    // Inside one allocation: one segment of exactly the range.
    ASSERT_EQ(det.detect(at(kBase + kMiB + 100), 200, &segs), GDX_OK);
    ASSERT_EQ(segs.size(), 1u);
    EXPECT_EQ(segs[0].addr, kBase + kMiB + 100);
    EXPECT_EQ(segs[0].length, 200u);
}

TEST_F(FakeRow, AllocationBetweenProbePointsEndsTheHostStretchAtItsBase) {
    Detector det(opts()); // probes every 64 KiB
    fake().alloc(kBase + 100 * 1024 + 256, 200 * 1024, MemType::HostPinned);
    std::vector<MemSegment> segs;
    ASSERT_EQ(det.detect(at(kBase), kMiB, &segs), GDX_OK);
    ASSERT_EQ(segs.size(), 3u);
    EXPECT_EQ(segs[0].length, 100 * 1024u + 256);
    EXPECT_EQ(segs[1].info.type, MemType::HostPinned);
    EXPECT_EQ(segs[1].length, 200 * 1024u);
    EXPECT_EQ(segs[2].info.type, MemType::HostPageable);
}

TEST_F(FakeRow, BoundlessMemoryExtendsToTheNextProbePoint) {
    Detector det(opts());
    const size_t step = 64 * 1024;
    fake().alloc(kBase + 10, 3 * step, MemType::CudaManaged, 0, /*known_bounds=*/false);
    std::vector<MemSegment> segs;
    ASSERT_EQ(det.detect(at(kBase + 10), 8 * step, &segs), GDX_OK);
    ASSERT_EQ(segs.size(), 2u);
    EXPECT_EQ(segs[0].info.type, MemType::CudaManaged);
    // Known only to probe granularity (documented): ends at the first probe point that answers differently.
    EXPECT_GE(segs[0].addr + segs[0].length, kBase + 10 + 3 * step);
    EXPECT_LE(segs[0].addr + segs[0].length, kBase + 10 + 4 * step);
    EXPECT_EQ(segs[1].info.type, MemType::HostPageable);
}

// Four threads allocate, look up and free at recycled addresses; every answer must match what was allocated.
TEST_F(FakeRow, ConcurrentChurnIsNeverStale) {
    for (CacheValidation v : {CacheValidation::PerHit, CacheValidation::Events}) {
        fake().reset();
        Detector det(opts(v, 32));
        std::atomic<int> wrong{0};
        auto worker = [&](int t) {
            std::mt19937_64 rng(1234 + t);
            const uintptr_t region = kBase + uintptr_t(t) * 1024 * kMiB;
            const MemType kinds[] = {MemType::CudaDevice, MemType::HostPinned, MemType::CudaVmm, MemType::CudaManaged};
            for (int i = 0; i < 20000; ++i) {
                const uintptr_t base = region + (rng() % 4) * kMiB; // few addresses: constant reuse
                const size_t size = (1 + rng() % 8) * 128 * 1024;
                const MemType type = kinds[rng() % 4];
                const uint64_t id = fake().alloc(base, size, type, t, true, type == MemType::CudaVmm ? i + 1 : 0);
                for (int k = 0; k < 3; ++k) {
                    MemInfo info;
                    const uintptr_t p = base + rng() % size;
                    if (det.detect_one(at(p), &info) != GDX_OK || info.type != type || info.buffer_id != id ||
                        info.base != base || info.size != size)
                        wrong.fetch_add(1);
                }
                fake().free(base);
                if (v == CacheValidation::Events) mem::invalidate(at(base), size); // the Events contract
            }
        };
        std::vector<std::thread> threads;
        for (int t = 0; t < 4; ++t)
            threads.emplace_back(worker, t);
        for (auto &th : threads)
            th.join();
        const RangeCacheStats s = det.cache()->stats();
        EXPECT_EQ(wrong.load(), 0) << validation_name(v);
        EXPECT_GT(s.hits, 0u) << validation_name(v);
        EXPECT_LE(s.entries, 32u);
    }
}
