// rc transport pieces that need no NIC: the registration ladder's decisions (fake registrar), the registration
// cache, the packed remote key, and the QP timing derived from GDX_PEER_TIMEOUT.
#include "rc_test_util.h"
#include "transport/rc/iface.h"
#include "transport/rc/md.h"

#include <fcntl.h>

using namespace gdx;
using namespace gdx::tp;
using namespace gdx::tp::rc;
using gdx::test::FakeGpuMemoryForTest;
using gdx::test::FakeRegistrar;

namespace {

struct LadderTest : ::testing::Test {
    void SetUp() override { reset_learned_for_test(); }
    topo::GdrDecision direct{true, "no PCIe path"};
    LadderConfig cfg;
    static constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
};

void release(FakeRegistrar &r, std::vector<Chunk> &cs) {
    for (Chunk &c : cs)
        if (c.mr) r.dereg(c.mr);
    cs.clear();
}

} // namespace

TEST_F(LadderTest, NoDmabufNoPeerMemStagesWithBothReasonsAndLearnsNever) {
    FakeRegistrar r;
    FakeGpuMemoryForTest gpu(1 << 20);
    std::vector<Chunk> out;
    gdx::test::LogCapture log;
    ASSERT_EQ(register_gpu(r, gdx::test::fake_dmabuf_export, cfg, gpu.ptr(), 1 << 20, gpu.info, kAccess, direct, "GPU0", &out), GDX_OK);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].reg.reach, Reach::None);
    EXPECT_EQ(out[0].reg.reason, "no dma-buf (EOPNOTSUPP), no peer memory");
    EXPECT_EQ(r.dmabuf_calls + r.va_calls, 0); // neither rung could apply: nothing was attempted
    EXPECT_EQ(learned_state("fake0", mem::MemType::CudaDevice, Rung::Dmabuf), RungState::Never);
    EXPECT_EQ(learned_state("fake0", mem::MemType::CudaDevice, Rung::PeerMem), RungState::Never);
    // The decision is logged once, however many registrations follow.
    ASSERT_EQ(register_gpu(r, gdx::test::fake_dmabuf_export, cfg, gpu.ptr(), 4096, gpu.info, kAccess, direct, "GPU0", &out), GDX_OK);
    EXPECT_EQ(log.count("GPUDirect unavailable for GPU0 / fake0: no dma-buf (EOPNOTSUPP), no peer memory: staging"), 1u)
        << log.text();
}

TEST_F(LadderTest, DmabufRungUsesTheExportedFdAndClosesIt) {
    FakeRegistrar r;
    r.support_.dmabuf = true;
    r.support_.dmabuf_errno = EBADF;
    FakeGpuMemoryForTest gpu(8192);
    std::vector<Chunk> out;
    ASSERT_EQ(register_gpu(r, gdx::test::fake_dmabuf_export, cfg, gpu.ptr(), 8192, gpu.info, kAccess, direct, "GPU0", &out), GDX_OK);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].reg.reach, Reach::Dmabuf);
    EXPECT_TRUE(r.fd_was_open);
    EXPECT_EQ(fcntl(r.last_fd, F_GETFD), -1) << "the ladder must close the dma-buf fd after registering";
    EXPECT_EQ(learned_state("fake0", mem::MemType::CudaDevice, Rung::Dmabuf), RungState::Works);
    release(r, out);
}

