// intranode_bench: the peer side of every mode, the GPU mode (cuda_ipc P2P) and GPU helpers. Staged GPU memory is
// measured through the product's path only (gdx_perftest -x shm: gdx_put -> staging engine -> shm).
#include "intranode_bench.h"

#include "core/error.h"
#include "memtype/memtype.h"
#if GDX_HAVE_CUDA_H
#include "memtype/cuda_driver.h"
#endif

#include <cstdio>
#include <cstring>

namespace gdx::bench {

int gpu_count() {
#if GDX_HAVE_CUDA_H
    const cuda::DriverApi *api = cuda::driver();
    return api ? api->device_count : 0;
#else
    return 0;
#endif
}

mem::MemInfo gpu_info(void *ptr) {
    static mem::Detector det;
    mem::MemInfo mi;
    det.detect_one(ptr, &mi);
    return mi;
}

#if GDX_HAVE_CUDA_H
bool gpu_alloc(int device, size_t len, void **ptr) {
    cuda::DeviceScope s(device);
    CUdeviceptr p = 0;
    if (!s.ok() || cuda::driver()->cuMemAlloc(&p, len) != CUDA_SUCCESS) return false;
    *ptr = reinterpret_cast<void *>(p);
    return true;
}
void gpu_free(int device, void *ptr) {
    cuda::DeviceScope s(device);
    cuda::driver()->cuMemFree(reinterpret_cast<CUdeviceptr>(ptr));
}
bool gpu_memset(int device, void *ptr, int v, size_t len) {
    cuda::DeviceScope s(device);
    return cuda::driver()->cuMemsetD8(reinterpret_cast<CUdeviceptr>(ptr), static_cast<unsigned char>(v), len) ==
           CUDA_SUCCESS;
}
#else
bool gpu_alloc(int, size_t, void **) { return false; }
void gpu_free(int, void *) {}
bool gpu_memset(int, void *, int, size_t) { return false; }
#endif

namespace {

constexpr size_t kGpuBuf = (256u << 20) + 4096;
uint64_t g_am[8];          // AMs received per id
uint64_t g_pong_size = 0;  // ipc peer: a ping asked for this many bytes back
size_t g_last_len = 0;     // shm peer: echo as many bytes as the ping had
void on_am(void *arg, tp::Endpoint *, const void *d, size_t n) {
    ++g_am[reinterpret_cast<uintptr_t>(arg)];
    g_last_len = n;
    if (n >= 8) std::memcpy(&g_pong_size, d, 8);
}

struct Reg {
    std::unique_ptr<tp::MemHandle> mh;
    std::vector<uint8_t> packed;
};
Reg reg(Transport &t, void *p, size_t len, const mem::MemInfo &mi) {
    Reg r;
    if (t.iface->md().mem_reg(p, len, mi, tp::kAccessAll, &r.mh) != GDX_OK) std::exit(2);
    r.packed.resize(t.iface->md().rkey_packed_size());
    r.mh->pack_rkey(r.packed);
    return r;
}


} // namespace

// ---- peer ---------------------------------------------------------------------------------------------------

int peer_main(const std::string &mode, int gpu) {
    Transport t;
    bool ipc = mode == "ipc";
    open_or_die(ipc ? "cuda_ipc" : "shm", ipc ? "GPU" + std::to_string(gpu) : "memory", &t);
    for (uintptr_t id = 1; id < 8; ++id) t.iface->set_am_handler(static_cast<uint8_t>(id), on_am, reinterpret_cast<void *>(id));
    void *buf = nullptr;
    mem::MemInfo mi;
    std::vector<uint8_t> host;
    if (mode == "shm") {
        host.assign(64u << 20, 0);
        buf = host.data();
    } else if (!gpu_alloc(gpu, kGpuBuf, &buf)) {
        std::fprintf(stderr, "peer: no GPU %d memory\n", gpu);
        return 2;
    } else {
        mi = gpu_info(buf);
    }
    Reg r = reg(t, buf, mode == "shm" ? host.size() : kGpuBuf, mi);
    auto addr = t.ep->address();
    peer_write_line("addr " + hex(addr.data(), addr.size()));
    char a[32];
    std::snprintf(a, sizeof(a), "%llx", static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(buf)));
    peer_write_line(std::string("buf ") + a + " " + hex(r.packed.data(), r.packed.size()));
    std::string line, inbuf;
    uint64_t lead_addr = 0;
    std::unique_ptr<tp::RemoteKey> lead_key;
    uint64_t seen_bw = 0;
    for (;;) {
        t.iface->progress();
        if (ipc && g_am[1] > 0 && lead_key) { // ping: the same bytes back into the lead's buffer, then the pong
            --g_am[1];
            size_t n = g_pong_size;
            issue(*t.iface, [&] { return t.ep->put(buf, n, nullptr, lead_addr, *lead_key, nullptr); });
            issue(*t.iface, [&] { return t.ep->am_short(1, &n, 8); });
        }
        if (g_am[2] > seen_bw) { // bandwidth run finished on the lead's side: the data landed, answer
            seen_bw = g_am[2];
            issue(*t.iface, [&] { return t.ep->am_short(3, nullptr, 0); });
        }
        if (mode == "shm" && g_am[1] > 0) { // AM ping-pong: echo
            --g_am[1];
            size_t n = g_last_len;
            issue(*t.iface, [&] {
                return n <= 240 ? t.ep->am_short(1, host.data(), n) : t.ep->am_bcopy(1, host.data(), n);
            });
        }
        if (!peer_read_line(&line, &inbuf)) continue;
        std::vector<std::string> w = words(line);
        if (w.empty()) continue;
        if (w[0] == "exit") break;
        if (w[0] == "connect") {
            connect_or_die(t, unhex(w[1]));
            if (w.size() >= 4) {
                lead_addr = std::stoull(w[2], nullptr, 16);
                t.iface->md().rkey_unpack(unhex(w[3]), &lead_key);
            }
            peer_write_line("ok");
        }
    }
    r.mh.reset();
    t.ep.reset();
    if (mode != "shm") gpu_free(gpu, buf);
    return 0;
}

