// rxe_bench: gdx rc put bandwidth and active-message latency, measured the way perftest's ib_write_bw and
// ib_send_lat measure (two processes on one RDMA device, the same message size and queue depth), so
// bench/rxe_bench.sh can print them side by side from one guest run.
//
//   rxe_bench put_bw [-d dev:port] [-s bytes] [-n iters] [-t depth]   client; execs its own server
//   rxe_bench am_lat [-d dev:port] [-s bytes] [-n iters]
//
// The client fork+execs "rxe_bench --server <mode> ..." and exchanges endpoint addresses and the remote key
// with it over pipes. put_bw keeps `depth` puts in flight and reports the payload rate once all completed;
// am_lat ping-pongs am_short messages and reports half the round trip (typical = median, and average).
#include "core/config.h"
#include "core/error.h"
#include "support/text.h"
#include "transport/rc/component.h"
#include "transport/rc/device.h"
#include "transport/transport.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <poll.h>
#include <spawn.h>
#include <string>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

extern char **environ;
using namespace gdx;
using gdx::test::hex;
using gdx::test::unhex;
using Clock = std::chrono::steady_clock;

namespace {

struct Opts {
    std::string mode, dev;
    size_t size = 65536;
    long iters = 2000;
    int depth = 128;
    bool server = false;
};

[[noreturn]] void die(const char *what) {
    std::fprintf(stderr, "rxe_bench: %s: %s\n", what, last_error().c_str());
    std::exit(1);
}

struct Side {
    std::unique_ptr<tp::Interface> iface;
    std::unique_ptr<tp::Endpoint> ep;
    void *buf = nullptr;
    size_t len = 0;
    std::unique_ptr<tp::MemHandle> mh;
    void open(const Opts &o, size_t buf_len) {
        Config cfg;
        std::string err;
        if (Config::load({}, &cfg, &err) != GDX_OK) die(err.c_str());
        if (tp::rc::component()->open({o.dev, "", false}, cfg, &iface) != GDX_OK) die("open");
        if (iface->ep_create(&ep) != GDX_OK) die("ep_create");
        len = buf_len;
        buf = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (buf == MAP_FAILED) die("mmap");
        std::memset(buf, 0x5a, len);
        if (iface->md().mem_reg(buf, len, {}, tp::kAccessAll, &mh) != GDX_OK) die("mem_reg");
    }
};

// ---- server: registers a target, answers pings, exits when stdin closes -------------------------------------

int run_server(const Opts &o) {
    Side s;
    s.open(o, std::max<size_t>(o.size * o.depth, 1 << 20));
    // Pings are answered from the main loop, not from inside the handler (a handler must not spin on
    // resources that only progress() frees).
    struct Echo {
        int owed = 0;
        std::vector<uint8_t> msg;
    } echo;
    s.iface->set_am_handler(1, [](void *arg, tp::Endpoint *, const void *d, size_t n) {
        auto *e = static_cast<Echo *>(arg);
        e->msg.assign(static_cast<const uint8_t *>(d), static_cast<const uint8_t *>(d) + n);
        ++e->owed;
    }, &echo);
    std::vector<uint8_t> rkey(s.iface->md().rkey_packed_size());
    if (s.mh->pack_rkey(rkey) != GDX_OK) die("pack_rkey");
    std::cout << hex(s.ep->address()) << " " << hex(rkey) << " " << reinterpret_cast<uintptr_t>(s.buf) << std::endl;
    std::string peer;
    if (!std::getline(std::cin, peer) || s.ep->connect(unhex(peer)) != GDX_OK) die("connect");
    std::cout << "READY" << std::endl;
    if (o.mode == "put_bw") {
        // A put target has nothing to do (the NIC places the data): wait idle like ib_write_bw's server, so the
        // measured side and the device get the CPUs.
        char c;
        while (read(0, &c, 1) > 0) {
        }
        return 0;
    }
    for (;;) {
        for (int i = 0; i < 256; ++i) {
            s.iface->progress();
            if (echo.owed > 0 && s.ep->am_short(1, echo.msg.data(), echo.msg.size()) == GDX_OK) --echo.owed;
        }
        pollfd p{0, POLLIN, 0};
        if (poll(&p, 1, 0) == 1) break; // the client closed our stdin (or wrote): done
    }
    return 0;
}

// ---- client -------------------------------------------------------------------------------------------------

struct Peer {
    pid_t pid = -1;
    int to = -1;
    FILE *from = nullptr;
    std::vector<uint8_t> addr, rkey;
    uint64_t base = 0;
};

Peer spawn_server(const Opts &o, const char *self) {
    int tc[2], fc[2];
    if (pipe(tc) || pipe(fc)) die("pipe");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, tc[0], 0);
    posix_spawn_file_actions_adddup2(&fa, fc[1], 1);
    posix_spawn_file_actions_addclose(&fa, tc[1]);
    posix_spawn_file_actions_addclose(&fa, fc[0]);
    std::string s = std::to_string(o.size), n = std::to_string(o.iters), t = std::to_string(o.depth);
    std::vector<std::string> a = {self, "--server", o.mode, "-d", o.dev, "-s", s, "-n", n, "-t", t};
    std::vector<char *> argv;
    for (auto &x : a) argv.push_back(x.data());
    argv.push_back(nullptr);
    Peer p;
    if (posix_spawn(&p.pid, self, &fa, nullptr, argv.data(), environ) != 0) die("posix_spawn");
    close(tc[0]);
    close(fc[1]);
    p.to = tc[1];
    p.from = fdopen(fc[0], "r");
    char line[8192];
    char a1[1024], a2[1024];
    unsigned long long base;
    if (!fgets(line, sizeof(line), p.from) || sscanf(line, "%1023s %1023s %llu", a1, a2, &base) != 3) die("server hello");
    p.addr = unhex(a1);
    p.rkey = unhex(a2);
    p.base = base;
    return p;
}

