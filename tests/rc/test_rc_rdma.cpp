// rc data path on a real RDMA device (label rdma): put/get and active messages byte-exact over sizes, odd
// offsets and many QPs; flow control (send queue, receive credits, pending queue); flush; the wakeup fd.
#include "rc_rdma_fixture.h"

#include <poll.h>

using namespace gdx;
using namespace gdx::tp;
using namespace gdx::test;

namespace {
using RcData = RcRdmaTest;

struct AmLog {
    std::vector<std::vector<uint8_t>> msgs;
    static void handler(void *arg, Endpoint *, const void *data, size_t len) {
        auto *l = static_cast<AmLog *>(arg);
        const uint8_t *p = static_cast<const uint8_t *>(data);
        l->msgs.emplace_back(p, p + len);
    }
};
} // namespace

TEST_F(RcData, PutGetByteExactOverSizesAndOddOffsets) {
    auto a = open(), b = open();
    std::unique_ptr<Endpoint> ea, eb;
    connect(*a, *b, &ea, &eb);
    const size_t kMax = 64u << 20, kPad = 64;
    Buf src(kMax + kPad), dst(kMax + 2 * kPad), back(kMax + kPad);
    ASSERT_TRUE(src.data && dst.data && back.data);
    auto hs = reg(*a, src.data, src.len, kAccessLocalRead);
    auto hb = reg(*a, back.data, back.len, kAccessLocalWrite);
    auto hd = reg(*b, dst.data, dst.len, kAccessRemoteRead | kAccessRemoteWrite | kAccessLocalWrite);
    auto rk = rkey_of(*a, *hd);
    const size_t sizes[] = {0, 1, 2, 7, 8, 63, 64, 65, 127, 1000, 4095, 4096, 4097, 8191, 65536 + 13,
                            (1u << 20) - 1, (1u << 20) + 7, (8u << 20) + 3, kMax};
    uint32_t seed = 1;
    for (size_t n : sizes) {
        std::vector<std::pair<size_t, size_t>> offs = {{0, 0}, {1, 3}, {7, 5}, {3, 63}};
        if (n >= (1u << 20)) offs = {{0, 0}, {5, 3}}; // the big ones: fewer offsets, same coverage of the path
        if (n == kMax) offs = {{0, 0}, {kPad - 1, kPad + 1}};
        for (auto [so, dofs] : offs) {
            SCOPED_TRACE(::testing::Message() << "size " << n << " src+" << so << " dst+" << dofs);
            fill(src.data + so, n, ++seed);
            std::memset(dst.data, 0xee, dofs + n + kPad);
            uint64_t raddr = reinterpret_cast<uintptr_t>(dst.data + dofs);
            ASSERT_EQ(wait_op({a.get(), b.get()}, [&](Completion *c) { return ea->put(src.data + so, n, hs.get(), raddr, *rk, c); }),
                      GDX_OK) << last_error();
            ASSERT_EQ(std::memcmp(dst.data + dofs, src.data + so, n), 0);
            for (size_t i = 0; i < dofs; ++i) ASSERT_EQ(dst.data[i], 0xee) << "byte before the target, " << i;
            for (size_t i = 0; i < kPad; ++i) ASSERT_EQ(dst.data[dofs + n + i], 0xee) << "byte after the target, " << i;
            std::memset(back.data, 0x11, so + n + 1);
            ASSERT_EQ(wait_op({a.get(), b.get()}, [&](Completion *c) { return ea->get(back.data + so, n, hb.get(), raddr, *rk, c); }),
                      GDX_OK) << last_error();
            ASSERT_EQ(std::memcmp(back.data + so, src.data + so, n), 0);
            ASSERT_EQ(back.data[so + n], 0x11);
        }
    }
    // Small puts need no local registration: they travel inline in the work request.
    uint8_t small[16];
    fill(small, sizeof(small), 99);
    ASSERT_EQ(wait_op({a.get(), b.get()}, [&](Completion *c) {
                  return ea->put(small, sizeof(small), nullptr, reinterpret_cast<uintptr_t>(dst.data), *rk, c);
              }), GDX_OK) << last_error();
    EXPECT_EQ(std::memcmp(dst.data, small, sizeof(small)), 0);
}

