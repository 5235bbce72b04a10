// gdx_perftest: bandwidth and latency between two processes over gdx, with the path that carried the bytes on
// every row. Launch like ib_write_bw (server, then client with the server's address), in one command
// (--loopback: this program starts its peer by exec'ing itself), or under mpirun (2 ranks).
#include "control.h"
#include "mps.h"
#include "options.h"
#include "report.h"
#include "session.h"

#include <gdx/gdx.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

extern char **environ;

namespace {

using namespace gdx::perf;

int fail(const std::string &msg, int code = 1) {
    std::fprintf(stderr, "gdx_perftest: %s\n", msg.c_str());
    return code;
}

// The loopback client connects where its peer listens: GDX_TCP_ADDR (a wildcard is reached through loopback).
std::string connect_addr_for(const std::string &listen) {
    if (listen == "0.0.0.0") return "127.0.0.1";
    if (listen == "::") return "::1";
    return listen;
}

// The loopback peer: this same program, exec'd (never a bare fork: CUDA state does not survive fork), serving
// on a free port it reports through a pipe.
class Peer {
  public:
    ~Peer() { stop(); }
    bool start(const Options &opt, uint16_t *port, std::string *why) {
        int fds[2];
        if (pipe2(fds, O_CLOEXEC) != 0) {
            *why = std::string("pipe: ") + std::strerror(errno);
            return false;
        }
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, fds[1], 3); // dup2 clears close-on-exec: fd 3 in the peer
        posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
        char timeout[32];
        std::snprintf(timeout, sizeof(timeout), "%g", opt.timeout_s);
        std::vector<std::string> args{"gdx_perftest", "-p", "0", "--report-fd", "3", "--timeout", timeout};
        std::vector<char *> argv;
        for (auto &a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        int rc = posix_spawn(&pid_, "/proc/self/exe", &fa, nullptr, argv.data(), environ);
        posix_spawn_file_actions_destroy(&fa);
        close(fds[1]);
        if (rc != 0) {
            close(fds[0]);
            pid_ = -1;
            *why = std::string("cannot start the loopback peer (posix_spawn /proc/self/exe): ") + std::strerror(rc);
            return false;
        }
        // The peer writes its port as text and closes the pipe; EOF without a port means it failed.
        std::string text;
        auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(opt.timeout_s);
        for (;;) {
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
            pollfd p{fds[0], POLLIN, 0};
            int n = left.count() > 0 ? poll(&p, 1, static_cast<int>(left.count())) : 0;
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                close(fds[0]);
                *why = "the loopback peer did not report its port within the --timeout";
                return false;
            }
            char buf[32];
            ssize_t r = read(fds[0], buf, sizeof(buf));
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) break;
            text.append(buf, static_cast<size_t>(r));
        }
        close(fds[0]);
        unsigned long v = std::strtoul(text.c_str(), nullptr, 10);
        if (text.empty() || v == 0 || v > 65535) {
            int st = wait(2.0);
            *why = "the loopback peer failed before listening (" + describe(st) + "; its message is above)";
            return false;
        }
        *port = static_cast<uint16_t>(v);
        return true;
    }
    // Waits up to timeout_s for the peer to exit; returns its wait status, or -1 if it is still running.
    int wait(double timeout_s) {
        if (pid_ <= 0) return status_;
        auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
        for (;;) {
            int st = 0;
            pid_t r = waitpid(pid_, &st, WNOHANG);
            if (r == pid_) {
                pid_ = -1;
                status_ = st;
                return st;
            }
            if (r < 0 && errno != EINTR) {
                pid_ = -1;
                return status_;
            }
            if (std::chrono::steady_clock::now() > deadline) return -1;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
    }
    void stop() {
        if (pid_ <= 0) return;
        if (wait(1.0) == -1 && pid_ > 0) {
            kill(pid_, SIGTERM); // our own child, by its pid
            if (wait(2.0) == -1 && pid_ > 0) {
                kill(pid_, SIGKILL);
                wait(5.0);
            }
        }
    }
    static std::string describe(int st) {
        if (st == -1) return "still running";
        if (WIFEXITED(st)) return "exit status " + std::to_string(WEXITSTATUS(st));
        if (WIFSIGNALED(st)) return std::string("killed by signal ") + strsignal(WTERMSIG(st));
        return "status " + std::to_string(st);
    }

  private:
    pid_t pid_ = -1;
    int status_ = 0;
};

} // namespace

