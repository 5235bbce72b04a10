// Host memory's pin-or-ODP choice (register_host) with the fault-injecting registrar: when ODP is taken and
// why (pinning refused, GDX_RC_ODP_MIN), when it is not (not listed, not pageable, the device has none) and that
// this is said once; the implicit MR only for local access; prefetch asked only where the probe found it.
#include "rc_test_util.h"
#include "transport/rc/md.h"

using namespace gdx;
using namespace gdx::tp;
using namespace gdx::tp::rc;
using gdx::test::FakeRegistrar;

namespace {
struct HostOdpTest : ::testing::Test {
    void SetUp() override {
        cfg.order = {Rung::Dmabuf, Rung::PeerMem, Rung::Odp};
        odp_nic.support_.odp = true;
        odp_nic.support_.odp_errno = 0;
        odp_nic.support_.odp_why.clear();
        odp_nic.support_.prefetch_errno = EOPNOTSUPP;
    }
    void release(FakeRegistrar &r, HostReg &h) {
        if (h.mr != nullptr && h.shared == nullptr) r.dereg(h.mr);
        h = HostReg{};
    }
    LadderConfig cfg;
    FakeRegistrar odp_nic;
    mem::MemInfo pageable; // default: host-pageable
    std::vector<char> buf = std::vector<char>(1 << 16);
    static constexpr int kLocal = IBV_ACCESS_LOCAL_WRITE;
    static constexpr int kRemote = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
};
} // namespace

TEST_F(HostOdpTest, PinnedWhenPinningWorksAndNoThreshold) {
    HostReg h;
    ASSERT_EQ(register_host(odp_nic, cfg, buf.data(), buf.size(), pageable, kRemote, &h), GDX_OK);
    EXPECT_EQ(h.reach, Reach::Host);
    EXPECT_EQ(h.reason, "host memory (pinned)");
    EXPECT_EQ(odp_nic.odp_calls, 0);
    release(odp_nic, h);
}

TEST_F(HostOdpTest, PinningRefusedGoesToOdpAndSaysWhyOnce) {
    odp_nic.va_errno = ENOMEM;
    gdx::test::LogCapture log;
    HostReg h;
    ASSERT_EQ(register_host(odp_nic, cfg, buf.data(), buf.size(), pageable, kRemote, &h), GDX_OK) << last_error();
    EXPECT_EQ(h.reach, Reach::Odp);
    EXPECT_EQ(h.reason.rfind("ODP: pinning refused (ibv_reg_mr: ENOMEM, RLIMIT_MEMLOCK ", 0), 0u) << h.reason;
    EXPECT_EQ(odp_nic.va_calls, 1);
    EXPECT_EQ(odp_nic.odp_calls, 1);
    EXPECT_EQ(odp_nic.prefetch_calls, 0) << "the probe found no ibv_advise_mr: not asked";
    release(odp_nic, h);
    ASSERT_EQ(register_host(odp_nic, cfg, buf.data(), buf.size(), pageable, kRemote, &h), GDX_OK);
    release(odp_nic, h);
    EXPECT_EQ(log.count("pageable host memory registered with on-demand paging (nothing pinned): pinning refused"), 1u)
        << log.text();
}

