// Topology: path classes and GPUDirect decisions on real machine shapes (hwloc XML fixtures written by
// tests/topo/fixtures/gen_fixtures.py), and gdx_info -t reading them through GDX_TOPO_FILE.
#include "core/config.h"
#include "fallback/numa_placement.h"
#include "topo/topology.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <sys/wait.h>

using namespace gdx;
using namespace gdx::topo;

namespace {

const std::string kFixtures = GDX_TEST_SOURCE_DIR "/tests/topo/fixtures/";

std::unique_ptr<Topology> load(const std::string &name) {
    std::unique_ptr<Topology> t;
    EXPECT_EQ(Topology::load_xml(kFixtures + name, &t), GDX_OK) << name;
    return t;
}

std::vector<std::vector<PathClass>> matrix(const Topology &t) {
    std::vector<std::vector<PathClass>> m;
    for (const PciDevice &g : t.gpus()) {
        m.emplace_back();
        for (const PciDevice &n : t.nics()) m.back().push_back(t.path(g.bus_id, n.bus_id));
    }
    return m;
}

std::vector<std::string> names(const Topology &t) {
    std::vector<std::string> v;
    for (const PciDevice &n : t.nics()) v.push_back(n.name);
    return v;
}

std::string run_info(const std::string &env) {
    std::string cmd = "env " + env + " " GDX_TEST_BINARY_DIR "/tools/gdx_info -t 2>&1";
    FILE *p = popen(cmd.c_str(), "r");
    std::string out;
    if (!p) return out;
    std::array<char, 4096> buf;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
    int st = pclose(p);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << out;
    return out;
}

} // namespace

TEST(Topology, DgxLikePathClasses) {
    auto t = load("dgx-like.xml");
    ASSERT_TRUE(t);
    ASSERT_EQ(t->gpus().size(), 8u);
    ASSERT_EQ(names(*t), (std::vector<std::string>{"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"}));
    auto m = matrix(*t);
    // GPU 2k and 2k+1 share a level-2 switch with mlx5_k; two level-2 switches hang off one level-1 switch per
    // socket.
    for (int g = 0; g < 8; ++g) {
        for (int n = 0; n < 4; ++n) {
            PathClass want = g / 2 == n ? PathClass::PIX : g / 4 == n / 2 ? PathClass::PXB : PathClass::SYS;
            EXPECT_EQ(m[g][n], want) << "GPU" << g << " - mlx5_" << n << ": " << path_name(m[g][n]);
        }
    }
    EXPECT_EQ(t->path(t->gpus()[0].bus_id, t->gpus()[1].bus_id), PathClass::PIX);
    EXPECT_EQ(t->path(t->gpus()[0].bus_id, t->gpus()[0].bus_id), PathClass::LOC);
}

TEST(Topology, TwoSocketNicOnTheOtherSocket) {
    auto t = load("two-socket.xml");
    ASSERT_TRUE(t);
    ASSERT_EQ(t->gpus().size(), 2u);
    ASSERT_EQ(t->nics().size(), 1u);
    EXPECT_EQ(t->path(t->gpus()[0].bus_id, t->nics()[0].bus_id), PathClass::SYS);
    EXPECT_EQ(t->path(t->gpus()[1].bus_id, t->nics()[0].bus_id), PathClass::PHB);
    std::string why;
    EXPECT_EQ(t->path(t->gpus()[0].bus_id, "0000:ee:00.0", &why), PathClass::Unknown);
    EXPECT_EQ(why, "PCI 0000:ee:00.0 not in the topology");
    EXPECT_EQ(t->path(t->gpus()[0].bus_id, "", &why), PathClass::Unknown);
    EXPECT_EQ(why, "not a PCI device");
}

TEST(Topology, DecisionsFollowGdrLevelPolicyAndNicCaps) {
    GdrPolicy p; // defaults: try, PXB, P2P allowed
    NicGdrCaps dmabuf{true, true, false, false, "dma-buf yes"};
    NicGdrCaps none{true, false, false, false, "no dma-buf (EOPNOTSUPP), no peer memory"};
    EXPECT_TRUE(decide_gdr(p, PathClass::PIX, dmabuf).direct);
    EXPECT_EQ(decide_gdr(p, PathClass::PXB, dmabuf).reason, "PXB, dma-buf yes");
    GdrDecision d = decide_gdr(p, PathClass::SYS, dmabuf);
    EXPECT_FALSE(d.direct);
    EXPECT_EQ(d.reason, "SYS > GDX_GDR_LEVEL=PXB");
    EXPECT_FALSE(decide_gdr(p, PathClass::PHB, dmabuf).direct);
    EXPECT_EQ(decide_gdr(p, PathClass::PIX, none).reason, "PIX, no dma-buf (EOPNOTSUPP), no peer memory");
    EXPECT_FALSE(decide_gdr(p, PathClass::PIX, none).direct);
    EXPECT_TRUE(decide_gdr(p, PathClass::Unknown, NicGdrCaps{}).direct) << "an unknown path does not gate";
    p.level = PathClass::SYS;
    EXPECT_TRUE(decide_gdr(p, PathClass::SYS, dmabuf).direct);
    p.p2p_disabled = true;
    EXPECT_EQ(decide_gdr(p, PathClass::PIX, dmabuf).reason, "GDX_PCI_P2P_DISABLE=yes");
    p.gdr = Ternary::No;
    EXPECT_EQ(decide_gdr(p, PathClass::PIX, dmabuf).reason, "GDX_GDR=no");
    Config c;
    std::string err;
    ASSERT_EQ(Config::load({{"GDX_GDR_LEVEL", "phb"}, {"GDX_PCI_P2P_DISABLE", "yes"}}, &c, &err), GDX_OK) << err;
    GdrPolicy q = GdrPolicy::from(c);
    EXPECT_EQ(q.level, PathClass::PHB);
    EXPECT_TRUE(q.p2p_disabled);
}