TEST_F(LadderTest, DmabufFailureForOneBufferFailsOverToPeerMemAndStaysTryable) {
    FakeRegistrar r;
    r.support_.dmabuf = true;
    r.support_.peermem = true;
    r.dmabuf_errno = EINVAL; // e.g. VMM memory without the RDMA flag: this buffer, not the device
    FakeGpuMemoryForTest gpu(8192, 0, 0x77, mem::MemType::CudaVmm);
    std::vector<Chunk> out;
    gdx::test::LogCapture log;
    ASSERT_EQ(register_gpu(r, gdx::test::fake_dmabuf_export, cfg, gpu.ptr(), 8192, gpu.info, kAccess, direct, "GPU0", &out), GDX_OK);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].reg.reach, Reach::PeerMem);
    EXPECT_EQ(out[0].reg.reason, "peer memory (after dma-buf: EINVAL)");
    EXPECT_EQ(learned_state("fake0", mem::MemType::CudaVmm, Rung::Dmabuf), RungState::Untried);
    EXPECT_NE(log.text().find("peer memory (after dma-buf: EINVAL)"), std::string::npos) << log.text();
    release(r, out);
    // Peer memory worked: it goes first from now on (sticky), dma-buf is not attempted again.
    int before = r.dmabuf_calls;
    ASSERT_EQ(register_gpu(r, gdx::test::fake_dmabuf_export, cfg, gpu.ptr(), 4096, gpu.info, kAccess, direct, "GPU0", &out), GDX_OK);
    EXPECT_EQ(out[0].reg.reach, Reach::PeerMem);
    EXPECT_EQ(out[0].reg.reason, "peer memory");
    EXPECT_EQ(r.dmabuf_calls, before);
    release(r, out);
}

TEST_F(LadderTest, NotSupportedRefusalIsNeverTriedAgain) {
    FakeRegistrar r;
    r.support_.dmabuf = true; // the probe said yes, the registration says EOPNOTSUPP (e.g. old kernel)
    r.dmabuf_errno = EOPNOTSUPP;
    FakeGpuMemoryForTest gpu(4096);
    std::vector<Chunk> out;
    ASSERT_EQ(register_gpu(r, gdx::test::fake_dmabuf_export, cfg, gpu.ptr(), 4096, gpu.info, kAccess, direct, "GPU0", &out), GDX_OK);
    EXPECT_EQ(out[0].reg.reach, Reach::None);
    EXPECT_EQ(out[0].reg.reason, "dma-buf: EOPNOTSUPP, no peer memory");
    EXPECT_EQ(r.dmabuf_calls, 1);
    ASSERT_EQ(register_gpu(r, gdx::test::fake_dmabuf_export, cfg, gpu.ptr(), 4096, gpu.info, kAccess, direct, "GPU0", &out), GDX_OK);
    EXPECT_EQ(r.dmabuf_calls, 1);
    EXPECT_EQ(out[0].reg.reason, "dma-buf refused before (not tried again), no peer memory");
}

TEST_F(LadderTest, ExportFailureIsReportedAndTheNextRungTried) {
    FakeRegistrar r;
    r.support_.dmabuf = r.support_.peermem = true;
    FakeGpuMemoryForTest gpu(4096);
    std::vector<Chunk> out;
    ASSERT_EQ(register_gpu(r, gdx::test::failing_dmabuf_export, cfg, gpu.ptr(), 4096, gpu.info, kAccess, direct, "GPU0", &out), GDX_OK);
    EXPECT_EQ(out[0].reg.reach, Reach::PeerMem);
    EXPECT_NE(out[0].reg.reason.find("dma-buf export failed"), std::string::npos) << out[0].reg.reason;
    release(r, out);
}

TEST_F(LadderTest, ManagedMemoryNeverTakesDmabufOrPeerMemOnlyOdp) {
    FakeRegistrar r;
    r.support_.dmabuf = r.support_.peermem = true;
    FakeGpuMemoryForTest gpu(4096, 0, 9, mem::MemType::CudaManaged);
    std::vector<Chunk> out;
    ASSERT_EQ(register_gpu(r, gdx::test::fake_dmabuf_export, cfg, gpu.ptr(), 4096, gpu.info, kAccess, direct, "GPU0", &out), GDX_OK);
    EXPECT_EQ(out[0].reg.reach, Reach::None);
    EXPECT_EQ(out[0].reg.reason,
              "dma-buf not allowed for cuda-managed memory, peer memory does not pin cuda-managed memory");
    EXPECT_EQ(r.dmabuf_calls + r.va_calls, 0);
    // With ODP listed and supported, managed memory is reachable on demand.
    r.support_.odp = true;
    cfg.order = {Rung::Dmabuf, Rung::PeerMem, Rung::Odp};
    ASSERT_EQ(register_gpu(r, gdx::test::fake_dmabuf_export, cfg, gpu.ptr(), 4096, gpu.info, kAccess, direct, "GPU0", &out), GDX_OK);
    EXPECT_EQ(out[0].reg.reach, Reach::Odp);
    release(r, out);
}