TEST_F(RcData, ActiveMessagesShortBcopyZcopyInOrderBothWays) {
    auto a = open(), b = open();
    std::unique_ptr<Endpoint> ea, eb;
    connect(*a, *b, &ea, &eb);
    AmLog la, lb;
    ASSERT_EQ(b->set_am_handler(5, AmLog::handler, &lb), GDX_OK);
    ASSERT_EQ(a->set_am_handler(31, AmLog::handler, &la), GDX_OK);
    const Capabilities &caps = a->caps();
    Buf payload(caps.max_am_zcopy);
    auto hp = reg(*a, payload.data, payload.len, kAccessLocalRead);
    std::vector<std::vector<uint8_t>> want;
    auto send = [&](const std::function<gdx_status_t()> &f) {
        gdx_status_t st;
        while ((st = f()) == GDX_ERR_NO_RESOURCE) a->progress(), b->progress();
        return st;
    };
    uint32_t seed = 7;
    for (size_t n = 0; n <= caps.max_am_short; ++n) {
        std::vector<uint8_t> m(n);
        fill(m.data(), n, ++seed);
        ASSERT_EQ(send([&] { return ea->am_short(5, m.data(), n); }), GDX_OK) << last_error();
        want.push_back(m);
    }
    for (size_t n : {size_t(0), size_t(1), size_t(100), caps.max_am_bcopy - 1, caps.max_am_bcopy}) {
        std::vector<uint8_t> m(n);
        fill(m.data(), n, ++seed);
        ASSERT_EQ(send([&] { return ea->am_bcopy(5, m.data(), n); }), GDX_OK) << last_error();
        want.push_back(m);
    }
    std::vector<Completion> zc(9);
    int zi = 0;
    for (size_t h : {size_t(0), size_t(8), caps.max_am_short}) {
        for (size_t n : {size_t(0), size_t(1), caps.max_am_zcopy - h}) {
            std::vector<uint8_t> hdr(h);
            fill(hdr.data(), h, ++seed);
            size_t pn = std::min(n, payload.len - 1); // odd payload offset, within the registered buffer
            fill(payload.data + 1, pn, ++seed);
            Completion &c = zc[zi++];
            c.count = 1;
            gdx_status_t st = send([&] { return ea->am_zcopy(5, hdr.data(), h, payload.data + 1, pn, hp.get(), &c); });
            ASSERT_TRUE(st == GDX_INPROGRESS || st == GDX_OK) << gdx_status_string(st) << " " << last_error();
            if (st == GDX_OK) c.count = 0;
            std::vector<uint8_t> m(hdr);
            m.insert(m.end(), payload.data + 1, payload.data + 1 + pn);
            want.push_back(m);
            // The payload may be reused once the completion says so.
            ASSERT_TRUE(progress_until({a.get(), b.get()}, [&] { return c.count == 0; }, "am_zcopy completion"));
            ASSERT_EQ(c.status, GDX_OK);
        }
    }
    // Many more than the receiver's buffers: credits must flow back, nothing may be lost or reordered.
    for (int i = 0; i < 1500; ++i) {
        std::vector<uint8_t> m(1 + i % 3000);
        fill(m.data(), m.size(), ++seed);
        ASSERT_EQ(send([&] { return ea->am_bcopy(5, m.data(), m.size()); }), GDX_OK) << last_error();
        want.push_back(m);
    }
    ASSERT_TRUE(progress_until({a.get(), b.get()}, [&] { return lb.msgs.size() >= want.size(); }, "all AMs delivered"));
    ASSERT_EQ(lb.msgs.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(lb.msgs[i], want[i]) << "message " << i;
    // And the other way, to a handler at the highest id.
    uint8_t x[3] = {1, 2, 3};
    ASSERT_EQ(send([&] { return eb->am_short(31, x, 3); }), GDX_OK);
    ASSERT_TRUE(progress_until({a.get(), b.get()}, [&] { return la.msgs.size() == 1; }, "reverse AM"));
    EXPECT_EQ(la.msgs[0], std::vector<uint8_t>(x, x + 3));
}

TEST_F(RcData, ManyQueuePairsInterleaved) {
    auto a = open(), b = open();
    constexpr int kEps = 24;
    std::vector<std::unique_ptr<Endpoint>> ea(kEps), eb(kEps);
    for (int i = 0; i < kEps; ++i) connect(*a, *b, &ea[i], &eb[i]);
    const size_t kSlice = 256 * 1024;
    Buf src(kEps * kSlice), dst(kEps * kSlice);
    auto hs = reg(*a, src.data, src.len, kAccessLocalRead);
    auto hd = reg(*b, dst.data, dst.len, kAccessRemoteWrite | kAccessLocalWrite);
    auto rk = rkey_of(*a, *hd);
    struct PerEp {
        std::vector<std::vector<uint8_t>> got;
    };
    std::vector<PerEp> per(kEps);
    struct Ctx {
        std::vector<std::unique_ptr<Endpoint>> *eps;
        std::vector<PerEp> *per;
    } ctx{&eb, &per};
    ASSERT_EQ(b->set_am_handler(1, [](void *arg, Endpoint *ep, const void *d, size_t n) {
        auto *c = static_cast<Ctx *>(arg);
        for (size_t i = 0; i < c->eps->size(); ++i)
            if ((*c->eps)[i].get() == ep) (*c->per)[i].got.emplace_back((const uint8_t *)d, (const uint8_t *)d + n);
    }, &ctx), GDX_OK);
    fill(src.data, src.len, 3);
    std::vector<Completion> comps(kEps * 8);
    int issued = 0;
    for (int round = 0; round < 8; ++round) {
        for (int i = 0; i < kEps; ++i) {
            size_t off = i * kSlice + round * (kSlice / 8), n = kSlice / 8 - (i + round) % 7;
            Completion &c = comps[issued++];
            c.count = 1;
            gdx_status_t st;
            while ((st = ea[i]->put(src.data + off, n, hs.get(), reinterpret_cast<uintptr_t>(dst.data + off), *rk, &c)) ==
                   GDX_ERR_NO_RESOURCE)
                a->progress(), b->progress();
            ASSERT_EQ(st, GDX_INPROGRESS) << last_error();
            uint8_t tag[2] = {static_cast<uint8_t>(i), static_cast<uint8_t>(round)};
            while ((st = ea[i]->am_short(1, tag, 2)) == GDX_ERR_NO_RESOURCE) a->progress(), b->progress();
            ASSERT_EQ(st, GDX_OK);
        }
    }
    ASSERT_TRUE(progress_until({a.get(), b.get()}, [&] {
        for (auto &c : comps) if (c.count) return false;
        for (auto &p : per) if (p.got.size() < 8) return false;
        return true;
    }, "all puts and AMs on every QP"));
    for (auto &c : comps) EXPECT_EQ(c.status, GDX_OK);
    for (int i = 0; i < kEps; ++i) {
        for (int round = 0; round < 8; ++round) {
            size_t off = i * kSlice + round * (kSlice / 8), n = kSlice / 8 - (i + round) % 7;
            ASSERT_EQ(std::memcmp(dst.data + off, src.data + off, n), 0) << "ep " << i << " round " << round;
            ASSERT_EQ(per[i].got[round], (std::vector<uint8_t>{uint8_t(i), uint8_t(round)}));
        }
    }
}

TEST_F(RcData, ReceiveCreditsBoundTheSenderExactly) {
    auto a = open({{"GDX_RC_RX_QUEUE_LEN", "4"}}), b = open({{"GDX_RC_RX_QUEUE_LEN", "4"}});
    std::unique_ptr<Endpoint> ea, eb;
    connect(*a, *b, &ea, &eb);
    AmLog lb;
    ASSERT_EQ(b->set_am_handler(0, AmLog::handler, &lb), GDX_OK);
    uint8_t m = 42;
    // The receiver does not progress: exactly its 4 posted buffers' worth may be sent, then back-pressure.
    for (int i = 0; i < 4; ++i) ASSERT_EQ(ea->am_short(0, &m, 1), GDX_OK) << i;
    for (int i = 0; i < 50; ++i) a->progress();
    EXPECT_EQ(ea->am_short(0, &m, 1), GDX_ERR_NO_RESOURCE);
    // A parked request runs once the receiver has consumed and re-posted its buffers (credits written back).
    struct Req : PendingRequest {
        Endpoint *ep;
        int sent = 0;
    } req;
    req.ep = ea.get();
    req.func = [](PendingRequest *self) {
        auto *r = static_cast<Req *>(self);
        uint8_t v = 43;
        gdx_status_t st = r->ep->am_short(0, &v, 1);
        if (st == GDX_OK) ++r->sent;
        return st;
    };
    ASSERT_EQ(ea->pending_add(&req), GDX_OK);
    ASSERT_TRUE(progress_until({a.get(), b.get()}, [&] { return req.sent == 1 && lb.msgs.size() == 5; }, "pending AM"));
    EXPECT_EQ(lb.msgs[4], std::vector<uint8_t>{43});
    // With resources free, pending_add says so instead of parking.
    EXPECT_EQ(ea->pending_add(&req), GDX_ERR_BUSY);
}

TEST_F(RcData, SendQueueBackPressureFlushAndFence) {
    auto a = open({{"GDX_RC_TX_QUEUE_LEN", "8"}}), b = open();
    std::unique_ptr<Endpoint> ea, eb;
    connect(*a, *b, &ea, &eb);
    Buf src(1 << 20), dst(1 << 20);
    auto hs = reg(*a, src.data, src.len, kAccessLocalRead);
    auto hd = reg(*b, dst.data, dst.len, kAccessRemoteWrite | kAccessLocalWrite);
    auto rk = rkey_of(*a, *hd);
    fill(src.data, src.len, 5);
    Completion flush0;
    EXPECT_EQ(ea->flush(&flush0), GDX_OK) << "nothing outstanding";
    std::vector<Completion> c(32);
    int posted = 0;
    gdx_status_t st = GDX_OK;
    for (; posted < 32; ++posted) {
        c[posted].count = 1;
        st = ea->put(src.data + posted * 32768, 32768, hs.get(), reinterpret_cast<uintptr_t>(dst.data + posted * 32768), *rk, &c[posted]);
        if (st != GDX_INPROGRESS) break;
    }
    EXPECT_EQ(st, GDX_ERR_NO_RESOURCE) << "a queue of 8 cannot hold 32 puts";
    EXPECT_LT(posted, 8);
    ASSERT_EQ(ea->fence(), GDX_OK);
    Completion fl;
    fl.count = 1;
    ASSERT_EQ(ea->flush(&fl), GDX_INPROGRESS);
    ASSERT_TRUE(progress_until({a.get(), b.get()}, [&] { return fl.count == 0; }, "flush"));
    EXPECT_EQ(fl.status, GDX_OK);
    for (int i = 0; i < posted; ++i) EXPECT_EQ(c[i].count, 0) << "a flush completes after everything before it";
    EXPECT_EQ(std::memcmp(dst.data, src.data, posted * 32768), 0);
}

TEST_F(RcData, WakeupFdSignalsArrivals) {
    auto a = open(), b = open();
    std::unique_ptr<Endpoint> ea, eb;
    connect(*a, *b, &ea, &eb);
    AmLog lb;
    ASSERT_EQ(b->set_am_handler(2, AmLog::handler, &lb), GDX_OK);
    ASSERT_GE(b->wakeup_fd(), 0);
    ASSERT_TRUE(b->caps().flags & kCapWakeup);
    ASSERT_EQ(b->arm_wakeup(), GDX_OK);
    uint8_t m[4] = {9, 8, 7, 6};
    ASSERT_EQ(ea->am_short(2, m, 4), GDX_OK);
    pollfd pfd{b->wakeup_fd(), POLLIN, 0};
    int r = 0;
    for (int i = 0; i < 600 && r == 0; ++i) { // the hang guard: 60 s; the sender must progress to push it
        a->progress();
        r = poll(&pfd, 1, 100);
    }
    ASSERT_EQ(r, 1) << "the wakeup fd never became readable";
    ASSERT_TRUE(progress_until({b.get()}, [&] { return lb.msgs.size() == 1; }, "AM after wakeup"));
    EXPECT_EQ(lb.msgs[0], std::vector<uint8_t>(m, m + 4));
    // Re-arming with nothing pending is safe to sleep on.
    while (b->arm_wakeup() == GDX_ERR_BUSY) b->progress();
}

TEST_F(RcData, RegistrationCacheOnTheNic) {
    auto a = open();
    Buf m(1 << 20);
    mem::MemInfo info;
    info.type = mem::MemType::HostPinned;
    info.buffer_id = 1234;
    auto h1 = reg(*a, m.data, m.len, kAccessAll, info);
    uint32_t k1, k2, k3;
    size_t contig;
    ASSERT_TRUE(static_cast<tp::rc::RcMemHandle &>(*h1).lkey_at(m.data, 1, &k1, &contig));
    h1.reset();
    auto h2 = reg(*a, m.data + 4096, 8192, kAccessLocalRead, info);
    ASSERT_TRUE(static_cast<tp::rc::RcMemHandle &>(*h2).lkey_at(m.data + 4096, 1, &k2, &contig));
    EXPECT_EQ(k1, k2) << "a cached registration serves a sub-range";
    info.buffer_id = 1235; // freed and reallocated at the same address
    auto h3 = reg(*a, m.data, m.len, kAccessAll, info);
    ASSERT_TRUE(static_cast<tp::rc::RcMemHandle &>(*h3).lkey_at(m.data, 1, &k3, &contig));
    EXPECT_NE(k3, k1) << "a changed buffer id must not reuse the old pin";
    EXPECT_EQ(static_cast<tp::rc::RcInterface &>(*a).rc_md().rcache_stats().invalidations, 1u);
}
