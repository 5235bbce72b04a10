// Runs build/perftest/gdx_perftest as a user would (through the shell), with stdout and stderr together.
#pragma once

#include <array>
#include <cstdio>
#include <string>
#include <sys/wait.h>

namespace gdx::perf::test {

struct RunResult {
    int status = -1; // exit status; -1 when killed by a signal
    std::string out;
};

// `env`: "NAME=value ..." (may be empty). Every run is capped by timeout(1) at 120 s, so a hang fails the test
// instead of stalling the suite.
inline RunResult run(const std::string &env, const std::string &args, const std::string &redirect = "2>&1") {
    std::string cmd = "env " + env + " timeout -k 5 120 " GDX_TEST_BINARY_DIR "/perftest/gdx_perftest " + args + " " +
                      redirect;
    RunResult r;
    FILE *p = popen(cmd.c_str(), "r");
    if (p == nullptr) return r;
    std::array<char, 4096> buf;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
    int st = pclose(p);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return r;
}

} // namespace gdx::perf::test