TEST_F(LadderTest, OdpOnlyWhenListedInRegMethods) {
    FakeRegistrar r;
    r.support_.odp = true;
    FakeGpuMemoryForTest gpu(4096);
    std::vector<Chunk> out;
    ASSERT_EQ(register_gpu(r, nullptr, cfg, gpu.ptr(), 4096, gpu.info, kAccess, direct, "GPU0", &out), GDX_OK);
    EXPECT_EQ(out[0].reg.reach, Reach::None);
    EXPECT_EQ(r.odp_calls, 0);
    cfg = LadderConfig::from(gdx::test::config_with({{"GDX_REG_METHODS", "odp,dmabuf"}}));
    ASSERT_EQ(cfg.order.size(), 2u);
    EXPECT_EQ(cfg.order[0], Rung::Odp);
    ASSERT_EQ(register_gpu(r, nullptr, cfg, gpu.ptr(), 4096, gpu.info, kAccess, direct, "GPU0", &out), GDX_OK);
    EXPECT_EQ(out[0].reg.reach, Reach::Odp);
    release(r, out);
}

TEST_F(LadderTest, GdrYesFailsLoudlyAndLeavesNothingRegistered) {
    FakeRegistrar r;
    r.support_.peermem = true;
    r.base = 0x100000000;
    r.va_fail_offsets = {cfg.chunk}; // the second chunk is refused
    cfg.gdr = Ternary::Yes;
    mem::MemInfo info = FakeGpuMemoryForTest(0).info;
    std::vector<Chunk> out;
    EXPECT_EQ(register_gpu(r, nullptr, cfg, reinterpret_cast<void *>(r.base), 3 * cfg.chunk, info, kAccess, direct, "GPU0", &out),
              GDX_ERR_UNSUPPORTED);
    EXPECT_TRUE(out.empty());
    EXPECT_TRUE(r.live.empty()); // the first chunk's MR was released
    EXPECT_NE(last_error().find("GDX_GDR=yes"), std::string::npos) << last_error();
    // And a gate that says "not direct" fails too under 'yes'.
    topo::GdrDecision far{false, "SYS > GDX_GDR_LEVEL=PXB"};
    EXPECT_EQ(register_gpu(r, nullptr, cfg, reinterpret_cast<void *>(r.base), 4096, info, kAccess, far, "GPU0", &out),
              GDX_ERR_UNSUPPORTED);
}

TEST_F(LadderTest, ChunksAreRegisteredIndependently) {
    // 40 GiB of "GPU memory" (never touched: the fake registrar does not dereference it), 1 GiB chunks asked:
    // at most 16 chunks, and one refused chunk leaves the others direct.
    FakeRegistrar r;
    r.support_.peermem = true;
    r.base = 0x7f0000000000;
    size_t len = size_t(40) << 30;
    size_t cs = chunk_size_for(len, cfg.chunk);
    EXPECT_EQ(cs % (64 * 1024), 0u);
    EXPECT_LE((len + cs - 1) / cs, kMaxChunks);
    r.va_fail_offsets = {3 * cs};
    mem::MemInfo info = FakeGpuMemoryForTest(0).info;
    std::vector<Chunk> out;
    ASSERT_EQ(register_gpu(r, nullptr, cfg, reinterpret_cast<void *>(r.base), len, info, kAccess, direct, "GPU0", &out), GDX_OK);
    ASSERT_EQ(out.size(), (len + cs - 1) / cs);
    size_t covered = 0;
    for (size_t i = 0; i < out.size(); ++i) {
        EXPECT_EQ(out[i].reg.offset, covered);
        covered += out[i].reg.length;
        EXPECT_EQ(out[i].reg.reach, i == 3 ? Reach::None : Reach::PeerMem) << i;
    }
    EXPECT_EQ(covered, len);
    // Peer memory worked for chunk 0, so it is tried first for the rest (sticky order).
    EXPECT_EQ(out[3].reg.reason, "peer memory: EFAULT, no dma-buf (EOPNOTSUPP)");
    release(r, out);
}

