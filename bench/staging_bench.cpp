// staging_bench: throughput of gdx's per-fragment staging engine (src/fallback). Measures and prints; never judges.
//
//   staging_bench --mode null  [opts]   one process, two engines over the loop transport in "null" mode (puts move
//                                       nothing), so the figure is the pipeline alone: D2H copies on the sender,
//                                       H2D copies on the receiver, the engine's bookkeeping. --stage picks which
//                                       side stages: local (the sender copies its source into bounce buffers; the
//                                       destination is reachable), remote (the receiver copies out of its bounce
//                                       buffers), both (default). Printed next to the raw copy rate the staged
//                                       side(s) face with the same fragment size and depth (copy_GBps: D2H for
//                                       local, H2D for remote, D2H and H2D running at once for both: on one GPU
//                                       they share its PCIe link; memcpy for --mem host) and the ratio of the two.
//   staging_bench --mode tcp   [opts]   two processes (this one and an exec'd copy of itself, GPU --gpu -> GPU
//                                       --peer-gpu), puts through the public C API over tcp loopback: what a user
//                                       gets. After each size the peer checks every byte it received.
// Options: --mem cuda|managed|host (host runs anywhere), --sizes 1M:256M, --frag 4M (GDX_FRAG_SIZE of --mem's
// kind), --depth 4, --pool N, --window 4 (requests in flight), --seconds 2 (per point), --gpu 0, --peer-gpu 1.
// Output: one header line per run and one row per size:
//   mode mem size frag depth window iters GBps copy_GBps ratio wrong_bytes path
#include "core/error.h"
#include "fallback/engine.h"
#include "gdx/gdx.h"
#include "memtype/memtype.h"
#include "support/loop_transport.h"
#include "transport/bootstrap.h"
#if GDX_HAVE_CUDA_H
#include "memtype/cuda_driver.h"
#endif

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <spawn.h>
#include <string>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

extern char **environ;
using namespace gdx;
using Clock = std::chrono::steady_clock;

