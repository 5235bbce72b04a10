// The public C API end to end: contexts, endpoints from address blobs, registration and keys, put/get with
// requests and their path reports; first two contexts in this process, then two processes over tcp (staging_peer
// exec'd) with direct, staged, mixed and failing transfers. Host memory only: the GPU set is test_staging_gpu.
#include "capi_pair.h"
#include "gdx/gdx.h"
#include "transport/transport.h"
#include "two_process.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace gdx::test {
namespace {

TEST_F(CApiPair, PutAndGetOverTcpReportTheirPath) {
    open("tcp");
    EXPECT_STREQ(gdx_ep_transports(e[0]), "tcp");
    gdx_request_t *r = nullptr;
    ASSERT_EQ(gdx_put(e[0], m[0], 100, k[0], 200, 300000, &r), GDX_OK) << gdx_last_error();
    ASSERT_TRUE(run([&] { return gdx_request_test(r) != GDX_INPROGRESS; }));
    EXPECT_EQ(gdx_request_test(r), GDX_OK);
    gdx_path_info_t p;
    ASSERT_EQ(gdx_request_path(r, &p), GDX_OK);
    EXPECT_STREQ(p.transport, "tcp");
    EXPECT_EQ(p.bytes_direct, 300000u);
    EXPECT_EQ(p.bytes_staged, 0u);
    EXPECT_STREQ(p.text, "tcp: direct[host->host] 100.0%");
    gdx_request_free(r);
    EXPECT_EQ(first_mismatch(mem[1].data() + 200, 300000, 10, 100), -1);

    ASSERT_EQ(gdx_get(e[0], m[0], 5, k[0], 400007, 1000, &r), GDX_OK);
    ASSERT_TRUE(run([&] { return gdx_request_test(r) != GDX_INPROGRESS; }));
    EXPECT_EQ(gdx_request_test(r), GDX_OK);
    gdx_request_free(r);
    EXPECT_EQ(first_mismatch(mem[0].data() + 5, 1000, 11, 400007), -1);
}

TEST_F(CApiPair, SameHostPeersUseTheIntraNodeTransports) {
    if (tp::find_component("shm") == nullptr) GTEST_SKIP() << "no shm transport in this build";
    open("all");
    std::string lanes = gdx_ep_transports(e[0]);
    EXPECT_NE(lanes.find("shm"), std::string::npos) << lanes;
    EXPECT_EQ(lanes.find("tcp"), std::string::npos) << "a peer on this host went over tcp: " << lanes;
    gdx_request_t *r = nullptr;
    ASSERT_EQ(gdx_put(e[1], m[1], 0, k[1], 0, 70000, &r), GDX_OK) << gdx_last_error();
    ASSERT_TRUE(run([&] { return gdx_request_test(r) != GDX_INPROGRESS; }));
    EXPECT_EQ(gdx_request_test(r), GDX_OK) << gdx_last_error();
    gdx_path_info_t p;
    ASSERT_EQ(gdx_request_path(r, &p), GDX_OK);
    EXPECT_STREQ(p.transport, "shm") << p.text;
    gdx_request_free(r);
    EXPECT_EQ(first_mismatch(mem[0].data(), 70000, 11), -1);
}

TEST_F(CApiPair, MisuseGetsAClearStatus) {
    open("tcp");
    gdx_request_t *r = nullptr;
    EXPECT_EQ(gdx_put(e[0], m[0], 0, k[0], (1 << 20) - 10, 11, &r), GDX_ERR_INVALID_PARAM);
    EXPECT_NE(std::strstr(gdx_last_error(), "outside"), nullptr) << gdx_last_error();
    EXPECT_EQ(gdx_put(e[0], m[0], 0, k[1], 0, 10, &r), GDX_ERR_INVALID_PARAM) << "a key of the other endpoint";
    EXPECT_EQ(gdx_put(nullptr, m[0], 0, k[0], 0, 10, &r), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(gdx_put(e[0], m[0], 0, k[0], 0, 10, nullptr), GDX_ERR_INVALID_PARAM);
    uint8_t junk[40] = {1, 2, 3};
    gdx_rkey_t *bad = nullptr;
    EXPECT_EQ(gdx_rkey_unpack(e[0], junk, sizeof(junk), &bad), GDX_ERR_PROTOCOL);
    EXPECT_EQ(gdx_ep_connect(e[0], junk, sizeof(junk)), GDX_ERR_BUSY) << "already connected";
    gdx_ep_t *fresh = nullptr;
    ASSERT_EQ(gdx_ep_create(c[0], &fresh), GDX_OK);
    EXPECT_EQ(gdx_ep_connect(fresh, junk, sizeof(junk)), GDX_ERR_PROTOCOL);
    EXPECT_EQ(gdx_rkey_unpack(fresh, junk, sizeof(junk), &bad), GDX_ERR_BUSY) << "not connected";
    EXPECT_EQ(gdx_ep_destroy(fresh), GDX_OK);
    size_t n = 3;
    uint8_t small[3];
    EXPECT_EQ(gdx_ep_address(e[0], small, &n), GDX_ERR_INVALID_PARAM);
    EXPECT_GT(n, 3u) << "the size needed is reported";
    gdx_mem_t *none = nullptr;
    EXPECT_EQ(gdx_mem_reg(c[0], nullptr, 10, GDX_ACCESS_ALL, &none), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(gdx_request_test(nullptr), GDX_ERR_INVALID_PARAM);

    // Busy objects refuse to go; a request freed early is released when it completes.
    ASSERT_EQ(gdx_put(e[0], m[0], 0, k[0], 0, 1 << 20, &r), GDX_OK);
    EXPECT_EQ(gdx_mem_dereg(m[0]), GDX_ERR_BUSY);
    EXPECT_EQ(gdx_ep_destroy(e[0]), GDX_ERR_BUSY);
    gdx_request_free(r);
    gdx_request_t *r2 = nullptr;
    ASSERT_EQ(gdx_put(e[0], m[0], 0, k[0], 0, 10, &r2), GDX_OK);
    ASSERT_TRUE(run([&] { return gdx_request_test(r2) != GDX_INPROGRESS; }));
    gdx_request_free(r2);
    gdx_status_t st = GDX_ERR_BUSY;
    for (int i = 0; i < 100 && st == GDX_ERR_BUSY; ++i) {
        long n = 0;
        run([&] { return ++n > 10000; });
        st = gdx_mem_dereg(m[0]);
    }
    EXPECT_EQ(st, GDX_OK) << "the freed request never released the registration";
    m[0] = nullptr;
}

// ---- two processes ------------------------------------------------------------------------------------------------

// Parametrized by the transport: over shm the staging engine's pools are shared segments each side maps, so a
// staged fragment is copied straight into the peer's slot (no transport copy): the path says "peer-mapped".
class TwoProcessHost : public ::testing::TestWithParam<std::string> {
  protected:
    void SetUp() override {
        if (tp::find_component(GetParam()) == nullptr) GTEST_SKIP() << "no " << GetParam() << " transport in this build";
    }
    bool mapped() const { return GetParam() == "shm"; }
    // Runs the scenario with `size` bytes, GDX_* settings for rank 0 and for the peer; asserts both ran.
    TwoProcessRun go(size_t size, unsigned pieces, std::vector<std::pair<std::string, std::string>> mine,
                     std::vector<std::pair<std::string, std::string>> peer = {}) {
        RankOptions o;
        o.sc.size = size;
        o.sc.pieces = pieces;
        o.config = std::move(mine);
        o.config.emplace_back("GDX_TLS", GetParam());
        peer.emplace_back("GDX_TLS", GetParam());
        TwoProcessRun r = run_two_process(o, "host", peer);
        EXPECT_EQ(r.setup_error, "");
        EXPECT_EQ(r.rank0.transports, GetParam());
        return r;
    }
    static void expect_exact(const TwoProcessRun &r) {
        EXPECT_EQ(r.rank0.error, "");
        EXPECT_EQ(r.rank0.op_status, GDX_OK) << gdx_status_string(r.rank0.op_status);
        EXPECT_EQ(r.rank0.peer_report, "") << "the peer's bytes";
        EXPECT_EQ(r.peer_exit, 0);
    }
};

TEST_P(TwoProcessHost, Direct) {
    TwoProcessRun r = go((1 << 20) + 13, 2, {});
    expect_exact(r);
    EXPECT_EQ(r.rank0.bytes_staged, 0u);
    EXPECT_EQ(r.rank0.bytes_direct, 2u * ((1 << 20) + 13));
}

TEST_P(TwoProcessHost, EverythingStaged) {
    TwoProcessRun r = go((1 << 20) + 13, 3, {{"GDX_FAULT_P2P_EVERY", "1"}});
    expect_exact(r);
    EXPECT_EQ(r.rank0.bytes_direct, 0u);
    std::string want = std::string("staged[frag 512K depth 4 local+remote") + (mapped() ? " peer-mapped" : "") +
                       "; fault-injected] 100.0%";
    EXPECT_NE(r.rank0.put_path.find(want), std::string::npos) << r.rank0.put_path;
    // Gets are staged out by the peer: over shm straight into our landing slots (the peer's counters say so; here
    // the bytes checked by both ranks are what counts).
    EXPECT_NE(r.rank0.get_path.find("staged"), std::string::npos) << r.rank0.get_path;
    // The context is gone: so are our pools' shared segments and our mappings of the peer's (nothing named, nothing
    // left in this process's address space).
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line)) EXPECT_EQ(line.find("gdx-shared"), std::string::npos) << line;
}

TEST_P(TwoProcessHost, MixedDirectAndStaged) {
    TwoProcessRun r = go((3 << 20) + 5, 2, {{"GDX_FAULT_P2P_EVERY", "2"}, {"GDX_FRAG_SIZE", "host:256K"}});
    expect_exact(r);
    EXPECT_GT(r.rank0.bytes_direct, 0u);
    EXPECT_GT(r.rank0.bytes_staged, 0u);
}

TEST_P(TwoProcessHost, ExhaustedPoolsOnBothSidesStillComplete) {
    std::vector<std::pair<std::string, std::string>> tight = {
        {"GDX_FAULT_P2P_EVERY", "1"}, {"GDX_FAULT_POOL_LIMIT", "1"}, {"GDX_FRAG_SIZE", "host:64K"}};
    TwoProcessRun r = go((2 << 20) + 7, 8, tight, {{"GDX_FAULT_POOL_LIMIT", "1"}});
    expect_exact(r);
}

TEST_P(TwoProcessHost, OddAndSmallSizes) {
    for (size_t size : {size_t(1), size_t(4097), size_t(8192), size_t(8193)}) {
        SCOPED_TRACE(size);
        TwoProcessRun r = go(size, 1, {{"GDX_FAULT_P2P_EVERY", "1"}});
        expect_exact(r);
    }
}

TEST_P(TwoProcessHost, FailedCopyFailsTheRequestNotTheProcess) {
    TwoProcessRun r = go(1 << 20, 2, {{"GDX_FAULT_P2P_EVERY", "1"}, {"GDX_FAULT_COPY_EVERY", "1"}});
    EXPECT_EQ(r.rank0.error, "");
    EXPECT_EQ(r.rank0.op_status, GDX_ERR_IO) << gdx_status_string(r.rank0.op_status);
    EXPECT_GE(r.peer_exit, 0) << "the peer must exit on its own";
}

TEST_P(TwoProcessHost, FailedCopyAtThePeerIsReportedHere) {
    TwoProcessRun r = go(1 << 20, 2, {{"GDX_FAULT_P2P_EVERY", "1"}}, {{"GDX_FAULT_COPY_EVERY", "1"}});
    EXPECT_EQ(r.rank0.error, "");
    EXPECT_EQ(r.rank0.op_status, GDX_ERR_IO) << gdx_status_string(r.rank0.op_status);
}

INSTANTIATE_TEST_SUITE_P(Over, TwoProcessHost, ::testing::Values(std::string("tcp"), std::string("shm")),
                         [](const ::testing::TestParamInfo<std::string> &i) { return i.param; });

} // namespace
} // namespace gdx::test
