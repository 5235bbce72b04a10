// The staging engine under pressure and failure: a bounce pool of one buffer per partition with many messages in
// flight in both directions, three peers competing for one receiver's slots, transport back-pressure, failed
// copies on either side, a peer that goes away mid-transfer, and misuse of the API. Outcomes are asserted (every
// request completes, with the right status and the right bytes); timings never are.
#include "loop_fixture.h"

#include <deque>

namespace gdx::test {
namespace {

class StagingStress : public LoopPairTest {
  protected:
    struct Msg {
        fb::Request req;
        bool put = true;
        size_t off = 0, len = 0;
    };

    // Issues `count` messages from x to y (puts and gets alternating), each into its own range, all at once.
    void issue(EngineSide &x, HostBuf &xl, HostBuf &yr, size_t count, size_t len, std::deque<Msg> *out,
               bool gets = true) {
        for (size_t i = 0; i < count; ++i) {
            Msg &m = out->emplace_back();
            m.put = !gets || i % 2 == 0;
            m.off = i * len;
            m.len = len;
            gdx_status_t st = m.put ? x.engine->put(*x.ep, *xl.reg, m.off, *yr.remote, m.off, len, &m.req)
                                    : x.engine->get(*x.ep, *xl.reg, m.off, *yr.remote, m.off, len, &m.req);
            ASSERT_EQ(st, GDX_INPROGRESS) << last_error();
        }
    }
    // Every message done and OK, and each range holds the source's bytes.
    void check(const std::deque<Msg> &msgs, const HostBuf &xl, uint64_t xseed, const HostBuf &yr, uint64_t yseed) {
        for (const Msg &m : msgs) {
            ASSERT_EQ(m.req.status, GDX_OK) << gdx_status_string(m.req.status);
            const HostBuf &dst = m.put ? yr : xl;
            EXPECT_EQ(first_mismatch(dst.mem.data() + m.off, m.len, m.put ? xseed : yseed, m.off), -1)
                << (m.put ? "put" : "get") << " at " << m.off;
        }
    }
    static bool all_done(const std::deque<Msg> &msgs) {
        for (const Msg &m : msgs)
            if (m.req.status == GDX_INPROGRESS) return false;
        return true;
    }
};

TEST_F(StagingStress, OneSlotPoolsManyMessagesBothDirectionsAllComplete) {
    for (fb::Params *p : {&params_a, &params_b}) {
        p->fault.p2p_every = 1; // every fragment staged on both sides
        p->fault.pool_limit = 1; // one slot per partition of each pool
        p->pool_slots = 3;
    }
    start();
    const size_t len = 5 * 4096 + 123, count = 16;
    HostBuf al, ar, bl, br; // a's and b's buffers: l = used as local side, r = the one the other side targets
    make_buf(a, b, len * count, 1, &al);
    make_buf(b, a, len * count, 2, &ar);
    make_buf(b, a, len * count, 3, &bl);
    make_buf(a, b, len * count, 4, &br);
    std::deque<Msg> from_a, from_b;
    issue(a, al, ar, count, len, &from_a);
    issue(b, bl, br, count, len, &from_b);
    ASSERT_TRUE(run_until([&] { return all_done(from_a) && all_done(from_b); })) << "deadlock: requests stuck";
    check(from_a, al, 1, ar, 2);
    check(from_b, bl, 3, br, 4);
    for (EngineSide *s : {&a, &b}) {
        fb::Stats st = s->engine->stats();
        EXPECT_GT(st.pool_waits, 0u) << "the pool was never exhausted: the test tests nothing";
        EXPECT_GT(st.credit_waits, 0u);
        EXPECT_EQ(st.slots_in_use, 0u);
        EXPECT_EQ(st.requests_completed, count);
    }
}

TEST_F(StagingStress, ThreePeersShareOneTargetSlotFairly) {
    params_b.fault.pool_limit = 1; // the receiver lends one slot at a time
    opt_b.refuse = [this](uintptr_t addr, size_t) { return user_mem(addr); };
    start();
    EngineSide c;
    ASSERT_NO_FATAL_FAILURE(open_side(&c, opt_a, params_a));
    std::unique_ptr<tp::Endpoint> b_to_c;
    ASSERT_EQ(b.iface->ep_create(&b_to_c), GDX_OK);
    ASSERT_EQ(b_to_c->connect(c.ep->address()), GDX_OK);
    ASSERT_EQ(c.ep->connect(b_to_c->address()), GDX_OK);
    const size_t len = 8 * 4096, count = 6;
    HostBuf al, cl, ba, bc;
    make_buf(a, b, len * count, 1, &al);
    make_buf(c, b, len * count, 2, &cl);
    make_buf(b, a, len * count, 3, &ba);
    make_buf(b, c, len * count, 4, &bc);
    std::deque<Msg> from_a, from_c;
    issue(a, al, ba, count, len, &from_a, false);
    issue(c, cl, bc, count, len, &from_c, false);
    ASSERT_TRUE(run_until([&] { return all_done(from_a) && all_done(from_c); }, {c.engine.get()}))
        << "a peer starved: the single slot never reached it\n a: " << a.engine->stats().describe()
        << "\n b: " << b.engine->stats().describe() << "\n c: " << c.engine->stats().describe();
    check(from_a, al, 1, ba, 3);
    check(from_c, cl, 2, bc, 4);
    EXPECT_GT(a.engine->stats().credit_waits, 0u);
    EXPECT_GT(c.engine->stats().credit_waits, 0u);
    EXPECT_EQ(b.engine->ep_close(*b.ep), GDX_OK);
    EXPECT_EQ(b.engine->ep_close(*b_to_c), GDX_OK);
    EXPECT_EQ(b.engine->stats().slots_lent, 0u);
    c.engine.reset();
}

TEST_F(StagingStress, TransportBackPressureOnlyDelays) {
    opt_a.max_inflight = 1;
    opt_b.max_inflight = 1;
    params_a.fault.p2p_every = 2;
    start();
    const size_t len = 7 * 4096 + 5, count = 12;
    HostBuf al, br;
    make_buf(a, b, len * count, 1, &al);
    make_buf(b, a, len * count, 2, &br);
    std::deque<Msg> msgs;
    issue(a, al, br, count, len, &msgs);
    ASSERT_TRUE(run_until([&] { return all_done(msgs); }));
    check(msgs, al, 1, br, 2);
}

// ---- failures: an error status, nothing stuck, nothing leaked -------------------------------------------------

TEST_F(StagingStress, FailedCopyOnTheSenderFailsTheRequestCleanly) {
    params_a.fault.p2p_every = 1;
    params_a.fault.copy_every = 1;
    start();
    HostBuf al, br;
    make_buf(a, b, 64 * 1024, 1, &al);
    make_buf(b, a, 64 * 1024, 2, &br);
    for (bool put : {true, false}) {
        fb::Request req;
        ASSERT_EQ(put ? a.engine->put(*a.ep, *al.reg, 0, *br.remote, 0, 40000, &req)
                      : a.engine->get(*a.ep, *al.reg, 0, *br.remote, 0, 40000, &req),
                  GDX_INPROGRESS);
        ASSERT_TRUE(wait(req));
        EXPECT_EQ(req.status, GDX_ERR_IO) << gdx_status_string(req.status);
    }
    fb::Stats s = a.engine->stats();
    EXPECT_GT(s.copy_failures, 0u);
    EXPECT_EQ(s.requests_failed, 2u);
    EXPECT_EQ(s.slots_in_use, 0u);
    EXPECT_EQ(a.engine->mem_dereg(al.reg), GDX_OK) << "a failed request left its region busy";
    EXPECT_EQ(b.engine->mem_dereg(br.reg), GDX_OK);
}

TEST_F(StagingStress, FailedCopyOnTheReceiverIsReportedToTheSender) {
    params_b.fault.copy_every = 1; // b's copy-outs (put) and stage-outs (get) fail
    opt_b.refuse = [this](uintptr_t addr, size_t) { return user_mem(addr); };
    start();
    HostBuf al, br;
    make_buf(a, b, 64 * 1024, 1, &al);
    make_buf(b, a, 64 * 1024, 2, &br);
    for (bool put : {true, false}) {
        fb::Request req;
        ASSERT_EQ(put ? a.engine->put(*a.ep, *al.reg, 0, *br.remote, 0, 40000, &req)
                      : a.engine->get(*a.ep, *al.reg, 0, *br.remote, 0, 40000, &req),
                  GDX_INPROGRESS);
        ASSERT_TRUE(wait(req));
        EXPECT_EQ(req.status, GDX_ERR_IO) << gdx_status_string(req.status);
    }
    EXPECT_GT(b.engine->stats().copy_failures, 0u);
    EXPECT_TRUE(run_until([&] { return b.engine->mem_dereg(br.reg) == GDX_OK; }, {}, 1000));
}

TEST_F(StagingStress, SomeCopiesFailNeverWrongBytesOnSuccess) {
    params_a.fault.p2p_every = 1;
    params_a.fault.copy_every = 7;
    start();
    const size_t len = 3 * 4096 + 17, count = 20;
    HostBuf al, br;
    make_buf(a, b, len * count, 1, &al);
    make_buf(b, a, len * count, 2, &br);
    std::deque<Msg> msgs;
    issue(a, al, br, count, len, &msgs);
    ASSERT_TRUE(run_until([&] { return all_done(msgs); }));
    size_t failed = 0;
    for (const Msg &m : msgs) {
        if (m.req.status != GDX_OK) {
            EXPECT_EQ(m.req.status, GDX_ERR_IO);
            ++failed;
            continue;
        }
        const HostBuf &dst = m.put ? br : al;
        EXPECT_EQ(first_mismatch(dst.mem.data() + m.off, m.len, m.put ? 1 : 2, m.off), -1) << "OK with wrong bytes";
    }
    EXPECT_GT(failed, 0u);
    EXPECT_LT(failed, count);
}

TEST_F(StagingStress, PeerGoneMidTransferFailsInsteadOfHanging) {
    params_a.fault.p2p_every = 1;
    start();
    HostBuf al, br;
    make_buf(a, b, 1 << 20, 1, &al);
    make_buf(b, a, 1 << 20, 2, &br);
    fb::Request req;
    ASSERT_EQ(a.engine->put(*a.ep, *al.reg, 0, *br.remote, 0, 1 << 20, &req), GDX_INPROGRESS);
    for (int i = 0; i < 20; ++i) {
        a.engine->progress();
        b.engine->progress();
    }
    ASSERT_EQ(req.status, GDX_INPROGRESS) << "finished too early to test anything";
    break_link(*a.ep);
    ASSERT_TRUE(run_until([&] { return req.status != GDX_INPROGRESS; }));
    EXPECT_EQ(req.status, GDX_ERR_CONNECTION_RESET) << gdx_status_string(req.status);
    EXPECT_EQ(a.engine->stats().slots_in_use, 0u);
}

// ---- misuse is refused up front ----------------------------------------------------------------------------

TEST_F(StagingStress, BadRangesAndRightsAreRefusedBeforeAnythingMoves) {
    start();
    HostBuf al, ro;
    make_buf(a, b, 4096, 1, &al);
    make_buf(b, a, 4096, 2, &ro, tp::kAccessLocalRead | tp::kAccessRemoteRead); // no remote write
    fb::Request req;
    EXPECT_EQ(a.engine->put(*a.ep, *al.reg, 0, *ro.remote, 0, 100, &req), GDX_ERR_ACCESS_DENIED);
    EXPECT_EQ(a.engine->get(*a.ep, *al.reg, 4000, *ro.remote, 0, 100, &req), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(a.engine->get(*a.ep, *al.reg, 0, *ro.remote, 4097, 0, &req), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(a.engine->get(*a.ep, *al.reg, 0, *ro.remote, 0, 0, &req), GDX_OK); // empty: done at once
    EXPECT_EQ(a.engine->get(*a.ep, *al.reg, 0, *ro.remote, 0, 100, nullptr), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(a.engine->mem_dereg(ro.reg), GDX_ERR_INVALID_PARAM) << "another engine's region";
    fb::Region *r = nullptr;
    EXPECT_EQ(a.engine->mem_reg(nullptr, 10, tp::kAccessAll, &r), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(a.engine->mem_reg(al.mem.data(), 0, tp::kAccessAll, &r), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(a.engine->mem_reg(al.mem.data(), 10, 0x100, &r), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(first_mismatch(ro.mem.data(), 4096, 2), -1);
}

TEST_F(StagingStress, BusyRegionsAndEndpointsRefuseToGo) {
    params_a.fault.p2p_every = 1;
    start();
    HostBuf al, br;
    make_buf(a, b, 1 << 16, 1, &al);
    make_buf(b, a, 1 << 16, 2, &br);
    fb::Request req;
    ASSERT_EQ(a.engine->put(*a.ep, *al.reg, 0, *br.remote, 0, 1 << 16, &req), GDX_INPROGRESS);
    EXPECT_EQ(a.engine->mem_dereg(al.reg), GDX_ERR_BUSY);
    EXPECT_EQ(a.engine->ep_close(*a.ep), GDX_ERR_BUSY);
    EXPECT_EQ(a.engine->put(*a.ep, *al.reg, 0, *br.remote, 0, 10, &req), GDX_ERR_INVALID_PARAM) << "request reused";
    ASSERT_TRUE(wait(req));
    EXPECT_EQ(req.status, GDX_OK);
    EXPECT_EQ(a.engine->mem_dereg(al.reg), GDX_OK);
    EXPECT_EQ(a.engine->ep_close(*a.ep), GDX_OK);
}

TEST_F(StagingStress, EngineDestroyedWithRequestsInFlightCancelsThem) {
    params_a.fault.p2p_every = 1;
    start();
    HostBuf al, br;
    make_buf(a, b, 1 << 18, 1, &al);
    make_buf(b, a, 1 << 18, 2, &br);
    fb::Request req;
    bool called = false;
    req.user = &called;
    req.cb = [](fb::Request *r) { *static_cast<bool *>(r->user) = true; };
    ASSERT_EQ(a.engine->put(*a.ep, *al.reg, 0, *br.remote, 0, 1 << 18, &req), GDX_INPROGRESS);
    a.engine->progress();
    a.engine.reset(); // must not hang or crash; the peer (b) simply stops hearing from it
    EXPECT_TRUE(called);
    EXPECT_EQ(req.status, GDX_ERR_CANCELED);
}

TEST_F(StagingStress, ParamsComeFromTheConfiguration) {
    Config cfg;
    std::string err;
    ASSERT_EQ(Config::load({{"GDX_FRAG_SIZE", "host:64K,cuda:2M"}, {"GDX_STAGING_DEPTH", "8"},
                            {"GDX_FAULT_P2P_EVERY", "5"}},
                           &cfg, &err),
              GDX_OK)
        << err;
    fb::Params p;
    ASSERT_EQ(fb::Params::from_config(cfg, &p), GDX_OK);
    EXPECT_EQ(p.frag_host, 64u << 10);
    EXPECT_EQ(p.frag_cuda, 2u << 20);
    EXPECT_EQ(p.depth, 8u);
    EXPECT_EQ(p.fault.p2p_every, 5u);
    for (auto [var, val] : {std::pair{"GDX_STAGING_DEPTH", "0"}, {"GDX_FRAG_SIZE", "1K"}, {"GDX_STAGING_POOL", "1"},
                            {"GDX_FAULT_P2P_PERCENT", "101"}}) {
        // Refused where the value enters (the config table's range), naming it; from_config keeps its own check.
        EXPECT_EQ(Config::load({{var, val}}, &cfg, &err), GDX_ERR_INVALID_CONFIG) << var << "=" << val;
        EXPECT_NE(err.find(std::string(var) + "=" + val), std::string::npos) << err;
    }
}

} // namespace
} // namespace gdx::test