namespace {

struct Opts {
    std::string mode = "null", mem = "cuda", stage = "both";
    std::vector<uint64_t> sizes;
    uint64_t frag = 0; // 0: the configured default
    unsigned depth = 0, pool = 0, window = 4;
    double seconds = 2;
    int gpu = 0, peer_gpu = 1;
    int peer_port = 0; // internal: run as the tcp peer
    std::string self;
};

uint64_t parse_size(const char *s) {
    char *end = nullptr;
    double v = std::strtod(s, &end);
    uint64_t m = 1;
    if (*end == 'K' || *end == 'k') m = 1ull << 10;
    if (*end == 'M' || *end == 'm') m = 1ull << 20;
    if (*end == 'G' || *end == 'g') m = 1ull << 30;
    return static_cast<uint64_t>(v * m);
}

std::string size_text(uint64_t b) {
    if (b >= (1ull << 30) && b % (1ull << 30) == 0) return std::to_string(b >> 30) + "G";
    if (b >= (1ull << 20) && b % (1ull << 20) == 0) return std::to_string(b >> 20) + "M";
    if (b >= 1024 && b % 1024 == 0) return std::to_string(b >> 10) + "K";
    return std::to_string(b);
}

// ---- buffers ---------------------------------------------------------------------------------------------------

struct Buffer {
    void *p = nullptr;
    size_t n = 0;
    std::string mem;
    int gpu = -1;
    bool alloc(const std::string &kind, size_t bytes, int device) {
        mem = kind;
        n = bytes;
        if (kind == "host") return posix_memalign(&p, 4096, bytes) == 0 && std::memset(p, 1, bytes) != nullptr;
#if GDX_HAVE_CUDA_H
        const cuda::DriverApi *api = cuda::driver();
        if (api == nullptr || cuda::bind_device(device) != CUDA_SUCCESS) return false;
        gpu = device;
        CUdeviceptr d = 0;
        CUresult r = kind == "managed" ? api->cuMemAllocManaged(&d, bytes, CU_MEM_ATTACH_GLOBAL) : api->cuMemAlloc(&d, bytes);
        p = reinterpret_cast<void *>(d);
        return r == CUDA_SUCCESS;
#else
        return false;
#endif
    }
    ~Buffer() {
        if (p == nullptr) return;
#if GDX_HAVE_CUDA_H
        if (gpu >= 0) {
            cuda::bind_device(gpu);
            cuda::driver()->cuMemFree(reinterpret_cast<CUdeviceptr>(p));
            return;
        }
#endif
        std::free(p);
    }
    gdx_status_t copy_in(const std::vector<uint8_t> &h) {
        if (gpu < 0) return std::memcpy(p, h.data(), n), GDX_OK;
        return mem::ops(mem::MemKind::Cuda).copy(p, h.data(), n, gpu);
    }
    gdx_status_t copy_out(std::vector<uint8_t> *h) const {
        h->resize(n);
        if (gpu < 0) return std::memcpy(h->data(), p, n), GDX_OK;
        return mem::ops(mem::MemKind::Cuda).copy(h->data(), p, n, gpu);
    }
};

uint8_t pattern(uint64_t seed, uint64_t i) { return static_cast<uint8_t>((i * 2654435761u + seed * 97) >> 7); }

std::vector<std::pair<std::string, std::string>> config_of(const Opts &o) {
    std::vector<std::pair<std::string, std::string>> c;
    std::string kind = o.mem == "host" ? "host" : "cuda";
    if (o.frag != 0) c.emplace_back("GDX_FRAG_SIZE", kind + ":" + std::to_string(o.frag));
    if (o.depth != 0) c.emplace_back("GDX_STAGING_DEPTH", std::to_string(o.depth));
    if (o.pool != 0) c.emplace_back("GDX_STAGING_POOL", std::to_string(o.pool));
    return c;
}

void header(const Opts &o, int argc, char **argv) {
    char host[128] = {};
    gethostname(host, sizeof(host) - 1);
    utsname u{};
    uname(&u);
    std::time_t t = std::time(nullptr);
    char date[32];
    std::strftime(date, sizeof(date), "%FT%TZ", std::gmtime(&t));
    std::printf("# command:");
    for (int i = 0; i < argc; ++i) std::printf(" %s", argv[i]);
    std::printf("\n# date: %s  machine: %s %s %s, %u cores\n", date, host, u.sysname, u.release,
                std::thread::hardware_concurrency());
#if GDX_HAVE_CUDA_H
    for (const cuda::DeviceInfo &d : cuda::list_devices())
        std::printf("# gpu %d: %s (%s)\n", d.ordinal, d.name.c_str(), d.pci_bus_id.c_str());
#endif
    std::printf("# mode=%s stage=%s mem=%s window=%u seconds/point=%.1f\n", o.mode.c_str(), o.stage.c_str(), o.mem.c_str(), o.window, o.seconds);
    std::printf("%-5s %-8s %10s %6s %5s %6s %7s %9s %9s %6s %11s  %s\n", "mode", "mem", "size", "frag", "depth",
                "window", "iters", "GBps", "copy_GBps", "ratio", "wrong_bytes", "path");
    std::fflush(stdout);
}

// Keeps `window` operations in flight for `seconds` (at least 3 iterations); returns iterations done.
template <typename Submit, typename Progress, typename Done>
uint64_t timed_loop(const Opts &o, double *secs, Submit submit, Progress progress, Done done) {
    const Clock::time_point t0 = Clock::now();
    const Clock::time_point end = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));
    uint64_t issued = 0, completed = 0;
    std::vector<int> slot(o.window, -1);
    while (true) {
        bool time_left = Clock::now() < end || issued < 3;
        for (unsigned w = 0; w < o.window; ++w) {
            if (slot[w] >= 0 && done(w)) {
                slot[w] = -1;
                ++completed;
            }
            if (slot[w] < 0 && time_left) {
                if (!submit(w)) return 0;
                slot[w] = 1;
                ++issued;
            }
        }
        if (!time_left && completed == issued) break;
        progress();
    }
    *secs = std::chrono::duration<double>(Clock::now() - t0).count();
    return completed;
}

// ---- null mode: the pipeline alone -------------------------------------------------------------------------------

