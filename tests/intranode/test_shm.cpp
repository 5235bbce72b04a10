// shm transport between two processes (the test and an exec'd peer): integrity of put/get/AM over every size
// and path (CMA both ways, the ring copy, CMA in one direction only), odd offsets, and key enforcement.
#include "pair_fixture.h"
#include "peer_map_contract.h"
#include "transport/shm/get_path.h"
#include "transport/shm/shm_iface.h"
#include "transport/wire.h"

#include <cstring>

namespace gdx::test {
namespace {

// Which side may use cross-memory attach: both, neither (ring copy), only us, only the peer.
enum class Mode { Cma, Ring, OnlyUs, OnlyPeer, CmaSmall };
const char *mode_name(Mode m) {
    switch (m) {
    case Mode::Cma: return "cma";
    case Mode::Ring: return "ring";
    case Mode::OnlyUs: return "cma_only_us";
    case Mode::OnlyPeer: return "cma_only_peer";
    case Mode::CmaSmall: return "cma_from_4k";
    }
    return "?";
}

class ShmPair : public PairFixture, public ::testing::WithParamInterface<Mode> {
  protected:
    void SetUp() override {
        Mode m = GetParam();
        std::vector<std::string> env;
        Config::Overrides ours;
        if (m == Mode::Ring || m == Mode::OnlyUs) env.push_back("GDX_SHM_CMA=no");
        if (m == Mode::Ring || m == Mode::OnlyPeer) ours["GDX_SHM_CMA"] = "no";
        if (m == Mode::CmaSmall) { // CMA (and the split copy) from small sizes on: both paths at every size
            env.push_back("GDX_SHM_CMA_THRESH=4K");
            env.push_back("GDX_SHM_CMA_SPLIT=8K");
            ours["GDX_SHM_CMA_THRESH"] = "4K";
            ours["GDX_SHM_CMA_SPLIT"] = "8K";
        }
        start("shm", "memory", env, ours);
        ASSERT_FALSE(peer_failed);
        ASSERT_TRUE(connect_both());
    }
};

const size_t kSizes[] = {1, 7, 64, 4095, 16383, 16384, 65537, 262147, 1u << 20, (16u << 20) + 5, 64u << 20};

TEST_P(ShmPair, PutGetAllSizesOddOffsets) {
    const size_t kMax = 64u << 20;
    RemoteBuf r = alloc_remote("r", "host", kMax + 64, 1, 11);
    ASSERT_TRUE(r.rkey);
    std::unique_ptr<Buffer> local;
    ASSERT_EQ(Buffer::make(Kind::Host, -1, kMax + 64, 3, &local), GDX_OK);
    std::unique_ptr<tp::MemHandle> lmh;
    ASSERT_EQ(tp.iface->md().mem_reg(local->ptr(), local->size(), local->info(),
                                     tp::kAccessLocalRead | tp::kAccessLocalWrite, &lmh),
              GDX_OK);
    uint64_t seed = 100;
    for (size_t len : kSizes) {
        SCOPED_TRACE("size " + std::to_string(len));
        // put: our bytes [0, len) land at remote offset 5; the bytes around them keep the peer's pattern.
        ++seed;
        fill_pattern(local->ptr(), len, seed);
        ASSERT_EQ(put(local->ptr(), len, lmh.get(), r.addr + 5, *r.rkey), GDX_OK) << last_error();
        EXPECT_EQ(check_remote("r", 5, len, seed, 0), "ok");
        EXPECT_EQ(check_remote("r", 0, 5, 11, 0), "ok");
        EXPECT_EQ(check_remote("r", 5 + len, 59, 11, 5 + len), "ok");
        // get: remote offset 7 into our offset 9; our surrounding bytes stay untouched.
        ++seed;
        ASSERT_EQ(call("fill r " + std::to_string(seed)), "ok");
        fill_pattern(local->ptr(), len + 18, 5);
        ASSERT_EQ(get(local->ptr() + 9, len, lmh.get(), r.addr + 7, *r.rkey), GDX_OK) << last_error();
        EXPECT_EQ(check_pattern(local->ptr() + 9, len, seed, 7), -1);
        EXPECT_EQ(check_pattern(local->ptr(), 9, 5), -1);
        EXPECT_EQ(check_pattern(local->ptr() + 9 + len, 9, 5, 9 + len), -1);
        ASSERT_EQ(call("fill r 11"), "ok");
    }
}

TEST_P(ShmPair, PeerInitiatedPutGet) {
    // The peer is the initiator and we are the target: our progress must serve its requests (and grants).
    std::unique_ptr<Buffer> mine;
    ASSERT_EQ(Buffer::make(Kind::Host, -1, (8u << 20) + 16, 5, &mine), GDX_OK);
    fill_pattern(mine->ptr(), mine->size(), 21);
    std::unique_ptr<tp::MemHandle> mh;
    ASSERT_EQ(tp.iface->md().mem_reg(mine->ptr(), mine->size(), mine->info(),
                                     tp::kAccessRemoteRead | tp::kAccessRemoteWrite, &mh),
              GDX_OK);
    std::vector<uint8_t> rk(tp.iface->md().rkey_packed_size());
    ASSERT_EQ(mh->pack_rkey(rk), GDX_OK);
    RemoteBuf pb = alloc_remote("p", "host", (8u << 20) + 16, 3, 33);
    for (size_t len : {size_t{1}, size_t{5000}, size_t{70000}, size_t{8u << 20}}) {
        SCOPED_TRACE("size " + std::to_string(len));
        char addr[32];
        std::snprintf(addr, sizeof(addr), "%llx", static_cast<unsigned long long>(
                                                      reinterpret_cast<uintptr_t>(mine->ptr()) + 3));
        EXPECT_EQ(call("put p 2 " + std::to_string(len) + " " + addr + " " + hex(rk)), "done 0");
        EXPECT_EQ(check_pattern(mine->ptr() + 3, len, 33, 2), -1);
        EXPECT_EQ(check_pattern(mine->ptr(), 3, 21), -1);
        EXPECT_EQ(call("get p 1 " + std::to_string(len) + " " + addr + " " + hex(rk)), "done 0");
        EXPECT_EQ(check_remote("p", 1, len, 33, 2), "ok"); // read back what it just wrote
        fill_pattern(mine->ptr(), mine->size(), 21);
        ASSERT_EQ(call("fill p 33"), "ok"); // the get above overwrote part of it
    }
}

// Gets of one size, again and again, while the target (us) learns which way serves them (get_path.h): while it
// learns it serves them by cross-memory attach and through the ring by turns, and every one is byte-exact.
TEST_P(ShmPair, PeerGetsStayExactWhileTheTargetLearnsItsPath) {
    constexpr size_t kLen = (1u << 20) + 3, kGets = 10;
    std::unique_ptr<Buffer> mine;
    ASSERT_EQ(Buffer::make(Kind::Host, -1, kLen + 8, 5, &mine), GDX_OK);
    std::unique_ptr<tp::MemHandle> mh;
    ASSERT_EQ(tp.iface->md().mem_reg(mine->ptr(), mine->size(), mine->info(), tp::kAccessRemoteRead, &mh), GDX_OK);
    std::vector<uint8_t> rk(tp.iface->md().rkey_packed_size());
    ASSERT_EQ(mh->pack_rkey(rk), GDX_OK);
    RemoteBuf pb = alloc_remote("p", "host", kLen + 8, 3, 33);
    char addr[32];
    std::snprintf(addr, sizeof(addr), "%llx",
                  static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(mine->ptr()) + 1));
    for (size_t i = 0; i < kGets; ++i) {
        SCOPED_TRACE("get " + std::to_string(i));
        fill_pattern(mine->ptr(), mine->size(), 100 + i);
        ASSERT_EQ(call("get p 2 " + std::to_string(kLen) + " " + addr + " " + hex(rk)), "done 0");
        EXPECT_EQ(check_remote("p", 2, kLen, 100 + i, 1), "ok");
        EXPECT_EQ(check_remote("p", 0, 2, 33, 0), "ok") << "bytes before the destination";
    }
    if (GetParam() != Mode::Cma) return; // where CMA is off, or from 4 KiB on, there is nothing to choose from
    auto &paths = dynamic_cast<tp::shm::ShmIface &>(*tp.iface).get_paths();
    using Path = tp::shm::GetPathChooser::Path;
    EXPECT_GE(paths.samples(Path::Cma, kLen), tp::shm::GetPathChooser::kWarmSamples);
    EXPECT_GE(paths.samples(Path::Ring, kLen), tp::shm::GetPathChooser::kWarmSamples)
        << "never served through the ring";
    EXPECT_GT(paths.rate(Path::Cma, kLen), 0);
    EXPECT_GT(paths.rate(Path::Ring, kLen), 0);
}

// The choice itself, fed with made-up measurements.
TEST(ShmGetPath, LearnsTheFasterWayPerSizeAndKeepsTryingTheOther) {
    using C = tp::shm::GetPathChooser;
    using Path = C::Path;
    C off(false);
    for (int i = 0; i < 40; ++i) ASSERT_EQ(off.choose(1u << 20, "test"), Path::Cma) << "GDX_SHM_CMA_LEARN=no";
    C c(true);
    const uint64_t mib = 1u << 20;
    // Warm-up: by turns, by what was issued (no measurement has come back yet).
    for (int i = 0; i < 8; ++i) EXPECT_EQ(c.choose(mib, "test"), i % 2 ? Path::Ring : Path::Cma) << i;
    // The first get of each way pays for first touches (here a CMA get 40x slower): not measured.
    c.record(Path::Cma, mib, 1'200'000);
    c.record(Path::Ring, mib, 21'000);
    EXPECT_EQ(c.samples(Path::Cma, mib), 0u);
    EXPECT_EQ(c.samples(Path::Ring, mib), 0u);
    for (unsigned i = 0; i < C::kWarmSamples; ++i) {
        EXPECT_EQ(c.choose(mib, "test"), i % 2 ? Path::Ring : Path::Cma) << "still warming up, " << i;
        c.record(Path::Cma, mib, 30'000);  // 35 GB/s
        c.record(Path::Ring, mib, 21'000); // 50 GB/s
    }
    EXPECT_NEAR(c.rate(Path::Cma, mib), 1048576.0 / 30'000, 0.01);
    c.record(Path::Ring, mib, 2'000'000); // a preempted copy: the median ignores it
    EXPECT_NEAR(c.rate(Path::Ring, mib), 1048576.0 / 21'000, 0.01);
    unsigned cma = 0, ring = 0;
    for (unsigned i = 0; i < 16 * C::kExploreEvery; ++i) (c.choose(mib, "test") == Path::Ring ? ring : cma) += 1;
    EXPECT_EQ(cma, 16u) << "the slower way, tried every kExploreEvery-th get";
    EXPECT_EQ(ring, 16 * C::kExploreEvery - 16);
    // Other sizes learn apart; a way measured under 2/3 of the other is tried more rarely, under 1/3 seldom.
    const uint64_t big = 16u << 20, huge = 64u << 20;
    for (unsigned i = 0; i <= C::kWarmSamples; ++i) { // the cold first one and kWarmSamples
        c.record(Path::Cma, big, 200'000);  // 84 GB/s
        c.record(Path::Ring, big, 500'000); // 34 GB/s
        c.record(Path::Cma, huge, 600'000);    // 112 GB/s
        c.record(Path::Ring, huge, 2'400'000); // 28 GB/s
    }
    cma = ring = 0;
    for (unsigned i = 0; i < 4 * C::kExploreRarely; ++i) (c.choose(big, "test") == Path::Ring ? ring : cma) += 1;
    EXPECT_EQ(ring, 4u);
    cma = ring = 0;
    for (unsigned i = 0; i < 4 * C::kExploreSeldom; ++i) (c.choose(huge, "test") == Path::Ring ? ring : cma) += 1;
    EXPECT_EQ(ring, 4u);
    // The memory changed (huge pages now): the ring's measurements age out of the window, the choice follows.
    for (unsigned i = 0; i < C::kWindow; ++i) c.record(Path::Cma, mib, 10'000); // 105 GB/s
    EXPECT_EQ(c.choose(mib + 1, "test"), Path::Cma);
}

TEST_P(ShmPair, ActiveMessagesEcho) {
    const tp::Capabilities &c = tp.iface->caps();
    std::vector<size_t> sizes = {0, 1, 8, c.max_am_short, 1000, 65536, c.max_am_bcopy};
    std::vector<uint8_t> b(c.max_am_bcopy);
    uint64_t seed = 1;
    for (size_t len : sizes) {
        SCOPED_TRACE("size " + std::to_string(len));
        fill_pattern(b.data(), len, ++seed);
        am_got.clear();
        gdx_status_t st = run_op(*tp.iface, [&](tp::Completion *) {
            return len <= c.max_am_short ? ep->am_short(1, b.data(), len) : ep->am_bcopy(1, b.data(), len);
        });
        ASSERT_EQ(st, GDX_OK);
        ASSERT_TRUE(progress_until(*tp.iface, [&] { return !am_got.empty(); }, std::chrono::milliseconds(10000)));
        ASSERT_EQ(am_got[0].size(), len);
        EXPECT_EQ(check_pattern(am_got[0].data(), len, seed), -1);
    }
    // zcopy: header and payload arrive contiguous.
    std::vector<uint8_t> hdr(16), pay(50000);
    fill_pattern(hdr.data(), hdr.size(), 77);
    fill_pattern(pay.data(), pay.size(), 77, hdr.size());
    am_got.clear();
    ASSERT_EQ(run_op(*tp.iface, [&](tp::Completion *cc) {
                  return ep->am_zcopy(1, hdr.data(), hdr.size(), pay.data(), pay.size(), nullptr, cc);
              }),
              GDX_OK);
    ASSERT_TRUE(progress_until(*tp.iface, [&] { return !am_got.empty(); }, std::chrono::milliseconds(10000)));
    EXPECT_EQ(am_got[0].size(), hdr.size() + pay.size());
    EXPECT_EQ(check_pattern(am_got[0].data(), am_got[0].size(), 77), -1);
    // Limits are refused with a status, not truncated.
    EXPECT_EQ(ep->am_short(1, b.data(), c.max_am_short + 1), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(ep->am_bcopy(1, b.data(), c.max_am_bcopy + 1), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(ep->am_short(tp::kMaxAmId, b.data(), 1), GDX_ERR_INVALID_PARAM);
}

TEST_P(ShmPair, ManyOutstandingThenFlush) {
    RemoteBuf r = alloc_remote("r", "host", 4u << 20, 0, 1);
    std::vector<uint8_t> src(4u << 20);
    fill_pattern(src.data(), src.size(), 9);
    // 64 puts of 64 KiB in flight at once, then one flush that completes only after all of them.
    std::vector<tp::Completion> comps(64);
    int issued = 0;
    for (int i = 0; i < 64; ++i) {
        comps[i].count = 1;
        gdx_status_t st;
        while ((st = ep->put(src.data() + i * 65536, 65536, nullptr, r.addr + i * 65536, *r.rkey, &comps[i])) ==
               GDX_ERR_NO_RESOURCE)
            tp.iface->progress();
        ASSERT_TRUE(st == GDX_INPROGRESS || st == GDX_OK);
        if (st == GDX_OK) comps[i].count = 0;
        ++issued;
    }
    tp::Completion fc;
    fc.count = 1;
    gdx_status_t fst = ep->flush(&fc);
    if (fst == GDX_OK) fc.count = 0;
    ASSERT_TRUE(progress_until(*tp.iface, [&] { return fc.count == 0; }, std::chrono::milliseconds(30000)));
    for (auto &c : comps) {
        EXPECT_EQ(c.count, 0);
        EXPECT_EQ(c.status, GDX_OK);
    }
    EXPECT_EQ(issued, 64);
    EXPECT_EQ(check_remote("r", 0, 4u << 20, 9, 0), "ok");
    EXPECT_EQ(ep->flush(nullptr), GDX_OK); // nothing outstanding any more
}

// A key whose bytes were altered after packing: `mutate` edits the decoded fields, then it is packed again.
std::unique_ptr<tp::RemoteKey> forged(tp::Interface &ifc, const std::vector<uint8_t> &packed,
                                      void (*mutate)(tp::wire::PackedRkey *)) {
    tp::wire::PackedRkey k;
    std::string why;
    EXPECT_EQ(tp::wire::decode_rkey(packed, tp::wire::TransportId::Shm, &k, &why), GDX_OK);
    mutate(&k);
    std::vector<uint8_t> b(tp::wire::kPackedRkeySize);
    tp::wire::encode_rkey(k, b.data());
    std::unique_ptr<tp::RemoteKey> out;
    EXPECT_EQ(ifc.md().rkey_unpack(b, &out), GDX_OK);
    return out;
}

TEST_P(ShmPair, BadKeysRefusedByTarget) {
    RemoteBuf r = alloc_remote("r", "host", 1u << 20, 0, 4);
    RemoteBuf ro = alloc_remote("ro", "host", 1u << 20, 0, 4, "r");
    std::vector<uint8_t> src(1u << 20, 0xAB);
    for (size_t len : {size_t{100}, size_t{1u << 20}}) { // ring path and CMA path
        SCOPED_TRACE("size " + std::to_string(len));
        // Unknown key id: only the target can know.
        auto bad_id = forged(*tp.iface, r.packed, [](tp::wire::PackedRkey *k) { k->key_id ^= 0x5a5a; });
        EXPECT_EQ(put(src.data(), len, nullptr, r.addr, *bad_id), GDX_ERR_ACCESS_DENIED);
        EXPECT_EQ(get(src.data(), len, nullptr, r.addr, *bad_id), GDX_ERR_ACCESS_DENIED);
        // A key claiming more than was registered: the target checks its own record.
        auto wide = forged(*tp.iface, r.packed, [](tp::wire::PackedRkey *k) { k->length *= 2; });
        EXPECT_EQ(put(src.data(), len, nullptr, r.addr + (1u << 20), *wide), GDX_ERR_ACCESS_DENIED);
        // Read-only registration with forged write rights.
        auto rw = forged(*tp.iface, ro.packed,
                         [](tp::wire::PackedRkey *k) { k->access |= tp::kAccessRemoteWrite; });
        EXPECT_EQ(put(src.data(), len, nullptr, ro.addr, *rw), GDX_ERR_ACCESS_DENIED);
        EXPECT_EQ(check_remote("ro", 0, 1u << 20, 4, 0), "ok"); // untouched
        // Refused at once from the key's own claims.
        EXPECT_EQ(put(src.data(), len, nullptr, ro.addr, *ro.rkey), GDX_ERR_ACCESS_DENIED);
        EXPECT_EQ(put(src.data(), len, nullptr, r.addr + (1u << 20) - len + 1, *r.rkey), GDX_ERR_ACCESS_DENIED);
        EXPECT_EQ(get(src.data(), len, nullptr, r.addr - 1, *r.rkey), GDX_ERR_ACCESS_DENIED);
    }
    // A key revoked by deregistration opens nothing any more.
    ASSERT_EQ(call("dereg r"), "ok");
    EXPECT_EQ(put(src.data(), 100, nullptr, r.addr, *r.rkey), GDX_ERR_ACCESS_DENIED);
    EXPECT_EQ(put(src.data(), 1u << 20, nullptr, r.addr, *r.rkey), GDX_ERR_ACCESS_DENIED);
    EXPECT_EQ(check_remote("r", 0, 1u << 20, 4, 0), "ok");
    // Garbage key bytes never unpack.
    std::unique_ptr<tp::RemoteKey> k;
    std::vector<uint8_t> junk(tp::wire::kPackedRkeySize, 0xff);
    EXPECT_EQ(tp.iface->md().rkey_unpack(junk, &k), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(tp.iface->md().rkey_unpack(std::vector<uint8_t>(3), &k), GDX_ERR_INVALID_PARAM);
    // The endpoint still works after all the refusals.
    RemoteBuf ok = alloc_remote("ok", "host", 4096, 0, 1);
    fill_pattern(src.data(), 4096, 8);
    EXPECT_EQ(put(src.data(), 4096, nullptr, ok.addr, *ok.rkey), GDX_OK);
    EXPECT_EQ(check_remote("ok", 0, 4096, 8, 0), "ok");
}

INSTANTIATE_TEST_SUITE_P(Paths, ShmPair, ::testing::Values(Mode::Cma, Mode::Ring, Mode::OnlyUs, Mode::OnlyPeer, Mode::CmaSmall),
                         [](const ::testing::TestParamInfo<Mode> &i) { return std::string(mode_name(i.param)); });

// `buf` registered on `owner` for remote writes and its key unpacked by `user`: what a peer endpoint of `user`
// needs to put into it.
::testing::AssertionResult writable(tp::Interface &owner, tp::Interface &user, std::vector<uint8_t> &buf,
                                    std::unique_ptr<tp::MemHandle> *mh, std::unique_ptr<tp::RemoteKey> *rk) {
    if (owner.md().mem_reg(buf.data(), buf.size(), mem::MemInfo{}, tp::kAccessRemoteWrite, mh) != GDX_OK)
        return ::testing::AssertionFailure() << "mem_reg: " << last_error();
    std::vector<uint8_t> packed(owner.md().rkey_packed_size());
    if ((*mh)->pack_rkey(packed) != GDX_OK) return ::testing::AssertionFailure() << "pack_rkey: " << last_error();
    if (user.md().rkey_unpack(packed, rk) != GDX_OK)
        return ::testing::AssertionFailure() << "rkey_unpack: " << last_error();
    return ::testing::AssertionSuccess();
}

TEST(ShmLocal, BadArgumentsAndAddresses) {
    Opened tp;
    ASSERT_EQ(open_transport("shm", "memory", {}, &tp), GDX_OK);
    std::unique_ptr<tp::Endpoint> ep;
    ASSERT_EQ(tp.iface->ep_create(&ep), GDX_OK);
    EXPECT_EQ(ep->connect(std::vector<uint8_t>(5, 1)), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(ep->connect(ep->address()), GDX_ERR_INVALID_PARAM); // itself
    std::vector<uint8_t> other_host = ep->address();
    other_host[8] ^= 1; // host id
    EXPECT_EQ(ep->connect(other_host), GDX_ERR_UNREACHABLE);
    std::unique_ptr<tp::MemHandle> mh;
    mem::MemInfo host;
    EXPECT_EQ(tp.iface->md().mem_reg(nullptr, 10, host, tp::kAccessAll, &mh), GDX_ERR_INVALID_PARAM);
    uint8_t b[16];
    EXPECT_EQ(tp.iface->md().mem_reg(b, 0, host, tp::kAccessAll, &mh), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(tp.iface->md().mem_reg(b, 16, host, 0x100, &mh), GDX_ERR_INVALID_PARAM);
    // GPU memory is not shm's: registered, but unreachable with a reason.
    mem::MemInfo dev;
    dev.type = mem::MemType::CudaDevice;
    dev.kind = mem::MemKind::Cuda;
    ASSERT_EQ(tp.iface->md().mem_reg(b, 16, dev, tp::kAccessAll, &mh), GDX_OK);
    EXPECT_EQ(mh->chunks().at(0).reach, tp::Reach::None);
    EXPECT_FALSE(mh->chunks().at(0).reason.empty());
    EXPECT_FALSE(mh->direct(0, 16));
    // Operations before the connection is up: back-pressure, not an error.
    ASSERT_EQ(tp.iface->md().mem_reg(b, 16, host, tp::kAccessAll, &mh), GDX_OK);
    std::vector<uint8_t> packed(tp.iface->md().rkey_packed_size());
    ASSERT_EQ(mh->pack_rkey(packed), GDX_OK);
    std::unique_ptr<tp::RemoteKey> rk;
    ASSERT_EQ(tp.iface->md().rkey_unpack(packed, &rk), GDX_OK);
    EXPECT_EQ(ep->put(b, 4, nullptr, reinterpret_cast<uintptr_t>(b), *rk, nullptr), GDX_ERR_NO_RESOURCE);
    EXPECT_EQ(ep->am_short(0, b, 4), GDX_ERR_NO_RESOURCE);
}

TEST(ShmLocal, LoopbackInOneProcess) {
    // Two endpoints of one interface connected to each other: the same code paths without a second process.
    Opened tp;
    ASSERT_EQ(open_transport("shm", "memory", {}, &tp), GDX_OK);
    std::unique_ptr<tp::Endpoint> a, b;
    ASSERT_EQ(tp.iface->ep_create(&a), GDX_OK);
    ASSERT_EQ(tp.iface->ep_create(&b), GDX_OK);
    EXPECT_TRUE(connect_started(a->connect(b->address())));
    EXPECT_TRUE(connect_started(b->connect(a->address())));
    ASSERT_TRUE(progress_until(*tp.iface, [&] { return a->state() == GDX_OK && b->state() == GDX_OK; },
                               std::chrono::milliseconds(10000)));
    std::vector<uint8_t> dst(1u << 20, 0), src(1u << 20);
    fill_pattern(src.data(), src.size(), 3);
    std::unique_ptr<tp::MemHandle> mh;
    std::unique_ptr<tp::RemoteKey> rk;
    ASSERT_TRUE(writable(*tp.iface, *tp.iface, dst, &mh, &rk));
    for (size_t len : {size_t{10}, size_t{1u << 20}}) {
        gdx_status_t st = run_op(*tp.iface, [&](tp::Completion *c) {
            return a->put(src.data(), len, nullptr, reinterpret_cast<uintptr_t>(dst.data()), *rk, c);
        });
        EXPECT_EQ(st, GDX_OK);
        EXPECT_EQ(check_pattern(dst.data(), len, 3), -1);
    }
    b.reset(); // the peer endpoint goes away: the other one fails instead of hanging
    EXPECT_TRUE(progress_until(*tp.iface, [&] { return a->state() != GDX_OK; }, std::chrono::milliseconds(10000)));
    EXPECT_EQ(a->state(), GDX_ERR_CONNECTION_RESET);
}

// A flush while a request is parked must not complete before it (UCT's contract, which UCP's flush relies on:
// found as a lost MPI_Put under UCX 1.18, parked while gdx_shm connected and "flushed" at once).
TEST(ShmLocal, FlushWaitsForParkedRequests) {
    Opened tp;
    ASSERT_EQ(open_transport("shm", "memory", {}, &tp), GDX_OK);
    std::unique_ptr<tp::Endpoint> a, b;
    ASSERT_EQ(tp.iface->ep_create(&a), GDX_OK);
    ASSERT_EQ(tp.iface->ep_create(&b), GDX_OK);
    int delivered = 0;
    tp.iface->set_am_handler(3, [](void *arg, tp::Endpoint *, const void *, size_t) { ++*static_cast<int *>(arg); },
                             &delivered);
    EXPECT_TRUE(connect_started(a->connect(b->address())));
    EXPECT_TRUE(connect_started(b->connect(a->address())));
    // The first sends complete the connection; fill the ring without progress so the next one is refused and parked.
    struct Req : tp::PendingRequest {
        tp::Endpoint *ep = nullptr;
        int runs = 0;
    } req;
    req.ep = a.get();
    req.func = [](tp::PendingRequest *self) {
        auto *r = static_cast<Req *>(self);
        ++r->runs;
        uint64_t v = 42;
        return r->ep->am_short(3, &v, sizeof(v));
    };
    int sent = 0;
    gdx_status_t fill = GDX_OK;
    while (sent < 1000000 && (fill = a->am_short(3, &req, 8)) == GDX_OK) {
        ++sent;
    }
    ASSERT_EQ(fill, GDX_ERR_NO_RESOURCE) << "after " << sent << " sends";
    ASSERT_EQ(a->pending_add(&req), GDX_OK);
    tp::Completion early;
    early.count = 1;
    EXPECT_EQ(a->flush(&early), GDX_ERR_NO_RESOURCE) << "a flush may not overtake a parked request";
    ASSERT_TRUE(progress_until(*tp.iface, [&] { return delivered == sent + 1; }, std::chrono::milliseconds(10000)));
    EXPECT_EQ(req.runs, 1);
    tp::Completion late;
    late.count = 1;
    gdx_status_t st = a->flush(&late);
    EXPECT_TRUE(st == GDX_OK || st == GDX_INPROGRESS) << gdx_status_string(st);
    if (st == GDX_INPROGRESS) {
        EXPECT_TRUE(progress_until(*tp.iface, [&] { return late.count == 0; }, std::chrono::milliseconds(10000)));
    }
}

// map_remote (kCapPeerMap): a peer maps a shared segment it holds a read+write key to, and nothing else
// (peer_map_contract.cpp; cuda_ipc passes the same checks in its GPU set).
TEST(ShmLocal, PeerMapsSharedSegmentsOnly) { check_peer_map_contract("shm", "memory", {}); }

TEST(ShmLocal, ReplacedPeerEndpointDoesNotBreakTheConnection) {
    // UCP's wire-up may connect an endpoint to us, destroy it and connect a new one before we are told whom to
    // connect to (seen as a hang of an Open MPI run: the second HELLO was refused, the first answered). Two
    // interfaces in one process; the one with the smaller nonce dials, so it plays the replacing peer.
    Opened i1, i2;
    ASSERT_EQ(open_transport("shm", "memory", {}, &i1), GDX_OK);
    ASSERT_EQ(open_transport("shm", "memory", {}, &i2), GDX_OK);
    std::unique_ptr<tp::Endpoint> probe1, probe2;
    ASSERT_EQ(i1.iface->ep_create(&probe1), GDX_OK);
    ASSERT_EQ(i2.iface->ep_create(&probe2), GDX_OK);
    const bool one_dials = tp::wire::load_le64(probe1->address().data() + 24) <
                           tp::wire::load_le64(probe2->address().data() + 24);
    Opened &dialer = one_dials ? i1 : i2, &waiter = one_dials ? i2 : i1;
    auto progress_both = [&](const std::function<bool()> &done) {
        auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (!done() && std::chrono::steady_clock::now() < until) {
            dialer.iface->progress();
            waiter.iface->progress();
        }
        return done();
    };
    std::unique_ptr<tp::Endpoint> target, gone, stray, replacement;
    ASSERT_EQ(waiter.iface->ep_create(&target), GDX_OK);
    ASSERT_EQ(dialer.iface->ep_create(&gone), GDX_OK);
    ASSERT_EQ(dialer.iface->ep_create(&stray), GDX_OK);
    ASSERT_EQ(dialer.iface->ep_create(&replacement), GDX_OK);
    // 1. The first peer endpoint dials and sends HELLO; our endpoint has not called connect() yet.
    EXPECT_TRUE(connect_started(gone->connect(target->address())));
    for (int i = 0; i < 200; ++i) {
        dialer.iface->progress();
        waiter.iface->progress();
    }
    gone.reset(); // replaced: its socket closes
    // 2. Its replacement dials too, and a stray endpoint as well.
    EXPECT_TRUE(connect_started(replacement->connect(target->address())));
    EXPECT_TRUE(connect_started(stray->connect(target->address())));
    for (int i = 0; i < 200; ++i) {
        dialer.iface->progress();
        waiter.iface->progress();
    }
    // 3. Now we are told to connect to the replacement: only its HELLO is answered.
    EXPECT_TRUE(connect_started(target->connect(replacement->address())));
    ASSERT_TRUE(progress_both([&] { return target->state() != GDX_INPROGRESS && stray->state() != GDX_INPROGRESS; }))
        << "target " << gdx_status_string(target->state()) << ", stray " << gdx_status_string(stray->state());
    ASSERT_TRUE(progress_both([&] { return replacement->state() != GDX_INPROGRESS; }));
    EXPECT_EQ(target->state(), GDX_OK);
    EXPECT_EQ(replacement->state(), GDX_OK);
    EXPECT_NE(stray->state(), GDX_OK); // closed on, not adopted
    // Bytes flow over the connection that came up.
    std::vector<uint8_t> dst(4096, 0), src(4096);
    fill_pattern(src.data(), src.size(), 11);
    std::unique_ptr<tp::MemHandle> mh;
    std::unique_ptr<tp::RemoteKey> rk;
    ASSERT_TRUE(writable(*waiter.iface, *dialer.iface, dst, &mh, &rk));
    tp::Completion done;
    done.count = 1;
    gdx_status_t st = GDX_ERR_NO_RESOURCE;
    ASSERT_TRUE(progress_both([&] {
        if (st == GDX_ERR_NO_RESOURCE) // issued once; done() is evaluated again after the loop
            st = replacement->put(src.data(), src.size(), nullptr, reinterpret_cast<uintptr_t>(dst.data()), *rk, &done);
        return st != GDX_ERR_NO_RESOURCE;
    }));
    if (st == GDX_INPROGRESS) {
        ASSERT_TRUE(progress_both([&] { return done.count == 0; }));
        st = done.status;
    }
    EXPECT_EQ(st, GDX_OK);
    EXPECT_EQ(check_pattern(dst.data(), dst.size(), 11), -1);
}

} // namespace
} // namespace gdx::test
