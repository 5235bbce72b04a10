// The other process of the multi-process tcp tests, the netns test and the bandwidth bench.
//
//   gdx_tcp_peer ROLE --bootstrap HOST:PORT [--listen] [--bytes N] [--iters N] [--seed N] [--wakeup]
//                     [--max-seconds N]
//   target    registers --bytes of host memory for remote read/write and serves active-message commands
//             (VERIFY, FILL, ECHO, QUIT) until QUIT (exit 0) or the connection ends (exit 3)
//   check     initiator: put/get of many sizes at random offsets up to --bytes, each verified byte for byte
//             (by the target for puts, locally for gets), then active messages; exit 0 when all matched
//   perf-put  initiator: --iters puts of --bytes, one at a time; prints the bandwidth
//   cut       initiator: keeps puts of --bytes in flight, prints TRANSFERRING once data flows, and exits 0
//             when the outstanding operations fail (the link was cut), 2 after --max-seconds without failure
// --listen: this process is bootstrap rank 0 on HOST:PORT (port 0: prints BOOTSTRAP_PORT=<port>).
// Configuration (GDX_TCP_ADDR, GDX_PEER_TIMEOUT, ...) comes from the environment.
#include "peer_blob.h"
#include "tcp_test_util.h"
#include "transport/bootstrap.h"
#include "transport/config_vars.h"
#include "transport/tcp/tcp.h"
#include "transport/wire.h"

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <poll.h>
#include <random>
#include <string>
#include <vector>

using namespace gdx;
using namespace gdx::test;
using Clock = std::chrono::steady_clock;
namespace wire = gdx::tp::wire;

namespace {

enum Am : uint8_t { kVerify = 1, kFill = 2, kResult = 3, kQuit = 4, kEcho = 5, kEchoReply = 6 };

struct Args {
    std::string role, host = "127.0.0.1";
    uint16_t port = 0;
    bool listen = false, wakeup = false;
    uint64_t bytes = 64u << 20, iters = 8, seed = 1, max_seconds = 120;
};

bool parse_args(int argc, char **argv, Args *a) {
    if (argc < 2) return false;
    a->role = argv[1];
    for (int i = 2; i < argc; ++i) {
        std::string k = argv[i], why;
        auto val = [&]() -> const char * { return i + 1 < argc ? argv[++i] : ""; };
        if (k == "--listen") a->listen = true;
        else if (k == "--wakeup") a->wakeup = true;
        else if (k == "--bootstrap") {
            std::string hp = val();
            size_t c = hp.rfind(':');
            uint64_t p = 0;
            if (c == std::string::npos || !parse_uint(hp.substr(c + 1), &p, &why) || p > 65535) return false;
            a->host = hp.substr(0, c);
            a->port = static_cast<uint16_t>(p);
        } else if (k == "--bytes") {
            if (!parse_size(val(), &a->bytes, &why)) return false;
        } else if (k == "--iters" || k == "--seed" || k == "--max-seconds") {
            uint64_t *dst = k == "--iters" ? &a->iters : k == "--seed" ? &a->seed : &a->max_seconds;
            if (!parse_uint(val(), dst, &why)) return false;
        } else {
            return false;
        }
    }
    return true;
}

struct Peer {
    Args args;
    Config cfg = Config::defaults();
    std::unique_ptr<tp::Interface> iface;
    std::unique_ptr<tp::Endpoint> ep;
    std::vector<uint8_t> buf;
    std::unique_ptr<tp::MemHandle> mh;
    std::unique_ptr<tp::RemoteKey> rkey; // the other side's buffer
    uint64_t remote_addr = 0, remote_len = 0;
    bool quit = false;
    uint64_t result = 0;
    bool have_result = false;
    std::vector<uint8_t> echo;
    bool have_echo = false;