// Copies of `frag` bytes with `depth` in flight per direction, as the copy engines run them for the staging
// pipeline: D2H from `src` (to_host), H2D into `dst` (to_device), or both at once, each direction moving `bytes`.
// Returns the rate of the slower direction. For host memory the "copy engine" is memcpy on this thread.
double copy_rate(const Buffer &src, const Buffer &dst, uint64_t bytes, uint64_t frag, unsigned depth, bool to_host,
                 bool to_device) {
    const mem::Ops &row = mem::ops(src.gpu < 0 ? mem::MemKind::Host : mem::MemKind::Cuda);
    void *pinned = nullptr;
    if (row.host_alloc(2 * frag * depth, src.gpu, &pinned) != GDX_OK) return 0;
    struct Lane {
        bool on;
        mem::CopyDir dir;
        const Buffer *user;
        uint8_t *slots;
        std::vector<mem::CopyHandle> h;
        std::vector<bool> busy;
        uint64_t off = 0, done = 0;
        Clock::time_point end;
    };
    Lane lanes[2] = {{to_host, mem::CopyDir::ToHost, &src, static_cast<uint8_t *>(pinned), {}, {}},
                     {to_device, mem::CopyDir::ToDevice, &dst, static_cast<uint8_t *>(pinned) + frag * depth, {}, {}}};
    auto run = [&](uint64_t total) {
        for (Lane &l : lanes) {
            l.h.assign(depth, mem::CopyHandle{});
            l.busy.assign(depth, false);
            l.off = l.done = 0;
        }
        bool pending = true;
        while (pending) {
            pending = false;
            for (Lane &l : lanes) {
                if (!l.on || l.done >= total) continue;
                pending = true;
                for (unsigned d = 0; d < depth; ++d) {
                    if (l.busy[d] && row.copy_test(&l.h[d]) != GDX_INPROGRESS) l.busy[d] = false, l.done += frag;
                    if (l.busy[d] || l.off >= total) continue;
                    uint8_t *user = static_cast<uint8_t *>(l.user->p) + l.off % (l.user->n - frag + 1);
                    uint8_t *slot = l.slots + d * frag;
                    bool down = l.dir == mem::CopyDir::ToHost;
                    gdx_status_t st = row.copy_async(down ? slot : user, down ? user : slot, frag, l.user->gpu,
                                                     l.dir, &l.h[d]);
                    l.busy[d] = st == GDX_INPROGRESS;
                    if (st == GDX_OK) l.done += frag;
                    if (st != GDX_OK && st != GDX_INPROGRESS) return false;
                    l.off += frag;
                }
                if (l.done >= total) l.end = Clock::now();
            }
        }
        return true;
    };
    double rate = 0;
    if (run(2 * frag * depth)) { // warm-up: first touch of the pinned pages, stream and event creation
        auto t0 = Clock::now();
        if (run(bytes)) {
            rate = 1e30;
            for (const Lane &l : lanes)
                if (l.on) rate = std::min(rate, bytes / std::chrono::duration<double>(l.end - t0).count() / 1e9);
        }
    }
    row.host_free(pinned);
    return rate;
}

