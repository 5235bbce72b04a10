// intranode_bench: gdx's intra-node transports between two processes (this binary and a copy of it started with
// exec), driven directly as the UCX module drives them: a diagnostic of the transports, not gdx_put's path (no
// staging engine, no lane choice; bench/README.md).
//   shm     host -> host: put/get bandwidth (64 KiB .. 64 MiB) and AM latency (8 B, 1 KiB, half round trip)
//   ipc     GPU a -> GPU b with cuda_ipc: put bandwidth at 1 MiB / 16 MiB / 256 MiB as the receiver sees it
//           (the bytes have landed when the peer's AM handler runs), put+AM latency at 8 B / 1 KiB
// Staged GPU memory (P2P off) is not measured here: gdx_perftest -x shm measures it through gdx_put, the path users
// take (bench/intranode_vs_nccl.sh runs both).
// Usage: intranode_bench [--mode shm|ipc|all] [--gpus A,B] [--scale N] [--size BYTES (shm bw only)]
// Prints a command/date/machine header and one table row per measurement; never judges (no thresholds).
#include "intranode_bench.h"

#include "core/error.h"
#include "transport/open_interfaces.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sstream>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

namespace gdx::bench {

size_t g_only_size = 0; // --size: shm bandwidth at this size only

// ---- plumbing -------------------------------------------------------------------------------------------

std::unique_ptr<Peer> Peer::spawn(const std::vector<std::string> &args, const std::vector<std::string> &env) {
    int to[2], from[2];
    if (pipe2(to, O_CLOEXEC) != 0 || pipe2(from, O_CLOEXEC) != 0) return nullptr;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, to[0], 0);
    posix_spawn_file_actions_adddup2(&fa, from[1], 1);
    std::vector<std::string> all_env;
    for (char **e = environ; *e; ++e) all_env.emplace_back(*e);
    all_env.insert(all_env.end(), env.begin(), env.end());
    std::vector<std::string> argv{"/proc/self/exe"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char *> av, ev;
    for (auto &a : argv) av.push_back(a.data());
    av.push_back(nullptr);
    for (auto &e : all_env) ev.push_back(e.data());
    ev.push_back(nullptr);
    pid_t pid;
    int rc = posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, av.data(), ev.data());
    posix_spawn_file_actions_destroy(&fa);
    close(to[0]);
    close(from[1]);
    if (rc != 0) {
        std::fprintf(stderr, "posix_spawn: %s\n", std::strerror(rc));
        return nullptr;
    }
    auto p = std::make_unique<Peer>();
    p->pid_ = pid;
    p->in_ = to[1];
    p->out_ = from[0];
    return p;
}

