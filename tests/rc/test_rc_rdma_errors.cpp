// rc failure paths on a real RDMA device (label rdma): the GPUDirect probe meeting the device's real refusal
// and the ladder's decision for (fake) GPU memory; keys the NIC refuses; a peer killed mid-transfer; bad input.
#include "rc_rdma_fixture.h"

#include <algorithm>
#include <csignal>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

using namespace gdx;
using namespace gdx::tp;
using namespace gdx::test;

extern char **environ;

namespace {
using RcErrors = RcRdmaTest;
constexpr size_t kRkeyOff = 44, kLenOff = 16, kChunkOff = 32, kAccessOff = 5; // md.h's key layout
struct AmLogOne {
    int n = 0;
    static void handler(void *arg, Endpoint *, const void *, size_t) { ++static_cast<AmLogOne *>(arg)->n; }
};
void put_le(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
} // namespace

TEST_F(RcErrors, GpuDirectProbeMeetsTheDevicesRealRefusal) {
    std::shared_ptr<rc::DeviceCtx> dev;
    ASSERT_EQ(rc::DeviceCtx::open(device_, 0, Config::defaults(), &dev), GDX_OK) << last_error();
    const rc::NicGdrSupport &s = dev->gdr_support();
    std::printf("%s: %s; ODP errno %s; peer memory: %s\n", device_.c_str(), s.summary().c_str(),
                rc::errno_name(s.odp_errno).c_str(), s.peermem_how.c_str());
    if (device_.rfind("rxe", 0) != 0) GTEST_SKIP() << "the expected refusals below are soft-RoCE's; " << device_ << " printed above";
    EXPECT_FALSE(s.dmabuf);
    EXPECT_EQ(s.dmabuf_errno, EOPNOTSUPP) << "rxe has no reg_dmabuf_mr: libibverbs' stub answers EOPNOTSUPP";
    EXPECT_FALSE(s.odp) << "rxe: none on 6.1/6.12; on sid's 7.2 refused by the data check (test_rc_odp)";
    if (s.odp_check.empty()) {
        EXPECT_EQ(s.odp_errno, EINVAL) << "rxe (6.1) refuses IBV_ACCESS_ON_DEMAND with EINVAL";
    }
    EXPECT_FALSE(s.peermem);
    EXPECT_TRUE(dev->bus_id().empty()) << "a software device has no PCI function";
}

TEST_F(RcErrors, LadderStagesGpuMemoryOnThisNicAndSaysWhyOnce) {
    rc::reset_learned_for_test();
    FakeGpuMemoryForTest gpu(1 << 20);
    {
        LogCapture log;
        auto a = open({{"GDX_REG_METHODS", "dmabuf,peermem,odp"}});
        std::unique_ptr<MemHandle> h;
        ASSERT_EQ(a->md().mem_reg(gpu.ptr(), gpu.bytes.size(), gpu.info, kAccessAll, &h), GDX_OK) << last_error();
        ASSERT_EQ(h->chunks().size(), 1u);
        EXPECT_EQ(h->chunks()[0].reach, Reach::None);
        const std::string &why = h->chunks()[0].reason;
        EXPECT_EQ(why.rfind("no dma-buf (EOPNOTSUPP), no peer memory, no ODP (", 0), 0u) << why;
        EXPECT_NE(why.find("ON_DEMAND: EINVAL"), std::string::npos) << why;
        EXPECT_FALSE(h->direct(0, 1));
        EXPECT_FALSE(a->caps().direct_types & type_bit(mem::MemType::CudaDevice)) << "caps must not promise GPU memory";
        // The decision is learned: a second registration logs nothing new.
        std::unique_ptr<MemHandle> h2;
        ASSERT_EQ(a->md().mem_reg(gpu.ptr(), 4096, gpu.info, kAccessAll, &h2), GDX_OK);
        EXPECT_EQ(log.count("GPUDirect unavailable for GPU0 / " + device_ + ": no dma-buf (EOPNOTSUPP), no peer memory"), 1u)
            << log.text();
        // Staged memory is refused as an RDMA source or target, before anything is posted.
        auto b = open();
        std::unique_ptr<Endpoint> ea, eb;
        connect(*a, *b, &ea, &eb);
        Buf tgt(4096);
        auto ht = reg(*b, tgt.data, tgt.len);
        auto rk = rkey_of(*a, *ht);
        Completion c;
        c.count = 1;
        EXPECT_EQ(ea->put(gpu.ptr(), 4096, h.get(), reinterpret_cast<uintptr_t>(tgt.data), *rk, &c), GDX_ERR_INVALID_PARAM);
        EXPECT_NE(last_error().find("Reach::None"), std::string::npos) << last_error();
        auto rk_gpu = rkey_of(*b, *h); // what a peer would get for the staged buffer: it opens nothing
        Buf src(4096);
        auto hs = reg(*b, src.data, src.len);
        EXPECT_EQ(eb->put(src.data, 4096, hs.get(), reinterpret_cast<uintptr_t>(gpu.ptr()), *rk_gpu, &c), GDX_ERR_ACCESS_DENIED);
        EXPECT_NE(last_error().find("staged memory"), std::string::npos) << last_error();
    }
    // GDX_GDR=yes demands directness: registration fails loudly. GDX_GDR=no never tries.
    auto y = open({{"GDX_GDR", "yes"}});
    std::unique_ptr<MemHandle> h;
    EXPECT_EQ(y->md().mem_reg(gpu.ptr(), 4096, gpu.info, kAccessAll, &h), GDX_ERR_UNSUPPORTED);
    EXPECT_NE(last_error().find("GDX_GDR=yes"), std::string::npos) << last_error();
    auto n = open({{"GDX_GDR", "no"}});
    ASSERT_EQ(n->md().mem_reg(gpu.ptr(), 4096, gpu.info, kAccessAll, &h), GDX_OK);
    EXPECT_EQ(h->chunks()[0].reason, "GDX_GDR=no");
}

TEST_F(RcErrors, KeysTheNicRefusesAreReportedAndTheEndpointReplaced) {
    auto a = open(), b = open();
    Buf src(8192), tgt(8192), ro(4096);
    auto hs = reg(*a, src.data, src.len, kAccessLocalRead | kAccessLocalWrite);
    auto ht = reg(*b, tgt.data, 4096, kAccessRemoteWrite | kAccessRemoteRead | kAccessLocalWrite);
    auto hro = reg(*b, ro.data, ro.len, kAccessRemoteRead);
    std::vector<uint8_t> good(a->md().rkey_packed_size()), ro_packed(good.size());
    ASSERT_EQ(ht->pack_rkey(good), GDX_OK);
    ASSERT_EQ(hro->pack_rkey(ro_packed), GDX_OK);
    uint64_t base = reinterpret_cast<uintptr_t>(tgt.data);
    auto unpack = [&](std::vector<uint8_t> bytes) {
        std::unique_ptr<RemoteKey> k;
        EXPECT_EQ(a->md().rkey_unpack(bytes, &k), GDX_OK) << last_error();
        return k;
    };
    // 1. The initiator refuses what the key does not claim, before posting: the endpoint stays usable.
    std::unique_ptr<Endpoint> ea, eb;
    connect(*a, *b, &ea, &eb);
    auto rk = unpack(good);
    Completion c;
    c.count = 1;
    EXPECT_EQ(ea->put(src.data, 4097, hs.get(), base, *rk, &c), GDX_ERR_ACCESS_DENIED);
    EXPECT_EQ(ea->put(src.data, 8, hs.get(), base - 8, *rk, &c), GDX_ERR_ACCESS_DENIED);
    auto rro = unpack(ro_packed);
    EXPECT_EQ(ea->put(src.data, 8, hs.get(), reinterpret_cast<uintptr_t>(ro.data), *rro, &c), GDX_ERR_ACCESS_DENIED);
    EXPECT_EQ(ea->state(), GDX_OK);
    // 2. Forged keys pass our check but not the NIC's: a wrong rkey, a range beyond the memory region, a right
    //    the region was not registered with. Each fails the operation with GDX_ERR_ACCESS_DENIED and the
    //    endpoint with it; a new endpoint pair works again.
    struct Forgery {
        const char *what;
        std::vector<uint8_t> bytes;
        uint64_t raddr;
        size_t len;
        bool write;
    };
    std::vector<Forgery> forgeries;
    {
        std::vector<uint8_t> f = good;
        f[kRkeyOff] ^= 0x5a;
        forgeries.push_back({"wrong rkey", f, base, 64, true});
        f = good; // claim 8 KiB (as one 1 MiB chunk) over a 4 KiB region
        put_le(&f[kLenOff], 8192);
        put_le(&f[kChunkOff], 1u << 20);
        forgeries.push_back({"range beyond the region", f, base + 4096, 64, true});
        forgeries.push_back({"range beyond the region (read)", f, base + 4000, 200, false});
        f = ro_packed;
        f[kAccessOff] |= kAccessRemoteWrite;
        forgeries.push_back({"write to a read-only region", f, reinterpret_cast<uintptr_t>(ro.data), 64, true});
    }
    for (Forgery &f : forgeries) {
        SCOPED_TRACE(f.what);
        auto k = unpack(f.bytes);
        std::memset(ro.data, 0x33, ro.len);
        gdx_status_t st = wait_op({a.get(), b.get()}, [&](Completion *cp) {
            return f.write ? ea->put(src.data, f.len, hs.get(), f.raddr, *k, cp) : ea->get(src.data, f.len, hs.get(), f.raddr, *k, cp);
        });
        EXPECT_EQ(st, GDX_ERR_ACCESS_DENIED) << gdx_status_string(st);
        EXPECT_EQ(ea->state(), GDX_ERR_ACCESS_DENIED);
        EXPECT_EQ(ea->put(src.data, 8, hs.get(), base, *rk, &c), GDX_ERR_ACCESS_DENIED) << "the failed endpoint stays failed";
        EXPECT_EQ(ro.data[0], 0x33) << "nothing written where the key gave no right";
        // Reconnect on new endpoints and prove the path works.
        eb.reset();
        ea.reset();
        connect(*a, *b, &ea, &eb);
        fill(src.data, 64, 77);
        ASSERT_EQ(wait_op({a.get(), b.get()}, [&](Completion *cp) { return ea->put(src.data, 64, hs.get(), base, *rk, cp); }), GDX_OK);
        EXPECT_EQ(std::memcmp(tgt.data, src.data, 64), 0);
    }
}

TEST_F(RcErrors, PeerKilledMidTransferFailsOperationsWithinTheBound) {
    const char *timeout = "2s";
    setenv("GDX_PEER_TIMEOUT", timeout, 1); // the exec'd peer inherits it too
    auto a = open({{"GDX_PEER_TIMEOUT", timeout}});
    double bound = static_cast<rc::RcInterface &>(*a).timing().bound_s;
    int to_child[2], from_child[2];
    ASSERT_EQ(pipe2(to_child, O_CLOEXEC), 0);
    ASSERT_EQ(pipe2(from_child, O_CLOEXEC), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, to_child[0], 0);
    posix_spawn_file_actions_adddup2(&fa, from_child[1], 1);
    const size_t kLen = 16u << 20;
    std::string bin = GDX_TEST_BINARY_DIR "/tests/rc/rc_peer", len = std::to_string(kLen);
    char *argv[] = {bin.data(), port_.data(), len.data(), nullptr};
    pid_t pid = -1;
    ASSERT_EQ(posix_spawn(&pid, bin.c_str(), &fa, nullptr, argv, environ), 0) << bin;
    posix_spawn_file_actions_destroy(&fa);
    close(to_child[0]);
    close(from_child[1]);
    FILE *in = fdopen(from_child[0], "r");
    char line[4096];
    ASSERT_NE(fgets(line, sizeof(line), in), nullptr) << "the peer printed nothing";
    char addr[512], rkey[512];
    unsigned long long rbase = 0;
    ASSERT_EQ(sscanf(line, "ADDR %511s RKEY %511s BASE %llu", addr, rkey, &rbase), 3) << line;
    std::unique_ptr<Endpoint> ep;
    ASSERT_EQ(a->ep_create(&ep), GDX_OK);
    ASSERT_EQ(ep->connect(unhex(addr)), GDX_OK) << last_error();
    std::string mine = hex(ep->address()) + "\n";
    ASSERT_EQ(write(to_child[1], mine.data(), mine.size()), ssize_t(mine.size()));
    ASSERT_NE(fgets(line, sizeof(line), in), nullptr);
    ASSERT_STREQ(line, "READY\n");
    std::unique_ptr<RemoteKey> rk;
    ASSERT_EQ(a->md().rkey_unpack(unhex(rkey), &rk), GDX_OK);
    Buf src(kLen);
    auto hs = reg(*a, src.data, src.len, kAccessLocalRead);
    // Keep 8 puts of 1 MiB in flight; kill the peer once some have completed.
    struct Slot {
        Completion c;
        bool busy = false;
    } slots[8];
    int done_ok = 0, issued = 0, errors = 0, reset = 0;
    auto t_kill = std::chrono::steady_clock::time_point{};
    bool killed = false;
    auto guard = std::chrono::steady_clock::now() + std::chrono::seconds(300);
    for (;;) {
        a->progress();
        bool any_busy = false;
        for (Slot &s : slots) {
            if (s.busy && s.c.count == 0) {
                s.busy = false;
                if (s.c.status == GDX_OK) ++done_ok;
                else ++errors, reset += s.c.status == GDX_ERR_CONNECTION_RESET;
            }
            if (!s.busy && ep->state() == GDX_OK) { // after the kill too: the stream goes on until it fails
                s.c = Completion{};
                s.c.count = 1;
                size_t off = (issued % 16) * (1u << 20);
                gdx_status_t st = ep->put(src.data + off, 1u << 20, hs.get(), rbase + off, *rk, &s.c);
                if (st == GDX_INPROGRESS) s.busy = true, ++issued;
                else ASSERT_EQ(st, GDX_ERR_NO_RESOURCE) << last_error();
            }
            any_busy |= s.busy;
        }
        if (!killed && done_ok >= 8) {
            ASSERT_EQ(kill(pid, SIGKILL), 0);
            ASSERT_EQ(waitpid(pid, nullptr, 0), pid);
            t_kill = std::chrono::steady_clock::now();
            killed = true;
        }
        if (killed && !any_busy && ep->state() != GDX_OK) break;
        ASSERT_LT(std::chrono::steady_clock::now(), guard) << "hang guard: operations never completed after the kill";
    }
    double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_kill).count();
    std::printf("peer killed after %d puts completed (%d issued); %d failed (%d with CONNECTION_RESET) %.2f s later "
                "(GDX_PEER_TIMEOUT=%s, QP retry bound %.2f s)\n", done_ok, issued, errors, reset, took, timeout, bound);
    EXPECT_GT(errors, 0) << "operations in flight at the kill must fail, not vanish";
    EXPECT_EQ(ep->state(), GDX_ERR_CONNECTION_RESET);
    EXPECT_EQ(ep->put(src.data, 64, hs.get(), rbase, *rk, &slots[0].c), GDX_ERR_CONNECTION_RESET);
    // Within the bound: the QP gives up after its retries; generous slack for an emulated machine's timers.
    EXPECT_LT(took, 3 * bound + 10) << "errors took far longer than the configured bound";
    fclose(in);
    close(to_child[1]);
    unsetenv("GDX_PEER_TIMEOUT");
}