int run_null(const Opts &o) {
    Config cfg;
    std::string err;
    Config::Overrides ov;
    for (auto &[k, v] : config_of(o)) ov[k] = v;
    if (Config::load(ov, &cfg, &err) != GDX_OK) return std::fprintf(stderr, "%s\n", err.c_str()), 2;
    fb::Params p;
    if (fb::Params::from_config(cfg, &p) != GDX_OK) return 2;
    mem::Detector det(mem::Detector::options(cfg));
    uint64_t max = 0;
    for (uint64_t s : o.sizes) max = std::max(max, s);
    Buffer src, dst;
    if (!src.alloc(o.mem, max, o.gpu) || !dst.alloc(o.mem, max, o.mem == "host" ? o.gpu : o.peer_gpu))
        return std::fprintf(stderr, "cannot allocate 2 x %s of %s memory\n", size_text(max).c_str(), o.mem.c_str()), 1;
    test::LoopOptions lo;
    lo.move_bytes = false;
    // The transport reaches the bounce buffers but not the user buffer(s) of the staged side(s): --stage both
    // stages every fragment on both sides.
    const bool stage_local = o.stage != "remote", stage_remote = o.stage != "local";
    auto inside = [](const Buffer &b, uintptr_t a) { return a >= uintptr_t(b.p) && a - uintptr_t(b.p) < b.n; };
    lo.refuse = [&](uintptr_t a, size_t) { return (stage_local && inside(src, a)) || (stage_remote && inside(dst, a)); };
    lo.direct_types |= tp::type_bit(mem::MemType::CudaDevice) | tp::type_bit(mem::MemType::CudaManaged);
    auto fabric = test::make_loop_fabric();
    std::unique_ptr<tp::Interface> ia, ib;
    std::unique_ptr<fb::Engine> ea, eb;
    std::unique_ptr<tp::Endpoint> pa, pb;
    if (test::open_loop_iface(fabric, lo, &ia) != GDX_OK || test::open_loop_iface(fabric, lo, &ib) != GDX_OK ||
        fb::Engine::create(*ia, p, det, &ea) != GDX_OK || fb::Engine::create(*ib, p, det, &eb) != GDX_OK ||
        ia->ep_create(&pa) != GDX_OK || ib->ep_create(&pb) != GDX_OK || pa->connect(pb->address()) != GDX_OK ||
        pb->connect(pa->address()) != GDX_OK)
        return std::fprintf(stderr, "null mode setup failed: %s\n", last_error().c_str()), 1;
    fb::Region *rs = nullptr, *rd = nullptr;
    std::vector<uint8_t> key;
    std::unique_ptr<fb::RemoteRegion> remote;
    if (ea->mem_reg(src.p, max, tp::kAccessAll, &rs) != GDX_OK || eb->mem_reg(dst.p, max, tp::kAccessAll, &rd) != GDX_OK ||
        eb->pack_key(*rd, &key) != GDX_OK || ea->unpack_key(key, &remote) != GDX_OK)
        return std::fprintf(stderr, "registration failed: %s\n", last_error().c_str()), 1;
    uint64_t frag = p.frag_size(rs->info().kind);
    for (uint64_t size : o.sizes) {
        std::vector<fb::Request> reqs(o.window);
        fb::PathReport path;
        double secs = 0;
        uint64_t iters = timed_loop(
            o, &secs,
            [&](unsigned w) {
                if (reqs[w].status == GDX_OK) path = reqs[w].path;
                return ea->put(*pa, *rs, 0, *remote, 0, size, &reqs[w]) == GDX_INPROGRESS;
            },
            [&] {
                ea->progress();
                eb->progress();
            },
            [&](unsigned w) { return reqs[w].status != GDX_INPROGRESS; });
        double gbps = iters * size / secs / 1e9;
        double d2h = copy_rate(src, dst, std::max<uint64_t>(size, 64 * frag), std::min(frag, size), p.depth,
                               stage_local, stage_remote);
        std::printf("%-5s %-8s %10s %6s %5u %6u %7llu %9.2f %9.2f %6.3f %11s  %s\n",
                    (o.stage == "both" ? "null" : o.stage == "local" ? "nullL" : "nullR"), o.mem.c_str(),
                    size_text(size).c_str(), size_text(frag).c_str(), p.depth, o.window,
                    static_cast<unsigned long long>(iters), gbps, d2h, d2h > 0 ? gbps / d2h : 0.0, "n/a",
                    path.describe().c_str());
        std::fflush(stdout);
    }
    ea->mem_dereg(rs);
    eb->mem_dereg(rd);
    return 0;
}

// ---- tcp mode: two processes through the C API ---------------------------------------------------------------------

struct Side {
    gdx_context_t *ctx = nullptr;
    gdx_ep_t *ep = nullptr;
    gdx_mem_t *mem = nullptr;
    gdx_rkey_t *rkey = nullptr;
    ~Side() {
        gdx_rkey_destroy(rkey);
        gdx_ep_destroy(ep);
        gdx_mem_dereg(mem);
        gdx_context_destroy(ctx);
    }
};

template <typename F> std::vector<uint8_t> blob(F fn) {
    size_t n = 0;
    fn(nullptr, &n);
    std::vector<uint8_t> b(n);
    fn(b.data(), &n);
    return b;
}

