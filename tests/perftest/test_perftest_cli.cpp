// gdx_perftest as a user runs it: every bad input gets a clear message and a non-zero exit (2 for arguments),
// nothing hangs (every wait is bounded by --timeout), and the option parser's rules hold.
#include "perftest/decisions.h"
#include "perftest/options.h"
#include "perftest/report.h"
#include "perftest_run.h"

#include <gtest/gtest.h>

#include <map>

using gdx::perf::Options;
using gdx::perf::parse_options;
using gdx::perf::parse_sizes;
using gdx::perf::Role;
using PTest = gdx::perf::Test;
using gdx::perf::test::run;

namespace {

bool has(const std::string &out, const std::string &needle) { return out.find(needle) != std::string::npos; }

std::map<std::string, std::string> g_env;
const char *fake_env(const char *name) {
    auto it = g_env.find(name);
    return it == g_env.end() ? nullptr : it->second.c_str();
}

bool parse(std::vector<std::string> args, Options *o, std::string *why, std::map<std::string, std::string> env = {}) {
    g_env = std::move(env);
    bool usage = false;
    return parse_options(args, o, why, &usage, fake_env);
}

} // namespace

// ---- the binary: messages and exit codes ---------------------------------------------------------------

TEST(PerftestCli, HelpPrintsUsageAndExitsZero) {
    auto r = run("", "-h");
    EXPECT_EQ(r.status, 0);
    EXPECT_TRUE(has(r.out, "Usage: gdx_perftest")) << r.out;
    EXPECT_TRUE(has(r.out, "--validate")) << r.out;
}

TEST(PerftestCli, BadSizeNamesTheValueAndTheUnit) {
    auto r = run("", "--loopback -s 4Q");
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_TRUE(has(r.out, "bad size '4Q' in -s: unknown size unit 'q'")) << r.out;
    EXPECT_TRUE(has(r.out, "Try 'gdx_perftest -h'")) << r.out;
}

TEST(PerftestCli, BadSizeRangeAndZeroAreRefused) {
    auto r = run("", "--loopback -s 1M:4K");
    EXPECT_EQ(r.status, 2);
    EXPECT_TRUE(has(r.out, "the first size is larger than the last")) << r.out;
    r = run("", "--loopback -s 0,8");
    EXPECT_EQ(r.status, 2);
    EXPECT_TRUE(has(r.out, "sizes start at 1 byte")) << r.out;
    r = run("", "--loopback -s 8,,16");
    EXPECT_EQ(r.status, 2);
    EXPECT_TRUE(has(r.out, "empty element")) << r.out;
}

TEST(PerftestCli, UnknownTestListsTheAcceptedOnes) {
    auto r = run("", "--loopback -t put_bw,put_bww");
    EXPECT_EQ(r.status, 2);
    EXPECT_TRUE(has(r.out, "unknown test 'put_bww' in -t (accepted: put_bw, get_bw, put_lat, all)")) << r.out;
}

TEST(PerftestCli, ActiveMessageTestsAreGoneAndSaySo) {
    // Transport active messages are reached only through the UCX module: ucx_perftest measures them.
    for (const char *t : {"am_bw", "am_lat"}) {
        auto r = run("", std::string("--loopback -t put_bw,") + t);
        EXPECT_EQ(r.status, 2) << r.out;
        EXPECT_TRUE(has(r.out, std::string("test '") + t + "' was removed")) << r.out;
        EXPECT_TRUE(has(r.out, std::string("ucx_perftest -t ") + t)) << r.out;
    }
}

TEST(PerftestCli, UnknownMemoryKindListsTheAcceptedOnes) {
    auto r = run("", "--loopback -M gpu:0");
    EXPECT_EQ(r.status, 2);
    EXPECT_TRUE(has(r.out, "in -M: unknown memory kind 'gpu:0' (accepted: host, host-pinned[:N], cuda[:N]")) << r.out;
    r = run("", "--loopback -m cuda:x");
    EXPECT_EQ(r.status, 2);
    EXPECT_TRUE(has(r.out, "bad GPU index 'x'")) << r.out;
    r = run("", "--loopback -m host:1");
    EXPECT_EQ(r.status, 2);
    EXPECT_TRUE(has(r.out, "memory kind 'host' takes no GPU index")) << r.out;
}