TEST_F(LadderTest, GateSaysWhyWithoutTryingAnything) {
    FakeRegistrar r;
    r.support_.peermem = true;
    FakeGpuMemoryForTest gpu(4096);
    std::vector<Chunk> out;
    topo::GdrDecision far = topo::decide_gdr(topo::GdrPolicy{}, topo::PathClass::SYS, {});
    ASSERT_EQ(register_gpu(r, nullptr, cfg, gpu.ptr(), 4096, gpu.info, kAccess, far, "GPU1", &out), GDX_OK);
    EXPECT_EQ(out[0].reg.reach, Reach::None);
    EXPECT_EQ(out[0].reg.reason, "SYS > GDX_GDR_LEVEL=PXB");
    EXPECT_EQ(r.va_calls, 0);
}

// ---- the memory domain with a fake NIC ----------------------------------------------------------------------

namespace {
struct MdTest : ::testing::Test {
    void SetUp() override { reset_learned_for_test(); }
    std::shared_ptr<FakeRegistrar> reg = std::make_shared<FakeRegistrar>();
    std::unique_ptr<RcMemoryDomain> md(const Config::Overrides &o = {}) {
        return std::make_unique<RcMemoryDomain>(nullptr, gdx::test::config_with(o), reg, gdx::test::fake_dmabuf_export);
    }
    static mem::MemInfo host(uint64_t id = 0) {
        mem::MemInfo i;
        i.buffer_id = id;
        return i;
    }
};
} // namespace

TEST_F(MdTest, HostMemoryIsOneHostChunkAndTheKeyRoundTrips) {
    auto m = md();
    std::vector<char> buf(10000);
    std::unique_ptr<MemHandle> h;
    ASSERT_EQ(m->mem_reg(buf.data(), buf.size(), host(), kAccessAll, &h), GDX_OK);
    ASSERT_EQ(h->chunks().size(), 1u);
    EXPECT_EQ(h->chunks()[0].reach, Reach::Host);
    EXPECT_TRUE(h->direct(0, buf.size()));
    std::vector<uint8_t> packed(m->rkey_packed_size());
    ASSERT_EQ(h->pack_rkey(packed), GDX_OK);
    std::unique_ptr<RemoteKey> rk;
    ASSERT_EQ(m->rkey_unpack(packed, &rk), GDX_OK);
    EXPECT_EQ(rk->base(), reinterpret_cast<uintptr_t>(buf.data()));
    EXPECT_EQ(rk->length(), buf.size());
    EXPECT_EQ(rk->access(), unsigned(kAccessRemoteRead | kAccessRemoteWrite));
    auto &k = static_cast<RcRemoteKey &>(*rk);
    uint32_t key = 0;
    size_t contig = 0;
    std::string why;
    EXPECT_EQ(k.lookup(rk->base() + 10, 100, kAccessRemoteWrite, &key, &contig, &why), GDX_OK);
    ASSERT_EQ(reg->live.size(), 1u);
    EXPECT_EQ(key, (*reg->live.begin())->rkey);
    EXPECT_EQ(contig, buf.size() - 10);
    EXPECT_EQ(k.lookup(rk->base() + 9990, 11, kAccessRemoteWrite, &key, &contig, &why), GDX_ERR_ACCESS_DENIED);
    EXPECT_EQ(why, "range outside the key");
    EXPECT_EQ(k.lookup(rk->base() - 1, 1, kAccessRemoteRead, &key, &contig, &why), GDX_ERR_ACCESS_DENIED);
}