TEST(Topology, NearestNicIsStableAndSpreadsAmongEquals) {
    auto t = load("dgx-like.xml");
    ASSERT_TRUE(t);
    auto m = matrix(*t);
    std::vector<bool> all(4, true);
    EXPECT_EQ(nearest_nics(m, names(*t), all), (std::vector<int>{0, 0, 1, 1, 2, 2, 3, 3}));
    // Without mlx5_0 its GPUs fall back to the PXB neighbour; without a whole socket's NICs they spread over
    // the other socket's two (SYS, equal: GPU0 → mlx5_2, GPU1 → mlx5_3, ...).
    EXPECT_EQ(nearest_nics(m, names(*t), {false, true, true, true}), (std::vector<int>{1, 1, 1, 1, 2, 2, 3, 3}));
    EXPECT_EQ(nearest_nics(m, names(*t), {false, false, true, true}), (std::vector<int>{2, 3, 2, 3, 2, 2, 3, 3}));
    EXPECT_EQ(nearest_nics(m, names(*t), {false, false, false, false}), (std::vector<int>(8, -1)));
}

TEST(Topology, NetDevicesFilter) {
    Config c;
    std::string err;
    ASSERT_EQ(Config::load({{"GDX_NET_DEVICES", "mlx5_1:1,rxe0"}}, &c, &err), GDX_OK) << err;
    EXPECT_TRUE(net_device_allowed(c, "mlx5_1"));
    EXPECT_TRUE(net_device_allowed(c, "mlx5_1:1"));
    EXPECT_FALSE(net_device_allowed(c, "mlx5_1:2"));
    EXPECT_FALSE(net_device_allowed(c, "mlx5_0"));
    EXPECT_TRUE(net_device_allowed(c, "rxe0:1"));
    EXPECT_TRUE(net_device_allowed(Config::defaults(), "anything"));
}

TEST(Topology, BusIdNormalization) {
    EXPECT_EQ(normalize_bus_id("00000000:3B:00.0"), "0000:3b:00.0");
    EXPECT_EQ(normalize_bus_id("0000:3b:00.1"), "0000:3b:00.1");
    EXPECT_EQ(normalize_bus_id("rxe0"), "");
    EXPECT_EQ(normalize_bus_id("0000:3b:00.0x"), "");
    EXPECT_EQ(normalize_bus_id(""), "");
}

TEST(Topology, BadTopologyFileIsAClearConfigError) {
    std::unique_ptr<Topology> t;
    EXPECT_EQ(Topology::load_xml("/nonexistent/topo.xml", &t), GDX_ERR_INVALID_CONFIG);
    EXPECT_EQ(Topology::load_xml(kFixtures + "gen_fixtures.py", &t), GDX_ERR_INVALID_CONFIG);
}

TEST(GdxInfoTopology, DgxLikeFileLinesAndDecisions) {
    std::string out = run_info("GDX_TOPO_FILE=" + kFixtures + "dgx-like.xml");
    EXPECT_NE(out.find("GPU0 → mlx5_0: PIX"), std::string::npos) << out;
    EXPECT_NE(out.find("GPU0 → mlx5_1: PXB"), std::string::npos) << out;
    EXPECT_NE(out.find("GPU0 → mlx5_2: SYS > GDX_GDR_LEVEL=PXB → staged"), std::string::npos) << out;
    EXPECT_NE(out.find("GPU7 → mlx5_3: PIX"), std::string::npos) << out;
    EXPECT_NE(out.find("GPU2 nearest: mlx5_1"), std::string::npos) << out;
}

