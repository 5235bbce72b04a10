// The stopped-peer fixture (issue 16): this process and a second one (stop_peer, exec'd and driven over pipes by the
// intranode tests' Link), met through gdx's bootstrap, over the public C API, every fragment staged
// (GDX_FAULT_P2P_EVERY=1), GDX_PEER_SILENCE_TIMEOUT=1s; the peer is SIGSTOPped, resumed or killed. Shared by the
// host-memory tests (test_stopped_peer.cpp, label cpu) and the GPU-memory ones (test_stopped_peer_gpu.cpp, label gpu).
#pragma once

#include "../intranode/common.h"
#include "../memtype/test_alloc.h"
#include "stop_scenario.h"
#include "transport/bootstrap.h"
#include "transport/transport.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>

#ifndef GDX_STOP_PEER_PATH
#define GDX_STOP_PEER_PATH "stop_peer"
#endif

namespace gdx::test {

constexpr double kPeerTimeout = 1.0;            // GDX_PEER_SILENCE_TIMEOUT below
constexpr double kBound = kPeerTimeout + 1.0;    // what the issue promises
constexpr double kMargin = 4.0;                  // a loaded 2-core machine under ASan
constexpr double kHangGuard = kPeerTimeout + 30; // beyond it the test reports a hang instead of waiting forever

inline std::vector<std::string> lines_with(const std::string &path, const std::string &needle) {
    std::vector<std::string> out;
    std::ifstream f(path);
    for (std::string line; std::getline(f, line);)
        if (line.find(needle) != std::string::npos) out.push_back(line);
    return out;
}

// (transport, memory kind of both buffers): "host", or a GPU kind of KindBuffer (staging_scenario.h).
struct StopParam {
    const char *transport;
    const char *kind;
};
inline std::string stop_param_name(const ::testing::TestParamInfo<StopParam> &i) {
    std::string k = i.param.kind;
    return k == "host" ? std::string(i.param.transport) : std::string(i.param.transport) + "_" + k;
}

class StoppedPeerFixture : public ::testing::TestWithParam<StopParam> {
  protected:
    std::unique_ptr<tp::Bootstrap> boot_;
    std::unique_ptr<Link> peer_; // stop_peer, exec'd (tests/intranode/common.h)
    ApiSide me_;
    std::string log_;
    const std::function<void()> tick_ = [this] {
        if (me_.ctx != nullptr) gdx_progress(me_.ctx);
    };

    // The load that a stop or kill interrupts: `mid_requests_` requests of `mid_request_len_` bytes, in buffers of
    // their total size on both sides. A faster link needs more of it, or the target has served everything by the
    // time the signal lands (the GPU suite on an H200 saw 14 outstanding requests all complete after the kill).
    unsigned mid_requests_ = 16;
    size_t mid_request_len_ = 256 << 10;

    const char *transport() const { return GetParam().transport; }
    void SetUp() override {
        if (tp::find_component(transport()) == nullptr)
            GTEST_SKIP() << "no " << transport() << " transport in this build";
        if (std::string(GetParam().kind) != "host") {
            if (std::string why = mem::test::gpu_skip_reason(); !why.empty()) GTEST_SKIP() << why;
        }
        std::string name = testing::UnitTest::GetInstance()->current_test_info()->name();
        for (char &ch : name)
            if (ch == '/') ch = '_';
        log_ = testing::TempDir() + "/gdx_stopped_" + name + ".log";
        std::remove(log_.c_str());
    }

    ConfigList config() const {
        return {{"kind", GetParam().kind}, // ApiSide's buffer kind and size (stop_scenario.h), not GDX_* settings
                {"bytes", std::to_string(size_t(mid_requests_) * mid_request_len_)},
                {"GDX_TLS", transport()},
                {"GDX_TCP_LANES", "0"},
                {"GDX_FAULT_P2P_EVERY", "1"}, // every fragment staged, on both sides
                {"GDX_FRAG_SIZE", "host:64K"},
                silence_clock_ ? ConfigList::value_type{"GDX_PEER_SILENCE_TIMEOUT", "1s"}
                               : ConfigList::value_type{"GDX_PEER_TIMEOUT", "1s"}};
    }
    // false: the default, no silence clock (a stopped peer is only busy), and GDX_PEER_TIMEOUT=1s.
    bool silence_clock_ = true;
    // Starts the peer in `role`, connects to it and waits for its "connected".
    void open(const char *role, const char *stop) {
        tp::Bootstrap::Options bo;
        bo.size = 2;
        bo.timeout = std::chrono::seconds(120);
        ASSERT_EQ(tp::Bootstrap::listen(bo, &boot_), GDX_OK) << gdx_last_error();
        std::vector<std::string> argv = {GDX_STOP_PEER_PATH, std::to_string(boot_->port()), role, stop};
        for (const auto &[k, v] : config()) argv.push_back(k + "=" + v);
        ASSERT_EQ(Link::spawn(argv, {}, &peer_), GDX_OK) << gdx_last_error();
        ConfigList mine = config();
        mine.emplace_back("GDX_LOG_FILE", log_);
        ASSERT_EQ(me_.open(boot_.get(), 0, 4 << 20, mine, 120), "");
        ASSERT_EQ(peer_->recv(std::chrono::seconds(60), tick_), "connected") << "the peer's stderr says why";
    }