TEST_F(MdTest, KeyOpensOnlyGrantedRights) {
    auto m = md();
    std::vector<char> buf(4096);
    std::unique_ptr<MemHandle> h;
    ASSERT_EQ(m->mem_reg(buf.data(), buf.size(), host(), kAccessLocalRead | kAccessRemoteRead, &h), GDX_OK);
    std::vector<uint8_t> packed(m->rkey_packed_size());
    ASSERT_EQ(h->pack_rkey(packed), GDX_OK);
    std::unique_ptr<RemoteKey> rk;
    ASSERT_EQ(m->rkey_unpack(packed, &rk), GDX_OK);
    uint32_t key;
    size_t contig;
    std::string why;
    auto &k = static_cast<RcRemoteKey &>(*rk);
    EXPECT_EQ(k.lookup(rk->base(), 8, kAccessRemoteWrite, &key, &contig, &why), GDX_ERR_ACCESS_DENIED);
    EXPECT_EQ(why, "the key does not grant remote write");
    EXPECT_EQ(k.lookup(rk->base(), 8, kAccessRemoteRead, &key, &contig, &why), GDX_OK);
    // A local-only registration opens nothing remotely.
    ASSERT_EQ(m->mem_reg(buf.data(), buf.size(), host(), kAccessLocalRead, &h), GDX_OK);
    ASSERT_EQ(h->pack_rkey(packed), GDX_OK);
    ASSERT_EQ(m->rkey_unpack(packed, &rk), GDX_OK);
    EXPECT_EQ(static_cast<RcRemoteKey &>(*rk).lookup(rk->base(), 8, kAccessRemoteRead, &key, &contig, &why),
              GDX_ERR_ACCESS_DENIED);
}

TEST_F(MdTest, MalformedKeysAreRejectedField) {
    auto m = md();
    std::vector<char> buf(4096);
    std::unique_ptr<MemHandle> h;
    ASSERT_EQ(m->mem_reg(buf.data(), buf.size(), host(), kAccessAll, &h), GDX_OK);
    std::vector<uint8_t> good(m->rkey_packed_size());
    ASSERT_EQ(h->pack_rkey(good), GDX_OK);
    std::unique_ptr<RemoteKey> rk;
    EXPECT_EQ(m->rkey_unpack(std::span<const uint8_t>(good.data(), good.size() - 1), &rk), GDX_ERR_PROTOCOL);
    auto mutate = [&](size_t off, uint8_t v) {
        std::vector<uint8_t> b = good;
        b[off] = v;
        return m->rkey_unpack(b, &rk);
    };
    EXPECT_EQ(mutate(0, 0x00), GDX_ERR_PROTOCOL);     // magic
    EXPECT_EQ(mutate(4, 2), GDX_ERR_PROTOCOL);        // version
    EXPECT_EQ(mutate(5, 0x1), GDX_ERR_PROTOCOL);      // local access bits are not a remote key's business
    EXPECT_EQ(mutate(6, 0), GDX_ERR_PROTOCOL);        // no chunks
    EXPECT_EQ(mutate(6, 17), GDX_ERR_PROTOCOL);       // too many chunks
    EXPECT_EQ(mutate(40, 0x2), GDX_ERR_PROTOCOL);     // opened chunk beyond the count
    EXPECT_EQ(mutate(23, 0xff), GDX_ERR_PROTOCOL);    // length reaching past the chunks (and wrapping)
    EXPECT_EQ(mutate(31, 0x7f), GDX_ERR_PROTOCOL);    // origin above base
    EXPECT_EQ(mutate(4, 1), GDX_OK);
}

