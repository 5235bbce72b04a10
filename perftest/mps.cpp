#include "mps.h"

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

extern char **environ;

namespace gdx::perf {

namespace {

namespace fs = std::filesystem;

std::string find_control() {
    std::string path = std::getenv("PATH") != nullptr ? std::getenv("PATH") : "";
    path += ":/usr/local/nvidia/bin:/usr/bin:/usr/local/cuda/bin";
    size_t start = 0;
    while (start <= path.size()) {
        size_t end = path.find(':', start);
        std::string dir = path.substr(start, end == std::string::npos ? std::string::npos : end - start);
        std::string cand = (dir.empty() ? "." : dir) + "/nvidia-cuda-mps-control";
        if (access(cand.c_str(), X_OK) == 0) return cand;
        if (end == std::string::npos) break;
        start = end + 1;
    }
    return "";
}

// Runs `ctl` with `arg` (or with `input` on its standard input); returns its exit status, or -1.
int run_control(const std::string &ctl, const char *arg, const char *input) {
    int fds[2] = {-1, -1};
    if (input != nullptr && pipe(fds) != 0) return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (input != nullptr) {
        posix_spawn_file_actions_adddup2(&fa, fds[0], 0);
        posix_spawn_file_actions_addclose(&fa, fds[1]);
    }
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    std::string c = ctl;
    char *argv[] = {c.data(), const_cast<char *>(arg), nullptr};
    pid_t pid = -1;
    int rc = posix_spawn(&pid, ctl.c_str(), &fa, nullptr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (input != nullptr) {
        close(fds[0]);
        if (rc == 0 && write(fds[1], input, std::strlen(input)) < 0) rc = errno;
        close(fds[1]);
    }
    if (rc != 0) return -1;
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

} // namespace

void MpsForRun::start(const std::string &mode, int gpu, std::string *note) {
    const std::string slicing = "two processes on GPU " + std::to_string(gpu) +
                                " time-slice without MPS (~150 us per small operation): these figures describe the "
                                "GPU's scheduler, not gdx; give each process its own GPU or run MPS";
    const char *pipe_env = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
    std::string pipe_dir = pipe_env != nullptr ? pipe_env : "/tmp/nvidia-mps";
    if (access((pipe_dir + "/control").c_str(), F_OK) == 0) {
        already_ = true;
        *note = "MPS: a control daemon is already running (pipe folder " + pipe_dir + "); this run uses it";
        return;
    }
    if (mode == "no") {
        *note = "MPS: not started (--mps no): " + slicing;
        return;
    }
    ctl_ = find_control();
    if (ctl_.empty()) {
        *note = "MPS: nvidia-cuda-mps-control not found: " + slicing;
        return;
    }
    char tmpl[] = "/tmp/gdx-mps-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
        *note = std::string("MPS: cannot make a folder for it (") + std::strerror(errno) + "): " + slicing;
        return;
    }
    dir_ = tmpl;
    std::string pipes = dir_ + "/pipe", logs = dir_ + "/log";
    mkdir(pipes.c_str(), 0700);
    mkdir(logs.c_str(), 0700);
    // The daemon and every CUDA client of this run (this process, and the peer it starts) meet in these folders.
    setenv("CUDA_MPS_PIPE_DIRECTORY", pipes.c_str(), 1);
    setenv("CUDA_MPS_LOG_DIRECTORY", logs.c_str(), 1);
    int rc = run_control(ctl_, "-d", nullptr);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while (rc == 0 && access((pipes + "/control").c_str(), F_OK) != 0 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (rc != 0 || access((pipes + "/control").c_str(), F_OK) != 0) {
        unsetenv("CUDA_MPS_PIPE_DIRECTORY");
        unsetenv("CUDA_MPS_LOG_DIRECTORY");
        std::error_code ec;
        fs::remove_all(dir_, ec);
        dir_.clear();
        *note = "MPS: '" + ctl_ + " -d' failed (exit " + std::to_string(rc) + "): " + slicing;
        return;
    }
    started_ = true;
    *note = "MPS: started a control daemon for this run (" + ctl_ + " -d, pipe folder " + pipes +
            "): both processes share GPU " + std::to_string(gpu) + "; it is stopped at the end";
}

MpsForRun::~MpsForRun() {
    if (started_) {
        run_control(ctl_, nullptr, "quit\n");
        // 'quit' returns at once; the daemon (and its server) exit after. Waiting here keeps the next CUDA process
        // on this GPU from starting while an MPS server of ours is still shutting down.
        std::string pipe = dir_ + "/pipe/control";
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (access(pipe.c_str(), F_OK) == 0 && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!dir_.empty()) {
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }
}

} // namespace gdx::perf