// ---- lead: cuda_ipc -----------------------------------------------------------------------------------------

int lead_ipc(int a, int b, int scale) {
    if (gpu_count() < std::max(a, b) + 1) {
        row("cuda_ipc GPU->GPU", "skipped", "-", 0, "", "needs GPUs " + std::to_string(a) + "," + std::to_string(b));
        return 0;
    }
    Transport t;
    open_or_die("cuda_ipc", "GPU" + std::to_string(a), &t);
    for (uintptr_t id = 1; id < 8; ++id) t.iface->set_am_handler(static_cast<uint8_t>(id), on_am, reinterpret_cast<void *>(id));
    void *buf = nullptr;
    if (!gpu_alloc(a, kGpuBuf, &buf)) return 2;
    gpu_memset(a, buf, 1, kGpuBuf);
    Reg r = reg(t, buf, kGpuBuf, gpu_info(buf));
    auto peer = Peer::spawn({"--role", "peer", "--mode", "ipc", "--gpu", std::to_string(b)}, {});
    std::vector<std::string> pa = words(peer->recv(60)), pb = words(peer->recv(60));
    if (pa.size() != 2 || pb.size() != 3) return std::fprintf(stderr, "ipc peer did not start\n"), 2;
    char la[32];
    std::snprintf(la, sizeof(la), "%llx", static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(buf)));
    auto addr = t.ep->address();
    peer->send("connect " + hex(addr.data(), addr.size()) + " " + la + " " + hex(r.packed.data(), r.packed.size()));
    connect_or_die(t, unhex(pa[1]));
    if (peer->recv(60, [&] { t.iface->progress(); }) != "ok") return 2;
    uint64_t raddr = std::stoull(pb[1], nullptr, 16);
    std::unique_ptr<tp::RemoteKey> rk;
    if (t.iface->md().rkey_unpack(unhex(pb[2]), &rk) != GDX_OK) return 2;
    std::string path = "cuda_ipc GPU" + std::to_string(a) + "->GPU" + std::to_string(b);
    // Latency: put + AM (the AM waits for the put's bytes); the peer answers the same way. Half round trip.
    for (size_t size : {size_t{8}, size_t{1024}}) {
        std::vector<double> half;
        int iters = 5000 * scale;
        for (int i = -500; i < iters; ++i) {
            uint64_t want = g_am[1] + 1, n = size;
            auto t0 = Clock::now();
            if (issue(*t.iface, [&] { return t.ep->put(buf, size, nullptr, raddr, *rk, nullptr); }) < 0) return 2;
            issue(*t.iface, [&] { return t.ep->am_short(1, &n, 8); });
            while (g_am[1] < want) t.iface->progress();
            if (i >= 0) half.push_back(secs(Clock::now() - t0) * 1e6 / 2);
        }
        row(path.c_str(), "put lat", size_name(size), median(half), "us",
            "put+AM ping-pong, half round trip, median of " + std::to_string(iters));
    }
    // Bandwidth as the receiver sees it: N puts, then an AM ordered after them; timed until the peer answers it.
    for (size_t size : {size_t{1} << 20, size_t{16} << 20, size_t{256} << 20}) {
        size_t count = std::max<size_t>(16, (size_t{8} << 30) * scale / size);
        size_t window = size <= (1u << 20) ? 32 : size <= (16u << 20) ? 8 : 2;
        std::vector<double> reps;
        for (int rep = 0; rep < 4; ++rep) {
            uint64_t want = g_am[3] + 1;
            auto t0 = Clock::now();
            double s = windowed(t, count, window, [&](tp::Completion *c) {
                return t.ep->put(buf, size, nullptr, raddr, *rk, c);
            });
            if (s < 0) return 2;
            issue(*t.iface, [&] { return t.ep->am_short(2, nullptr, 0); });
            while (g_am[3] < want) t.iface->progress();
            if (rep > 0) reps.push_back(count * size / secs(Clock::now() - t0) / 1e9); // rep 0 warms up
        }
        row(path.c_str(), "put bw", size_name(size), median(reps), "GB/s",
            "window " + std::to_string(window) + ", " + std::to_string(count) + " puts, receiver's view, median of 3");
    }
    peer->send("exit");
    peer.reset();
    r.mh.reset();
    t.ep.reset();
    gpu_free(a, buf);
    return 0;
}

} // namespace gdx::bench