TEST(GdxInfoTopology, TwoSocketWithLevelAndP2pOverrides) {
    std::string f = "GDX_TOPO_FILE=" + kFixtures + "two-socket.xml";
    std::string out = run_info(f);
    EXPECT_NE(out.find("GPU0 → mlx5_0: SYS > GDX_GDR_LEVEL=PXB → staged"), std::string::npos) << out;
    EXPECT_NE(out.find("GPU1 → mlx5_0: PHB > GDX_GDR_LEVEL=PXB → staged"), std::string::npos) << out;
    out = run_info(f + " GDX_GDR_LEVEL=SYS");
    EXPECT_NE(out.find("GPU0 → mlx5_0: SYS"), std::string::npos) << out;
    EXPECT_NE(out.find("→ direct"), std::string::npos) << out;
    out = run_info(f + " GDX_GDR_LEVEL=SYS GDX_PCI_P2P_DISABLE=1");
    EXPECT_NE(out.find("GPU1 → mlx5_0: PHB, GDX_PCI_P2P_DISABLE=yes → staged"), std::string::npos) << out;
    out = run_info(f + " GDX_NET_DEVICES=mlx5_9");
    EXPECT_NE(out.find("no RDMA device allowed by GDX_NET_DEVICES"), std::string::npos) << out;
}

TEST(GdxInfoTopology, ThisMachineSaysWhatItHas) {
    // Here: no GPU and (outside the soft-RoCE guest) no RDMA device; either way a plain answer, exit 0.
    std::string out = run_info("");
    EXPECT_NE(out.find("# Topology and path decisions"), std::string::npos) << out;
}

// ---- NUMA: where the staging pools go (src/topo/numa.cpp, src/fallback/numa_placement.cpp) -------------------

TEST(TopologyNuma, EachGpuOfTwoSocketsHasItsOwnNode) {
    auto t = load("two-socket.xml");
    ASSERT_TRUE(t);
    EXPECT_EQ(t->numa_nodes(), 2);
    std::string why;
    EXPECT_EQ(t->nodes_near(t->gpus()[0].bus_id, &why), "0") << why;
    EXPECT_EQ(t->nodes_near(t->gpus()[1].bus_id, &why), "1") << why;
    EXPECT_EQ(t->nodes_near("0000:99:00.0", &why), "");
    EXPECT_NE(why.find("not in the topology"), std::string::npos) << why;
    // Another machine's nodes are never bound here.
    std::vector<char> mem(1 << 16);
    EXPECT_FALSE(t->bind_area(mem.data(), mem.size(), "1"));
    topo::Topology::ThreadMembind scope(*t, "1");
    EXPECT_FALSE(scope.active());
}

TEST(TopologyNuma, DgxLikeGpusFollowTheirSocket) {
    auto t = load("dgx-like.xml");
    ASSERT_TRUE(t);
    ASSERT_EQ(t->gpus().size(), 8u);
    std::string why;
    for (size_t g = 0; g < 8; ++g)
        EXPECT_EQ(t->nodes_near(t->gpus()[g].bus_id, &why), g < 4 ? "0" : "1") << "GPU" << g << ": " << why;
}

// The pool placement reads the topology GDX_TOPO_FILE names (issue 17: it used to discover this machine whatever
// the file said), decides the node from it, and binds nothing (the nodes are another machine's).
TEST(TopologyNuma, PoolPlacementHonoursTheTopologyFile) {
    const std::string file = kFixtures + "two-socket.xml";
    auto t = load("two-socket.xml");
    ASSERT_TRUE(t);
    fb::Placement p = fb::place_near_pci(t->gpus()[1].bus_id, "GPU 1", file);
    EXPECT_EQ(p.nodes, "1");
    EXPECT_NE(p.text.find("NUMA node 1 (nearest GPU 1 at " + t->gpus()[1].bus_id + ")"), std::string::npos) << p.text;
    EXPECT_NE(p.text.find("GDX_TOPO_FILE"), std::string::npos) << p.text;
    std::vector<char> mem(4096);
    std::string text;
    void *got = nullptr;
    bool called = false;
    EXPECT_EQ(fb::alloc_placed(p, [&](void **out) { called = true; *out = mem.data(); return GDX_OK; }, mem.size(),
                               &got, &text),
              GDX_OK);
    EXPECT_TRUE(called);
    EXPECT_EQ(got, mem.data());
    EXPECT_EQ(text.find("failed"), std::string::npos) << "nothing is bound from a file: " << text;

    p = fb::place_near_pci("0000:99:00.0", "GPU 7", file);
    EXPECT_EQ(p.nodes, "");
    EXPECT_NE(p.text.find("GPU 7 (bus 0000:99:00.0) not found in the hwloc topology"), std::string::npos) << p.text;
    p = fb::place_near_device(-1, file);
    EXPECT_NE(p.text.find("no device affinity"), std::string::npos) << p.text;
    p = fb::place_near_pci(t->gpus()[0].bus_id, "GPU 0", kFixtures + "missing.xml");
    EXPECT_NE(p.text.find("topology unavailable"), std::string::npos) << p.text;
}