TEST_F(MdTest, CacheHitsByRangeAndDropsWhenTheBufferIdChanges) {
    auto m = md({{"GDX_RCACHE_MAX_SIZE", "1M"}});
    std::vector<char> buf(65536);
    std::unique_ptr<MemHandle> a, b, c;
    ASSERT_EQ(m->mem_reg(buf.data(), buf.size(), host(11), kAccessAll, &a), GDX_OK);
    EXPECT_EQ(reg->va_calls, 1);
    a.reset(); // idle, still cached
    ASSERT_EQ(m->mem_reg(buf.data() + 100, 1000, host(11), kAccessLocalRead, &b), GDX_OK);
    EXPECT_EQ(reg->va_calls, 1) << "a sub-range with fewer rights is a hit";
    EXPECT_EQ(b->addr(), buf.data() + 100);
    EXPECT_EQ(b->length(), 1000u);
    ASSERT_EQ(b->chunks().size(), 1u);
    EXPECT_EQ(b->chunks()[0].offset, 0u);
    EXPECT_EQ(b->chunks()[0].length, 1000u);
    EXPECT_EQ(m->rcache_stats().hits, 1u);
    // The allocation was freed and another one took the address: new id, stale entry dropped, new MR.
    ASSERT_EQ(m->mem_reg(buf.data(), buf.size(), host(12), kAccessAll, &c), GDX_OK);
    EXPECT_EQ(reg->va_calls, 2);
    EXPECT_EQ(m->rcache_stats().invalidations, 1u);
    EXPECT_EQ(reg->live.size(), 2u) << "the stale MR lives on while handle b still uses it";
    b.reset();
    EXPECT_EQ(reg->live.size(), 1u);
    // Pageable host memory (no id) is never cached.
    std::unique_ptr<MemHandle> d, e;
    ASSERT_EQ(m->mem_reg(buf.data(), 4096, host(0), kAccessAll, &d), GDX_OK);
    ASSERT_EQ(m->mem_reg(buf.data(), 4096, host(0), kAccessAll, &e), GDX_OK);
    EXPECT_EQ(reg->va_calls, 4);
}

TEST_F(MdTest, GdrNoAndP2pDisableStageGpuMemoryWithoutTrying) {
    reg->support_.dmabuf = reg->support_.peermem = true;
    FakeGpuMemoryForTest gpu(4096);
    std::unique_ptr<MemHandle> h;
    for (auto [var, reason] : {std::pair{"GDX_GDR", "GDX_GDR=no"}, std::pair{"GDX_PCI_P2P_DISABLE", "GDX_PCI_P2P_DISABLE=yes"}}) {
        auto m = md({{var, std::string(var) == "GDX_GDR" ? "no" : "yes"}});
        ASSERT_EQ(m->mem_reg(gpu.ptr(), 4096, gpu.info, kAccessAll, &h), GDX_OK);
        ASSERT_EQ(h->chunks().size(), 1u);
        EXPECT_EQ(h->chunks()[0].reach, Reach::None);
        EXPECT_EQ(h->chunks()[0].reason, reason);
        EXPECT_FALSE(h->direct(0, 1));
    }
    EXPECT_EQ(reg->va_calls + reg->dmabuf_calls, 0);
}