    int setup() {
        std::string err;
        if (Config::load({}, &cfg, &err) != GDX_OK) return std::fprintf(stderr, "%s\n", err.c_str()), 2;
        if (config_apply_logging(cfg, &err) != GDX_OK) return std::fprintf(stderr, "%s\n", err.c_str()), 2;
        if (tp::tcp::open_iface(cfg, &iface) != GDX_OK) return 2;
        buf.assign(args.bytes, 0);
        unsigned access = args.role == "target" ? tp::kAccessAll : tp::kAccessLocalRead | tp::kAccessLocalWrite;
        if (iface->md().mem_reg(buf.data(), buf.size(), mem::MemInfo{}, access, &mh) != GDX_OK) return 2;
        if (iface->ep_create(&ep) != GDX_OK) return 2;
        std::unique_ptr<tp::Bootstrap> boot;
        tp::Bootstrap::Options opt;
        opt.host = args.host;
        opt.timeout = cfg.duration(tp::TransportVar::CONN_TIMEOUT); // tcp_netns_test.sh lengthens it for lossy links
        opt.port = args.port;
        opt.size = 2;
        gdx_status_t st = args.listen ? tp::Bootstrap::listen(opt, &boot) : tp::Bootstrap::join(opt, &boot);
        if (st != GDX_OK) return 2;
        if (args.listen) std::printf("BOOTSTRAP_PORT=%u\n", boot->port()), std::fflush(stdout);
        std::vector<std::vector<uint8_t>> all;
        if (boot->allgather(make_blob(*ep, *mh), &all) != GDX_OK) return 2;
        PeerBlob other;
        if (parse_blob(*iface, all[1 - boot->rank()], ep->address().size(), &other) != GDX_OK)
            return std::fprintf(stderr, "bad peer blob\n"), 2;
        rkey = std::move(other.rkey);
        remote_addr = other.addr;
        remote_len = other.len;
        iface->set_am_handler(kVerify, on_command, this);
        iface->set_am_handler(kFill, on_command, this);
        iface->set_am_handler(kQuit, on_command, this);
        iface->set_am_handler(kEcho, on_command, this);
        iface->set_am_handler(kResult, on_reply, this);
        iface->set_am_handler(kEchoReply, on_reply, this);
        st = ep->connect(other.address);
        if (st != GDX_OK && st != GDX_INPROGRESS) return 2;
        if (!progress_until({iface.get()}, [&] { return ep->state() != GDX_INPROGRESS; })) return 2;
        if (ep->state() != GDX_OK) return std::fprintf(stderr, "connect: %s\n", gdx_status_string(ep->state())), 2;
        return boot->barrier() == GDX_OK ? 0 : 2; // both connected before anyone sends
    }

    static void on_command(void *arg, tp::Endpoint *ep, const void *data, size_t len) {
        auto *p = static_cast<Peer *>(arg);
        const auto *d = static_cast<const uint8_t *>(data);
        uint8_t out[8];
        if (len >= 1 && d[0] == kQuit) {
            p->quit = true;
            return;
        }
        if (len >= 1 && d[0] == kEcho) {
            ep->am_bcopy(kEchoReply, d + 1, len - 1);
            return;
        }
        if (len != 33) return;
        uint64_t off = wire::load_le64(d + 1), n = wire::load_le64(d + 9), seed = wire::load_le64(d + 17);
        uint64_t r = ~0ull;
        if (off > p->buf.size() || n > p->buf.size() - off) r = ~1ull;
        else if (d[0] == kVerify) r = check_pattern(p->buf.data() + off, n, seed);
        else fill_pattern(p->buf.data() + off, n, seed);
        wire::store_le64(out, r == SIZE_MAX ? ~0ull : r);
        ep->am_short(kResult, out, sizeof(out));
    }
    static void on_reply(void *arg, tp::Endpoint *, const void *data, size_t len) {
        auto *p = static_cast<Peer *>(arg);
        if (len == 8) {
            p->result = wire::load_le64(static_cast<const uint8_t *>(data));
            p->have_result = true;
        } else {
            p->echo.assign(static_cast<const uint8_t *>(data), static_cast<const uint8_t *>(data) + len);
            p->have_echo = true;
        }
    }

    // Progresses until cond(); with --wakeup it sleeps on the wakeup descriptor whenever there is nothing to
    // do (event-driven, like a blocking socket program) instead of spinning.
    bool wait(const std::function<bool()> &cond) {
        auto done = [&] { return cond() || ep->state() != GDX_OK; };
        if (!args.wakeup) return progress_until({iface.get()}, done) && ep->state() == GDX_OK;
        auto end = Clock::now() + std::chrono::seconds(120);
        while (!done() && Clock::now() < end) {
            iface->progress();
            if (!done() && iface->arm_wakeup() == GDX_OK) {
                pollfd p{iface->wakeup_fd(), POLLIN, 0};
                ::poll(&p, 1, 1000);
            }
        }
        return done() && ep->state() == GDX_OK;
    }

