// The silence clock on the target side of staging (issue 16, class 4): a target waits on the initiator too — for
// slots it granted and the initiator never fills, for slots it recalled because another peer waits, for a
// stage-out's transfer — and a stopped initiator must be declared dead there as well: the target reports it
// (peer_state), stops waiting, does not stay BUSY, and gets its slots back when the endpoint goes. A live peer
// that merely keeps slots it filled is never declared dead. Over the loop transport, with one engine "stopped"
// by not progressing it (tests/fallback/test_stopped_peer.cpp does the same with a real SIGSTOPped process).
#include "loop_fixture.h"

#include <chrono>

namespace gdx::test {
namespace {

using Clock = std::chrono::steady_clock;

class TargetLiveness : public LoopPairTest {
  protected:
    static constexpr int64_t kTimeoutNs = 300'000'000; // GDX_PEER_SILENCE_TIMEOUT of both: tests stay fast

    void SetUp() override {
        LoopPairTest::SetUp();
        for (fb::Params *p : {&params_a, &params_b}) {
            p->silence_timeout_ns = kTimeoutNs;
            p->fault.p2p_every = 1; // every fragment staged on both sides: everything waits on the peer
        }
    }
    // The engines go first, while the requests and buffers they may still touch exist (a failed assertion
    // leaves requests in flight).
    void TearDown() override {
        for (EngineSide *s : {&c, &a, &b}) s->engine.reset();
        LoopPairTest::TearDown();
    }
    EngineSide c;                                // a third peer, where a test needs one
    HostBuf al, ar, cl, cr; // xl: x's own buffer; xr: the buffer x targets (registered by b)
    fb::Request ra, rb, rc;

