// rc on-demand paging for pageable host memory on a real RDMA device (labels rdma and odp): with
// GDX_REG_METHODS=...,odp a registration that pinning refuses (RLIMIT_MEMLOCK) or that is at least GDX_RC_ODP_MIN
// is made with IBV_ACCESS_ON_DEMAND, and put/get over it are byte-exact: beyond the pinning limit, on pages never
// touched, and on memory freed and re-mapped between operations. On a kernel whose rxe has no ODP (Debian 12's
// 6.1) the rung is refused with the probe's reason. RC_TEST_EXPECT_ODP=yes|no (tests/rxe/run-tests.sh sets it
// per guest kernel) turns "the device has no ODP" from a skip into a failure, or the other way round.
#include "rc_rdma_fixture.h"
#include "transport/rc/odp_check.h"

#include <cstdlib>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>

using namespace gdx;
using namespace gdx::tp;
using namespace gdx::test;

namespace {

// CAP_IPC_LOCK out of this process's effective set for good, as an unprivileged user has it (the guest runs the
// tests as root, whom RLIMIT_MEMLOCK does not bind). Before any device is opened and never restored: uverbs
// refuses commands (EACCES) on a device file opened under other credentials than the caller's, and every capset
// makes new ones.
std::string drop_ipc_lock_for_this_process() {
    __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct caps[2] = {};
    if (syscall(SYS_capget, &hdr, caps) != 0) return std::string("capget: ") + std::strerror(errno);
    if (!(caps[CAP_TO_INDEX(CAP_IPC_LOCK)].effective & CAP_TO_MASK(CAP_IPC_LOCK))) return "";
    caps[CAP_TO_INDEX(CAP_IPC_LOCK)].effective &= ~CAP_TO_MASK(CAP_IPC_LOCK);
    if (syscall(SYS_capset, &hdr, caps) != 0) return std::string("capset (drop CAP_IPC_LOCK): ") + std::strerror(errno);
    return "";
}

// RLIMIT_MEMLOCK's soft limit lowered while it lives (process-wide; no credential change).
class PinLimit {
  public:
    explicit PinLimit(rlim_t bytes) {
        if (getrlimit(RLIMIT_MEMLOCK, &old_) != 0) {
            error_ = std::string("getrlimit(RLIMIT_MEMLOCK): ") + std::strerror(errno);
            return;
        }
        rlimit now = old_;
        now.rlim_cur = bytes;
        if (setrlimit(RLIMIT_MEMLOCK, &now) != 0) error_ = std::string("setrlimit(RLIMIT_MEMLOCK): ") + std::strerror(errno);
        else limited_ = true;
    }
    ~PinLimit() {
        if (limited_ && setrlimit(RLIMIT_MEMLOCK, &old_) != 0) ADD_FAILURE() << "setrlimit (restore): " << std::strerror(errno);
    }
    const std::string &error() const { return error_; }