TEST_F(HostOdpTest, ThresholdTakesOdpFirstAndFailureFallsBackToPinning) {
    cfg.odp_min = 4096;
    odp_nic.support_.odp_prefetch = true;
    odp_nic.support_.prefetch_errno = 0;
    HostReg h;
    ASSERT_EQ(register_host(odp_nic, cfg, buf.data(), buf.size(), pageable, kRemote, &h), GDX_OK);
    EXPECT_EQ(h.reach, Reach::Odp);
    EXPECT_EQ(h.reason, "ODP: 65536 bytes >= GDX_RC_ODP_MIN=4K");
    EXPECT_EQ(odp_nic.va_calls, 0);
    EXPECT_EQ(odp_nic.prefetch_calls, 1);
    EXPECT_EQ(odp_nic.prefetched, buf.size());
    EXPECT_TRUE(odp_nic.last_prefetch_write);
    release(odp_nic, h);
    // Below the threshold: pinned.
    ASSERT_EQ(register_host(odp_nic, cfg, buf.data(), 4095, pageable, kRemote, &h), GDX_OK);
    EXPECT_EQ(h.reach, Reach::Host);
    release(odp_nic, h);
    // ODP refusing this buffer: pinned, with the refusal in the reason.
    odp_nic.odp_errno = EFAULT;
    ASSERT_EQ(register_host(odp_nic, cfg, buf.data(), buf.size(), pageable, kRemote, &h), GDX_OK);
    EXPECT_EQ(h.reach, Reach::Host);
    EXPECT_EQ(h.reason, "host memory (pinned; ODP failed (ibv_reg_mr ON_DEMAND: EFAULT))");
    release(odp_nic, h);
    // Both refusing: an error that names both.
    odp_nic.va_errno = ENOMEM;
    EXPECT_EQ(register_host(odp_nic, cfg, buf.data(), buf.size(), pageable, kRemote, &h), GDX_ERR_NO_MEMORY);
    EXPECT_NE(last_error().find("refused (ibv_reg_mr: ENOMEM"), std::string::npos) << last_error();
    EXPECT_NE(last_error().find("ODP failed (ibv_reg_mr ON_DEMAND: EFAULT)"), std::string::npos) << last_error();
}

TEST_F(HostOdpTest, NotListedNotPageableOrNoOdpMeansPinning) {
    odp_nic.va_errno = ENOMEM;
    LadderConfig plain; // GDX_REG_METHODS default: no odp
    HostReg h;
    EXPECT_EQ(register_host(odp_nic, plain, buf.data(), buf.size(), pageable, kRemote, &h), GDX_ERR_NO_MEMORY);
    EXPECT_NE(last_error().find("GDX_REG_METHODS=...,odp registers pageable memory on demand"), std::string::npos)
        << last_error();
    mem::MemInfo pinned;
    pinned.type = mem::MemType::HostPinned;
    EXPECT_EQ(register_host(odp_nic, cfg, buf.data(), buf.size(), pinned, kRemote, &h), GDX_ERR_NO_MEMORY);
    EXPECT_EQ(odp_nic.odp_calls, 0) << "pinned memory is resident already: ODP is never tried for it";

    FakeRegistrar no_odp; // the probe's refusal, as on Debian 12's rxe
    gdx::test::LogCapture log;
    ASSERT_EQ(register_host(no_odp, cfg, buf.data(), buf.size(), pageable, kRemote, &h), GDX_OK);
    EXPECT_EQ(h.reach, Reach::Host);
    no_odp.dereg(h.mr);
    ASSERT_EQ(register_host(no_odp, cfg, buf.data(), buf.size(), pageable, kRemote, &h), GDX_OK);
    no_odp.dereg(h.mr);
    EXPECT_EQ(log.count("fake0: GDX_REG_METHODS has odp, but no ODP (device reports none; ibv_reg_mr ON_DEMAND: EINVAL): "
                        "pageable host memory is pinned"), 1u) << log.text();
    no_odp.va_errno = ENOMEM;
    EXPECT_EQ(register_host(no_odp, cfg, buf.data(), buf.size(), pageable, kRemote, &h), GDX_ERR_NO_MEMORY);
    EXPECT_NE(last_error().find("and no ODP (device reports none"), std::string::npos) << last_error();
    EXPECT_EQ(no_odp.odp_calls, 0);
}

