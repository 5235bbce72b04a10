// The staging engine over the in-process loop transport: every combination of direct and staged fragments (by
// the transport's reachability and by fault injection), odd sizes and offsets, the small-message path, and the
// path report that says what happened. Every transfer is checked byte for byte, including the bytes around it.
#include "loop_fixture.h"

#include "core/error.h"

#include <string>
#include <tuple>

namespace gdx::test {
namespace {

enum class Mode { Direct, Staged, LocalOnly, RemoteOnly, Mixed };
const char *mode_name(Mode m) {
    switch (m) {
    case Mode::Direct: return "direct";
    case Mode::Staged: return "staged";
    case Mode::LocalOnly: return "local_only";
    case Mode::RemoteOnly: return "remote_only";
    case Mode::Mixed: return "mixed";
    }
    return "?";
}

class StagingLoop : public LoopPairTest {
  protected:
    // a is the initiator. LocalOnly: a's memory is unreachable; RemoteOnly: b's is; Mixed: both cut into chunks
    // of different sizes with every other one refused, so one message meets all four combinations.
    void configure(Mode m) {
        auto none = [this](uintptr_t addr, size_t) { return user_mem(addr); };
        switch (m) {
        case Mode::Direct: break;
        case Mode::Staged: params_a.fault.p2p_every = 1; break;
        case Mode::LocalOnly: opt_a.refuse = none; break;
        case Mode::RemoteOnly: opt_b.refuse = none; break;
        case Mode::Mixed:
            opt_a.chunk = 8192;
            opt_b.chunk = 12288;
            opt_a.refuse = [this](uintptr_t addr, size_t) { return user_mem(addr) && (addr / 8192) % 2 == 0; };
            opt_b.refuse = [this](uintptr_t addr, size_t) { return user_mem(addr) && (addr / 12288) % 3 == 1; };
            break;
        }
    }

