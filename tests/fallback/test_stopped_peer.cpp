// Issue 16 with a peer stopped for real: a second process (stop_peer, exec'd and driven over pipes by the intranode
// tests' Link) is SIGSTOPped, over tcp and shm, with every fragment staged (GDX_FAULT_P2P_EVERY=1) and
// GDX_PEER_SILENCE_TIMEOUT=1s.
//   - This process initiates and the target stops, before the puts and gets are posted or in the middle of them:
//     every outstanding request fails with a reason naming the cause, gdx_ep_state reports it, and the endpoint
//     and registration are released (not BUSY forever).
//   - The peer initiates and stops itself, right after posting puts or after its first request completed: this
//     process, the target, declares it dead where it waits on it (slots granted and never filled), says so once
//     in its log, and releases its endpoint and registration.
// Then the peer is resumed (it must see its requests end, each failure with a reason, and tear down) or killed,
// and once the context is gone no shared segment (ours or the peer's, mapped here) is left in this process.
// Durations are printed; the only bound asserted is the GDX_PEER_SILENCE_TIMEOUT + 1 s, with a margin for a
// loaded machine (sanitizers, two shared cores).
#include "stop_fixture.h"

namespace gdx::test {
namespace {

using StoppedPeer = StoppedPeerFixture;

// ---- the target stops: this process, the initiator, survives -------------------------------------------------

TEST_P(StoppedPeer, TargetStoppedBeforeThePostsFailsEveryRequest) {
    ASSERT_NO_FATAL_FAILURE(open("target", "posted"));
    ASSERT_NO_FATAL_FAILURE(stop_peer());
    ASSERT_EQ(me_.post(8, 256 << 10), "");
    double t = progress([&] { return me_.outstanding() == 0; }, kHangGuard);
    ASSERT_GE(t, 0) << me_.outstanding() << " staged requests to a stopped peer still hang";
    std::printf("[%s] 8 requests to a stopped target failed after %.3f s (GDX_PEER_SILENCE_TIMEOUT %.1f s)\n",
                transport(), t, kPeerTimeout);
    EXPECT_LE(t, kBound + kMargin);
    EXPECT_EQ(check_ended("silent for GDX_PEER_SILENCE_TIMEOUT"), me_.reqs.size())
        << "nothing can complete: the peer never ran";
    EXPECT_EQ(gdx_ep_state(me_.ep), GDX_ERR_TIMEOUT);
    release_ours();
    ASSERT_NO_FATAL_FAILURE(resume_or_kill(false));
    expect_no_shared_segment();
}

TEST_P(StoppedPeer, TargetStoppedMidTransferFailsTheOutstandingRequests) {
    ASSERT_NO_FATAL_FAILURE(stop_target_mid_transfer());
    EXPECT_EQ(gdx_ep_state(me_.ep), GDX_ERR_TIMEOUT);
    release_ours();
    ASSERT_NO_FATAL_FAILURE(resume_or_kill(true)); // it reads our BYE, gives us up and tears down
    expect_no_shared_segment();
}

// Without GDX_PEER_SILENCE_TIMEOUT (the default) a stopped target is a busy one: its requests wait through several
// GDX_PEER_TIMEOUTs, nothing is declared dead, and once it runs again every one completes.
TEST_P(StoppedPeer, TargetStoppedLongerThanThePeerTimeoutIsWaitedForByDefault) {
    silence_clock_ = false;
    ASSERT_NO_FATAL_FAILURE(open("target", "posted"));
    ASSERT_NO_FATAL_FAILURE(stop_peer());
    ASSERT_EQ(me_.post(8, 256 << 10), "");
    EXPECT_LT(progress([&] { return me_.outstanding() < me_.reqs.size(); }, 3 * kPeerTimeout), 0)
        << "a request to a stopped (busy) target ended";
    EXPECT_EQ(gdx_ep_state(me_.ep), GDX_OK) << "a stopped but live peer was declared dead";
    ASSERT_TRUE(peer_->signal(SIGCONT)) << std::strerror(errno);
    double t = progress([&] { return me_.outstanding() == 0; }, kHangGuard);
    ASSERT_GE(t, 0) << me_.outstanding() << " requests still outstanding after the target resumed";
    EXPECT_EQ(check_ended("(none may fail)"), 0u);
    EXPECT_EQ(gdx_ep_state(me_.ep), GDX_OK);
    release_ours();
    peer_->close_stdin();
    EXPECT_EQ(peer_->wait_exit(std::chrono::seconds(90), tick_), 0) << "the target's stderr says why";
    expect_no_shared_segment();
}

// ---- the initiator stops: this process, the target, survives ---------------------------------------------------

TEST_P(StoppedPeer, InitiatorStoppedAfterPostingPutsIsDeclaredDeadByTheTarget) {
    ASSERT_NO_FATAL_FAILURE(open("initiator", "posted"));
    // We do not progress until it has stopped: its WANTs wait for us, unanswered.
    ASSERT_TRUE(peer_->send("go"));
    ASSERT_TRUE(peer_->wait_stopped(std::chrono::seconds(60))) << "the peer did not stop itself";
    // Now we grant it slots it will never fill: only our staging clock sees that (no transport operation waits).
    double t = progress([&] { return gdx_ep_state(me_.ep) != GDX_OK; }, kHangGuard);
    ASSERT_GE(t, 0) << "the target never declared its stopped initiator dead";
    std::printf("[%s] the target declared its stopped initiator dead after %.3f s\n", transport(), t);
    EXPECT_LE(t, kBound + kMargin);
    EXPECT_EQ(gdx_ep_state(me_.ep), GDX_ERR_TIMEOUT);
    release_ours();
    // One line says so, naming the cause.
    auto dead = lines_with(log_, "peer declared dead for staging");
    ASSERT_EQ(dead.size(), 1u) << log_;
    EXPECT_NE(dead[0].find("silent for GDX_PEER_SILENCE_TIMEOUT"), std::string::npos) << dead[0];
    EXPECT_NE(dead[0].find("slots of our bounce pools"), std::string::npos) << dead[0];
    ASSERT_NO_FATAL_FAILURE(resume_or_kill(true)); // its requests fail at once (our BYE), each with a reason
    expect_no_shared_segment();
}

TEST_P(StoppedPeer, InitiatorStoppedMidTransferLeavesTheTargetFreeToTearDown) {
    ASSERT_NO_FATAL_FAILURE(open("initiator", "mid"));
    ASSERT_TRUE(peer_->send("go"));
    ASSERT_TRUE(peer_->wait_stopped(std::chrono::seconds(120), tick_)) << "the peer did not stop itself";
    // Whatever we still wait on from it (a slot granted, a stage-out) ends within the timeout; what it merely
    // keeps (slots it filled) does not hold us: the endpoint and registration go.
    progress([] { return false; }, kPeerTimeout / 2); // serve on a little after the stop
    release_ours();
    EXPECT_LE(lines_with(log_, "peer declared dead for staging").size(), 1u);
    ASSERT_NO_FATAL_FAILURE(resume_or_kill(false));
    expect_no_shared_segment();
}

INSTANTIATE_TEST_SUITE_P(Tl, StoppedPeer, ::testing::Values(StopParam{"tcp", "host"}, StopParam{"shm", "host"}),
                         stop_param_name);

} // namespace
} // namespace gdx::test