void finish(Peer &p) {
    close(p.to);
    int st = 0;
    waitpid(p.pid, &st, 0);
    fclose(p.from);
}

void connect_to(Side &c, Peer &p) {
    if (c.ep->connect(p.addr) != GDX_OK) die("connect");
    std::string mine = hex(c.ep->address()) + "\n";
    if (write(p.to, mine.data(), mine.size()) != static_cast<ssize_t>(mine.size())) die("write");
    char line[64];
    if (!fgets(line, sizeof(line), p.from) || std::strcmp(line, "READY\n") != 0) die("server not ready");
}

int run_put_bw(const Opts &o, const char *self) {
    Peer p = spawn_server(o, self);
    Side c;
    c.open(o, std::max<size_t>(o.size * o.depth, 1 << 20));
    connect_to(c, p);
    std::unique_ptr<tp::RemoteKey> rk;
    if (c.iface->md().rkey_unpack(p.rkey, &rk) != GDX_OK) die("rkey_unpack");
    std::vector<tp::Completion> comp(o.depth);
    long posted = 0, done = 0;
    auto issue = [&](int slot) {
        size_t off = static_cast<size_t>(slot) * o.size;
        comp[slot] = tp::Completion{};
        comp[slot].count = 1;
        gdx_status_t st = c.ep->put(static_cast<char *>(c.buf) + off, o.size, c.mh.get(), p.base + off, *rk, &comp[slot]);
        if (st == GDX_INPROGRESS) ++posted;
        else if (st == GDX_OK) ++posted, ++done, comp[slot].count = 0;
        else if (st != GDX_ERR_NO_RESOURCE) die("put");
        return st;
    };
    std::vector<bool> busy(o.depth, false);
    auto t0 = Clock::now();
    while (done < o.iters) {
        c.iface->progress();
        for (int i = 0; i < o.depth; ++i) {
            if (busy[i] && comp[i].count == 0) {
                busy[i] = false;
                ++done;
                if (comp[i].status != GDX_OK) die("put completion");
            }
            if (!busy[i] && posted < o.iters && issue(i) == GDX_INPROGRESS) busy[i] = true;
        }
    }
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    double bytes = static_cast<double>(o.size) * o.iters;
    std::printf("gdx put_bw %s: %zu B x %ld, depth %d: %.3f s, %.2f MB/s (1e6), %.3f Gb/s, %.0f msg/s\n", o.dev.c_str(),
                o.size, o.iters, o.depth, s, bytes / s / 1e6, bytes * 8 / s / 1e9, o.iters / s);
    finish(p);
    return 0;
}

