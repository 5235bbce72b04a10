// The second process of the stopped-peer tests (test_stopped_peer.cpp): exec'd by the test, which stops it for
// real (SIGSTOP), resumes (SIGCONT) or kills it. Usage:
//   stop_peer <bootstrap port> target|initiator posted|mid [GDX_NAME=VALUE ...]
// target: registers its buffer and serves (progresses) until its stdin closes, then tears down.
// initiator: waits for "go" on stdin, posts kRequests staged requests into the test's buffer, then stops itself
//   (raise(SIGSTOP)): "posted": puts only, right after posting (a few progress calls let the transport send their
//   WANTs) — the target then lends slots that nothing but its staging clock sees go unused (a get would also
//   leave a transport operation or a map request waiting, which the transport's own clock covers); "mid": puts
//   and gets, once the first has completed. Resumed, it progresses until every request has ended, then tears
//   down.
// stdout: milestones, one per line ("connected", "posted", "stopping"). Exit status: 0 every request ended (an
// error always with its reason) and teardown worked; 1 setup failed; 3 teardown stayed BUSY; 4 a request hung or
// failed without a reason; 2 bad usage. The reason goes to stderr.
#include "stop_scenario.h"
#include "staging_scenario.h"
#include "transport/bootstrap.h"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <poll.h>
#include <string>
#include <unistd.h>

namespace {

constexpr size_t kBufSize = 4 << 20;
constexpr unsigned kRequests = 16;
constexpr size_t kRequestLen = 256 << 10;

void say(const char *milestone) {
    std::printf("%s\n", milestone);
    std::fflush(stdout);
}

// What stdin holds now: a line (without the newline), "" for nothing yet, or "EOF".
std::string read_stdin() {
    static std::string pending;
    pollfd p{0, POLLIN, 0};
    int n = poll(&p, 1, 0);
    if (n < 0 && errno != EINTR) {
        std::fprintf(stderr, "stop_peer: poll(stdin): %s\n", std::strerror(errno));
        return "EOF";
    }
    if (n > 0) {
        char buf[64];
        ssize_t r = read(0, buf, sizeof(buf));
        if (r == 0) return "EOF";
        if (r < 0 && errno != EINTR && errno != EAGAIN) {
            std::fprintf(stderr, "stop_peer: read(stdin): %s\n", std::strerror(errno));
            return "EOF";
        }
        if (r > 0) pending.append(buf, static_cast<size_t>(r));
    }
    size_t nl = pending.find('\n');
    if (nl == std::string::npos) return "";
    std::string line = pending.substr(0, nl);
    pending.erase(0, nl + 1);
    return line;
}

int teardown(gdx::test::ApiSide &s) {
    std::string busy = s.close(30);
    if (!busy.empty()) {
        std::fprintf(stderr, "stop_peer: teardown: %s\n", busy.c_str());
        return 3;
    }
    return 0;
}

int serve(gdx::test::ApiSide &s) {
    for (std::string line; (line = read_stdin()) != "EOF";)
        for (int i = 0; i < 256; ++i) gdx_progress(s.ctx); // stdin is polled now and then, not every progress
    return teardown(s);
}

int initiate(gdx::test::ApiSide &s, const std::string &stop) {
    for (std::string line; (line = read_stdin()) != "go";) {
        if (line == "EOF") return teardown(s);
        gdx_progress(s.ctx);
    }
    if (std::string e = s.post(kRequests, kRequestLen, /*puts_only=*/stop == "posted"); !e.empty()) {
        std::fprintf(stderr, "stop_peer: %s\n", e.c_str());
        return 1;
    }
    if (stop == "posted") {
        for (int i = 0; i < 100; ++i) gdx_progress(s.ctx);
        say("posted");
    } else {
        if (!gdx::test::progress_until(s.ctx, [&] { return s.outstanding() < kRequests; }, 120)) {
            std::fprintf(stderr, "stop_peer: no request completed in 120 s\n");
            return 4;
        }
        say("stopping");
    }
    if (raise(SIGSTOP) != 0) {
        std::fprintf(stderr, "stop_peer: raise(SIGSTOP): %s\n", std::strerror(errno));
        return 1;
    }
    // Resumed (SIGCONT): the test gave us up meanwhile, or not; every request must end either way.
    if (!gdx::test::progress_until(s.ctx, [&] { return s.outstanding() == 0; }, 60)) {
        std::fprintf(stderr, "stop_peer: %zu requests still in progress 60 s after resuming\n", s.outstanding());
        return 4;
    }
    unsigned failed = 0;
    for (gdx_request_t *r : s.reqs) {
        if (gdx_request_test(r) == GDX_OK) continue;
        ++failed;
        if (*gdx_request_error(r) == '\0') {
            std::fprintf(stderr, "stop_peer: a request failed with %s and no reason\n",
                         gdx_status_string(gdx_request_test(r)));
            return 4;
        }
    }
    std::fprintf(stderr, "stop_peer: resumed; %u of %u requests failed, each with a reason\n",
                 failed, kRequests);
    return teardown(s);
}

} // namespace

int main(int argc, char **argv) {
    if (argc < 4) {
        std::fprintf(stderr, "usage: %s <port> target|initiator posted|mid [GDX_NAME=VALUE ...]\n", argv[0]);
        return 2;
    }
    const std::string role = argv[2], stop = argv[3];
    if ((role != "target" && role != "initiator") || (stop != "posted" && stop != "mid")) return 2;
    gdx::test::ConfigList config;
    for (int i = 4; i < argc; ++i) {
        std::string kv = argv[i];
        size_t eq = kv.find('=');
        if (eq == std::string::npos) return 2;
        config.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    }
    gdx::tp::Bootstrap::Options bo;
    bo.port = static_cast<uint16_t>(std::atoi(argv[1]));
    bo.rank = 1;
    bo.size = 2;
    bo.timeout = std::chrono::seconds(120);
    std::unique_ptr<gdx::tp::Bootstrap> boot;
    if (gdx::tp::Bootstrap::join(bo, &boot) != GDX_OK) {
        std::fprintf(stderr, "stop_peer: cannot join the bootstrap on port %s\n", argv[1]);
        return 1;
    }
    gdx::test::ApiSide s;
    if (std::string e = s.open(boot.get(), 1, kBufSize, config, 120); !e.empty()) {
        std::fprintf(stderr, "stop_peer (%s): %s\n", role.c_str(), e.c_str());
        return 1;
    }
    say("connected");
    int rc = role == "target" ? serve(s) : initiate(s, stop);
    s.destroy_context();
    return rc;
}
