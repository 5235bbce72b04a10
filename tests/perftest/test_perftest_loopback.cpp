// gdx_perftest end to end on this machine: --loopback over tcp and shm with host memory, every test, a few sizes,
// --validate, gdx's own path and forced staging. The data must match, the JSON must hold every row with its path
// and no NaN, and a corrupted transfer must be caught with its offset. No timing is asserted.
#include "perftest_run.h"

#define BOOST_BIND_GLOBAL_PLACEHOLDERS // property_tree includes boost/bind.hpp, which otherwise prints a note

#include <boost/property_tree/json_parser.hpp>
#include <boost/property_tree/ptree.hpp>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <unistd.h>

using gdx::perf::test::run;
namespace pt = boost::property_tree;

namespace {

bool has(const std::string &out, const std::string &needle) { return out.find(needle) != std::string::npos; }

// The decision lines come from a topology fixture: deterministic, and it keeps hwloc's PCI probe (libpciaccess,
// which leaks under LeakSanitizer) out of the sanitizer run.
const std::string kTopo = "GDX_TOPO_FILE=" GDX_TEST_SOURCE_DIR "/tests/topo/fixtures/two-socket.xml";

class TempFile {
  public:
    explicit TempFile(const char *suffix) {
        path_ = std::string(::testing::TempDir()) + "gdx_perftest_" + std::to_string(getpid()) + "_" +
                std::to_string(counter_++) + suffix;
    }
    ~TempFile() { std::remove(path_.c_str()); }
    const std::string &path() const { return path_; }
    std::string read() const {
        std::ifstream f(path_);
        std::stringstream ss;
        ss << f.rdbuf();
        return ss.str();
    }

  private:
    static inline int counter_ = 0;
    std::string path_;
};

} // namespace

TEST(PerftestLoopback, TcpHostMemoryAllTestsValidatedWithJson) {
    TempFile json(".json");
    auto r = run(kTopo, "--loopback -x tcp -m host -M host -t all -s 8,4K,64K -n 12 -w 2 -W 4 --validate --json " + json.path());
    ASSERT_EQ(r.status, 0) << r.out;
    // The table says which transport ran and that every row was validated.
    EXPECT_TRUE(has(r.out, "# tcp on ")) << r.out;
    EXPECT_TRUE(has(r.out, "(validated)")) << r.out;
    EXPECT_TRUE(has(r.out, "# decision: transport tcp")) << r.out;
    EXPECT_TRUE(has(r.out, "# decision: source: GDX_TOPO_FILE=")) << r.out; // gdx_info -t's lines
    EXPECT_FALSE(has(r.out, "WARNING")) << r.out;

    const std::string text = json.read();
    ASSERT_FALSE(text.empty());
    for (const char *bad : {"nan", "NaN", "inf", "Infinity"}) EXPECT_FALSE(has(text, bad)) << bad << " in " << text;
    pt::ptree doc;
    std::istringstream in(text);
    ASSERT_NO_THROW(pt::read_json(in, doc)) << text;
    EXPECT_EQ(doc.get<std::string>("tool"), "gdx_perftest");
    EXPECT_EQ(doc.get<bool>("validate"), true);
    const auto &rows = doc.get_child("rows");
    std::set<std::pair<std::string, uint64_t>> seen;
    for (const auto &[_, row] : rows) {
        const std::string test = row.get<std::string>("test");
        const uint64_t size = row.get<uint64_t>("size");
        seen.insert({test, size});
        EXPECT_EQ(row.get<std::string>("transport"), "tcp");
        EXPECT_EQ(row.get<std::string>("local_mem"), "host");
        EXPECT_EQ(row.get<std::string>("remote_mem"), "host");
        // The path field is present and names what carried the bytes.
        const std::string path = row.get<std::string>("path", "");
        const std::string kind = row.get<std::string>("path_kind", "");
        EXPECT_FALSE(path.empty()) << test << " " << size;
        EXPECT_TRUE(kind == "direct" || kind == "staged" || kind == "mixed") << test << " " << size << ": " << kind;
        EXPECT_TRUE(row.get<bool>("validated")) << test << " " << size;
        EXPECT_EQ(row.get<uint64_t>("iterations"), 12u);
        const double bw = row.get<double>("bw_GBps");
        EXPECT_GT(bw, 0) << test << " " << size;
        EXPECT_GT(row.get<double>("msg_rate_Mps"), 0) << test << " " << size;
        if (test == "put_lat") {
            EXPECT_GT(row.get<double>("lat_us.avg"), 0) << test << " " << size;
            EXPECT_LE(row.get<double>("lat_us.min"), row.get<double>("lat_us.p50"));
            EXPECT_LE(row.get<double>("lat_us.p50"), row.get<double>("lat_us.max"));
        } else {
            EXPECT_EQ(row.get<std::string>("lat_us"), "null");
        }
    }
    std::set<std::pair<std::string, uint64_t>> want;
    for (const char *t : {"put_bw", "get_bw", "put_lat"})
        for (uint64_t s : {8u, 4096u, 65536u}) want.insert({t, s});
    EXPECT_EQ(seen, want) << text;
}