int run_am_lat(const Opts &o, const char *self) {
    Peer p = spawn_server(o, self);
    Side c;
    c.open(o, 1 << 20);
    struct Got {
        bool arrived = false;
    } got;
    c.iface->set_am_handler(1, [](void *arg, tp::Endpoint *, const void *, size_t) { static_cast<Got *>(arg)->arrived = true; }, &got);
    connect_to(c, p);
    std::vector<uint8_t> msg(o.size, 0x42);
    std::vector<double> rtt;
    rtt.reserve(o.iters);
    long warmup = std::min<long>(100, o.iters / 10);
    for (long i = 0; i < o.iters + warmup; ++i) {
        got.arrived = false;
        auto t0 = Clock::now();
        while (c.ep->am_short(1, msg.data(), msg.size()) == GDX_ERR_NO_RESOURCE) c.iface->progress();
        while (!got.arrived) c.iface->progress();
        if (i >= warmup) rtt.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / 2);
    }
    std::sort(rtt.begin(), rtt.end());
    double avg = 0;
    for (double x : rtt) avg += x;
    avg /= rtt.size();
    std::printf("gdx am_lat %s: %zu B x %ld: one-way t_typical %.2f us, t_avg %.2f us, 99%% %.2f us, 99.9%% %.2f us\n",
                o.dev.c_str(), o.size, o.iters, rtt[rtt.size() / 2], avg, rtt[rtt.size() * 99 / 100],
                rtt[rtt.size() * 999 / 1000]);
    finish(p);
    return 0;
}

} // namespace

int main(int argc, char **argv) {
    Opts o;
    int i = 1;
    if (i < argc && std::strcmp(argv[i], "--server") == 0) o.server = true, ++i;
    if (i >= argc) {
        std::fprintf(stderr, "usage: rxe_bench put_bw|am_lat [-d dev:port] [-s bytes] [-n iters] [-t depth]\n");
        return 2;
    }
    o.mode = argv[i++];
    for (; i + 1 < argc; i += 2) {
        std::string k = argv[i], v = argv[i + 1];
        if (k == "-d") o.dev = v;
        else if (k == "-s") o.size = std::strtoull(v.c_str(), nullptr, 0);
        else if (k == "-n") o.iters = std::strtol(v.c_str(), nullptr, 0);
        else if (k == "-t") o.depth = std::atoi(v.c_str());
        else {
            std::fprintf(stderr, "rxe_bench: unknown option %s\n", k.c_str());
            return 2;
        }
    }
    if (o.dev.empty()) {
        std::vector<tp::rc::PortDesc> ports;
        tp::rc::list_ports(&ports);
        if (ports.empty()) {
            std::fprintf(stderr, "rxe_bench: no RDMA device\n");
            return 1;
        }
        o.dev = ports[0].device + ":" + std::to_string(ports[0].port);
    }
    if (o.mode != "put_bw" && o.mode != "am_lat") {
        std::fprintf(stderr, "rxe_bench: unknown mode %s\n", o.mode.c_str());
        return 2;
    }
    if (o.depth < 1 || o.iters < 1 || o.size == 0) return 2;
    if (o.server) return run_server(o);
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0) die("readlink /proc/self/exe");
    self[n] = 0;
    return o.mode == "put_bw" ? run_put_bw(o, self) : run_am_lat(o, self);
}