int run_tcp(const Opts &o, int argc, char **argv) {
    const bool peer = o.peer_port != 0;
    tp::Bootstrap::Options bo;
    bo.size = 2;
    bo.timeout = std::chrono::seconds(300);
    std::unique_ptr<tp::Bootstrap> boot;
    pid_t child = -1;
    if (peer) {
        bo.port = static_cast<uint16_t>(o.peer_port);
        bo.rank = 1;
        if (tp::Bootstrap::join(bo, &boot) != GDX_OK) return 1;
    } else {
        if (tp::Bootstrap::listen(bo, &boot) != GDX_OK) return 1;
        std::vector<std::string> args(argv, argv + argc);
        args.push_back("--peer");
        args.push_back(std::to_string(boot->port()));
        std::vector<char *> av;
        for (std::string &a : args) av.push_back(a.data());
        av.push_back(nullptr);
        if (posix_spawn(&child, o.self.c_str(), nullptr, nullptr, av.data(), environ) != 0) return 1;
    }
    uint64_t max = 0;
    for (uint64_t s : o.sizes) max = std::max(max, s);
    Side s;
    gdx_config_t *cfg = nullptr;
    gdx_config_create(&cfg);
    gdx_config_set(cfg, "GDX_TLS", "tcp");
    for (auto &[k, v] : config_of(o)) gdx_config_set(cfg, k.c_str(), v.c_str());
    gdx_status_t st = gdx_context_create(cfg, &s.ctx);
    gdx_config_destroy(cfg);
    Buffer buf;
    if (st != GDX_OK || !buf.alloc(o.mem, max, peer ? o.peer_gpu : o.gpu))
        return std::fprintf(stderr, "setup failed: %s\n", gdx_last_error()), 1;
    if (gdx_mem_reg(s.ctx, buf.p, max, GDX_ACCESS_ALL, &s.mem) != GDX_OK || gdx_ep_create(s.ctx, &s.ep) != GDX_OK)
        return std::fprintf(stderr, "setup failed: %s\n", gdx_last_error()), 1;
    std::vector<uint8_t> addr = blob([&](void *b, size_t *n) { return gdx_ep_address(s.ep, b, n); });
    std::vector<uint8_t> key = blob([&](void *b, size_t *n) { return gdx_mem_pack(s.mem, b, n); });
    std::vector<std::vector<uint8_t>> a, k;
    if (boot->allgather(addr, &a) != GDX_OK || boot->allgather(key, &k) != GDX_OK) return 1;
    int other = peer ? 0 : 1;
    if (gdx_ep_connect(s.ep, a[other].data(), a[other].size()) != GDX_OK) return 1;
    while (gdx_ep_state(s.ep) == GDX_INPROGRESS) gdx_progress(s.ctx);
    if (gdx_ep_state(s.ep) != GDX_OK || gdx_rkey_unpack(s.ep, k[other].data(), k[other].size(), &s.rkey) != GDX_OK)
        return std::fprintf(stderr, "connect failed: %s\n", gdx_last_error()), 1;
    for (size_t idx = 0; idx < o.sizes.size(); ++idx) {
        uint64_t size = o.sizes[idx];
        std::vector<uint8_t> host(max);
        for (uint64_t i = 0; i < max; ++i) host[i] = pattern(peer ? 1000 + idx : idx, i);
        if (buf.copy_in(host) != GDX_OK) return 1;
        std::vector<std::vector<uint8_t>> sync, res;
        if (peer) {
            // Progress (copy-outs, grants) until rank 0 has finished this size, then check what arrived.
            std::atomic<bool> done{false};
            std::thread t([&] { boot->allgather({}, &sync), done = true; });
            while (!done) gdx_progress(s.ctx);
            t.join();
            buf.copy_out(&host);
            uint64_t wrong = 0;
            for (uint64_t i = 0; i < size; ++i) wrong += host[i] != pattern(idx, i);
            std::string w = std::to_string(wrong);
            boot->allgather(std::vector<uint8_t>(w.begin(), w.end()), &res);
            continue;
        }
        std::vector<gdx_request_t *> reqs(o.window, nullptr);
        gdx_path_info_t path{};
        double secs = 0;
        uint64_t iters = timed_loop(
            o, &secs,
            [&](unsigned w) {
                if (reqs[w] != nullptr) gdx_request_path(reqs[w], &path), gdx_request_free(reqs[w]);
                return gdx_put(s.ep, s.mem, 0, s.rkey, 0, size, &reqs[w]) == GDX_OK;
            },
            [&] { gdx_progress(s.ctx); },
            [&](unsigned w) { return reqs[w] != nullptr && gdx_request_test(reqs[w]) != GDX_INPROGRESS; });
        bool failed = false;
        for (gdx_request_t *r : reqs)
            if (r != nullptr) failed |= gdx_request_test(r) != GDX_OK, gdx_request_path(r, &path), gdx_request_free(r);
        boot->allgather({}, &sync);
        boot->allgather({}, &res);
        std::string wrong(res[1].begin(), res[1].end());
        std::printf("%-5s %-8s %10s %6s %5u %6u %7llu %9.2f %9s %6s %11s  %s%s\n", "tcp", o.mem.c_str(),
                    size_text(size).c_str(), size_text(path.frag_size).c_str(), path.depth, o.window,
                    static_cast<unsigned long long>(iters), iters * size / secs / 1e9, "-", "-", wrong.c_str(),
                    path.text, failed || iters == 0 ? "  [A REQUEST FAILED]" : "");
        std::fflush(stdout);
    }
    if (peer) return 0;
    int status = 0;
    waitpid(child, &status, 0);
    return 0;
}

} // namespace