    // One put (or get) of `len` bytes at the given offsets; checks status, every byte of both buffers and that
    // the path report adds up. Returns the report.
    fb::PathReport transfer(bool is_put, size_t len, size_t loff, size_t roff) {
        const size_t n = len + 8192 + 64;
        HostBuf la, rb;
        make_buf(a, b, n, 11, &la);
        make_buf(b, a, n, 22, &rb);
        fb::Request req;
        gdx_status_t st = is_put ? a.engine->put(*a.ep, *la.reg, loff, *rb.remote, roff, len, &req)
                                 : a.engine->get(*a.ep, *la.reg, loff, *rb.remote, roff, len, &req);
        EXPECT_EQ(st, GDX_INPROGRESS) << last_error();
        EXPECT_TRUE(wait(req)) << "request did not complete";
        EXPECT_EQ(req.status, GDX_OK) << gdx_status_string(req.status) << ": " << last_error();
        // Destination: the source's bytes in the range, its own pattern around it. Source: untouched.
        const HostBuf &dst = is_put ? rb : la;
        size_t doff = is_put ? roff : loff, soff = is_put ? loff : roff;
        uint64_t dseed = is_put ? 22 : 11, sseed = is_put ? 11 : 22;
        EXPECT_EQ(first_mismatch(dst.mem.data(), doff, dseed), -1) << "bytes before the range changed";
        EXPECT_EQ(first_mismatch(dst.mem.data() + doff, len, sseed, soff), -1) << "wrong bytes in the range";
        EXPECT_EQ(first_mismatch(dst.mem.data() + doff + len, n - doff - len, dseed, doff + len), -1)
            << "bytes after the range changed";
        const HostBuf &src = is_put ? la : rb;
        EXPECT_EQ(first_mismatch(src.mem.data(), n, sseed), -1) << "the source changed";
        EXPECT_EQ(req.path.bytes_direct + req.path.bytes_staged, len);
        EXPECT_EQ(a.engine->mem_dereg(la.reg), GDX_OK);
        EXPECT_EQ(b.engine->mem_dereg(rb.reg), GDX_OK);
        return req.path;
    }
};

// ---- the path report tells the truth ------------------------------------------------------------------------

TEST_F(StagingLoop, DirectHostMemoryIsNeverStaged) {
    start();
    for (bool put : {true, false}) {
        fb::PathReport p = transfer(put, 100000, 0, 0);
        EXPECT_STREQ(p.kind(), "direct");
        EXPECT_EQ(p.bytes_staged, 0u);
        EXPECT_EQ(p.frags_direct, (100000u + 4095) / 4096);
        EXPECT_EQ(p.via(), "host");
        EXPECT_NE(p.describe().find("direct[host->host] 100.0%"), std::string::npos) << p.describe();
    }
    EXPECT_EQ(a.engine->stats().bytes_staged, 0u);
}

TEST_F(StagingLoop, ForcedStagingStagesEveryFragmentOnBothSides) {
    configure(Mode::Staged);
    start();
    for (bool put : {true, false}) {
        fb::PathReport p = transfer(put, 100000, 0, 0);
        EXPECT_STREQ(p.kind(), "staged");
        EXPECT_EQ(p.bytes_staged, 100000u);
        EXPECT_EQ(p.stage_sides, fb::kStageSideLocal | fb::kStageSideRemote);
        EXPECT_EQ(p.reasons, fb::kStageFaultInjected);
        EXPECT_EQ(p.frag_size, 4096u);
        EXPECT_EQ(p.depth, 4u);
        EXPECT_NE(p.describe().find("staged[frag 4K depth 4 local+remote; fault-injected] 100.0%"), std::string::npos)
            << p.describe();
    }
    fb::Stats s = a.engine->stats();
    EXPECT_EQ(s.bytes_staged, 200000u);
    EXPECT_EQ(s.bytes_staged_by_reason[2], 200000u); // fault-injected
    EXPECT_GT(b.engine->stats().target_bytes_copied, 0u);
}

TEST_F(StagingLoop, FaultEveryThirdFragmentMixesOneMessage) {
    params_a.fault.p2p_every = 3;
    start();
    fb::PathReport p = transfer(true, 30 * 4096, 0, 0);
    EXPECT_STREQ(p.kind(), "mixed");
    EXPECT_EQ(p.frags_staged, 10u);
    EXPECT_EQ(p.frags_direct, 20u);
    EXPECT_NEAR(p.staged_share(), 1.0 / 3, 1e-9);
}

TEST_F(StagingLoop, UnreachableLocalMemoryStagesOnlyThisSide) {
    configure(Mode::LocalOnly);
    start();
    for (bool put : {true, false}) {
        fb::PathReport p = transfer(put, 50000, 0, 0);
        EXPECT_STREQ(p.kind(), "staged");
        EXPECT_EQ(p.stage_sides, fb::kStageSideLocal);
        EXPECT_EQ(p.reasons, fb::kStageLocalUnreachable);
    }
}

TEST_F(StagingLoop, UnreachableRemoteMemoryIsStagedByThePeer) {
    configure(Mode::RemoteOnly);
    start();
    for (bool put : {true, false}) {
        fb::PathReport p = transfer(put, 50000, 0, 0);
        EXPECT_STREQ(p.kind(), "staged");
        EXPECT_EQ(p.stage_sides, fb::kStageSideRemote);
        EXPECT_EQ(p.reasons, fb::kStageRemoteUnreachable);
    }
    EXPECT_GE(b.engine->stats().target_bytes_copied, 100000u);
}

TEST_F(StagingLoop, ChunkedRegistrationsMixAllFourCombinations) {
    configure(Mode::Mixed);
    start();
    for (bool put : {true, false}) {
        fb::PathReport p = transfer(put, 200000, 100, 300);
        EXPECT_STREQ(p.kind(), "mixed");
        EXPECT_EQ(p.stage_sides, fb::kStageSideLocal | fb::kStageSideRemote);
        EXPECT_EQ(p.reasons, fb::kStageLocalUnreachable | fb::kStageRemoteUnreachable);
    }
}

// An endpoint without a direct path to its peer (cuda_ipc with no peer-to-peer access to the peer's GPU) moves
// directly reachable memory staged on both sides: nothing is issued that would fail with GDX_ERR_UNREACHABLE.
TEST_F(StagingLoop, NoDirectPathToThePeerStagesBothSides) {
    opt_a.no_direct = true;
    opt_b.no_direct = true;
    start();
    for (bool put : {true, false}) {
        fb::PathReport p = transfer(put, 50000, 3, 5);
        EXPECT_STREQ(p.kind(), "staged");
        EXPECT_EQ(p.bytes_direct, 0u);
        EXPECT_EQ(p.stage_sides, fb::kStageSideLocal | fb::kStageSideRemote);
        EXPECT_EQ(p.reasons, fb::kStageNoTransportOp);
    }
}

TEST_F(StagingLoop, GetWithoutTransportGetIsStagedOutByThePeer) {
    opt_a.no_get = true;
    opt_b.no_get = true;
    start();
    fb::PathReport p = transfer(false, 40000, 0, 0);
    EXPECT_EQ(p.reasons, fb::kStageNoTransportOp);
    EXPECT_EQ(p.bytes_staged, 40000u);
}

// ---- odd sizes and offsets, every mode, both directions ----------------------------------------------------

class StagingOdd : public StagingLoop, public ::testing::WithParamInterface<std::tuple<Mode, bool>> {};

TEST_P(StagingOdd, ByteExactAtOddSizesAndOffsets) {
    auto [mode, put] = GetParam();
    configure(mode);
    start();
    const size_t sizes[] = {1, 2, 4095, 4096, 4097, 12289, 65537};
    const std::pair<size_t, size_t> offsets[] = {{0, 0}, {1, 3}, {4093, 7}};
    for (size_t len : sizes)
        for (auto [lo, ro] : offsets) {
            SCOPED_TRACE("len " + std::to_string(len) + " offsets " + std::to_string(lo) + "/" + std::to_string(ro));
            transfer(put, len, lo, ro);
        }
    EXPECT_EQ(a.engine->stats().slots_in_use, 0u);
    EXPECT_EQ(b.engine->stats().slots_in_use, 0u);
    // Slots a still holds idle (credits kept for the next message) come back when the endpoint goes.
    EXPECT_EQ(b.engine->ep_close(*b.ep), GDX_OK);
    EXPECT_EQ(b.engine->stats().slots_lent, 0u);
}

INSTANTIATE_TEST_SUITE_P(Modes, StagingOdd,
                         ::testing::Combine(::testing::Values(Mode::Direct, Mode::Staged, Mode::LocalOnly,
                                                              Mode::RemoteOnly, Mode::Mixed),
                                            ::testing::Bool()),
                         [](const auto &info) {
                             return std::string(mode_name(std::get<0>(info.param))) +
                                    (std::get<1>(info.param) ? "_put" : "_get");
                         });

// ---- the small-message path ------------------------------------------------------------------------------------

TEST_F(StagingLoop, SmallStagedMessagesTakeOneActiveMessage) {
    params_a.small_thresh = 8192;
    configure(Mode::Staged);
    start();
    for (bool put : {true, false})
        for (size_t len : {1, 100, 8000}) {
            fb::PathReport p = transfer(put, len, 3, 5);
            EXPECT_TRUE(p.small) << len;
            EXPECT_EQ(p.bytes_staged, len);
            EXPECT_NE(p.describe().find("staged-small"), std::string::npos) << p.describe();
        }
    EXPECT_EQ(a.engine->stats().msgs_small, 6u);
    // Above the threshold (and the room of one message) the fragment pipeline takes over.
    fb::PathReport p = transfer(true, 9000, 0, 0);
    EXPECT_FALSE(p.small);
}

TEST_F(StagingLoop, SmallDirectMessagesStayDirect) {
    params_a.small_thresh = 8192;
    start();
    fb::PathReport p = transfer(true, 100, 0, 0);
    EXPECT_FALSE(p.small);
    EXPECT_STREQ(p.kind(), "direct");
}

// A mixed request whose staged part is a few bytes (a 4 MiB + 7 B rendezvous with one fragment denied, as seen on
// the GPU machine) never reads "100.0% + 0.0%": the small part is shown in bytes, the large one as >99.9%.
TEST(PathReportText, ATinyShareOfAMixedRequestIsShownInBytes) {
    fb::PathReport p;
    p.bytes_direct = 4194304;
    p.bytes_staged = 7;
    p.frag_size = 4u << 20;
    p.depth = 4;
    p.local_reach = p.remote_reach = fb::reach_bit(tp::Reach::Host);
    p.stage_sides = fb::kStageSideLocal;
    p.reasons = fb::kStageFaultInjected;
    const std::string d = p.describe();
    EXPECT_NE(d.find("] >99.9% + staged["), std::string::npos) << d;
    EXPECT_NE(d.find("fault-injected] 7 B, <0.1%"), std::string::npos) << d;
    p.bytes_direct = 7;
    p.bytes_staged = 4194304;
    const std::string e = p.describe();
    EXPECT_NE(e.find("] 7 B, <0.1% + staged["), std::string::npos) << e;
    EXPECT_NE(e.find("fault-injected] >99.9%"), std::string::npos) << e;
    p.bytes_direct = 2;
    p.bytes_staged = 1;
    EXPECT_NE(p.describe().find("] 66.7% + staged["), std::string::npos) << p.describe();
}

// Engine::quiet (what the UCX module asks before each progress call) after peers have been used: false while a
// staged request, the peer's copy-out or a control message is under way, true once everything settled, and a run
// that skips progress() whenever it says true still completes staged puts and gets both ways. Quiet must not wait
// for a first transfer only: an MPI job's small messages come after its large ones.
TEST_F(StagingLoop, QuietOnceStagedTransfersSettledAndNeverBeforeTheyComplete) {
    auto none = [this](uintptr_t addr, size_t) { return user_mem(addr); };
    opt_a.refuse = opt_b.refuse = none; // every user byte staged, on both sides
    start();
    EXPECT_TRUE(a.engine->quiet() && b.engine->quiet()) << "a fresh engine pair with nothing to do";
    HostBuf src, dst;
    ASSERT_NO_FATAL_FAILURE(make_buf(a, b, 3 * 4096 + 5, 11, &src));
    ASSERT_NO_FATAL_FAILURE(make_buf(b, a, 3 * 4096 + 5, 22, &dst));
    // Progress only where quiet() says there is something to do; count the calls skipped.
    unsigned skipped = 0;
    auto step = [&] {
        for (EngineSide *s : {&a, &b}) {
            if (s->engine->quiet()) ++skipped;
            else s->engine->progress();
        }
    };
    auto until = [&](const std::function<bool()> &pred) {
        for (long i = 0; i < 2000000; ++i) {
            if (pred()) return true;
            step();
        }
        return pred();
    };
    for (int round = 0; round < 3; ++round) {
        fb::Request put, get;
        ASSERT_EQ(a.engine->put(*a.ep, *src.reg, 0, *dst.remote, 0, src.mem.size(), &put), GDX_INPROGRESS);
        EXPECT_FALSE(a.engine->quiet()) << "quiet with a request of its own active";
        ASSERT_TRUE(until([&] { return put.status != GDX_INPROGRESS; })) << "staged put stalled under quiet()";
        ASSERT_EQ(put.status, GDX_OK) << put.error;
        EXPECT_EQ(put.path.bytes_direct, 0u);
        EXPECT_EQ(first_mismatch(dst.mem.data(), dst.mem.size(), 11), -1) << "round " << round;
        ASSERT_EQ(b.engine->get(*b.ep, *dst.reg, 0, *src.remote, 0, src.mem.size(), &get), GDX_INPROGRESS);
        ASSERT_TRUE(until([&] { return get.status != GDX_INPROGRESS; })) << "staged get stalled under quiet()";
        ASSERT_EQ(get.status, GDX_OK) << get.error;
        // Settles: both engines quiet again within a bounded number of calls (credits returned, messages sent).
        ASSERT_TRUE(until([&] { return a.engine->quiet() && b.engine->quiet(); })) << "never quiet after round "
                                                                                   << round;
        fill_pattern(dst.mem.data(), dst.mem.size(), 22);
    }
    EXPECT_GT(skipped, 0u);
}

} // namespace
} // namespace gdx::test