TEST(PerftestCli, CudaMemoryWithoutSuchGpuIsAClearErrorBeforeAnythingStarts) {
    // GPU 1000 exists nowhere: without a GPU the message says there is none (and why), with GPUs it says how
    // many there are. Either way: non-zero exit, no connection attempted, no hang.
    auto r = run("", "--loopback -m cuda:1000 --timeout 5");
    EXPECT_EQ(r.status, 1) << r.out;
    EXPECT_TRUE(has(r.out, "memory kind 'cuda:1000'")) << r.out;
    EXPECT_TRUE(has(r.out, "needs a GPU, and there is none here") || has(r.out, "GPU 1000 does not exist")) << r.out;
    // The client checks its own memory before connecting to anyone.
    r = run("", "127.0.0.1 -p 1 -m cuda-vmm:1000 --timeout 5");
    EXPECT_EQ(r.status, 1) << r.out;
    EXPECT_TRUE(has(r.out, "memory kind 'cuda-vmm:1000'")) << r.out;
    EXPECT_FALSE(has(r.out, "cannot connect")) << r.out;
}

TEST(PerftestCli, BadPortIsRefused) {
    for (const char *p : {"70000", "abc", "-1", ""}) {
        auto r = run("", std::string("127.0.0.1 -p '") + p + "'");
        EXPECT_EQ(r.status, 2) << p << ": " << r.out;
        EXPECT_TRUE(has(r.out, std::string("bad port '") + p + "' in -p: expected a number from 1 to 65535")) << r.out;
    }
    auto r = run("", "127.0.0.1 -p 0");
    EXPECT_EQ(r.status, 2);
    EXPECT_TRUE(has(r.out, "a client needs the server's port")) << r.out;
    r = run("", "--loopback -p 5000");
    EXPECT_EQ(r.status, 2);
    EXPECT_TRUE(has(r.out, "-p is not used with --loopback")) << r.out;
}

TEST(PerftestCli, MissingServerAddressIsNamed) {
    auto r = run("", "''");
    EXPECT_EQ(r.status, 2);
    EXPECT_TRUE(has(r.out, "missing server address")) << r.out;
    // Under mpirun across nodes rank 1 cannot guess where rank 0 listens.
    r = run("OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_LOCAL_SIZE=1", "");
    EXPECT_EQ(r.status, 2);
    EXPECT_TRUE(has(r.out, "missing server address: the 2 ranks are on different nodes")) << r.out;
    EXPECT_TRUE(has(r.out, "gdx_perftest A")) << r.out;
}

TEST(PerftestCli, OtherArgumentErrors) {
    struct Case {
        const char *env, *args, *message;
    } cases[] = {
        {"", "--loopback -x ib", "unknown transport 'ib' in -x (accepted: tcp, shm, cuda_ipc, rc, auto)"},
        {"", "--loopback --path fast", "unknown path 'fast' in --path (accepted: auto, direct, staged)"},
        {"", "--loopback -n 0", "bad value '0' for -n: expected a positive number of iterations"},
        {"", "--loopback -W 5000", "the window is at most 4096"},
        {"", "--loopback --timeout 0", "bad value '0' for --timeout"},
        {"", "--loopback --json", "option --json needs a value"},
        {"", "--loopback --bogus", "unknown option '--bogus'"},
        {"", "a b", "unexpected argument 'b'"},
        {"", "--loopback 127.0.0.1", "--loopback runs both sides here"},
        {"OMPI_COMM_WORLD_SIZE=4 OMPI_COMM_WORLD_RANK=0", "", "needs exactly 2 ranks"},
        {"OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0", "--loopback", "do not combine it with mpirun"},
    };
    for (const auto &c : cases) {
        auto r = run(c.env, c.args);
        EXPECT_EQ(r.status, 2) << c.args << ": " << r.out;
        EXPECT_TRUE(has(r.out, c.message)) << c.args << ": " << r.out;
    }
}

