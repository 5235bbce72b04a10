#include "two_process.h"

#include "core/error.h"
#include "transport/bootstrap.h"

#include <chrono>
#include <csignal>
#include <spawn.h>
#include <sys/wait.h>
#include <thread>

#ifndef GDX_STAGING_PEER_PATH
#define GDX_STAGING_PEER_PATH "staging_peer"
#endif

extern char **environ;

namespace gdx::test {

TwoProcessRun run_two_process(const RankOptions &o, const std::string &peer_kind,
                              const std::vector<std::pair<std::string, std::string>> &peer_config) {
    TwoProcessRun run;
    tp::Bootstrap::Options bo;
    bo.size = 2;
    bo.timeout = std::chrono::seconds(600);
    std::unique_ptr<tp::Bootstrap> boot;
    if (tp::Bootstrap::listen(bo, &boot) != GDX_OK) {
        run.setup_error = "bootstrap listen: " + last_error();
        return run;
    }
    std::vector<std::string> args = {GDX_STAGING_PEER_PATH, std::to_string(boot->port()), peer_kind,
                                     std::to_string(o.sc.size), std::to_string(o.sc.pieces)};
    for (const auto &[k, v] : peer_config) args.push_back(k + "=" + v);
    std::vector<char *> argv;
    for (std::string &a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = -1;
    if (posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) {
        run.setup_error = std::string("cannot exec ") + argv[0];
        return run;
    }
    run.rank0 = run_rank(o, boot.get());
    // The peer exits right after the last exchange; a stuck one is killed rather than waited for forever.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    int status = 0;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) break;
        if (std::chrono::steady_clock::now() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            run.setup_error = "staging_peer did not exit: killed";
            return run;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    run.peer_exit = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return run;
}

} // namespace gdx::test