int main(int argc, char **argv) {
    Opts o;
    o.self = "/proc/self/exe";
    std::string sizes = "1M,4M,16M,64M,256M";
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&]() -> const char * { return i + 1 < argc ? argv[++i] : ""; };
        if (a == "--mode") o.mode = next();
        else if (a == "--mem") o.mem = next();
        else if (a == "--sizes") sizes = next();
        else if (a == "--stage") o.stage = next();
        else if (a == "--frag") o.frag = parse_size(next());
        else if (a == "--depth") o.depth = static_cast<unsigned>(std::atoi(next()));
        else if (a == "--pool") o.pool = static_cast<unsigned>(std::atoi(next()));
        else if (a == "--window") o.window = static_cast<unsigned>(std::max(1, std::atoi(next())));
        else if (a == "--seconds") o.seconds = std::atof(next());
        else if (a == "--gpu") o.gpu = std::atoi(next());
        else if (a == "--peer-gpu") o.peer_gpu = std::atoi(next());
        else if (a == "--peer") o.peer_port = std::atoi(next());
        else return std::fprintf(stderr, "unknown option %s (see the comment at the top of staging_bench.cpp)\n", a.c_str()), 2;
    }
    for (size_t at = 0; at < sizes.size();) {
        size_t comma = sizes.find(',', at);
        std::string one = sizes.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
        size_t colon = one.find(':');
        if (colon == std::string::npos) {
            o.sizes.push_back(parse_size(one.c_str()));
        } else {
            for (uint64_t s = parse_size(one.substr(0, colon).c_str()); s <= parse_size(one.substr(colon + 1).c_str()); s *= 2)
                o.sizes.push_back(s);
        }
        at = comma == std::string::npos ? sizes.size() : comma + 1;
    }
#if GDX_HAVE_CUDA_H
    if (o.mem != "host" && cuda::driver() == nullptr) {
        std::printf("# staging_bench: no GPU here (%s): use --mem host\n", cuda::why_unavailable().c_str());
        return 0;
    }
    if (o.mem != "host" && o.peer_gpu >= cuda::driver()->device_count) o.peer_gpu = 0;
#endif
    if (o.stage != "both" && o.stage != "local" && o.stage != "remote")
        return std::fprintf(stderr, "--stage %s: accepted are both, local, remote\n", o.stage.c_str()), 2;
    if (o.peer_port == 0) header(o, argc, argv);
    if (o.mode == "null") return run_null(o);
    if (o.mode == "tcp") return run_tcp(o, argc, argv);
    std::fprintf(stderr, "unknown mode %s\n", o.mode.c_str());
    return 2;
}