TEST(PerftestCli, InvalidGdxVariableFailsNamingIt) {
    auto r = run("GDX_LOG_LEVEL=loud", "--loopback");
    EXPECT_EQ(r.status, 1);
    EXPECT_TRUE(has(r.out, "GDX_LOG_LEVEL")) << r.out;
    EXPECT_TRUE(has(r.out, "loud")) << r.out;
}

TEST(PerftestCli, ServerWithoutClientGivesUpAfterTheTimeout) {
    auto r = run("", "-p 0 --timeout 1");
    EXPECT_EQ(r.status, 1) << r.out;
    EXPECT_TRUE(has(r.out, "listening on 127.0.0.1:")) << r.out;
    EXPECT_TRUE(has(r.out, "no client connected within 1 s")) << r.out;
}

TEST(PerftestCli, ClientWithoutServerGivesUpAfterTheTimeout) {
    auto r = run("", "127.0.0.1 -p 1 --timeout 1");
    EXPECT_EQ(r.status, 1) << r.out;
    EXPECT_TRUE(has(r.out, "gdx_perftest: cannot reach the server at 127.0.0.1:1")) << r.out;
    EXPECT_TRUE(has(r.out, "within 1s")) << r.out;
    r = run("", "no-such-host.invalid --timeout 1");
    EXPECT_EQ(r.status, 1) << r.out;
    EXPECT_TRUE(has(r.out, "cannot resolve 'no-such-host.invalid'")) << r.out;
}

// ---- the parser's rules, directly ----------------------------------------------------------------------

TEST(PerftestOptions, SizeRangeIsPowersOfTwo) {
    std::vector<uint64_t> v;
    std::string why;
    ASSERT_TRUE(parse_sizes("1:1G", &v, &why)) << why;
    ASSERT_EQ(v.size(), 31u);
    EXPECT_EQ(v.front(), 1u);
    EXPECT_EQ(v.back(), 1ull << 30);
    ASSERT_TRUE(parse_sizes("3:100", &v, &why)) << why;
    EXPECT_EQ(v, (std::vector<uint64_t>{4, 8, 16, 32, 64}));
    ASSERT_TRUE(parse_sizes("8,4K,1M", &v, &why)) << why;
    EXPECT_EQ(v, (std::vector<uint64_t>{8, 4096, 1u << 20}));
    ASSERT_TRUE(parse_sizes("1000", &v, &why)) << why;
    EXPECT_EQ(v, (std::vector<uint64_t>{1000}));
    EXPECT_FALSE(parse_sizes("1:inf", &v, &why));
    EXPECT_FALSE(parse_sizes("64G", &v, &why));
    EXPECT_TRUE(has(why, "larger than the 16G maximum")) << why;
}