    // Progresses until pred() or `seconds`; returns the seconds it took (or -1 after `seconds`).
    template <typename P> double progress(P pred, double seconds) {
        auto t0 = std::chrono::steady_clock::now();
        auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
        while (!pred()) {
            if (elapsed() > seconds) return -1;
            gdx_progress(me_.ctx);
        }
        return elapsed();
    }
    void stop_peer() {
        ASSERT_TRUE(peer_->signal(SIGSTOP)) << std::strerror(errno);
        ASSERT_TRUE(peer_->wait_stopped(std::chrono::seconds(30), tick_)) << "the peer did not stop";
    }
    // Our endpoint and registration go (not BUSY for ever) within the bound.
    void release_ours() {
        auto t0 = std::chrono::steady_clock::now();
        EXPECT_EQ(me_.close(kBound + kMargin), "");
        std::printf("[%s] endpoint and registration released in %.3f s\n", transport(),
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    // Resumes the peer (it must end its requests and tear down by itself: exit 0) or kills it.
    void resume_or_kill(bool resume) {
        if (resume) {
            ASSERT_TRUE(peer_->signal(SIGCONT)) << std::strerror(errno);
            peer_->close_stdin(); // a target peer serves until then
        } else {
            ASSERT_TRUE(peer_->signal(SIGKILL)) << std::strerror(errno);
        }
        int code = peer_->wait_exit(std::chrono::seconds(90), tick_);
        EXPECT_EQ(code, resume ? 0 : 128 + SIGKILL) << "the peer's exit (-1: still running); its stderr says why";
    }
    // With the context gone, nothing shared is left: neither our pools' segments nor mappings of the peer's.
    void expect_no_shared_segment() {
        me_.destroy_context();
        std::ifstream maps("/proc/self/maps");
        for (std::string line; std::getline(maps, line);) EXPECT_EQ(line.find("gdx-shared"), std::string::npos) << line;
    }
    // Every request has ended; each failure names its cause. Returns how many failed.
    size_t check_ended(const char *cause) {
        size_t failed = 0;
        for (gdx_request_t *r : me_.reqs) {
            gdx_status_t st = gdx_request_test(r);
            EXPECT_NE(st, GDX_INPROGRESS);
            if (st == GDX_OK || st == GDX_INPROGRESS) continue;
            ++failed;
            EXPECT_NE(std::string(gdx_request_error(r)).find(cause), std::string::npos)
                << gdx_status_string(st) << ": " << gdx_request_error(r);
        }
        return failed;
    }
    // The target stops (SIGSTOP) once a request of ours has completed and others are outstanding: only the silence
    // clock can end them. Returns when they have, within the bound, and some failed with that cause; the caller
    // adds its own checks and the peer's resumption.
    void stop_target_mid_transfer() {
        ASSERT_NO_FATAL_FAILURE(open("target", "mid"));
        ASSERT_EQ(me_.post(mid_requests_, mid_request_len_), "");
        ASSERT_GE(progress([&] { return me_.outstanding() < me_.reqs.size(); }, 120), 0) << "no request completed";
        ASSERT_NO_FATAL_FAILURE(stop_peer());
        size_t at_stop = me_.outstanding();
        ASSERT_GT(at_stop, 0u) << "the transfer finished before the stop: the test tests nothing";
        double t = progress([&] { return me_.outstanding() == 0; }, kHangGuard);
        ASSERT_GE(t, 0) << me_.outstanding() << " staged requests to a stopped peer still hang";
        std::printf("[%s/%s] %zu requests outstanding at the stop ended after %.3f s\n", transport(),
                    GetParam().kind, at_stop, t);
        EXPECT_LE(t, kBound + kMargin);
        // Those whose answers were already on their way may complete; the rest fail, each with the cause.
        EXPECT_GT(check_ended("silent for GDX_PEER_SILENCE_TIMEOUT"), 0u);
    }
};

} // namespace gdx::test