int main(int argc, char **argv) {
    std::vector<std::string> args(argv + 1, argv + argc);
    Options opt;
    std::string why;
    bool usage = false;
    if (!parse_options(args, &opt, &why, &usage)) {
        if (usage) {
            print_usage(stdout);
            return 0;
        }
        std::fprintf(stderr, "gdx_perftest: %s\nTry 'gdx_perftest -h' for the options.\n", why.c_str());
        return 2;
    }
    std::signal(SIGPIPE, SIG_IGN);

    // The environment's GDX_* values must be valid before anything starts; a context checks them, applies
    // logging, and says where to listen (GDX_TCP_ADDR). It opens nothing (transports open at the first endpoint),
    // so CUDA is not initialized before MPS below.
    std::string tcp_addr;
    {
        gdx_context_t *ctx = nullptr;
        if (gdx_context_create(nullptr, &ctx) != GDX_OK) return fail(gdx_last_error());
        const char *a = gdx_context_config_get(ctx, "GDX_TCP_ADDR");
        tcp_addr = a != nullptr ? a : "127.0.0.1";
        gdx_context_destroy(ctx);
    }

    // Two processes on one GPU: MPS first, before anything here (or the peer) initializes CUDA.
    MpsForRun mps;
    if (opt.role == Role::Loopback && !opt.mpi) {
        for (const auto &[local, remote] : opt.mem_pairs) {
            auto gpu = [](const MemSpec &m) { return m.kind == MemKindOpt::Host || m.kind == MemKindOpt::HostPinned ? -1 : m.gpu; };
            if (gpu(local) < 0 || gpu(local) != gpu(remote) || mps.active()) continue;
            std::string note;
            mps.start(opt.mps, gpu(local), &note);
            std::fprintf(opt.csv ? stderr : stdout, "# %s\n", note.c_str());
            std::fflush(opt.csv ? stderr : stdout);
            break;
        }
    }

    // Memory this side must hold is checked before connecting: a missing GPU is a clear error, not a hang.
    if (opt.role != Role::Server) {
        for (const auto &pair : opt.mem_pairs) {
            if (!memory_available_here(pair.first, &why)) return fail(why);
            if (opt.role == Role::Loopback && !memory_available_here(pair.second, &why)) return fail(why);
        }
    }

    std::string command = "gdx_perftest";
    for (const auto &a : args) command += " " + a;
    Control ctl;

    if (opt.mpi) {
        // Open MPI says who is who; rank 0 listens on HOST (or GDX_TCP_ADDR), rank 1 joins it.
        const std::string host = opt.host.empty() ? tcp_addr : opt.host;
        if (ctl.from_env(host, opt.port, opt.timeout_s, &why) != GDX_OK) return fail(why);
        if (opt.role == Role::Server) return run_server(opt, ctl, true);
    } else if (opt.role == Role::Server) {
        const bool quiet = opt.report_fd >= 0; // the loopback client prints the results
        if (opt.mem_given && !quiet)
            std::fprintf(stderr, "gdx_perftest: note: the server takes the memory kinds and tests from the client "
                                 "(give -m/-M there); they are ignored here\n");
        const std::string addr = tcp_addr;
        gdx_status_t st = ctl.listen(addr, opt.port, opt.timeout_s, &why);
        if (opt.report_fd >= 0) {
            std::string p = st == GDX_OK ? std::to_string(ctl.bound_port()) : "";
            bool ok = p.empty() || write(opt.report_fd, p.data(), p.size()) == static_cast<ssize_t>(p.size());
            close(opt.report_fd);
            if (!ok) return fail(std::string("cannot report the port to the loopback client: ") + std::strerror(errno));
        }
        if (st != GDX_OK) return fail(why);
        if (!quiet) {
            std::printf("# gdx_perftest server: listening on %s:%u (waiting up to %gs for a client)\n", addr.c_str(),
                        ctl.bound_port(), opt.timeout_s);
            std::fflush(stdout);
        }
        return run_server(opt, ctl, quiet);
    }

    Peer peer;
    if (!opt.mpi) {
        std::string host = opt.host;
        uint16_t port = opt.port;
        if (opt.role == Role::Loopback) {
            if (!peer.start(opt, &port, &why)) return fail(why);
            host = connect_addr_for(tcp_addr);
        }
        if (ctl.join(host, port, opt.timeout_s, &why) != GDX_OK) return fail(why);
    }

    Reporter rep(opt, stdout);
    int rc = run_client(opt, ctl, rep);
    if (opt.role == Role::Loopback) {
        int st = peer.wait(rc == 0 ? opt.timeout_s : 2.0);
        if (rc == 0 && st != 0) {
            rc = 1;
            fail("the loopback peer ended badly (" + Peer::describe(st) + ")");
        }
    }
    if (!opt.json_file.empty() && !rep.write_json(opt.json_file, command, &why)) {
        fail(why);
        if (rc == 0) rc = 1;
    }
    return rc;
}