TEST_F(HostOdpTest, ImplicitMrOnlyForLocalAccess) {
    odp_nic.support_.odp_implicit = true;
    cfg.odp_min = 4096;
    HostReg h;
    ASSERT_EQ(register_host(odp_nic, cfg, buf.data(), buf.size(), pageable, kLocal, &h), GDX_OK);
    EXPECT_EQ(h.reach, Reach::Odp);
    ASSERT_NE(h.shared, nullptr);
    EXPECT_EQ(h.mr, h.shared.get());
    EXPECT_EQ(h.reason.rfind("ODP (implicit MR): ", 0), 0u) << h.reason;
    EXPECT_EQ(odp_nic.odp_calls, 0);
    release(odp_nic, h);
    // A peer may reach it: an explicit MR, whose rkey opens only this range.
    ASSERT_EQ(register_host(odp_nic, cfg, buf.data(), buf.size(), pageable, kRemote, &h), GDX_OK);
    EXPECT_EQ(h.shared, nullptr);
    EXPECT_EQ(odp_nic.odp_calls, 1);
    release(odp_nic, h);
    // The implicit MR refused: explicit instead.
    odp_nic.implicit_errno = EINVAL;
    ASSERT_EQ(register_host(odp_nic, cfg, buf.data(), buf.size(), pageable, kLocal, &h), GDX_OK);
    EXPECT_EQ(h.reach, Reach::Odp);
    EXPECT_EQ(h.shared, nullptr);
    release(odp_nic, h);
}

TEST_F(HostOdpTest, MemoryDomainKeepsTheImplicitMrAndOdpChunksOpenTheirKey) {
    auto reg = std::make_shared<FakeRegistrar>();
    reg->support_ = odp_nic.support_;
    reg->support_.odp_implicit = true;
    Config c = gdx::test::config_with({{"GDX_REG_METHODS", "dmabuf,peermem,odp"}, {"GDX_RC_ODP_MIN", "4K"}});
    RcMemoryDomain md(nullptr, c, reg, gdx::test::fake_dmabuf_export);
    std::unique_ptr<MemHandle> local, remote;
    ASSERT_EQ(md.mem_reg(buf.data(), buf.size(), pageable, kAccessLocalRead, &local), GDX_OK) << last_error();
    ASSERT_EQ(md.mem_reg(buf.data(), buf.size(), pageable, kAccessAll, &remote), GDX_OK) << last_error();
    EXPECT_EQ(local->chunks()[0].reach, Reach::Odp);
    EXPECT_TRUE(local->direct(0, buf.size()));
    EXPECT_EQ(reg->live.size(), 1u) << "only the explicit MR is the registrar's to deregister";
    std::vector<uint8_t> packed(md.rkey_packed_size());
    ASSERT_EQ(remote->pack_rkey(packed), GDX_OK);
    std::unique_ptr<RemoteKey> rk;
    ASSERT_EQ(md.rkey_unpack(packed, &rk), GDX_OK);
    uint32_t key = 0;
    size_t contig = 0;
    std::string why;
    EXPECT_EQ(static_cast<RcRemoteKey &>(*rk).lookup(rk->base(), 100, kAccessRemoteWrite, &key, &contig, &why), GDX_OK);
    EXPECT_EQ(key, (*reg->live.begin())->rkey);
    local.reset();
    remote.reset();
    EXPECT_EQ(reg->live.size(), 0u);
}

TEST_F(HostOdpTest, PolicyLineSaysWhatHappens) {
    LadderConfig plain;
    EXPECT_EQ(host_reg_policy(plain, odp_nic.support_), "pageable host memory is pinned (GDX_REG_METHODS has no odp)");
    FakeRegistrar no_odp;
    EXPECT_EQ(host_reg_policy(cfg, no_odp.support_),
              "pageable host memory is pinned: GDX_REG_METHODS has odp, but no ODP (device reports none; ibv_reg_mr "
              "ON_DEMAND: EINVAL)");
    std::string s = host_reg_policy(cfg, odp_nic.support_);
    EXPECT_EQ(s.rfind("pageable host memory is pinned, and registered with ODP where pinning is refused (RLIMIT_MEMLOCK ", 0), 0u) << s;
    EXPECT_NE(s.find("; ODP yes (explicit; implicit no; prefetch no: ibv_advise_mr EOPNOTSUPP)"), std::string::npos) << s;
    cfg.odp_min = 1 << 20;
    s = host_reg_policy(cfg, odp_nic.support_);
    EXPECT_EQ(s.rfind("pageable host memory of at least GDX_RC_ODP_MIN=1M is registered with ODP", 0), 0u) << s;
}