TEST(PerftestOptions, RolesFromArgumentsAndOpenMpiEnvironment) {
    Options o;
    std::string why;
    ASSERT_TRUE(parse({}, &o, &why)) << why;
    EXPECT_EQ(o.role, Role::Server);
    ASSERT_TRUE(parse({"node1", "-p", "2000"}, &o, &why)) << why;
    EXPECT_EQ(o.role, Role::Client);
    EXPECT_EQ(o.host, "node1");
    EXPECT_EQ(o.port, 2000);
    ASSERT_TRUE(parse({"--loopback"}, &o, &why)) << why;
    EXPECT_EQ(o.role, Role::Loopback);
    // mpirun on one node: rank 0 serves, rank 1 connects through loopback.
    std::map<std::string, std::string> env{
        {"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}};
    ASSERT_TRUE(parse({}, &o, &why, env)) << why;
    EXPECT_EQ(o.role, Role::Client);
    EXPECT_EQ(o.host, "127.0.0.1");
    env["OMPI_COMM_WORLD_RANK"] = "0";
    ASSERT_TRUE(parse({"nodeA"}, &o, &why, env)) << why;
    EXPECT_EQ(o.role, Role::Server);
    EXPECT_EQ(o.host, "nodeA"); // rank 0 listens on the address it was given
}

TEST(PerftestOptions, ClientSpecRoundTripsWithSidesSwapped) {
    Options c, s;
    std::string why;
    ASSERT_TRUE(parse({"h", "-t", "get_bw,put_lat", "-s", "8,1M", "-n", "7", "-w", "2", "-W", "9", "-m", "cuda:1",
                       "-M", "host-pinned:0", "-x", "tcp", "--path", "staged", "--validate"},
                      &c, &why))
        << why;
    ASSERT_TRUE(parse({}, &s, &why)) << why;
    ASSERT_TRUE(gdx::perf::apply_client_spec(c.serialize(), &s, &why)) << why << " | " << c.serialize();
    EXPECT_EQ(s.tests, (std::vector<PTest>{PTest::GetBw, PTest::PutLat}));
    EXPECT_EQ(s.sizes, (std::vector<uint64_t>{8, 1u << 20}));
    EXPECT_EQ(s.iterations, 7u);
    EXPECT_EQ(s.warmup, 2u);
    EXPECT_EQ(s.window, 9u);
    EXPECT_EQ(s.transport, "tcp");
    EXPECT_EQ(s.path, gdx::perf::PathMode::Staged);
    EXPECT_TRUE(s.validate);
    ASSERT_EQ(s.mem_pairs.size(), 1u);
    EXPECT_EQ(s.mem_pairs[0].first.text(), "host-pinned:0");
    EXPECT_EQ(s.mem_pairs[0].second.text(), "cuda:1");
    EXPECT_EQ(s.role, Role::Server); // launch options stay the server's
    EXPECT_FALSE(gdx::perf::apply_client_spec("-t nope", &s, &why));
    EXPECT_TRUE(has(why, "unknown test 'nope'")) << why;
}

TEST(PerftestOptions, AutomaticCountsStayBounded) {
    Options o;
    std::string why;
    ASSERT_TRUE(parse({"--loopback"}, &o, &why)) << why;
    for (uint64_t size : {uint64_t{1}, uint64_t{4096}, uint64_t{1} << 20, uint64_t{1} << 30}) {
        for (PTest t : gdx::perf::kAllTests) {
            EXPECT_GE(o.iterations_for(t, size), 3u);
            EXPECT_LE(o.iterations_for(t, size), 5000u);
            EXPECT_GE(o.window_for(t, size), 1u);
            EXPECT_LE(o.warmup_for(t, size), 100u);
        }
    }
    EXPECT_EQ(o.window_for(PTest::PutLat, 8), 1u);
    EXPECT_EQ(o.window_for(PTest::PutBw, 1u << 30), 1u);
}

// ---- sanity limits (ucx-py#1088: an impossible figure must be flagged, not printed as a result) ----------

namespace {
gdx::perf::Row row_with(double gbps) {
    gdx::perf::Row r;
    r.test = "put_bw";
    r.size = 1 << 20;
    r.bw_GBps = gbps;
    return r;
}
} // namespace

TEST(PerftestLimits, EachPathHasItsLimitAndOnlyAFigureAboveItIsFlagged) {
    using gdx::perf::limit_for;
    using gdx::perf::MemKindOpt;
    using gdx::perf::MemSpec;
    using gdx::perf::PathUsed;
    const MemSpec host{}, gpu0{MemKindOpt::Cuda, 0}, gpu1{MemKindOpt::Cuda, 1};
    PathUsed direct;
    direct.kind = "direct";
    PathUsed staged;
    staged.kind = "staged";
    staged.staged_share = 1;
    EXPECT_STREQ(limit_for("tcp", direct, host, host, true).name, "tcp-loopback");
    EXPECT_EQ(limit_for("tcp", direct, host, host, true).GBps, 100);
    EXPECT_STREQ(limit_for("tcp", direct, host, host, false).name, "tcp-network");
    EXPECT_STREQ(limit_for("shm", direct, host, host, true).name, "shm");
    EXPECT_STREQ(limit_for("cuda_ipc", direct, gpu0, gpu1, true).name, "nvlink");
    EXPECT_EQ(limit_for("cuda_ipc", direct, gpu0, gpu1, true).GBps, 900);
    EXPECT_STREQ(limit_for("cuda_ipc", direct, gpu0, gpu0, true).name, "gpu-local");
    EXPECT_STREQ(limit_for("cuda_ipc", staged, gpu0, gpu1, true).name, "pcie"); // staged through host: PCIe
    EXPECT_EQ(limit_for("tcp", staged, gpu0, host, true).GBps, 64);
    EXPECT_STREQ(limit_for("rc", direct, host, host, false).name, "rc");
    EXPECT_STREQ(limit_for("rc", direct, gpu0, host, false).name, "pcie");

    auto r = row_with(950);
    EXPECT_TRUE(gdx::perf::sanity_check(&r, limit_for("cuda_ipc", direct, gpu0, gpu1, true)));
    EXPECT_NE(r.warning.find("950.00 GB/s exceeds the 900 GB/s limit of nvlink"), std::string::npos) << r.warning;
    r = row_with(101);
    EXPECT_TRUE(gdx::perf::sanity_check(&r, limit_for("tcp", direct, host, host, true)));
    EXPECT_NE(r.warning.find("tcp-loopback"), std::string::npos) << r.warning;
    r = row_with(65);
    EXPECT_TRUE(gdx::perf::sanity_check(&r, limit_for("tcp", staged, gpu0, gpu0, true)));
    r = row_with(12.5);
    EXPECT_FALSE(gdx::perf::sanity_check(&r, limit_for("tcp", direct, host, host, true)));
    EXPECT_TRUE(r.warning.empty());
    EXPECT_EQ(r.limit_name, "tcp-loopback");
}

// ---- gdx_info -t's decisions, narrowed to the run's device pair ----------------------------------------

TEST(PerftestDecisions, KeepsOnlyTheLinesOfThisRunsGpuAndNic) {
    // gdx_info -t over the 8-GPU, 4-NIC fixture: the lines gdx_perftest filters.
    std::string cmd = "GDX_TOPO_FILE=" GDX_TEST_SOURCE_DIR "/tests/topo/fixtures/dgx-like.xml " GDX_TEST_BINARY_DIR
                      "/tools/gdx_info -t 2>&1";
    FILE *p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::vector<std::string> all;
    char buf[1024];
    while (fgets(buf, sizeof(buf), p) != nullptr) {
        std::string l(buf);
        if (!l.empty() && l.back() == '\n') l.pop_back();
        all.push_back(l);
    }
    ASSERT_EQ(pclose(p), 0);
    ASSERT_GT(all.size(), 30u);

    auto rc = gdx::perf::filter_decisions(all, {1}, "rc", "mlx5_0:1");
    ASSERT_EQ(rc.size(), 4u) << ::testing::PrintToString(rc);
    EXPECT_TRUE(has(rc[0], "source: GDX_TOPO_FILE=")) << rc[0];
    EXPECT_TRUE(has(rc[1], "GDX_GDR=try")) << rc[1];
    EXPECT_EQ(rc[2].rfind("GPU1 → mlx5_0: PIX → direct", 0), 0u) << rc[2];
    EXPECT_EQ(rc[3], "GPU1 nearest: mlx5_0 (PIX)");

    // tcp never uses a NIC: no GPU → NIC pair, but still where the GPU sits.
    auto tcp = gdx::perf::filter_decisions(all, {4}, "tcp", "lo");
    ASSERT_EQ(tcp.size(), 3u) << ::testing::PrintToString(tcp);
    EXPECT_EQ(tcp[2], "GPU4 nearest: mlx5_2 (PIX)");

    // Host memory: only the policy lines.
    EXPECT_EQ(gdx::perf::filter_decisions(all, {}, "rc", "mlx5_3:1").size(), 2u);
}