    // Progresses `engines` until pred() or `seconds` of wall time; returns pred(). The bound is a hang guard,
    // never the thing tested.
    template <typename P> static bool progress(std::initializer_list<fb::Engine *> engines, P pred, double seconds) {
        auto end = Clock::now() + std::chrono::duration<double>(seconds);
        while (!pred() && Clock::now() < end)
            for (fb::Engine *e : engines) e->progress();
        return pred();
    }
};

// a posts a staged put and stops before it hears the GRANT: b lent slots a asked for and never fills.
TEST_F(TargetLiveness, StoppedInitiatorHoldingGrantedSlotsIsDeclaredDeadByTheTarget) {
    start();
    make_buf(a, b, 256 << 10, 1, &al);
    make_buf(b, a, 256 << 10, 2, &ar);
    fb::Request &req = ra;
    ASSERT_EQ(a.engine->put(*a.ep, *al.reg, 0, *ar.remote, 0, 256 << 10, &req), GDX_INPROGRESS) << last_error();
    ASSERT_TRUE(progress({b.engine.get()}, [&] { return b.engine->stats().slots_lent > 0; }, 10))
        << "b never granted: the test tests nothing";
    auto t0 = Clock::now();
    ASSERT_TRUE(progress({b.engine.get()}, [&] { return b.engine->peer_state(*b.ep) != GDX_OK; }, 10))
        << "the target still waits on a stopped initiator";
    std::printf("target declared the stopped initiator dead after %.3f s (GDX_PEER_SILENCE_TIMEOUT %.3f s)\n",
                std::chrono::duration<double>(Clock::now() - t0).count(), kTimeoutNs / 1e9);
    EXPECT_EQ(b.engine->peer_state(*b.ep), GDX_ERR_TIMEOUT);
    EXPECT_NE(last_error().find("it held slots of our bounce pools"), std::string::npos) << last_error();
    // Its slots stay out of the pool while it could still write them, and come back with the endpoint.
    EXPECT_GT(b.engine->stats().slots_lent, 0u);
    EXPECT_EQ(b.engine->ep_close(*b.ep), GDX_OK) << last_error();
    EXPECT_EQ(b.engine->stats().slots_lent, 0u);
    // a resumes: b's BYE fails its request at once, with the reason (no wait for its own clock).
    ASSERT_TRUE(progress({a.engine.get()}, [&] { return req.status != GDX_INPROGRESS; }, 10));
    EXPECT_EQ(req.status, GDX_ERR_CONNECTION_RESET) << gdx_status_string(req.status);
    EXPECT_NE(req.error.find("declared this process dead"), std::string::npos) << req.error;
}

// b lends its only slot; a fills it, keeps it (DONE keep=1) and stops. c then wants the slot: b recalls it from
// a, which never answers. b must declare a dead — then destroying that endpoint gives c the slot.
TEST_F(TargetLiveness, StoppedHolderOfARecalledSlotIsDeclaredDeadAndTheWaitingPeerIsServed) {
    params_b.fault.pool_limit = 1;
    start();
    ASSERT_NO_FATAL_FAILURE(open_side(&c, opt_a, params_a));
    std::unique_ptr<tp::Endpoint> b_to_c;
    ASSERT_EQ(b.iface->ep_create(&b_to_c), GDX_OK);
    ASSERT_EQ(b_to_c->connect(c.ep->address()), GDX_OK);
    ASSERT_EQ(c.ep->connect(b_to_c->address()), GDX_OK);
    make_buf(a, b, 64 << 10, 1, &al);
    make_buf(b, a, 64 << 10, 2, &ar);
    make_buf(c, b, 64 << 10, 3, &cl);
    make_buf(b, c, 64 << 10, 4, &cr);
    ASSERT_EQ(a.engine->put(*a.ep, *al.reg, 0, *ar.remote, 0, 64 << 10, &ra), GDX_INPROGRESS);
    ASSERT_TRUE(wait(ra));
    ASSERT_EQ(ra.status, GDX_OK) << ra.error;
    ASSERT_EQ(b.engine->stats().slots_lent, 1u) << "a does not keep the slot: the test tests nothing";
    // a stops. c's put needs the slot a keeps.
    ASSERT_EQ(c.engine->put(*c.ep, *cl.reg, 0, *cr.remote, 0, 64 << 10, &rc), GDX_INPROGRESS);
    fb::Engine *live[] = {b.engine.get(), c.engine.get()};
    ASSERT_TRUE(progress({live[0], live[1]}, [&] { return b.engine->peer_state(*b.ep) != GDX_OK; }, 10))
        << "the target waits forever on a stopped holder of the slot another peer needs";
    EXPECT_EQ(b.engine->peer_state(*b.ep), GDX_ERR_TIMEOUT);
    EXPECT_EQ(b.engine->peer_state(*b_to_c), GDX_OK) << "the live peer is not declared dead";
    EXPECT_EQ(rc.status, GDX_INPROGRESS);
    EXPECT_EQ(b.engine->ep_close(*b.ep), GDX_OK) << last_error(); // what the application does on that report
    ASSERT_TRUE(progress({live[0], live[1]}, [&] { return rc.status != GDX_INPROGRESS; }, 10));
    EXPECT_EQ(rc.status, GDX_OK) << rc.error;
    EXPECT_EQ(first_mismatch(cr.mem.data(), 64 << 10, 3), -1);
    EXPECT_EQ(b.engine->ep_close(*b_to_c), GDX_OK);
}

// A get from b that b stages out (no transport get): b's put into a's landing slot waits for a, which stopped.
// b declares a dead, and the region the stage-out copied from is free to go at once (its bytes are in b's slot).
TEST_F(TargetLiveness, StageOutForAStoppedInitiatorDoesNotHoldTheTargetsRegion) {
    opt_a.no_get = true;
    opt_b.no_get = true;
    start();
    make_buf(a, b, 64 << 10, 1, &al);
    make_buf(b, a, 64 << 10, 2, &ar);
    fb::Request &req = ra;
    ASSERT_EQ(a.engine->get(*a.ep, *al.reg, 0, *ar.remote, 0, 64 << 10, &req), GDX_INPROGRESS) << last_error();
    for (int i = 0; i < 4; ++i) a.engine->progress(); // the GET_REQs leave; then a stops
    ASSERT_TRUE(progress({b.engine.get()}, [&] { return b.engine->peer_state(*b.ep) != GDX_OK; }, 10))
        << "the target's stage-outs wait forever on a stopped initiator";
    EXPECT_EQ(b.engine->peer_state(*b.ep), GDX_ERR_TIMEOUT);
    EXPECT_NE(last_error().find("stage-outs we ran for its requests"), std::string::npos) << last_error();
    EXPECT_EQ(b.engine->mem_dereg(ar.reg), GDX_OK) << "the region stays BUSY behind a put to a stopped peer";
    ar.reg = nullptr;
    ASSERT_TRUE(progress({a.engine.get(), b.engine.get()}, [&] { return req.status != GDX_INPROGRESS; }, 10));
    EXPECT_NE(req.status, GDX_OK);
    EXPECT_NE(req.error, "");
}

// The other side of the rule: a peer that filled its slots and keeps them (DONE keep=1), with nothing of its own
// outstanding, may stop progressing for as long as it likes (an application computing): it owes nothing, so it
// is never declared dead. Nor is it for slots granted after its need was gone (the surplus goes back at once).
TEST_F(TargetLiveness, IdlePeerKeepingFilledSlotsIsNeverDeclaredDead) {
    start();
    make_buf(a, b, 1 << 20, 1, &al);
    make_buf(b, a, 1 << 20, 2, &ar);
    for (int round = 0; round < 3; ++round) {
        fb::Request &req = round % 2 ? ra : rb;
        ASSERT_EQ(a.engine->put(*a.ep, *al.reg, 0, *ar.remote, 0, 1 << 20, &req), GDX_INPROGRESS);
        ASSERT_TRUE(wait(req));
        ASSERT_EQ(req.status, GDX_OK) << req.error;
    }
    ASSERT_GT(b.engine->stats().slots_lent, 0u) << "a keeps no slot: the test tests nothing";
    // a stops; b keeps progressing for several of its GDX_PEER_SILENCE_TIMEOUTs.
    EXPECT_FALSE(progress({b.engine.get()}, [&] { return b.engine->peer_state(*b.ep) != GDX_OK; }, 4 * kTimeoutNs / 1e9))
        << "an idle peer that owes nothing was declared dead: " << last_error();
    // And a, back, carries on.
    fb::Request &req = rc;
    ASSERT_EQ(a.engine->put(*a.ep, *al.reg, 0, *ar.remote, 0, 1 << 20, &req), GDX_INPROGRESS);
    ASSERT_TRUE(wait(req));
    EXPECT_EQ(req.status, GDX_OK) << req.error;
}

} // namespace
} // namespace gdx::test