  private:
    rlimit old_{};
    bool limited_ = false;
    std::string error_;
};

// Counts differing bytes; a mismatch also prints where (4 KiB pages from `a`, the first few) to tell a missed
// page from a shifted or partial one.
size_t bytes_wrong(const uint8_t *a, const uint8_t *b, size_t n) {
    size_t bad = 0, shown = 0;
    std::string where;
    for (size_t pg = 0; pg * 4096 < n; ++pg) {
        size_t e = std::min(n, (pg + 1) * 4096), in_page = 0, first = 0;
        for (size_t i = pg * 4096; i < e; ++i)
            if (a[i] != b[i] && in_page++ == 0) first = i;
        bad += in_page;
        if (in_page && shown++ < 12)
            where += " page " + std::to_string(pg) + ": " + std::to_string(in_page) + " from +" + std::to_string(first) +
                     " (got 0x" + hex(&a[first], 1) + " want 0x" + hex(&b[first], 1) + ")";
    }
    if (bad) std::printf("bytes wrong: %zu of %zu, at (%p vs %p):%s\n", bad, n, (const void *)a, (const void *)b, where.c_str());
    return bad;
}

// Skips the test (from its body: GTEST_SKIP only returns from the function it is in) without usable ODP.
#define NEED_ODP()                                                                                              \
    do {                                                                                                       \
        if (std::string why = odp_unusable(); !why.empty()) GTEST_SKIP() << why;                               \
    } while (0)

constexpr rlim_t kLimit = 4u << 20;
const Config::Overrides kOdp = {{"GDX_REG_METHODS", "dmabuf,peermem,odp"}};
const Config::Overrides kOdpAlways = {{"GDX_REG_METHODS", "dmabuf,peermem,odp"}, {"GDX_RC_ODP_MIN", "4K"}};

class RcOdp : public RcRdmaTest {
  protected:
    void SetUp() override {
        ASSERT_EQ(drop_ipc_lock_for_this_process(), "");
        if (mechanics_) rc::trust_odp_without_check_for_test();
        RcRdmaTest::SetUp();
        if (IsSkipped() || HasFatalFailure()) return;
        ASSERT_EQ(rc::DeviceCtx::open(device_, 0, Config::defaults(), &dev_), GDX_OK) << last_error();
        sup_ = dev_->gdr_support();
        const ibv_odp_caps &c = dev_->dev_attr().odp_caps;
        const uint32_t need = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ;
        claims_ = (c.general_caps & IBV_ODP_SUPPORT) && (c.per_transport_caps.rc_odp_caps & need) == need;
        std::printf("%s: %s; general_odp_caps 0x%llx rc_odp_caps 0x%x; active MTU %d\n", device_.c_str(),
                    sup_.summary().c_str(), (unsigned long long)c.general_caps, c.per_transport_caps.rc_odp_caps,
                    128 << dev_->port_attr().active_mtu);
        const char *want = std::getenv("RC_TEST_EXPECT_ODP");
        const std::string expect = want ? want : "";
        if (expect == "yes") {
            ASSERT_TRUE(claims_) << "RC_TEST_EXPECT_ODP=yes, but the device claims no RC ODP";
        } else if (expect == "no") {
            ASSERT_FALSE(claims_) << "RC_TEST_EXPECT_ODP=no, but the device claims RC ODP";
        }
    }
    // The ODP registrations themselves. Where the data check refused the device's ODP (sid's 7.2.13 rxe moves
    // packets that start off a page boundary wrongly), they run only where no packet does: page-aligned buffers
    // and a 4096-byte MTU (RXE_VM_MTU=9000), the check not binding; gdx itself never uses such ODP.
    std::string odp_unusable() const {
        if (!sup_.odp) return device_ + " has " + sup_.odp_why + " (the sid-kernel guest stage runs this)";
        if (sup_.odp_check.find("exact") == std::string::npos && dev_->port_attr().active_mtu < IBV_MTU_4096)
            return "this device's ODP fails the data check (" + sup_.odp_check +
                   "); page-aligned transfers need a 4096-byte MTU here (RXE_VM_MTU=9000)";
        return "";
    }
    // An interface pair with endpoints, as two processes would have them.
    void pair(const Config::Overrides &o) {
        a_ = open(o), b_ = open(o);
        ASSERT_TRUE(a_ && b_);
        connect(*a_, *b_, &ea_, &eb_);
    }
    gdx_status_t put(const void *src, size_t n, MemHandle *h, const void *dst, const RemoteKey &rk) {
        return wait_op({a_.get(), b_.get()}, [&](Completion *c) {
            return ea_->put(src, n, h, reinterpret_cast<uintptr_t>(dst), rk, c);
        });
    }
    gdx_status_t get(void *dst, size_t n, MemHandle *h, const void *src, const RemoteKey &rk) {
        return wait_op({a_.get(), b_.get()}, [&](Completion *c) {
            return ea_->get(dst, n, h, reinterpret_cast<uintptr_t>(src), rk, c);
        });
    }
    static void expect_odp(const MemHandle &h, const char *because) {
        ASSERT_EQ(h.chunks().size(), 1u);
        EXPECT_EQ(h.chunks()[0].reach, Reach::Odp) << h.chunks()[0].reason;
        EXPECT_NE(h.chunks()[0].reason.find(because), std::string::npos) << h.chunks()[0].reason;
    }

    bool mechanics_ = true; // false: the data check binds, as in production
    bool claims_ = false;   // the device's capability bits claim RC ODP
    std::shared_ptr<rc::DeviceCtx> dev_;
    rc::NicGdrSupport sup_;
    std::unique_ptr<Interface> a_, b_;
    std::unique_ptr<Endpoint> ea_, eb_;
};

// The data check binds here, as in production.
class RcOdpAsShipped : public RcOdp {
  protected:
    void SetUp() override {
        mechanics_ = false;
        RcOdp::SetUp();
    }
};

} // namespace