TEST(PerftestLoopback, CorruptedTransferIsCaughtWithItsOffset) {
    // GDX_PERFTEST_CORRUPT_AT flips one byte of each message the receiver checks (a test aid).
    auto r = run(kTopo + " GDX_PERFTEST_CORRUPT_AT=100", "--loopback -x tcp -t put_bw -s 4K -n 3 --validate");
    EXPECT_EQ(r.status, 3) << r.out;
    EXPECT_TRUE(has(r.out, "data validation failed at the receiver (put_bw 4K, iteration 0)")) << r.out;
    EXPECT_TRUE(has(r.out, "first bad byte at offset 100 of the 4096-byte message")) << r.out;
    // The client checks what a get brought back.
    r = run(kTopo + " GDX_PERFTEST_CORRUPT_AT=7", "--loopback -x tcp -t get_bw -s 64 -n 3 --validate");
    EXPECT_EQ(r.status, 3) << r.out;
    EXPECT_TRUE(has(r.out, "first bad byte at offset 7 of the 64-byte message")) << r.out;
    // put_lat: the server checks each ping it echoes; the client checks each echo.
    r = run(kTopo + " GDX_PERFTEST_CORRUPT_AT=3", "--loopback -x shm -t put_lat -s 16 -n 3 -w 0 --validate");
    EXPECT_EQ(r.status, 3) << r.out;
    EXPECT_TRUE(has(r.out, "data validation failed at the receiver (put_lat 16")) << r.out;
    EXPECT_TRUE(has(r.out, "first bad byte at offset 3 of the 16-byte message")) << r.out;
}

TEST(PerftestLoopback, ShmWithGdxsPathAndForcedStagingIsValidatedAndSaysItsPath) {
    // gdx_put's own choice (shm between processes of one host), then every fragment staged: put_lat's
    // notification rides with the small staged put and follows the large ones.
    auto r = run(kTopo, "--loopback -x shm -t all -s 8,64K,1M -n 5 -w 1 --validate --no-decisions --csv");
    ASSERT_EQ(r.status, 0) << r.out;
    EXPECT_TRUE(has(r.out, "put_lat,8,5,")) << r.out;
    EXPECT_TRUE(has(r.out, ",shm,")) << r.out;
    EXPECT_TRUE(has(r.out, "\"direct[host->host] 100.0%\"")) << r.out;
    r = run(kTopo, "--loopback -x shm -t all -s 8,64K,1M -n 5 -w 1 --validate --no-decisions --path staged --csv");
    ASSERT_EQ(r.status, 0) << r.out;
    EXPECT_TRUE(has(r.out, "put_lat,8,5,")) << r.out;
    EXPECT_TRUE(has(r.out, "staged-small[local+remote; fault-injected] 100.0%")) << r.out;
    EXPECT_TRUE(has(r.out, "staged[frag 512K depth 4 local+remote")) << r.out;
    EXPECT_FALSE(has(r.out, "direct[")) << "--path staged took a direct path: " << r.out;
}

TEST(PerftestLoopback, MixedPathsAreTalliedPerRow) {
    // Every other fragment staged: one-fragment messages alternate between direct and staged requests, and the
    // row names both with their counts; a 1M message (two fragments of 512K) mixes within each request.
    auto r = run(kTopo + " GDX_FAULT_P2P_EVERY=2",
                 "--loopback -x tcp -t put_bw,put_lat -s 8,1M -n 4 -w 0 -W 2 --validate --no-decisions --csv");
    ASSERT_EQ(r.status, 0) << r.out;
    EXPECT_TRUE(has(r.out, "(x")) << "a row of alternating paths names each with its count: " << r.out;
    EXPECT_TRUE(has(r.out, "direct[host->host] 50.0% + staged[frag 512K depth 4 local+remote; fault-injected] 50.0%"))
        << r.out;
}

