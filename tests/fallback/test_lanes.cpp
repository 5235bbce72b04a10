// Lane choice in the staging layer (fallback/lanes.h): a multi-transport endpoint as the C API has one (cuda_ipc
// and shm to a peer on this host), built here from two loop transports, one engine pair each. The request goes to
// the lane that reaches both buffers directly even when a staging lane comes first, to the first lane that can stage
// when none is direct, never to a lane without the registration or the key; its range and rights are checked where
// it enters the chosen engine, and a refused request leaves nothing queued on any lane.
#include "loop_fixture.h"

#include "core/error.h"
#include "fallback/lanes.h"

#include <string>

namespace gdx::test {
namespace {

class Lanes : public LoopPairTest {
  protected:
    // Lane 0 is the fixture's pair (a, b on `fabric`); lane 1 a second pair on its own fabric.
    std::shared_ptr<LoopFabric> fabric1 = make_loop_fabric();
    LoopOptions opt_a1, opt_b1;
    EngineSide a1, b1;
    HostBuf src0, dst0;                                // one buffer per side, registered with lane 0's engines
    fb::Region *src1 = nullptr, *dst1 = nullptr;       // ... and with lane 1's
    std::unique_ptr<fb::RemoteRegion> dst1_key, src1_key; // lane 1's keys, as a1 sees b1's and b1 sees a1's
    static constexpr size_t kBuf = 256 << 10;

    void TearDown() override {
        LoopPairTest::TearDown();
        EXPECT_EQ(loop_violations(*fabric1), 0u) << "lane 1's engine broke a transport rule";
    }
    auto refuse_user() {
        return [this](uintptr_t addr, size_t) { return user_mem(addr); };
    }
    void open1(EngineSide *s, const LoopOptions &o) {
        ASSERT_EQ(open_loop_iface(fabric1, o, &s->iface), GDX_OK);
        ASSERT_EQ(fb::Engine::create(*s->iface, params_a, *detector, &s->engine), GDX_OK) << last_error();
        ASSERT_EQ(s->iface->ep_create(&s->ep), GDX_OK);
    }
    // Both lanes up, a's buffer (pattern 11) and b's (pattern 22) registered on both, keys exchanged.
    void start_lanes() {
        ASSERT_NO_FATAL_FAILURE(start());
        ASSERT_NO_FATAL_FAILURE(open1(&a1, opt_a1));
        ASSERT_NO_FATAL_FAILURE(open1(&b1, opt_b1));
        ASSERT_NO_FATAL_FAILURE(connect(a1, b1));
        ASSERT_NO_FATAL_FAILURE(make_buf(a, b, kBuf, 11, &src0));
        ASSERT_NO_FATAL_FAILURE(make_buf(b, a, kBuf, 22, &dst0));
        ASSERT_NO_FATAL_FAILURE(reg1(a1, b1, src0, &src1, &src1_key));
        ASSERT_NO_FATAL_FAILURE(reg1(b1, a1, dst0, &dst1, &dst1_key));
    }
    static void reg1(EngineSide &owner, EngineSide &peer, HostBuf &buf, fb::Region **reg,
                     std::unique_ptr<fb::RemoteRegion> *key) {
        ASSERT_EQ(owner.engine->mem_reg(buf.mem.data(), buf.mem.size(), tp::kAccessAll, reg), GDX_OK) << last_error();
        std::vector<uint8_t> packed;
        ASSERT_EQ(owner.engine->pack_key(**reg, &packed), GDX_OK);
        ASSERT_EQ(peer.engine->unpack_key(packed, key), GDX_OK) << last_error();
    }
    // a's lanes for a put into b's buffer or a get from it.
    std::vector<fb::Lane> lanes() {
        return {{a.engine.get(), a.ep.get(), src0.reg, dst0.remote.get()},
                {a1.engine.get(), a1.ep.get(), src1, dst1_key.get()}};
    }
    bool wait_all(fb::Request &r) {
        return run_until([&] { return r.status != GDX_INPROGRESS; }, {a1.engine.get(), b1.engine.get()});
    }