TEST_F(RcOdpAsShipped, ProbeAndDataCheckAgreeWithTheDevice) {
    const ibv_odp_caps &c = dev_->dev_attr().odp_caps;
    if (!claims_) {
        EXPECT_FALSE(sup_.odp);
        EXPECT_NE(sup_.odp_why.find("device reports none"), std::string::npos) << sup_.odp_why;
        EXPECT_EQ(sup_.odp_text(), sup_.odp_why);
        EXPECT_EQ(sup_.odp_check, "") << "no data check without the claim";
        return;
    }
    EXPECT_EQ(sup_.odp_errno, 0);
    ASSERT_NE(sup_.odp_check, "") << "a device that claims ODP is checked";
    std::printf("ODP data check: %s\n", sup_.odp_check.c_str());
    if (sup_.odp_check.find("exact") != std::string::npos) {
        EXPECT_TRUE(sup_.odp) << sup_.odp_why;
        EXPECT_EQ(sup_.odp_implicit, (c.general_caps & IBV_ODP_SUPPORT_IMPLICIT) != 0) << rc::errno_name(sup_.implicit_errno);
        EXPECT_NE(sup_.summary().find("ODP yes (explicit; implicit "), std::string::npos) << sup_.summary();
    } else {
        EXPECT_FALSE(sup_.odp) << "ODP that moved wrong bytes must not be used";
        EXPECT_NE(sup_.odp_why.find("a loopback data check through ODP MRs failed: " + sup_.odp_check), std::string::npos)
            << sup_.odp_why;
    }
}

// No usable ODP (Debian 12's rxe: none; sid's: refused by the data check): the rung is refused with the probe's
// reason, said once, host memory is pinned, and a registration that pinning refuses fails naming both refusals
// (never a silent success).
TEST_F(RcOdpAsShipped, WithoutUsableOdpTheRungIsRefusedWithItsReason) {
    if (sup_.odp) GTEST_SKIP() << device_ << " has ODP that passed the data check";
    pair(kOdpAlways);
    Buf buf(1 << 20);
    LogCapture log;
    auto h = reg(*a_, buf.data, buf.len);
    ASSERT_TRUE(h);
    EXPECT_EQ(h->chunks()[0].reach, Reach::Host);
    EXPECT_NE(log.text().find("GDX_REG_METHODS has odp, but " + sup_.odp_why + ": pageable host memory is pinned"),
              std::string::npos) << log.text();
    auto h2 = reg(*a_, buf.data, buf.len);
    EXPECT_EQ(log.count("GDX_REG_METHODS has odp, but"), 1u) << "said once: " << log.text();

    Buf big(2 * kLimit + 12345);
    PinLimit lim(kLimit);
    ASSERT_EQ(lim.error(), "");
    std::unique_ptr<MemHandle> hb;
    EXPECT_EQ(a_->md().mem_reg(big.data, big.len, {}, kAccessAll, &hb), GDX_ERR_NO_MEMORY);
    EXPECT_NE(last_error().find("refused (ibv_reg_mr: ENOMEM, RLIMIT_MEMLOCK 4M), and " + sup_.odp_why), std::string::npos)
        << last_error();
}

// Twice the pinning limit and more, registered with the limit in force: pinning is refused, ODP carries it.
TEST_F(RcOdp, PutGetByteExactBeyondTheMemlockLimit) {
    NEED_ODP();
    pair(kOdp);
    const size_t n = 2 * kLimit + 3 * 4096 + 123;
    Buf src(n + 64), dst(n + 64), back(n + 64);
    fill(src.data, src.len, 41);
    std::memset(dst.data, 0xee, dst.len);
    std::unique_ptr<MemHandle> hs, hd, hb;
    {
        PinLimit lim(kLimit); // CAP_IPC_LOCK is gone (SetUp): the limit binds
        ASSERT_EQ(lim.error(), "");
        LogCapture log;
        hs = reg(*a_, src.data, src.len, kAccessLocalRead);
        hd = reg(*b_, dst.data, dst.len, kAccessRemoteRead | kAccessRemoteWrite | kAccessLocalWrite);
        hb = reg(*a_, back.data, back.len, kAccessLocalWrite);
        ASSERT_TRUE(hs && hd && hb);
        EXPECT_NE(log.text().find("registered with on-demand paging (nothing pinned): pinning refused (ibv_reg_mr: ENOMEM, "
                                  "RLIMIT_MEMLOCK 4M)"), std::string::npos) << log.text();
    }
    for (MemHandle *h : {hs.get(), hd.get(), hb.get()}) expect_odp(*h, "pinning refused (ibv_reg_mr: ENOMEM");
    auto rk = rkey_of(*a_, *hd);
    ASSERT_EQ(put(src.data, n, hs.get(), dst.data, *rk), GDX_OK) << last_error();
    size_t bad = bytes_wrong(dst.data, src.data, n);
    EXPECT_EQ(bad, 0u);
    EXPECT_EQ(dst.data[n], 0xee) << "the byte after the target";
    ASSERT_EQ(get(back.data, n, hb.get(), dst.data, *rk), GDX_OK) << last_error();
    bad += bytes_wrong(back.data, src.data, n);
    EXPECT_EQ(bad, 0u);
    std::printf("odp: put + get of %zu bytes (RLIMIT_MEMLOCK %llu, %.2fx) over ODP MRs: %zu bytes wrong\n", n,
                (unsigned long long)kLimit, double(n) / kLimit, bad);
}