    // Sends a command (first byte = its id) and waits for the target's answer.
    bool command(uint8_t id, uint64_t off, uint64_t len, uint64_t seed, uint64_t *answer) {
        uint8_t m[33];
        m[0] = id;
        wire::store_le64(m + 1, off);
        wire::store_le64(m + 9, len);
        wire::store_le64(m + 17, seed);
        wire::store_le64(m + 25, 0);
        have_result = false;
        gdx_status_t st;
        while ((st = ep->am_short(id, m, sizeof(m))) == GDX_ERR_NO_RESOURCE) iface->progress();
        if (st != GDX_OK || !wait([&] { return have_result; })) return false;
        *answer = result;
        return true;
    }

    int serve() {
        while (!quit && ep->state() == GDX_OK) {
            if (args.wakeup && iface->arm_wakeup() == GDX_OK) {
                pollfd p{iface->wakeup_fd(), POLLIN, 0};
                ::poll(&p, 1, 1000);
            }
            iface->progress();
        }
        if (quit) { // let the last replies leave before closing
            progress_until({iface.get()}, [&] { return iface->arm_wakeup() == GDX_OK; }, std::chrono::seconds(5));
            return 0;
        }
        std::fprintf(stderr, "target: connection ended: %s\n", gdx_status_string(ep->state()));
        return 3;
    }

    bool op(bool put, uint64_t loff, uint64_t roff, uint64_t len) {
        Waiter w;
        gdx_status_t st;
        for (;;) {
            st = put ? ep->put(buf.data() + loff, len, mh.get(), remote_addr + roff, *rkey, &w)
                     : ep->get(buf.data() + loff, len, mh.get(), remote_addr + roff, *rkey, &w);
            if (st != GDX_ERR_NO_RESOURCE) break;
            iface->progress();
        }
        if (st == GDX_INPROGRESS && !wait([&] { return w.done(); })) return false;
        if (st != GDX_OK && st != GDX_INPROGRESS) return false;
        return w.status == GDX_OK;
    }

    int check() {
        std::mt19937_64 rng(args.seed);
        uint64_t span = std::min<uint64_t>(buf.size(), remote_len);
        std::vector<uint64_t> sizes = {0, 1, 3, 4095, 4096, 4097, 65537, (1u << 20) + 7, (16u << 20) + 3, span};
        uint64_t seed = args.seed * 1000;
        for (uint64_t len : sizes) {
            if (len > span) continue;
            uint64_t roff = rng() % (span - len + 1), loff = rng() % (span - len + 1), ans = 0;
            fill_pattern(buf.data() + loff, len, ++seed);
            if (!op(true, loff, roff, len)) return std::fprintf(stderr, "put of %" PRIu64 " failed\n", len), 1;
            if (!command(kVerify, roff, len, seed, &ans) || ans != ~0ull)
                return std::fprintf(stderr, "put of %" PRIu64 " at %" PRIu64 ": byte %" PRIu64 " differs\n", len, roff, ans), 1;
            if (!command(kFill, roff, len, ++seed, &ans)) return 1;
            if (!op(false, loff, roff, len)) return std::fprintf(stderr, "get of %" PRIu64 " failed\n", len), 1;
            size_t bad = check_pattern(buf.data() + loff, len, seed);
            if (bad != SIZE_MAX) return std::fprintf(stderr, "get of %" PRIu64 ": byte %zu differs\n", len, bad), 1;
            std::printf("ok %" PRIu64 " bytes\n", len);
        }
        for (size_t len : {size_t{0}, size_t{1}, iface->caps().max_am_bcopy - 1}) {
            std::vector<uint8_t> m(len + 1);
            m[0] = kEcho;
            fill_pattern(m.data() + 1, len, ++seed);
            have_echo = false;
            if (ep->am_bcopy(kEcho, m.data(), m.size()) != GDX_OK || !wait([&] { return have_echo; }) ||
                echo != std::vector<uint8_t>(m.begin() + 1, m.end()))
                return std::fprintf(stderr, "echo of %zu bytes failed\n", len), 1;
        }
        std::printf("ok active messages\n");
        return finish();
    }