TEST_F(RcErrors, BadInputIsRefusedWithAReason) {
    auto a = open(), b = open(), other = open();
    std::unique_ptr<Endpoint> ea, eb;
    ASSERT_EQ(a->ep_create(&ea), GDX_OK);
    Buf m(4096);
    auto hm = reg(*a, m.data, m.len, kAccessLocalRead);
    auto h_other = reg(*other, m.data, m.len, kAccessAll);
    auto rk = rkey_of(*a, *reg(*b, m.data, m.len));
    Completion c;
    c.count = 1;
    EXPECT_EQ(ea->am_short(0, m.data, 1), GDX_ERR_NO_RESOURCE) << "not connected yet";
    EXPECT_EQ(ea->connect(std::vector<uint8_t>(10, 0)), GDX_ERR_PROTOCOL);
    std::vector<uint8_t> addr = ea->address();
    addr[24] ^= 1; // another GDX_RC_SEG_SIZE
    EXPECT_EQ(ea->connect(addr), GDX_ERR_INVALID_CONFIG);
    EXPECT_NE(last_error().find("GDX_RC_SEG_SIZE"), std::string::npos);
    ea.reset();
    connect(*a, *b, &ea, &eb);
    EXPECT_EQ(ea->connect(eb->address()), GDX_ERR_INVALID_PARAM) << "connect twice";
    EXPECT_EQ(ea->put(m.data, 128, h_other.get(), rk->base(), *rk, &c), GDX_ERR_INVALID_PARAM) << "handle of another MD";
    EXPECT_EQ(ea->put(m.data, 128, nullptr, rk->base(), *rk, &c), GDX_ERR_INVALID_PARAM) << "too big for inline";
    EXPECT_EQ(ea->get(m.data, 8, hm.get(), rk->base(), *rk, &c), GDX_ERR_ACCESS_DENIED) << "no local write right";
    EXPECT_EQ(ea->put(m.data + 4000, 200, hm.get(), rk->base(), *rk, &c), GDX_ERR_INVALID_PARAM) << "outside the handle";
    EXPECT_EQ(ea->am_short(kMaxAmId, m.data, 1), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(ea->am_short(0, m.data, a->caps().max_am_short + 1), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(ea->am_bcopy(0, m.data, a->caps().max_am_bcopy + 1), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(ea->am_zcopy(0, nullptr, 0, m.data, 10, h_other.get(), &c), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(a->set_am_handler(kMaxAmId, nullptr, nullptr), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(ea->put(m.data, 0, nullptr, 0, *rk, &c), GDX_OK) << "nothing to move";
    EXPECT_EQ(ea->state(), GDX_OK) << "refusals before posting leave the endpoint usable";
    std::unique_ptr<Interface> none;
    EXPECT_EQ(rc::component()->open({"nosuchdev0:1", "", false}, Config::defaults(), &none), GDX_ERR_NO_DEVICE);
    EXPECT_EQ(rc::component()->open({port_, "", false}, config_with({{"GDX_NET_DEVICES", "mlx5_9"}}), &none), GDX_ERR_NO_DEVICE);
    EXPECT_EQ(rc::component()->open({port_, "", false}, config_with({{"GDX_IB_GID_INDEX", "99999"}}), &none),
              GDX_ERR_INVALID_CONFIG);
}

TEST_F(RcErrors, GidSelectionFollowsThePreferenceAndTheOverride) {
    std::shared_ptr<rc::DeviceCtx> dev;
    ASSERT_EQ(rc::DeviceCtx::open(device_, 0, Config::defaults(), &dev), GDX_OK) << last_error();
    if (!dev->is_roce()) GTEST_SKIP() << "InfiniBand port: LID addressing, no GID choice";
    std::vector<ibv_gid_entry> t(dev->port_attr().gid_tbl_len);
    ssize_t n = ibv_query_gid_table(dev->ctx(), t.data(), t.size(), 0);
    ASSERT_GT(n, 0);
    // The rule: RoCE v2 IPv4-mapped, else RoCE v2 link-local, else other RoCE v2, else v1 (first of each kind).
    int want = -1, rank = 9;
    for (ssize_t i = 0; i < n; ++i) {
        if (t[i].port_num != dev->port()) continue;
        const uint8_t *g = t[i].gid.raw;
        bool v4 = std::all_of(g, g + 10, [](uint8_t b) { return b == 0; }) && g[10] == 0xff && g[11] == 0xff;
        bool ll = g[0] == 0xfe && (g[1] & 0xc0) == 0x80;
        int r = t[i].gid_type == IBV_GID_TYPE_ROCE_V2 ? (v4 ? 0 : ll ? 1 : 2) : 3;
        if (r < rank) rank = r, want = static_cast<int>(t[i].gid_index);
    }
    EXPECT_EQ(dev->gid_index(), want) << "chose " << dev->gid_text();
    std::printf("%s: GID %d %s (rank %d of: 0 IPv4-mapped v2, 1 link-local v2, 2 other v2, 3 v1)\n", device_.c_str(),
                dev->gid_index(), dev->gid_text().c_str(), rank);
    // The override picks exactly that index, and an endpoint pair connects through it.
    std::shared_ptr<rc::DeviceCtx> forced;
    std::string idx = std::to_string(t[0].gid_index);
    ASSERT_EQ(rc::DeviceCtx::open(device_, 0, config_with({{"GDX_IB_GID_INDEX", idx}}), &forced), GDX_OK) << last_error();
    EXPECT_EQ(forced->gid_index(), static_cast<int>(t[0].gid_index));
    auto a = open({{"GDX_IB_GID_INDEX", idx}}), b = open({{"GDX_IB_GID_INDEX", idx}});
    std::unique_ptr<Endpoint> ea, eb;
    connect(*a, *b, &ea, &eb);
    uint8_t m = 7;
    AmLogOne got;
    ASSERT_EQ(b->set_am_handler(3, AmLogOne::handler, &got), GDX_OK);
    ASSERT_EQ(ea->am_short(3, &m, 1), GDX_OK);
    ASSERT_TRUE(progress_until({a.get(), b.get()}, [&] { return got.n == 1; }, "AM over the forced GID"));
}
