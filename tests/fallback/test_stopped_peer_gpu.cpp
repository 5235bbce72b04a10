// Issue 14: a peer that dies or stops in the middle of a staged transfer of GPU memory between two processes of one
// host (the peer-mapped bounce pools over shm, and tcp), with every fragment staged: the survivor's requests fail
// within GDX_PEER_SILENCE_TIMEOUT + 1 s, each with its reason, its endpoint and registration are released, and no
// shared segment is left in it once its context is gone (the fixture: stop_fixture.h). Label gpu: skipped with the reason
// where there is no GPU.
#include "stop_fixture.h"

namespace gdx::test {
namespace {

class GpuStoppedPeer : public StoppedPeerFixture {
  protected:
    GpuStoppedPeer() { // staged GPU memory between processes moves ~10 GB/s: 128 MiB outlasts the signal
        mid_requests_ = 32;
        mid_request_len_ = 4 << 20;
    }
};

// The target is killed (SIGKILL) while staged puts and gets of GPU memory are in flight: the transport sees its
// connection go, so the requests fail at once rather than at the silence clock.
TEST_P(GpuStoppedPeer, TargetKilledMidTransferFailsTheOutstandingRequests) {
    ASSERT_NO_FATAL_FAILURE(open("target", "mid"));
    ASSERT_EQ(me_.post(mid_requests_, mid_request_len_), "");
    ASSERT_GE(progress([&] { return me_.outstanding() < me_.reqs.size(); }, 120), 0) << "no request completed";
    size_t at_kill = me_.outstanding();
    ASSERT_GT(at_kill, 0u) << "the transfer finished before the kill: the test tests nothing";
    ASSERT_NO_FATAL_FAILURE(resume_or_kill(false));
    double t = progress([&] { return me_.outstanding() == 0; }, kHangGuard);
    ASSERT_GE(t, 0) << me_.outstanding() << " staged requests to a dead peer still hang";
    std::printf("[%s/%s] %zu requests outstanding at the kill ended %.3f s after its exit\n", transport(),
                GetParam().kind, at_kill, t);
    EXPECT_LE(t, kBound + kMargin);
    size_t failed = 0;
    for (gdx_request_t *r : me_.reqs) {
        gdx_status_t st = gdx_request_test(r);
        if (st == GDX_OK) continue;
        ++failed;
        EXPECT_NE(std::string(gdx_request_error(r)), "") << gdx_status_string(st) << " without a reason";
    }
    EXPECT_GT(failed, 0u);
    EXPECT_NE(gdx_ep_state(me_.ep), GDX_OK);
    release_ours();
    expect_no_shared_segment();
}

// The target is stopped (SIGSTOP) mid-transfer: only the silence clock can tell; then it is resumed, reads our BYE
// and tears down by itself.
TEST_P(GpuStoppedPeer, TargetStoppedMidTransferFailsTheOutstandingRequests) {
    ASSERT_NO_FATAL_FAILURE(stop_target_mid_transfer());
    release_ours();
    ASSERT_NO_FATAL_FAILURE(resume_or_kill(true));
    expect_no_shared_segment();
}

// The initiator (the peer) is killed mid-transfer: this process, the target, serving copy-outs into GPU memory,
// releases its endpoint and registration, and keeps nothing of the peer's pools mapped.
TEST_P(GpuStoppedPeer, InitiatorKilledMidTransferLeavesTheTargetFreeToTearDown) {
    ASSERT_NO_FATAL_FAILURE(open("initiator", "mid"));
    ASSERT_TRUE(peer_->send("go"));
    ASSERT_TRUE(peer_->wait_stopped(std::chrono::seconds(120), tick_)) << "the peer did not stop itself";
    ASSERT_NO_FATAL_FAILURE(resume_or_kill(false));
    progress([] { return false; }, kPeerTimeout / 2);
    release_ours();
    expect_no_shared_segment();
}

INSTANTIATE_TEST_SUITE_P(Kinds, GpuStoppedPeer,
                         ::testing::Values(StopParam{"shm", "cuda"}, StopParam{"shm", "vmm"},
                                           StopParam{"shm", "managed"}, StopParam{"tcp", "cuda"}),
                         stop_param_name);

} // namespace
} // namespace gdx::test