TEST(PerftestLoopback, CsvHasHeaderAndOneLinePerRow) {
    auto r = run(kTopo, "--loopback -x tcp -m host -M host -t put_bw,put_lat -s 8,1K -n 5 --csv", "2>/dev/null");
    ASSERT_EQ(r.status, 0) << r.out;
    std::istringstream in(r.out);
    std::string line;
    std::vector<std::string> lines;
    while (std::getline(in, line)) lines.push_back(line);
    ASSERT_EQ(lines.size(), 5u) << r.out;
    EXPECT_EQ(lines[0].rfind("test,size,iterations,", 0), 0u) << lines[0];
    EXPECT_EQ(lines[1].rfind("put_bw,8,5,", 0), 0u) << lines[1];
    EXPECT_EQ(lines[4].rfind("put_lat,1024,5,", 0), 0u) << lines[4];
    for (const auto &l : lines) EXPECT_FALSE(has(l, "nan")) << l;
}

TEST(PerftestLoopback, UnwritableJsonFileFailsAfterTheRun) {
    auto r = run(kTopo, "--loopback -x tcp -t put_bw -s 8 -n 3 --json /nonexistent-dir/x.json");
    EXPECT_EQ(r.status, 1) << r.out;
    EXPECT_TRUE(has(r.out, "cannot write JSON results to '/nonexistent-dir/x.json'")) << r.out;
}

TEST(PerftestLoopback, UnknownTransportInThisBuildIsNamed) {
    // rc needs an RDMA device; without one (or without the transport) the message says what is available.
    auto r = run(kTopo, "--loopback -x rc -t put_bw -s 8 -n 3 --timeout 10");
    if (r.status == 0) GTEST_SKIP() << "rc works here (RDMA device present)";
    EXPECT_EQ(r.status, 1) << r.out;
    EXPECT_TRUE(has(r.out, "transport 'rc'")) << r.out;
}

TEST(PerftestLoopback, PhaseLongerThanTheTimeoutSurvivesThroughKeepalives) {
    // --timeout bounds every wait, and the server waits for the client's next request through a whole measured
    // phase: the client's keepalives must carry a phase that outlasts it (about 3 GB here, longer than 2 s on
    // slow or sanitizer builds; no time asserted).
    auto r = run(kTopo, "--loopback -x tcp -t put_bw -s 256K -n 400 -W 32 --timeout 2 --no-decisions");
    EXPECT_EQ(r.status, 0) << r.out;
    std::istringstream in(r.out);
    std::string line, test, size;
    bool row = false;
    while (std::getline(in, line)) {
        std::istringstream f(line);
        if (f >> test >> size && test == "put_bw" && size == "256K") row = true;
    }
    EXPECT_TRUE(row) << r.out;
}

TEST(PerftestMpirun, TwoRanksRunAndTheServersRefusalReachesTheClient) {
    if (std::system("command -v mpirun > /dev/null 2>&1") != 0) GTEST_SKIP() << "mpirun not installed (openmpi-bin)";
    const std::string mpirun = "mpirun --allow-run-as-root --oversubscribe -np 2 ";
    const std::string port = std::to_string(20000 + getpid() % 20000);
    auto launch = [&](const std::string &args) {
        std::string cmd = "env " + kTopo + " timeout -k 5 120 " + mpirun + "-x GDX_TOPO_FILE " GDX_TEST_BINARY_DIR
                          "/perftest/gdx_perftest -p " + port +
                          " --timeout 30 " + args + " 2>&1";
        gdx::perf::test::RunResult r;
        FILE *p = popen(cmd.c_str(), "r");
        if (p == nullptr) return r;
        char buf[4096];
        size_t n;
        while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
        int st = pclose(p);
        r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        return r;
    };
    auto r = launch("-x tcp -t put_bw,put_lat -s 8,4K -n 5 --validate --no-decisions");
    ASSERT_EQ(r.status, 0) << r.out;
    EXPECT_TRUE(has(r.out, "# tcp on ")) << r.out;
    EXPECT_TRUE(has(r.out, "(validated)")) << r.out;
    // Rank 0 (the server) cannot hold GPU 1000's memory: it refuses, and the client says what the server said.
    r = launch("-M cuda:1000 -t put_bw -s 8 -n 3 --no-decisions");
    EXPECT_NE(r.status, 0) << r.out;
    EXPECT_TRUE(has(r.out, "peer: server: memory kind 'cuda:1000'")) << r.out;
}
