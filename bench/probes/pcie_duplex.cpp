// Probe (not part of gdx; a diagnosis, never a bar): how fast can one GPU move bytes D2H and H2D at once, the two
// PCIe crossings every staged byte between two processes of one host makes? Per chunk size: D2H alone, H2D alone,
// and both at once (each direction on two streams, so a copy's set-up overlaps the previous copy), pinned memory,
// 1 s per figure. Build: g++ -O2 -std=c++17 -I/usr/local/cuda/include pcie_duplex.cpp -lcuda
#include <cuda.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                                                        \
    do {                                                                                                             \
        CUresult r_ = (x);                                                                                           \
        if (r_ != CUDA_SUCCESS) {                                                                                    \
            const char *s_ = nullptr;                                                                                \
            cuGetErrorString(r_, &s_);                                                                               \
            std::fprintf(stderr, "%s failed: %s\n", #x, s_ ? s_ : "?");                                              \
            std::exit(1);                                                                                            \
        }                                                                                                            \
    } while (0)

using Clock = std::chrono::steady_clock;

struct Dir {
    CUdeviceptr dev;
    void *host;
    CUstream s[2];
    bool to_host;
};

// Keeps `depth` copies of `chunk` bytes queued per stream for `seconds`; returns GB/s per direction.
static void run(std::vector<Dir *> dirs, size_t chunk, size_t span, double seconds, double *gbps) {
    const int depth = 4;
    std::vector<size_t> bytes(dirs.size(), 0);
    std::vector<std::vector<CUevent>> evs(dirs.size());
    for (auto &v : evs) {
        v.resize(2 * depth);
        for (auto &e : v) CK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    }
    std::vector<size_t> next(dirs.size(), 0);
    auto issue = [&](size_t d, size_t k) {
        Dir &x = *dirs[d];
        size_t off = (next[d]++ * chunk) % (span - chunk + 1);
        CUstream s = x.s[k % 2];
        if (x.to_host) CK(cuMemcpyDtoHAsync(static_cast<char *>(x.host) + off, x.dev + off, chunk, s));
        else CK(cuMemcpyHtoDAsync(x.dev + off, static_cast<char *>(x.host) + off, chunk, s));
        CK(cuEventRecord(evs[d][k], s));
    };
    for (size_t d = 0; d < dirs.size(); ++d)
        for (size_t k = 0; k < evs[d].size(); ++k) issue(d, k);
    auto t0 = Clock::now();
    while (std::chrono::duration<double>(Clock::now() - t0).count() < seconds) {
        for (size_t d = 0; d < dirs.size(); ++d)
            for (size_t k = 0; k < evs[d].size(); ++k) {
                CUresult r = cuEventQuery(evs[d][k]);
                if (r == CUDA_ERROR_NOT_READY) continue;
                CK(r);
                bytes[d] += chunk;
                issue(d, k);
            }
    }
    double t = std::chrono::duration<double>(Clock::now() - t0).count();
    CK(cuCtxSynchronize());
    for (size_t d = 0; d < dirs.size(); ++d) gbps[d] = static_cast<double>(bytes[d]) / t / 1e9;
    for (auto &v : evs)
        for (auto &e : v) cuEventDestroy(e);
}

int main(int argc, char **argv) {
    int gpu = argc > 1 ? std::atoi(argv[1]) : 0;
    CK(cuInit(0));
    CUdevice d;
    CK(cuDeviceGet(&d, gpu));
    CUcontext ctx;
    CK(cuDevicePrimaryCtxRetain(&ctx, d));
    CK(cuCtxSetCurrent(ctx));
    char name[128];
    CK(cuDeviceGetName(name, sizeof(name), d));
    const size_t span = size_t(256) << 20;
    Dir down{}, up{};
    CK(cuMemAlloc(&up.dev, span));
    CK(cuMemAlloc(&down.dev, span));
    CK(cuMemHostAlloc(&up.host, span, CU_MEMHOSTALLOC_PORTABLE));
    CK(cuMemHostAlloc(&down.host, span, CU_MEMHOSTALLOC_PORTABLE));
    up.to_host = true;
    for (Dir *x : {&up, &down})
        for (auto &s : x->s) CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    std::printf("# pcie_duplex on GPU %d (%s): GB/s (1e9 B/s), 4 copies queued per stream, two streams per direction\n",
                gpu, name);
    std::printf("%-10s %10s %10s %12s %12s %12s\n", "chunk", "D2H-alone", "H2D-alone", "D2H-duplex", "H2D-duplex",
                "min-duplex");
    for (size_t chunk : {size_t(256) << 10, size_t(1) << 20, size_t(4) << 20, size_t(16) << 20}) {
        double a[1], b[1], c[2];
        run({&up}, chunk, span, 1.0, a);
        run({&down}, chunk, span, 1.0, b);
        run({&up, &down}, chunk, span, 1.0, c);
        std::printf("%-10zu %10.2f %10.2f %12.2f %12.2f %12.2f\n", chunk, a[0], b[0], c[0], c[1],
                    c[0] < c[1] ? c[0] : c[1]);
    }
    return 0;
}