    // One request over `ls`; returns the chosen lane (SIZE_MAX when refused: *st says why) and checks the bytes.
    size_t transfer(const std::vector<fb::Lane> &ls, const fb::Transfer &t, fb::Request *req, gdx_status_t *st) {
        size_t chosen = SIZE_MAX;
        *st = fb::submit(ls, t, req, &chosen);
        if (*st != GDX_INPROGRESS) return *st == GDX_OK ? chosen : SIZE_MAX;
        EXPECT_TRUE(wait_all(*req)) << "request did not complete";
        EXPECT_EQ(req->status, GDX_OK) << req->error;
        const HostBuf &dst = t.is_put ? dst0 : src0;
        size_t doff = t.is_put ? t.remote_off : t.local_off, soff = t.is_put ? t.local_off : t.remote_off;
        EXPECT_EQ(first_mismatch(dst.mem.data() + doff, t.len, t.is_put ? 11 : 22, soff), -1) << "wrong bytes";
        *st = req->status;
        return chosen;
    }
};

TEST_F(Lanes, TheLaneThatReachesBothBuffersWinsOverAStagingLaneListedFirst) {
    opt_a.refuse = refuse_user(); // lane 0 reaches neither buffer: it would stage on both sides
    opt_b.refuse = refuse_user();
    ASSERT_NO_FATAL_FAILURE(start_lanes());
    // The get reads a range of b's buffer the put did not write.
    for (fb::Transfer t : {fb::Transfer{true, 100, 300, 100000}, fb::Transfer{false, 100, 150000, 100000}}) {
        fb::Request req;
        gdx_status_t st;
        size_t chosen = transfer(lanes(), t, &req, &st);
        EXPECT_EQ(chosen, 1u) << (t.is_put ? "put" : "get") << " went over the lane that must stage";
        EXPECT_EQ(st, GDX_OK);
        EXPECT_EQ(req.path.bytes_direct, 100000u) << req.path.describe();
        EXPECT_EQ(req.path.bytes_staged, 0u) << req.path.describe();
    }
    EXPECT_EQ(a.engine->stats().requests_completed, 0u) << "lane 0 carried a request";
}

TEST_F(Lanes, WithNoDirectLaneTheFirstLaneThatCanStageCarriesIt) {
    // Lane 0: a's transport does not reach pinned host memory, so a cannot stage there (its own registration is
    // direct; b's is not). Lane 1 stages on both sides.
    opt_a.direct_types = tp::type_bit(mem::MemType::HostPageable) | tp::type_bit(mem::MemType::HostRegistered);
    opt_b.refuse = refuse_user();
    opt_a1.refuse = refuse_user();
    opt_b1.refuse = refuse_user();
    ASSERT_NO_FATAL_FAILURE(start_lanes());
    ASSERT_FALSE(a.engine->can_stage());
    ASSERT_TRUE(a1.engine->can_stage());
    fb::Request req;
    gdx_status_t st;
    EXPECT_EQ(transfer(lanes(), {true, 7, 9, 50000}, &req, &st), 1u) << "the lane that cannot stage was taken";
    EXPECT_EQ(st, GDX_OK);
    EXPECT_EQ(req.path.bytes_staged, 50000u) << req.path.describe();
    EXPECT_EQ(req.path.stage_sides, fb::kStageSideLocal | fb::kStageSideRemote) << req.path.describe();
}

TEST_F(Lanes, ATransportThatSharesPoolsWithItsPeersCanStageWithoutReachingPinnedMemory) {
    // cuda_ipc without P2P: it reaches neither pinned host memory nor (here) the user's buffer, but its bounce pools
    // live in segments the peer maps (kCapPeerMap), so registering memory it must stage is accepted, and its lane
    // counts as one that can stage. (Without the flag, WithNoDirectLaneTheFirstLaneThatCanStageCarriesIt shows
    // can_stage() false; the GPU test IpcMixedDirectAndPeerMappedAndFaults runs the transfer itself.)
    opt_a.direct_types = tp::type_bit(mem::MemType::HostPageable) | tp::type_bit(mem::MemType::HostRegistered);
    opt_a.refuse = refuse_user();
    opt_a.advertise_peer_map = true;
    ASSERT_NO_FATAL_FAILURE(start_lanes()); // registers a's buffer, which a's transport does not reach
    EXPECT_TRUE(a.engine->can_stage());
    EXPECT_FALSE(src0.reg->fully_direct()) << "a's registration was meant to be one it must stage";
}

TEST_F(Lanes, ALaneWithoutTheRegistrationOrTheKeyIsNeverChosen) {
    opt_a1.refuse = refuse_user(); // lane 1 must stage; lane 0 would be direct, but misses a piece each time
    ASSERT_NO_FATAL_FAILURE(start_lanes());
    for (int missing : {0, 1}) {
        std::vector<fb::Lane> ls = lanes();
        if (missing == 0)
            ls[0].local = nullptr;
        else
            ls[0].remote = nullptr;
        fb::Request req;
        gdx_status_t st;
        EXPECT_EQ(transfer(ls, {true, 0, 0, 20000}, &req, &st), 1u) << "lane 0 has no " << (missing ? "key" : "region");
        EXPECT_EQ(st, GDX_OK);
        EXPECT_EQ(req.path.bytes_staged, 20000u) << req.path.describe();
    }
    // No lane with both: refused before anything is queued, naming the lanes.
    std::vector<fb::Lane> ls = lanes();
    ls[0].remote = nullptr;
    ls[1].local = nullptr;
    fb::Request req;
    size_t chosen = 42;
    EXPECT_EQ(fb::submit(ls, {true, 0, 0, 100}, &req, &chosen), GDX_ERR_UNREACHABLE);
    EXPECT_EQ(chosen, 42u);
    EXPECT_NE(last_error().find("(loop+loop)"), std::string::npos) << last_error();
}

TEST_F(Lanes, RangeAndRightsAreCheckedWhereTheRequestEntersTheChosenEngine) {
    opt_a.refuse = refuse_user(); // lane 0 stages, lane 1 is direct: each case below would pick lane 1 if valid
    ASSERT_NO_FATAL_FAILURE(start_lanes());
    struct Case {
        fb::Transfer t;
        gdx_status_t expect;
        const char *text;
    };
    const Case cases[] = {
        {{true, kBuf - 10, 0, 11}, GDX_ERR_INVALID_PARAM, "local [262134, +11) is outside the region"},
        {{false, 0, kBuf, 1}, GDX_ERR_INVALID_PARAM, "remote [262144, +1) is outside the region"},
        {{true, 1, 0, SIZE_MAX}, GDX_ERR_INVALID_PARAM, "is outside the region"},
    };
    for (const Case &c : cases) {
        fb::Request req;
        size_t chosen = SIZE_MAX;
        EXPECT_EQ(fb::submit(lanes(), c.t, &req, &chosen), c.expect) << c.text;
        EXPECT_NE(last_error().find(c.text), std::string::npos) << last_error();
        EXPECT_EQ(req.status, GDX_OK) << "a refused request was touched";
    }
    // A key registered read-only: a put is refused for rights, a get of the same range goes through.
    HostBuf ro;
    ASSERT_NO_FATAL_FAILURE(make_buf(b, a, 4096, 33, &ro, tp::kAccessRemoteRead | tp::kAccessLocalRead));
    std::vector<fb::Lane> ls = lanes();
    ls.resize(1);
    ls[0].remote = ro.remote.get();
    fb::Request req;
    size_t chosen = SIZE_MAX;
    EXPECT_EQ(fb::submit(ls, {true, 0, 0, 64}, &req, &chosen), GDX_ERR_ACCESS_DENIED);
    EXPECT_NE(last_error().find("not registered for remote write"), std::string::npos) << last_error();
    for (fb::Engine *e : {a.engine.get(), a1.engine.get()}) EXPECT_EQ(e->stats().requests_active, 0u);
    EXPECT_EQ(fb::submit(ls, {false, 0, 0, 64}, &req, &chosen), GDX_INPROGRESS) << last_error();
    ASSERT_TRUE(wait_all(req));
    EXPECT_EQ(req.status, GDX_OK) << req.error;
    EXPECT_EQ(first_mismatch(src0.mem.data(), 64, 33), -1);
}

TEST_F(Lanes, ANotificationTravelsOnTheChosenLane) {
    opt_a.refuse = refuse_user();
    ASSERT_NO_FATAL_FAILURE(start_lanes());
    const uint64_t value = 0x5eed;
    fb::Request req;
    gdx_status_t st;
    fb::Transfer t{true, 0, 64, 30000, &value};
    EXPECT_EQ(transfer(lanes(), t, &req, &st), 1u);
    EXPECT_EQ(st, GDX_OK);
    fb::Notification n;
    ASSERT_TRUE(run_until([&] { return b1.engine->notify_peek(*b1.ep, &n); }, {a1.engine.get(), b1.engine.get()}));
    EXPECT_EQ(n.value, value);
    EXPECT_FALSE(b.engine->notify_peek(*b.ep, &n)) << "the value arrived on the other lane";
}

} // namespace
} // namespace gdx::test