// Pages never touched on either side: the source reads as zeros, the target is faulted in by the NIC.
TEST_F(RcOdp, UntouchedPagesBothSides) {
    NEED_ODP();
    pair(kOdpAlways);
    const size_t n = (1u << 20) + 4096 * 5 + 7;
    Buf zero_src(n), fresh_dst(n), src(n), touched_dst(n), fresh_back(n);
    fill(src.data, n, 7);
    std::memset(touched_dst.data, 0xee, n);
    auto hz = reg(*a_, zero_src.data, n, kAccessLocalRead);
    auto hs = reg(*a_, src.data, n, kAccessLocalRead);
    auto hf = reg(*b_, fresh_dst.data, n, kAccessAll);
    auto ht = reg(*b_, touched_dst.data, n, kAccessAll);
    auto hb = reg(*a_, fresh_back.data, n, kAccessLocalWrite);
    for (MemHandle *h : {hz.get(), hs.get(), hf.get(), ht.get(), hb.get()}) expect_odp(*h, "GDX_RC_ODP_MIN=4K");
    auto rkf = rkey_of(*a_, *hf), rkt = rkey_of(*a_, *ht);
    ASSERT_EQ(put(zero_src.data, n, hz.get(), touched_dst.data, *rkt), GDX_OK) << last_error();
    std::vector<uint8_t> zeros(n, 0);
    size_t bad = bytes_wrong(touched_dst.data, zeros.data(), n);
    ASSERT_EQ(put(src.data, n, hs.get(), fresh_dst.data, *rkf), GDX_OK) << last_error();
    bad += bytes_wrong(fresh_dst.data, src.data, n);
    ASSERT_EQ(get(fresh_back.data, n, hb.get(), fresh_dst.data, *rkf), GDX_OK) << last_error();
    bad += bytes_wrong(fresh_back.data, src.data, n);
    EXPECT_EQ(bad, 0u);
    std::printf("odp: untouched source, untouched target, untouched get buffer, %zu bytes each: %zu bytes wrong\n", n, bad);
}

