// GPU set (label gpu): cuda_ipc between two processes on one GPU and on two GPUs, device / VMM / pool / managed
// memory, 1 B to 1 GiB byte-exact, AMs ordered after puts, the exporter freeing and reallocating under a live
// mapping, GDX_P2P=no, and shared segments peers map (kCapPeerMap, the staging engine's pools: the contract shm
// passes too). Every case skips with the reason when the GPUs it needs are absent.
#include "memtype/cuda_driver.h"
#include "pair_fixture.h"
#include "peer_map_contract.h"
#include "transport/cuda_ipc/ipc_key.h"

namespace gdx::test {
namespace {

int gpu_count() {
#if GDX_HAVE_CUDA_H
    const cuda::DriverApi *api = cuda::driver();
    return api ? api->device_count : 0;
#else
    return 0;
#endif
}

std::string no_gpus_reason(int need) {
#if GDX_HAVE_CUDA_H
    if (cuda::driver() == nullptr) return "no usable CUDA driver/GPU here: " + cuda::why_unavailable();
#endif
    return "needs " + std::to_string(need) + " GPU(s), found " + std::to_string(gpu_count());
}

struct Case {
    int ours, theirs; // GPU of this process, GPU of the peer
    Kind kind;        // the peer's (exporter's) memory
    const char *signal;
};

std::string case_name(const ::testing::TestParamInfo<Case> &i) {
    return std::string(i.param.ours == i.param.theirs ? "one_gpu_" : "two_gpus_") + kind_name(i.param.kind) + "_" +
           i.param.signal;
}

class IpcPair : public PairFixture, public ::testing::WithParamInterface<Case> {
  protected:
    void SetUp() override {
        const Case &c = GetParam();
        int need = std::max(c.ours, c.theirs) + 1;
        if (gpu_count() < need) GTEST_SKIP() << no_gpus_reason(need);
        std::string why = kind_unavailable(c.kind, c.theirs);
        if (!why.empty()) GTEST_SKIP() << kind_name(c.kind) << ": " << why;
        std::string sig = std::string("GDX_CUDA_IPC_SIGNAL=") + c.signal;
        // The peer's --device/--gpu come after (and override) the shared --device.
        start("cuda_ipc", "GPU" + std::to_string(c.ours), {sig}, {{"GDX_CUDA_IPC_SIGNAL", c.signal}}, {},
              {"--device", "GPU" + std::to_string(c.theirs), "--gpu", std::to_string(c.theirs)});
        ASSERT_FALSE(peer_failed);
        ASSERT_TRUE(connect_both());
    }
};

const size_t kGpuSizes[] = {1, 7, 4097, (1u << 20) + 3, 64u << 20, size_t{1} << 30};

TEST_P(IpcPair, PutGetByteExact) {
    const Case &c = GetParam();
    const size_t kMax = size_t{1} << 30;
    RemoteBuf r = alloc_remote("r", kind_name(c.kind), kMax + 64, 0, 11);
    ASSERT_TRUE(r.rkey);
    tp::cuda_ipc::PackedKey pk;
    std::string why;
    ASSERT_EQ(tp::cuda_ipc::decode_key(r.packed, &pk, &why), GDX_OK) << why;
    std::unique_ptr<Buffer> local;
    ASSERT_EQ(Buffer::make(Kind::Cuda, c.ours, kMax + 64, 0, &local), GDX_OK);
    std::unique_ptr<tp::MemHandle> lmh;
    ASSERT_EQ(tp.iface->md().mem_reg(local->ptr(), local->size(), local->info(),
                                     tp::kAccessLocalRead | tp::kAccessLocalWrite, &lmh),
              GDX_OK);
    EXPECT_TRUE(lmh->direct(0, local->size())) << lmh->chunks()[0].reason;
    if (c.kind == Kind::Managed) {
        // Not exportable: the key opens nothing and says so; the staging layer moves such memory.
        EXPECT_EQ(pk.kind, tp::cuda_ipc::ExportKind::None);
        EXPECT_EQ(put(local->ptr(), 64, lmh.get(), r.addr, *r.rkey), GDX_ERR_ACCESS_DENIED);
        return;
    }
    ASSERT_NE(pk.kind, tp::cuda_ipc::ExportKind::None) << "export failed (see the peer's log)";
    uint64_t seed = 40;
    std::vector<uint8_t> host(kMax + 64);
    for (size_t len : kGpuSizes) {
        SCOPED_TRACE("size " + std::to_string(len));
        ++seed;
        fill_pattern(host.data(), len + 3, seed);
        ASSERT_EQ(local->write(0, host.data(), len + 3), GDX_OK);
        // put our [3, 3+len) at remote offset 5; neighbours keep the peer's pattern
        ASSERT_EQ(put(local->ptr() + 3, len, lmh.get(), r.addr + 5, *r.rkey), GDX_OK) << last_error();
        EXPECT_EQ(check_remote("r", 5, len, seed, 3), "ok");
        EXPECT_EQ(check_remote("r", 0, 5, 11, 0), "ok");
        EXPECT_EQ(check_remote("r", 5 + len, 59, 11, 5 + len), "ok");
        // get remote [7, 7+len) into our offset 1
        ++seed;
        ASSERT_EQ(call("fill r " + std::to_string(seed)), "ok");
        ASSERT_EQ(get(local->ptr() + 1, len, lmh.get(), r.addr + 7, *r.rkey), GDX_OK) << last_error();
        EXPECT_EQ(local->check(1, len, seed, 7), -1);
        ASSERT_EQ(call("fill r 11"), "ok");
    }
}

TEST_P(IpcPair, ActiveMessageSeesThePutBeforeIt) {
    const Case &c = GetParam();
    if (c.kind == Kind::Managed) GTEST_SKIP() << "managed memory is not exported";
    RemoteBuf r = alloc_remote("r", kind_name(c.kind), 4u << 20, 0, 1);
    std::unique_ptr<Buffer> local;
    ASSERT_EQ(Buffer::make(Kind::Cuda, c.ours, 4u << 20, 0, &local), GDX_OK);
    for (int i = 0; i < 50; ++i) {
        size_t len = i % 2 ? 8 : (1u << 20) + static_cast<size_t>(i);
        uint64_t seed = 900 + static_cast<uint64_t>(i);
        ASSERT_EQ(local->fill(seed), GDX_OK);
        tp::Completion comp;
        comp.count = 1;
        gdx_status_t st;
        while ((st = ep->put(local->ptr(), len, nullptr, r.addr, *r.rkey, &comp)) == GDX_ERR_NO_RESOURCE)
            tp.iface->progress();
        ASSERT_EQ(st, GDX_INPROGRESS);
        uint64_t w[2] = {len, seed}; // the peer's handler checks r[0, len) when the AM arrives
        ASSERT_EQ(run_op(*tp.iface, [&](tp::Completion *) { return ep->am_short(4, w, sizeof(w)); }), GDX_OK);
        ASSERT_TRUE(progress_until(*tp.iface, [&] { return comp.count == 0; }, std::chrono::milliseconds(20000)));
        // The next put overwrites r: it may go only once the peer's handler has checked this one (without the wait
        // the test raced its own next put, and once in four H200 runs an AM saw the following put's bytes).
        const std::string handled = "am4 " + std::to_string(i + 1) + " ";
        std::string stat;
        for (int tries = 0; tries < 2000 && (stat = call("am4stat")).rfind(handled, 0) != 0; ++tries) {
        }
        ASSERT_EQ(stat.rfind(handled, 0), 0u) << "the peer has not handled active message " << i + 1 << ": " << stat;
    }
    for (int i = 0; i < 200; ++i)
        if (call("am4stat") == "am4 50 0") break;
    EXPECT_EQ(call("am4stat"), "am4 50 0");
}

TEST_P(IpcPair, ExporterFreesAndReallocatesUnderALiveMapping) {
    const Case &c = GetParam();
    if (c.kind == Kind::Managed) GTEST_SKIP() << "managed memory is not exported";
    std::unique_ptr<Buffer> local;
    ASSERT_EQ(Buffer::make(Kind::Cuda, c.ours, 64u << 20, 0, &local), GDX_OK);
    RemoteBuf r = alloc_remote("r", kind_name(c.kind), 64u << 20, 0, 1);
    for (int round = 0; round < 5; ++round) {
        SCOPED_TRACE("round " + std::to_string(round));
        uint64_t seed = 300 + static_cast<uint64_t>(round);
        ASSERT_EQ(local->fill(seed), GDX_OK);
        ASSERT_EQ(put(local->ptr(), 64u << 20, nullptr, r.addr, *r.rkey), GDX_OK) << last_error(); // maps it
        EXPECT_EQ(check_remote("r", 0, 64u << 20, seed, 0), "ok");
        // The peer frees and allocates again (often at the same address, always with a new buffer id).
        RemoteBuf old = std::move(r);
        r = remote_buf("realloc r");
        ASSERT_TRUE(r.rkey);
        // The new allocation: a fresh mapping, no "already mapped", the bytes land.
        ASSERT_EQ(local->fill(seed + 50), GDX_OK);
        ASSERT_EQ(put(local->ptr(), 64u << 20, nullptr, r.addr, *r.rkey), GDX_OK) << last_error();
        EXPECT_EQ(check_remote("r", 0, 64u << 20, seed + 50, 0), "ok");
        // The old key: held back (never opened) until the revocation arrives, then refused. run_op retries the
        // back-pressure; the limit only guards against a hang.
        EXPECT_EQ(put(local->ptr(), 4096, nullptr, old.addr, *old.rkey), GDX_ERR_ACCESS_DENIED);
        EXPECT_EQ(check_remote("r", 0, 64u << 20, seed + 50, 0), "ok"); // the stale key wrote nothing new
    }
}

TEST_P(IpcPair, ExporterRegistersTheSameMemoryAgainAfterDeregistering) {
    // UCP registers a send buffer per rendezvous and deregisters it after: the same allocation is exported again
    // and again. Each deregistration revokes its export lifetime only; the next key of the same allocation works.
    const Case &c = GetParam();
    if (c.kind == Kind::Managed) GTEST_SKIP() << "managed memory is not exported";
    std::unique_ptr<Buffer> local;
    ASSERT_EQ(Buffer::make(Kind::Cuda, c.ours, 1u << 20, 0, &local), GDX_OK);
    RemoteBuf r = alloc_remote("r", kind_name(c.kind), 1u << 20, 0, 1);
    for (int round = 0; round < 4; ++round) {
        SCOPED_TRACE("round " + std::to_string(round));
        uint64_t seed = 700 + static_cast<uint64_t>(round);
        ASSERT_EQ(local->fill(seed), GDX_OK);
        ASSERT_EQ(put(local->ptr(), 1u << 20, nullptr, r.addr, *r.rkey), GDX_OK) << last_error();
        EXPECT_EQ(check_remote("r", 0, 1u << 20, seed, 0), "ok");
        RemoteBuf old = std::move(r);
        r = remote_buf("rereg r");
        ASSERT_TRUE(r.rkey);
        EXPECT_EQ(r.addr, old.addr); // the same memory
        // The old key is refused once its revocation arrives. Until then it still names live, registered memory
        // (the same allocation), so a put may land: harmless, and overwritten below.
        gdx_status_t st = GDX_OK;
        for (int i = 0; i < 5000 && st == GDX_OK; ++i)
            if ((st = put(local->ptr(), 4096, nullptr, old.addr, *old.rkey)) == GDX_OK) tp.iface->progress();
        EXPECT_EQ(st, GDX_ERR_ACCESS_DENIED);
        // ... and the new one opens the same allocation again.
        ASSERT_EQ(local->fill(seed + 50), GDX_OK);
        ASSERT_EQ(put(local->ptr(), 1u << 20, nullptr, r.addr, *r.rkey), GDX_OK) << last_error();
        EXPECT_EQ(check_remote("r", 0, 1u << 20, seed + 50, 0), "ok");
    }
}

std::vector<Case> cases() {
    std::vector<Case> v;
    for (auto [a, b] : {std::pair{0, 0}, std::pair{0, 1}})
        for (Kind k : {Kind::Cuda, Kind::Vmm, Kind::Pool, Kind::Managed}) v.push_back({a, b, k, "flag"});
    v.push_back({0, 1, Kind::Cuda, "event"});
    v.push_back({0, 0, Kind::Vmm, "event"});
    return v;
}
INSTANTIATE_TEST_SUITE_P(Gpu, IpcPair, ::testing::ValuesIn(cases()), case_name);

class IpcP2pOff : public PairFixture {};

TEST_F(IpcP2pOff, RegistrationsUnreachableAndOperationsRefused) {
    if (gpu_count() < 2) GTEST_SKIP() << no_gpus_reason(2);
    start("cuda_ipc", "GPU0", {"GDX_P2P=no"}, {{"GDX_P2P", "no"}}, {}, {"--device", "GPU1", "--gpu", "1"});
    ASSERT_FALSE(peer_failed);
    ASSERT_TRUE(connect_both());
    std::unique_ptr<Buffer> local;
    ASSERT_EQ(Buffer::make(Kind::Cuda, 0, 1u << 20, 0, &local), GDX_OK);
    std::unique_ptr<tp::MemHandle> mh;
    ASSERT_EQ(tp.iface->md().mem_reg(local->ptr(), local->size(), local->info(), tp::kAccessAll, &mh), GDX_OK);
    EXPECT_EQ(mh->chunks()[0].reach, tp::Reach::None);
    EXPECT_NE(mh->chunks()[0].reason.find("GDX_P2P=no"), std::string::npos) << mh->chunks()[0].reason;
    RemoteBuf r = alloc_remote("r", "cuda", 1u << 20, 0, 1);
    EXPECT_EQ(put(local->ptr(), 100, mh.get(), r.addr, *r.rkey), GDX_ERR_UNREACHABLE);
}

TEST_F(IpcP2pOff, P2pYesFailsClearlyWhenImpossible) {
    if (gpu_count() < 2) GTEST_SKIP() << no_gpus_reason(2);
    // The peer sees only GPU 0 (CUDA_VISIBLE_DEVICES), we use GPU 1: it cannot reach our memory at all, and with
    // GDX_P2P=yes its connect must fail loudly instead of leaving put/get to fail later.
    start("cuda_ipc", "GPU1", {"CUDA_VISIBLE_DEVICES=0", "GDX_P2P=yes"}, {}, {}, {"--device", "GPU0", "--gpu", "0"});
    ASSERT_FALSE(peer_failed);
    EXPECT_EQ(call("connect " + hex(ep->address())), "err " + std::to_string(GDX_ERR_UNREACHABLE));
}

// kCapPeerMap on cuda_ipc, with GDX_P2P=no (it concerns GPU memory only): the contract shm is held to
// (peer_map_contract.cpp) — mapping both ways, put/get through the key, refusals, the owner going away.
TEST(IpcLocal, PeerMapsSharedSegmentsOnlyWithP2pOff) {
    if (gpu_count() < 1) GTEST_SKIP() << no_gpus_reason(1);
    check_peer_map_contract("cuda_ipc", "GPU0", {{"GDX_P2P", "no"}});
}

TEST(IpcLocal, NoGpuMeansNoDevices) {
    std::vector<tp::DeviceDesc> devs;
    tp::Component *c = tp::find_component("cuda_ipc");
    ASSERT_NE(c, nullptr);
    ASSERT_EQ(c->query_devices(&devs), GDX_OK);
    EXPECT_EQ(static_cast<int>(devs.size()), gpu_count());
    std::vector<uint8_t> junk(tp::cuda_ipc::kKeySize, 0);
    tp::cuda_ipc::PackedKey k;
    std::string why;
    EXPECT_EQ(tp::cuda_ipc::decode_key(junk, &k, &why), GDX_ERR_INVALID_PARAM);
}

} // namespace
} // namespace gdx::test