TEST_F(MdTest, BadArgumentsAreRefusedWithAReason) {
    auto m = md();
    std::unique_ptr<MemHandle> h;
    std::vector<char> buf(64);
    EXPECT_EQ(m->mem_reg(nullptr, 10, host(), kAccessAll, &h), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(m->mem_reg(buf.data(), 64, host(), 0, &h), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(m->mem_reg(buf.data(), 64, host(), 0x100, &h), GDX_ERR_INVALID_PARAM);
    mem::MemInfo gone;
    gone.type = mem::MemType::Unmapped;
    EXPECT_EQ(m->mem_reg(buf.data(), 64, gone, kAccessAll, &h), GDX_ERR_INVALID_ADDR);
    reg->va_errno = ENOMEM;
    EXPECT_EQ(m->mem_reg(buf.data(), 64, host(), kAccessAll, &h), GDX_ERR_NO_MEMORY);
    EXPECT_NE(last_error().find("Cannot allocate memory"), std::string::npos) << last_error();
    reg->va_errno = 0;
    ASSERT_EQ(m->mem_reg(buf.data(), 0, host(), kAccessAll, &h), GDX_OK); // nothing to register, nothing opened
    EXPECT_TRUE(h->chunks().empty());
    EXPECT_TRUE(h->direct(0, 0));
}

// ---- registration cache alone ---------------------------------------------------------------------------------

namespace {
struct Region : CachedRegion {
    Region(uintptr_t a, size_t l, uint64_t id, int *alive) : alive_(alive) {
        addr = a, length = l, buffer_id = id, access = kAccessAll;
        ++*alive_;
    }
    ~Region() override { --*alive_; }
    int *alive_;
};
} // namespace

TEST(Rcache, EvictsIdleLeastRecentlyUsedBeyondTheCap) {
    int alive = 0;
    Rcache c(3 * 4096);
    std::shared_ptr<CachedRegion> keep;
    for (uintptr_t i = 0; i < 5; ++i) {
        auto r = std::make_shared<Region>(0x10000 * (i + 1), 4096, i + 1, &alive);
        if (i == 0) keep = r; // in use: never evicted
        c.insert(r);
    }
    EXPECT_EQ(c.stats().evictions, 2u);
    EXPECT_NE(c.lookup(0x10000, 4096, kAccessAll, 1), nullptr) << "the region in use survived";
    EXPECT_EQ(c.lookup(0x20000, 4096, kAccessAll, 2), nullptr) << "the oldest idle one went first";
    EXPECT_NE(c.lookup(0x50000, 16, kAccessAll, 5), nullptr);
    keep.reset();
    c.clear();
    EXPECT_EQ(alive, 0);
}

TEST(Rcache, RangeRightsIdentityAndDisabled) {
    int alive = 0;
    Rcache c(1 << 20);
    c.insert(std::make_shared<Region>(0x1000, 0x3000, 7, &alive));
    EXPECT_NE(c.lookup(0x1000, 0x3000, kAccessAll, 7), nullptr);
    EXPECT_NE(c.lookup(0x2fff, 1, kAccessLocalRead, 7), nullptr);
    EXPECT_EQ(c.lookup(0x3fff, 2, kAccessAll, 7), nullptr) << "beyond the end";
    EXPECT_EQ(c.lookup(0x1000, 16, kAccessAll, 0), nullptr) << "no identity, no hit";
    EXPECT_EQ(c.lookup(0x1000, 16, kAccessAll, 7, 99), nullptr) << "another VMM block";
    EXPECT_EQ(c.stats().invalidations, 1u);
    EXPECT_EQ(alive, 0);
    // Regions of very different lengths: a lookup deep inside a big region still finds it, small ones too.
    Rcache big(size_t(1) << 40);
    const uintptr_t B = 0x10000000, S = B + (128u << 20);
    big.insert(std::make_shared<Region>(B, 64u << 20, 8, &alive));
    for (uintptr_t i = 0; i < 100; ++i) big.insert(std::make_shared<Region>(S + (i << 20), 4096, 8, &alive));
    auto r = big.lookup(B + (63u << 20) + 5, 100, kAccessAll, 8);
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->length, 64u << 20);
    EXPECT_NE(big.lookup(S + (50u << 20) + 8, 100, kAccessAll, 8), nullptr);
    EXPECT_EQ(big.lookup(S + (50u << 20) + 4000, 200, kAccessAll, 8), nullptr) << "crosses the small one's end";
    r.reset();
    big.clear();
    EXPECT_EQ(alive, 0);
    Rcache off(0);
    off.insert(std::make_shared<Region>(0x1000, 16, 1, &alive));
    EXPECT_EQ(off.lookup(0x1000, 16, kAccessAll, 1), nullptr);
    EXPECT_EQ(alive, 0);
}

// ---- QP timing -----------------------------------------------------------------------------------------------

TEST(QpTiming, DetectionBoundStaysWithinThePeerTimeout) {
    using namespace std::chrono;
    for (auto t : {milliseconds(100), milliseconds(2000), milliseconds(10000), milliseconds(60000)}) {
        QpTiming q = QpTiming::from(t);
        EXPECT_GT(q.timeout, 0);
        EXPECT_LE(q.bound_s, duration<double>(t).count()) << t.count();
        EXPECT_GT(q.bound_s, duration<double>(t).count() / 2.5) << "not needlessly eager";
    }
    EXPECT_EQ(QpTiming::from(nanoseconds::max()).timeout, 0) << "inf: the IB spec's infinite timeout";
}
