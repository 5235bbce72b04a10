// The GPU set of the staging engine (label gpu; skips with the reason where there is no GPU). Device, managed and
// VMM buffers on either side:
//   - in one process, two engines over the loop transport, which reaches only host memory, so every GPU byte goes
//     D2H into a bounce slot, across, and H2D out of one (both sides staged), at 1 B .. 64 MiB, with fault
//     injection (failed copies, one-buffer pools);
//   - across two processes over tcp (staging_peer exec'd), at 1 B .. 1 GiB, and over the intra-node transports
//     (GDX_TLS=all: cuda_ipc reaches GPU memory directly, shm stages what it cannot; shm alone and cuda_ipc alone
//     with GDX_P2P=no stage through pools the peer maps).
// Every byte of both buffers is checked. Under compute-sanitizer (it must follow the exec'd peer):
//   compute-sanitizer --tool memcheck --target-processes all build-gpu/tests/fallback/test_fallback_gpu
#include "../memtype/test_alloc.h"
#include "two_process.h"

namespace gdx::test {
namespace {

const char *const kGpuKinds[] = {"cuda", "managed", "vmm"};

std::string skip_reason() { return mem::test::gpu_skip_reason(); }

std::string pair_name(const ::testing::TestParamInfo<std::tuple<const char *, const char *>> &i) {
    return std::string(std::get<0>(i.param)) + "_" + std::get<1>(i.param);
}

// ---- one process, loop transport ---------------------------------------------------------------------------------

class StagingGpuLoop : public LoopPairTest,
                       public ::testing::WithParamInterface<std::tuple<const char *, const char *>> {
  protected:
    void SetUp() override {
        if (std::string why = skip_reason(); !why.empty()) GTEST_SKIP() << why;
        detector = std::make_unique<mem::Detector>(mem::DetectorOptions{}); // with the CUDA row
        params_a = params_b = fb::Params{};                                // the real fragment sizes
    }

    // Put or get of `len` bytes between a `lkind` buffer on a and an `rkind` buffer on b; every byte checked.
    void transfer(bool put, const std::string &lkind, const std::string &rkind, size_t len, fb::Request *out = nullptr) {
        const size_t n = len + 4096;
        KindBuffer lb, rb;
        std::string why;
        ASSERT_TRUE(lb.allocate(lkind, n, &why)) << why;
        ASSERT_TRUE(rb.allocate(rkind, n, &why)) << why;
        std::vector<uint8_t> lh(n), rh(n);
        fill_pattern(lh.data(), n, 1);
        fill_pattern(rh.data(), n, 2);
        ASSERT_EQ(lb.write(lh), GDX_OK);
        ASSERT_EQ(rb.write(rh), GDX_OK);
        fb::Region *lr = nullptr, *rr = nullptr;
        ASSERT_EQ(a.engine->mem_reg(lb.data(), n, tp::kAccessAll, &lr), GDX_OK) << last_error();
        ASSERT_EQ(b.engine->mem_reg(rb.data(), n, tp::kAccessAll, &rr), GDX_OK) << last_error();
        EXPECT_EQ(lr->info().kind, mem::MemKind::Cuda) << "not detected as GPU memory";
        std::vector<uint8_t> key;
        ASSERT_EQ(b.engine->pack_key(*rr, &key), GDX_OK);
        std::unique_ptr<fb::RemoteRegion> remote;
        ASSERT_EQ(a.engine->unpack_key(key, &remote), GDX_OK);
        fb::Request req;
        const size_t loff = 3, roff = 5;
        ASSERT_EQ(put ? a.engine->put(*a.ep, *lr, loff, *remote, roff, len, &req)
                      : a.engine->get(*a.ep, *lr, loff, *remote, roff, len, &req),
                  GDX_INPROGRESS)
            << last_error();
        ASSERT_TRUE(wait(req));
        if (out != nullptr) {
            *out = req; // the caller judges the status (fault-injection cases)
        } else {
            ASSERT_EQ(req.status, GDX_OK) << gdx_status_string(req.status) << ": " << last_error();
            EXPECT_EQ(req.path.bytes_staged, len) << req.path.describe();
            ASSERT_EQ(lb.read(&lh), GDX_OK);
            ASSERT_EQ(rb.read(&rh), GDX_OK);
            std::vector<uint8_t> &dst = put ? rh : lh;
            size_t doff = put ? roff : loff, soff = put ? loff : roff;
            uint64_t dseed = put ? 2 : 1, sseed = put ? 1 : 2;
            EXPECT_EQ(first_mismatch(dst.data(), doff, dseed), -1);
            EXPECT_EQ(first_mismatch(dst.data() + doff, len, sseed, soff), -1) << "wrong bytes";
            EXPECT_EQ(first_mismatch(dst.data() + doff + len, n - doff - len, dseed, doff + len), -1);
        }
        EXPECT_EQ(a.engine->mem_dereg(lr), GDX_OK);
        EXPECT_TRUE(run_until([&] { return b.engine->mem_dereg(rr) == GDX_OK; }, {}, 100000));
    }
};

TEST_P(StagingGpuLoop, ByteExactFromOneByteTo64MiB) {
    start();
    auto [lk, rk] = GetParam();
    for (size_t len : {size_t(1), size_t(4097), size_t(8192), (size_t(1) << 20) + 3, (size_t(64) << 20) + 5})
        for (bool put : {true, false}) {
            SCOPED_TRACE(std::string(put ? "put " : "get ") + std::to_string(len));
            transfer(put, lk, rk, len);
        }
    EXPECT_EQ(a.engine->stats().slots_in_use, 0u);
}

INSTANTIATE_TEST_SUITE_P(Kinds, StagingGpuLoop, ::testing::Combine(::testing::ValuesIn(kGpuKinds),
                                                                   ::testing::ValuesIn(kGpuKinds)),
                         pair_name);

class StagingGpuFaults : public StagingGpuLoop {};

TEST_F(StagingGpuFaults, FailedGpuCopiesFailTheRequestCleanly) {
    params_a.fault.copy_every = 3;
    start();
    for (bool put : {true, false}) {
        fb::Request req;
        transfer(put, "cuda", "cuda", 32 << 20, &req);
        EXPECT_EQ(req.status, GDX_ERR_IO) << gdx_status_string(req.status);
    }
    EXPECT_EQ(a.engine->stats().slots_in_use, 0u);
}

TEST_F(StagingGpuFaults, OneBufferPoolsStillMoveEverything) {
    params_a.fault.pool_limit = params_b.fault.pool_limit = 1;
    start();
    transfer(true, "cuda", "managed", (16 << 20) + 1);
    transfer(false, "vmm", "cuda", (16 << 20) + 1);
    EXPECT_GT(a.engine->stats().pool_waits + a.engine->stats().credit_waits, 0u);
}

// ---- two processes -------------------------------------------------------------------------------------------------

class StagingGpuTwoProcess : public ::testing::TestWithParam<std::tuple<const char *, const char *>> {
  protected:
    void SetUp() override {
        if (std::string why = skip_reason(); !why.empty()) GTEST_SKIP() << why;
        if (tp::find_component("tcp") == nullptr) GTEST_SKIP() << "no tcp transport in this build";
    }
    // `cfg`: GDX_* settings of this process; `both`: settings of both processes (GDX_TLS is always both's).
    static TwoProcessRun go(const std::string &mine, const std::string &peer, size_t size, const char *tls,
                            std::vector<std::pair<std::string, std::string>> cfg = {},
                            std::vector<std::pair<std::string, std::string>> both = {}) {
        RankOptions o;
        o.kind = mine;
        o.sc.size = size;
        o.sc.pieces = size >= (8u << 20) ? 4 : 1;
        o.timeout_s = 300;
        both.emplace_back("GDX_TLS", tls);
        cfg.insert(cfg.end(), both.begin(), both.end());
        o.config = cfg;
        return run_two_process(o, peer, both);
    }
    // The intra-node staged matrix for one pair of kinds over `tls` alone (`both`: settings of both processes):
    // 1 B to 64 MiB + 5 byte-exact, nothing direct (neither shm nor cuda_ipc without P2P reaches GPU memory), and
    // every put above the single-message threshold copied straight into the peer's mapped slot.
    static void staged_matrix(const std::string &mine, const std::string &peer, const char *tls,
                              const std::vector<std::pair<std::string, std::string>> &both) {
        for (size_t size : {size_t(1), size_t(8191), (size_t(1) << 20) + 13, (size_t(64) << 20) + 5}) {
            SCOPED_TRACE(size);
            TwoProcessRun r = go(mine, peer, size, tls, {}, both);
            expect_exact(r);
            EXPECT_EQ(r.rank0.transports, tls);
            EXPECT_EQ(r.rank0.bytes_direct, 0u) << r.rank0.put_path;
            if (size > 8192) { // smaller ones take the single-message path (no bounce slot)
                EXPECT_NE(r.rank0.put_path.find("peer-mapped"), std::string::npos) << r.rank0.put_path;
                EXPECT_NE(r.rank0.get_path.find("staged"), std::string::npos) << r.rank0.get_path;
            }
        }
    }
    static void expect_exact(const TwoProcessRun &r) {
        EXPECT_EQ(r.setup_error, "");
        EXPECT_EQ(r.rank0.error, "");
        EXPECT_EQ(r.rank0.op_status, GDX_OK) << gdx_status_string(r.rank0.op_status);
        EXPECT_EQ(r.rank0.peer_report, "");
        EXPECT_EQ(r.peer_exit, 0);
    }
};

TEST_P(StagingGpuTwoProcess, OverTcpByteExact) {
    auto [mine, peer] = GetParam();
    for (size_t size : {size_t(1), size_t(4097), (size_t(1) << 20) + 13, (size_t(64) << 20) + 5}) {
        SCOPED_TRACE(size);
        TwoProcessRun r = go(mine, peer, size, "tcp");
        expect_exact(r);
        EXPECT_EQ(r.rank0.transports, "tcp");
        EXPECT_EQ(r.rank0.bytes_direct, 0u) << "tcp cannot reach GPU memory: " << r.rank0.put_path;
    }
}

INSTANTIATE_TEST_SUITE_P(Kinds, StagingGpuTwoProcess,
                         ::testing::Combine(::testing::ValuesIn(kGpuKinds), ::testing::ValuesIn(kGpuKinds)),
                         pair_name);

TEST_F(StagingGpuTwoProcess, OneGiBOverTcp) {
    TwoProcessRun r = go("cuda", "cuda", size_t(1) << 30, "tcp");
    expect_exact(r);
    std::printf("[ path     ] put: %s\n[ path     ] get: %s\n", r.rank0.put_path.c_str(), r.rank0.get_path.c_str());
}

TEST_F(StagingGpuTwoProcess, OneGiBManagedToVmmWithFaults) {
    TwoProcessRun r = go("managed", "vmm", size_t(1) << 30, "tcp", {{"GDX_FAULT_POOL_LIMIT", "2"}});
    expect_exact(r);
}

TEST_F(StagingGpuTwoProcess, IntraNodePicksTheGpuPath) {
    for (const char *peer : kGpuKinds) {
        SCOPED_TRACE(peer);
        TwoProcessRun r = go("cuda", peer, (size_t(16) << 20) + 3, "all");
        expect_exact(r);
        std::printf("[ path     ] cuda->%s over %s: put %s | get %s\n", peer, r.rank0.transports.c_str(),
                    r.rank0.put_path.c_str(), r.rank0.get_path.c_str());
    }
}

TEST_F(StagingGpuTwoProcess, StagedThroughShm) {
    if (tp::find_component("shm") == nullptr) GTEST_SKIP() << "no shm transport in this build";
    TwoProcessRun r = go("cuda", "cuda", (size_t(64) << 20) + 7, "shm");
    expect_exact(r);
    EXPECT_EQ(r.rank0.transports, "shm");
    // Zero CPU copies: the sender's D2H lands in the receiver's slot, mapped here.
    EXPECT_NE(r.rank0.put_path.find("peer-mapped"), std::string::npos) << r.rank0.put_path;
}

// The intra-node staged path's integrity matrix: every pair of GPU kinds the engine stages (device, managed, VMM,
// stream-ordered pool), odd sizes from 1 B, puts and gets in flight at once, over shm with its mapped pools.
class StagingGpuShmMatrix : public StagingGpuTwoProcess {};

TEST_P(StagingGpuShmMatrix, ByteExact) {
    if (tp::find_component("shm") == nullptr) GTEST_SKIP() << "no shm transport in this build";
    auto [mine, peer] = GetParam();
    staged_matrix(mine, peer, "shm", {});
}

const char *const kStagedKinds[] = {"cuda", "managed", "vmm", "pool"};
INSTANTIATE_TEST_SUITE_P(Kinds, StagingGpuShmMatrix,
                         ::testing::Combine(::testing::ValuesIn(kStagedKinds), ::testing::ValuesIn(kStagedKinds)),
                         pair_name);

TEST_F(StagingGpuTwoProcess, ShmOneGiBAndMixedAndFaults) {
    if (tp::find_component("shm") == nullptr) GTEST_SKIP() << "no shm transport in this build";
    TwoProcessRun big = go("cuda", "vmm", size_t(1) << 30, "shm");
    expect_exact(big);
    std::printf("[ path     ] 1 GiB over shm: put %s | get %s\n", big.rank0.put_path.c_str(), big.rank0.get_path.c_str());
    // One message, two paths: host memory here is reachable, the peer's GPU memory is staged on its side only.
    TwoProcessRun mixed = go("host", "cuda", (size_t(32) << 20) + 3, "shm", {{"GDX_FAULT_P2P_EVERY", "3"}});
    expect_exact(mixed);
    // Slots scarce on both sides: credits, recalls and back-pressure, never an error.
    TwoProcessRun tight = go("cuda", "cuda", (size_t(48) << 20) + 1, "shm", {{"GDX_FAULT_POOL_LIMIT", "1"}});
    expect_exact(tight);
    // A failing copy fails its request with GDX_ERR_IO, never wrong bytes reported as success.
    TwoProcessRun bad = go("cuda", "cuda", 16 << 20, "shm", {{"GDX_FAULT_COPY_EVERY", "2"}});
    EXPECT_EQ(bad.setup_error, "");
    EXPECT_EQ(bad.rank0.op_status, GDX_ERR_IO) << gdx_status_string(bad.rank0.op_status);
}

// cuda_ipc with no peer-to-peer path stages by itself (issue 14): its bounce pools are shared segments the peer
// maps (kCapPeerMap), so with GDX_P2P=no on both sides a cuda_ipc-only endpoint carries every kind the engine
// stages, the sender's D2H landing in the receiver's slot and its H2D reading it there — no CPU copy, as over shm.
class StagingGpuIpcP2pOffMatrix : public StagingGpuTwoProcess {};

TEST_P(StagingGpuIpcP2pOffMatrix, ByteExactPeerMapped) {
    if (tp::find_component("cuda_ipc") == nullptr) GTEST_SKIP() << "no cuda_ipc transport in this build";
    auto [mine, peer] = GetParam();
    staged_matrix(mine, peer, "cuda_ipc", {{"GDX_P2P", "no"}});
}

INSTANTIATE_TEST_SUITE_P(Kinds, StagingGpuIpcP2pOffMatrix,
                         ::testing::Combine(::testing::ValuesIn(kStagedKinds), ::testing::ValuesIn(kStagedKinds)),
                         pair_name);

// One message, two paths over cuda_ipc: P2P on (one GPU: device-local copies), every third fragment denied the
// direct path, so it is staged through the peer's mapped pool; then scarce slots and failing copies, as over shm.
TEST_F(StagingGpuTwoProcess, IpcMixedDirectAndPeerMappedAndFaults) {
    if (tp::find_component("cuda_ipc") == nullptr) GTEST_SKIP() << "no cuda_ipc transport in this build";
    TwoProcessRun mixed = go("cuda", "cuda", (size_t(32) << 20) + 3, "cuda_ipc", {{"GDX_FAULT_P2P_EVERY", "3"}});
    expect_exact(mixed);
    EXPECT_EQ(mixed.rank0.transports, "cuda_ipc");
    EXPECT_GT(mixed.rank0.bytes_direct, 0u) << mixed.rank0.put_path;
    EXPECT_GT(mixed.rank0.bytes_staged, 0u) << mixed.rank0.put_path;
    EXPECT_NE(mixed.rank0.put_path.find("peer-mapped"), std::string::npos) << mixed.rank0.put_path;
    std::printf("[ path     ] mixed over cuda_ipc: put %s | get %s\n", mixed.rank0.put_path.c_str(),
                mixed.rank0.get_path.c_str());
    const std::pair<std::string, std::string> p2p_off{"GDX_P2P", "no"};
    TwoProcessRun tight =
        go("cuda", "pool", (size_t(48) << 20) + 1, "cuda_ipc", {}, {p2p_off, {"GDX_FAULT_POOL_LIMIT", "1"}});
    expect_exact(tight);
    TwoProcessRun bad = go("cuda", "cuda", 16 << 20, "cuda_ipc", {{"GDX_FAULT_COPY_EVERY", "2"}}, {p2p_off});
    EXPECT_EQ(bad.setup_error, "");
    EXPECT_EQ(bad.rank0.op_status, GDX_ERR_IO) << gdx_status_string(bad.rank0.op_status);
}

TEST_F(StagingGpuTwoProcess, FailedCopiesFailCleanlyAcrossProcesses) {
    TwoProcessRun r = go("cuda", "cuda", 16 << 20, "tcp", {{"GDX_FAULT_COPY_EVERY", "2"}});
    EXPECT_EQ(r.setup_error, "");
    EXPECT_EQ(r.rank0.error, "");
    EXPECT_EQ(r.rank0.op_status, GDX_ERR_IO) << gdx_status_string(r.rank0.op_status);
}

} // namespace
} // namespace gdx::test