Peer::~Peer() {
    close(in_); // the peer leaves when its stdin closes
    close(out_);
    for (int i = 0; i < 300; ++i) {
        if (waitpid(pid_, nullptr, WNOHANG) == pid_) return;
        usleep(10000);
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
}

bool Peer::send(const std::string &line) {
    std::string s = line + "\n";
    return write(in_, s.data(), s.size()) == static_cast<ssize_t>(s.size());
}

std::string Peer::recv(double timeout_s, const std::function<void()> &tick) {
    auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
    for (;;) {
        size_t nl = buf_.find('\n');
        if (nl != std::string::npos) {
            std::string l = buf_.substr(0, nl);
            buf_.erase(0, nl + 1);
            return l;
        }
        if (Clock::now() > end) return "";
        pollfd p{out_, POLLIN, 0};
        if (poll(&p, 1, tick ? 0 : 10) > 0) {
            char b[4096];
            ssize_t n = read(out_, b, sizeof(b));
            if (n <= 0) return "";
            buf_.append(b, static_cast<size_t>(n));
        } else if (tick) {
            tick();
        }
    }
}

bool peer_read_line(std::string *line, std::string *buf) {
    size_t nl = buf->find('\n');
    if (nl == std::string::npos) {
        pollfd p{0, POLLIN, 0};
        if (poll(&p, 1, 0) <= 0) return false;
        char b[4096];
        ssize_t n = read(0, b, sizeof(b));
        if (n <= 0) std::exit(0); // the lead is gone
        buf->append(b, static_cast<size_t>(n));
        nl = buf->find('\n');
        if (nl == std::string::npos) return false;
    }
    *line = buf->substr(0, nl);
    buf->erase(0, nl + 1);
    return true;
}

void peer_write_line(const std::string &line) {
    std::string s = line + "\n";
    if (write(1, s.data(), s.size()) < 0) std::exit(3);
}

void open_or_die(const std::string &transport, const std::string &device, Transport *t,
                 const Config::Overrides &ov) {
    std::string err;
    if (Config::load(ov, &t->cfg, &err) != GDX_OK) {
        std::fprintf(stderr, "config: %s\n", err.c_str());
        std::exit(2);
    }
    config_apply_logging(t->cfg, &err);
    tp::OpenRequest req;
    req.device = device;
    if (tp::Component *c = tp::find_component(transport); c != nullptr) {
        tp::OpenOutcome o = tp::open_interface(*c, t->cfg, req);
        t->iface = std::move(o.iface);
        if (o.status == GDX_OK && t->iface->ep_create(&t->ep) == GDX_OK) return;
    }
    std::fprintf(stderr, "cannot open %s/%s: %s\n", transport.c_str(), device.c_str(), last_error().c_str());
    std::exit(2);
}

void connect_or_die(Transport &t, const std::vector<uint8_t> &peer_addr) {
    gdx_status_t st = t.ep->connect(peer_addr);
    auto end = Clock::now() + std::chrono::seconds(20);
    while (st == GDX_INPROGRESS || (st == GDX_OK && t.ep->state() == GDX_INPROGRESS)) {
        t.iface->progress();
        st = t.ep->state();
        if (Clock::now() > end) break;
    }
    if (st != GDX_OK) {
        std::fprintf(stderr, "connect: %s (%s)\n", gdx_status_string(st), last_error().c_str());
        std::exit(2);
    }
}

gdx_status_t issue(tp::Interface &ifc, const std::function<gdx_status_t()> &f) {
    gdx_status_t st;
    while ((st = f()) == GDX_ERR_NO_RESOURCE) ifc.progress();
    return st;
}

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

void row(const char *path, const char *metric, const std::string &size, double value, const char *unit,
         const std::string &detail) {
    std::printf("| %-26s | %-10s | %8s | %10.2f %-4s | %s\n", path, metric, size.c_str(), value, unit,
                detail.c_str());
    std::fflush(stdout);
}

std::string machine_header(int argc, char **argv) {
    utsname u{};
    uname(&u);
    char date[64];
    time_t now = time(nullptr);
    strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    std::string cmd;
    for (int i = 0; i < argc; ++i) cmd += std::string(i ? " " : "") + argv[i];
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    return "# " + cmd + "\n# " + date + " " + u.nodename + " " + u.release + " " + u.machine + ", " +
           std::to_string(ncpu) + " CPUs, " + std::to_string(gpu_count()) + " GPU(s)\n";
}

std::string size_name(size_t s) {
    if (s >= (1u << 20) && s % (1u << 20) == 0) return std::to_string(s >> 20) + "MiB";
    if (s >= 1024 && s % 1024 == 0) return std::to_string(s >> 10) + "KiB";
    return std::to_string(s) + "B";
}

namespace {
size_t g_done = 0;
void count_done(tp::Completion *) { ++g_done; }
} // namespace

double windowed(Transport &t, size_t count, size_t window, const std::function<gdx_status_t(tp::Completion *)> &op) {
    std::vector<tp::Completion> comps(window);
    size_t issued = 0;
    g_done = 0;
    auto t0 = Clock::now();
    while (g_done < count) {
        for (auto &c : comps) {
            if (issued >= count || c.count != 0) continue;
            c.count = 1;
            c.cb = count_done;
            gdx_status_t st = op(&c);
            if (st == GDX_ERR_NO_RESOURCE) {
                c.count = 0;
                break;
            }
            if (st == GDX_OK) {
                c.count = 0;
                ++g_done;
            } else if (st != GDX_INPROGRESS) {
                std::fprintf(stderr, "operation failed: %s (%s)\n", gdx_status_string(st), last_error().c_str());
                return -1;
            }
            ++issued;
        }
        t.iface->progress();
    }
    double s = secs(Clock::now() - t0);
    for (auto &c : comps)
        if (c.status != GDX_OK) return std::fprintf(stderr, "completion: %s\n", gdx_status_string(c.status)), -1;
    return s;
}

// ---- shm host -> host -----------------------------------------------------------------------------------

namespace {
volatile uint64_t g_pongs = 0;
void on_pong(void *, tp::Endpoint *, const void *, size_t) { g_pongs = g_pongs + 1; }

// Half round trip of AM ping-pong, median over samples (each sample = one round trip).
void am_latency(Transport &t, const char *path, size_t size, int iters) {
    std::vector<uint8_t> msg(size, 7);
    std::vector<double> rtt;
    rtt.reserve(iters);
    for (int i = -iters / 10; i < iters; ++i) {
        uint64_t want = g_pongs + 1;
        auto t0 = Clock::now();
        issue(*t.iface, [&] { return size <= 240 ? t.ep->am_short(1, msg.data(), size) : t.ep->am_bcopy(1, msg.data(), size); });
        while (g_pongs < want) t.iface->progress();
        if (i >= 0) rtt.push_back(secs(Clock::now() - t0) * 1e6 / 2);
    }
    row(path, "am lat", size_name(size), median(rtt), "us", "half round trip, median of " + std::to_string(iters));
}
} // namespace

int lead_shm(int scale, bool ring) {
    // ring: both processes with GDX_SHM_CMA=no (two copies through the shared ring instead of cross-memory attach)
    Transport t;
    open_or_die("shm", "memory", &t, ring ? Config::Overrides{{"GDX_SHM_CMA", "no"}} : Config::Overrides{});
    t.iface->set_am_handler(1, on_pong, nullptr);
    const char *path = ring ? "shm host->host ring" : "shm host->host";
    auto peer = Peer::spawn({"--role", "peer", "--mode", "shm"},
                            ring ? std::vector<std::string>{"GDX_SHM_CMA=no"} : std::vector<std::string>{});
    std::vector<std::string> a = words(peer->recv(20)), b = words(peer->recv(20));
    if (a.size() != 2 || b.size() != 3) {
        std::fprintf(stderr, "shm peer did not start\n");
        return 2;
    }
    peer->send("connect " + hex(t.ep->address().data(), t.ep->address().size()));
    connect_or_die(t, unhex(a[1]));
    if (peer->recv(20, [&] { t.iface->progress(); }) != "ok") return 2;
    uint64_t raddr = std::stoull(b[1], nullptr, 16);
    std::unique_ptr<tp::RemoteKey> rk;
    if (t.iface->md().rkey_unpack(unhex(b[2]), &rk) != GDX_OK) return 2;
    const size_t kBuf = 64u << 20;
    std::vector<uint8_t> local(kBuf, 1);
    if (!ring && !g_only_size)
        for (size_t size : {size_t{8}, size_t{1024}}) am_latency(t, path, size, 20000 * scale);
    for (bool put : {true, false}) {
        std::vector<size_t> sizes{size_t{65536}, size_t{1} << 20, size_t{16} << 20, size_t{64} << 20};
        if (g_only_size) sizes = {g_only_size};
        for (size_t size : sizes) {
            size_t count = std::max<size_t>(8, (size_t{2} << 30) * scale / size / 2);
            std::vector<double> reps;
            for (int rep = 0; rep < 3; ++rep) {
                double s = windowed(t, count, 4, [&](tp::Completion *c) {
                    return put ? t.ep->put(local.data(), size, nullptr, raddr, *rk, c)
                               : t.ep->get(local.data(), size, nullptr, raddr, *rk, c);
                });
                if (s <= 0) return 2;
                reps.push_back(count * size / s / 1e9);
            }
            row(path, put ? "put bw" : "get bw", size_name(size), median(reps), "GB/s",
                "window 4, " + std::to_string(count) + " ops, median of 3");
        }
    }
    peer->send("exit");
    return 0;
}

} // namespace gdx::bench

using namespace gdx::bench;

int main(int argc, char **argv) {
    std::string role = "lead", mode = "all";
    int gpu_a = 0, gpu_b = 1, scale = 1, gpu = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string k = argv[i], v = argv[i + 1];
        if (k == "--role") role = v;
        else if (k == "--mode") mode = v;
        else if (k == "--gpu") gpu = std::atoi(v.c_str());
        else if (k == "--scale") scale = std::max(1, std::atoi(v.c_str()));
        else if (k == "--gpus") std::sscanf(v.c_str(), "%d,%d", &gpu_a, &gpu_b);
        else if (k == "--size") g_only_size = std::stoull(v);
    }
    if (role == "peer") return peer_main(mode, gpu);
    std::printf("%s", machine_header(argc, argv).c_str());
    std::printf("| %-26s | %-10s | %8s | %15s | %s\n", "path", "metric", "size", "value", "detail");
    int rc = 0;
    if (mode == "shm" || mode == "all") rc |= lead_shm(scale, false) | lead_shm(scale, true);
    if (mode == "ipc" || mode == "all") rc |= lead_ipc(gpu_a, gpu_b, scale);
    return rc;
}