    // Everything issued is complete at the target, then QUIT; the target closes first, so no data is left
    // unread on either side (an unread byte turns a close into a reset).
    int finish() {
        Waiter f;
        gdx_status_t st = ep->flush(&f);
        if (st == GDX_INPROGRESS && !wait([&] { return f.done(); })) return 1;
        uint8_t q = kQuit;
        if (ep->am_short(kQuit, &q, 1) != GDX_OK) return 1;
        progress_until({iface.get()}, [&] { return ep->state() != GDX_OK; }, std::chrono::seconds(10));
        return 0;
    }

    int perf_put() {
        fill_pattern(buf.data(), buf.size(), args.seed);
        if (!op(true, 0, 0, buf.size())) return 1; // warm-up: pages of both buffers are touched once
        auto t0 = Clock::now();
        for (uint64_t i = 0; i < args.iters; ++i)
            if (!op(true, 0, 0, buf.size())) return 1;
        double s = std::chrono::duration<double>(Clock::now() - t0).count();
        double bw = static_cast<double>(buf.size()) * static_cast<double>(args.iters) / s;
        std::printf("gdx_put bytes=%zu iters=%" PRIu64 " seconds=%.3f bandwidth_Bps=%.0f (%.2f Gbit/s)\n", buf.size(),
                    args.iters, s, bw, bw * 8 / 1e9);
        return finish();
    }

    int cut() {
        fill_pattern(buf.data(), buf.size(), args.seed);
        constexpr int kDepth = 4;
        Waiter w[kDepth];
        bool busy[kDepth] = {};
        bool announced = false;
        Clock::time_point last_ok = Clock::now(), end = Clock::now() + std::chrono::seconds(args.max_seconds);
        gdx_status_t failure = GDX_OK;
        while (Clock::now() < end) {
            int outstanding = 0;
            for (int i = 0; i < kDepth; ++i) {
                if (busy[i] && w[i].done()) {
                    busy[i] = false;
                    if (w[i].status != GDX_OK && failure == GDX_OK) failure = w[i].status;
                    if (w[i].status == GDX_OK) last_ok = Clock::now();
                    if (w[i].status == GDX_OK && !announced) {
                        std::printf("TRANSFERRING\n");
                        std::fflush(stdout);
                        announced = true;
                    }
                }
                if (!busy[i] && failure == GDX_OK) {
                    w[i].reset();
                    gdx_status_t st = ep->put(buf.data(), buf.size(), mh.get(), remote_addr, *rkey, &w[i]);
                    if (st == GDX_INPROGRESS) busy[i] = true;
                    else if (st != GDX_ERR_NO_RESOURCE) failure = st;
                }
                outstanding += busy[i];
            }
            if (failure != GDX_OK && outstanding == 0) {
                double since = std::chrono::duration<double>(Clock::now() - last_ok).count();
                std::printf("FAILED status=%s seconds_since_last_success=%.1f\n", gdx_status_string(failure), since);
                return 0;
            }
            iface->progress();
        }
        std::printf("NO FAILURE within %" PRIu64 " s\n", args.max_seconds);
        return 2;
    }
};

} // namespace

int main(int argc, char **argv) {
    Peer p;
    if (!parse_args(argc, argv, &p.args)) {
        std::fprintf(stderr, "usage: gdx_tcp_peer target|check|perf-put|cut --bootstrap HOST:PORT [--listen] "
                             "[--bytes N] [--iters N] [--seed N] [--wakeup] [--max-seconds N]\n");
        return 2;
    }
    int rc = p.setup();
    if (rc != 0) return rc;
    if (p.args.role == "target") return p.serve();
    if (p.args.role == "check") return p.check();
    if (p.args.role == "perf-put") return p.perf_put();
    if (p.args.role == "cut") return p.cut();
    std::fprintf(stderr, "unknown role %s\n", p.args.role.c_str());
    return 2;
}