// Memory freed and mapped again at the same address between operations, on both sides, under one
// registration: the ODP MR follows the page tables, so the new pages carry the bytes, never the old ones.
TEST_F(RcOdp, FreedAndRemappedBetweenOperationsSeesTheNewPages) {
    NEED_ODP();
    pair(kOdpAlways);
    const size_t n = (2u << 20) + 4096 * 3;
    Buf src(n), dst(n), back(n);
    fill(src.data, n, 1);
    auto hs = reg(*a_, src.data, n, kAccessLocalRead);
    auto hd = reg(*b_, dst.data, n, kAccessAll);
    auto hb = reg(*a_, back.data, n, kAccessLocalWrite);
    auto rk = rkey_of(*a_, *hd);
    ASSERT_EQ(put(src.data, n, hs.get(), dst.data, *rk), GDX_OK) << last_error();
    size_t bad = bytes_wrong(dst.data, src.data, n);
    auto remap = [](Buf &b, int seed) {
        ASSERT_EQ(munmap(b.data, b.len), 0) << std::strerror(errno);
        void *p = mmap(b.data, b.len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        ASSERT_EQ(p, static_cast<void *>(b.data)) << "mmap at the old address: " << std::strerror(errno);
        if (seed != 0) fill(b.data, b.len, seed);
    };
    // The target freed and re-mapped (untouched): the next put lands in the new pages.
    remap(dst, 0);
    ASSERT_EQ(put(src.data, n, hs.get(), dst.data, *rk), GDX_OK) << last_error();
    bad += bytes_wrong(dst.data, src.data, n);
    // The source freed and re-mapped with other bytes: the put sends those.
    remap(src, 2);
    ASSERT_EQ(put(src.data, n, hs.get(), dst.data, *rk), GDX_OK) << last_error();
    bad += bytes_wrong(dst.data, src.data, n);
    // The get buffer freed and re-mapped after it was used once.
    ASSERT_EQ(get(back.data, n, hb.get(), dst.data, *rk), GDX_OK) << last_error();
    remap(back, 3);
    remap(dst, 4);
    ASSERT_EQ(get(back.data, n, hb.get(), dst.data, *rk), GDX_OK) << last_error();
    bad += bytes_wrong(back.data, dst.data, n);
    EXPECT_EQ(bad, 0u);
    std::printf("odp: free + re-map of target, source and get buffer between operations, %zu bytes: %zu bytes wrong\n",
                n, bad);
}

// Freed and not mapped again: the operation fails (the NIC's page fault finds nothing), it never "succeeds".
TEST_F(RcOdp, FreedAndNotRemappedFailsTheOperation) {
    NEED_ODP();
    pair(kOdpAlways);
    const size_t n = 1u << 20;
    Buf src(n);
    void *dst = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(dst, MAP_FAILED);
    fill(src.data, n, 5);
    auto hs = reg(*a_, src.data, n, kAccessLocalRead);
    auto hd = reg(*b_, dst, n, kAccessAll);
    auto rk = rkey_of(*a_, *hd);
    ASSERT_EQ(munmap(dst, n), 0);
    gdx_status_t st = put(src.data, n, hs.get(), dst, *rk);
    EXPECT_NE(st, GDX_OK) << "a put into unmapped memory must fail";
    std::printf("odp: put into a freed, unmapped target: %s (%s)\n", gdx_status_string(st), last_error().c_str());
}

// ibv_advise_mr: where the provider has it a registration prefetches; where not, the probe says why, and
// registration and transfers are unaffected.
TEST_F(RcOdp, PrefetchWhereSupportedElseSaidWhy) {
    NEED_ODP();
    if (!sup_.odp_prefetch) {
        EXPECT_NE(sup_.prefetch_errno, 0);
        EXPECT_NE(sup_.summary().find("prefetch no: ibv_advise_mr " + rc::errno_name(sup_.prefetch_errno)), std::string::npos)
            << sup_.summary();
    }
    pair(kOdpAlways);
    const size_t n = (1u << 20) + 99;
    Buf src(n), dst(n);
    fill(src.data, n, 9);
    auto hs = reg(*a_, src.data, n, kAccessLocalRead);
    auto hd = reg(*b_, dst.data, n, kAccessAll);
    expect_odp(*hd, "GDX_RC_ODP_MIN");
    auto rk = rkey_of(*a_, *hd);
    ASSERT_EQ(put(src.data, n, hs.get(), dst.data, *rk), GDX_OK) << last_error();
    EXPECT_EQ(bytes_wrong(dst.data, src.data, n), 0u);
    std::printf("odp: prefetch %s\n", sup_.odp_prefetch ? "yes" : ("no: " + rc::errno_name(sup_.prefetch_errno)).c_str());
}

// Implicit ODP where the device claims it: local-only registrations share the one whole-address-space MR;
// anything a peer may reach keeps an explicit MR (an implicit rkey would open all memory).
TEST_F(RcOdp, ImplicitMrForLocalAccessWhereClaimed) {
    NEED_ODP();
    if (!sup_.odp_implicit)
        GTEST_SKIP() << device_ << " does not claim implicit ODP (general_odp_caps 0x" << std::hex
                     << dev_->dev_attr().odp_caps.general_caps << "); the fake-NIC cpu test covers the choice";
    pair(kOdpAlways);
    const size_t n = 300000;
    Buf src(n), dst(n);
    fill(src.data, n, 11);
    auto hs = reg(*a_, src.data, n, kAccessLocalRead);
    auto hd = reg(*b_, dst.data, n, kAccessAll);
    expect_odp(*hs, "ODP (implicit MR)");
    EXPECT_EQ(hd->chunks()[0].reason.find("implicit"), std::string::npos) << hd->chunks()[0].reason;
    auto rk = rkey_of(*a_, *hd);
    ASSERT_EQ(put(src.data, n, hs.get(), dst.data, *rk), GDX_OK) << last_error();
    EXPECT_EQ(bytes_wrong(dst.data, src.data, n), 0u);
}
