// nccl_anchor: the NCCL numbers gdx's intra-node paths are compared with. Two processes (this binary started
// again with exec), GPU a -> GPU b, ncclSend/ncclRecv on one stream each:
//   --mode p2p     NCCL's default (NVLink / PCIe P2P)
//   --mode shm     NCCL_P2P_DISABLE=1: staged through shared host memory
//   --mode socket  NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1: through the network transport (TCP loopback)
// Rows: 1 KiB latency (ping-pong, stream synchronized, half round trip) and bandwidth 64 KiB..256 MiB as the
// receiver sees it (N sends, then a 1-byte answer from the receiver ends the clock).
// libnccl.so.2 is opened at run time (nothing links it); without it the program says so and exits 0. nccl.h is
// used when CMake found it (GDX_HAVE_NCCL_H); otherwise the few stable NCCL 2.x declarations below are.
//   nccl_anchor [--mode p2p|shm|socket] [--gpus A,B] [--scale N]
#include "memtype/cuda_driver.h"
#include "support/text.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#if GDX_HAVE_NCCL_H
#include <nccl.h>
#else
// NCCL 2.x ABI (unchanged since 2.0): opaque communicator, 128-byte unique id, int results, ncclInt8 = 0.
typedef struct ncclComm *ncclComm_t;
typedef struct {
    char internal[128];
} ncclUniqueId;
typedef int ncclResult_t;
typedef int ncclDataType_t;
constexpr ncclDataType_t ncclInt8 = 0;
#endif

extern char **environ;

namespace {

using Clock = std::chrono::steady_clock;

struct Nccl {
    ncclResult_t (*GetVersion)(int *);
    ncclResult_t (*GetUniqueId)(ncclUniqueId *);
    ncclResult_t (*CommInitRank)(ncclComm_t *, int, ncclUniqueId, int);
    ncclResult_t (*CommDestroy)(ncclComm_t);
    ncclResult_t (*Send)(const void *, size_t, ncclDataType_t, int, ncclComm_t, CUstream);
    ncclResult_t (*Recv)(void *, size_t, ncclDataType_t, int, ncclComm_t, CUstream);
    const char *(*GetErrorString)(ncclResult_t);
} nccl;

bool load_nccl(std::string *why) {
    void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
        *why = dlerror();
        return false;
    }
    auto sym = [&](const char *n) { return dlsym(h, n); };
    nccl.GetVersion = reinterpret_cast<decltype(nccl.GetVersion)>(sym("ncclGetVersion"));
    nccl.GetUniqueId = reinterpret_cast<decltype(nccl.GetUniqueId)>(sym("ncclGetUniqueId"));
    nccl.CommInitRank = reinterpret_cast<decltype(nccl.CommInitRank)>(sym("ncclCommInitRank"));
    nccl.CommDestroy = reinterpret_cast<decltype(nccl.CommDestroy)>(sym("ncclCommDestroy"));
    nccl.Send = reinterpret_cast<decltype(nccl.Send)>(sym("ncclSend"));
    nccl.Recv = reinterpret_cast<decltype(nccl.Recv)>(sym("ncclRecv"));
    nccl.GetErrorString = reinterpret_cast<decltype(nccl.GetErrorString)>(sym("ncclGetErrorString"));
    if (!nccl.GetUniqueId || !nccl.CommInitRank || !nccl.Send || !nccl.Recv || !nccl.CommDestroy) {
        *why = "libnccl.so.2 lacks ncclSend/ncclRecv (NCCL < 2.7)";
        return false;
    }
    return true;
}

#define NCCL_CHECK(x)                                                                                        \
    do {                                                                                                     \
        ncclResult_t r_ = (x);                                                                               \
        if (r_ != 0) {                                                                                       \
            std::fprintf(stderr, "%s: %s\n", #x, nccl.GetErrorString ? nccl.GetErrorString(r_) : "error");   \
            std::exit(2);                                                                                    \
        }                                                                                                    \
    } while (0)
#define CU_CHECK(x)                                                                                          \
    do {                                                                                                     \
        CUresult r_ = (x);                                                                                   \
        if (r_ != CUDA_SUCCESS) {                                                                            \
            std::fprintf(stderr, "%s: %s\n", #x, gdx::cuda::error_text(r_).c_str());                        \
            std::exit(2);                                                                                    \
        }                                                                                                    \
    } while (0)

std::string size_name(size_t s) {
    if (s >= (1u << 20)) return std::to_string(s >> 20) + "MiB";
    if (s >= 1024) return std::to_string(s >> 10) + "KiB";
    return std::to_string(s) + "B";
}

void row(const std::string &path, const char *metric, size_t size, double v, const char *unit,
         const std::string &detail) {
    std::printf("| %-26s | %-10s | %8s | %10.2f %-4s | %s\n", path.c_str(), metric, size_name(size).c_str(), v, unit,
                detail.c_str());
    std::fflush(stdout);
}

int run(int rank, int gpu, const ncclUniqueId &id, const std::string &mode, int scale, int out_fd) {
    const gdx::cuda::DriverApi *api = gdx::cuda::driver();
    CU_CHECK(gdx::cuda::bind_device(gpu));
    CUstream s;
    CU_CHECK(api->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    const size_t kMax = 256u << 20;
    CUdeviceptr buf;
    CU_CHECK(api->cuMemAlloc(&buf, kMax));
    CU_CHECK(api->cuMemsetD8(buf, static_cast<unsigned char>(rank + 1), kMax));
    ncclComm_t comm;
    NCCL_CHECK(nccl.CommInitRank(&comm, 2, id, rank));
    int peer = 1 - rank;
    void *p = reinterpret_cast<void *>(buf);
    std::string path = "nccl " + mode;
    // 1 KiB latency: ping-pong, each step synchronized (what a caller waiting for the bytes sees).
    {
        const size_t n = 1024;
        int iters = 2000 * scale;
        std::vector<double> half;
        for (int i = -200; i < iters; ++i) {
            auto t0 = Clock::now();
            if (rank == 0) {
                NCCL_CHECK(nccl.Send(p, n, ncclInt8, peer, comm, s));
                NCCL_CHECK(nccl.Recv(p, n, ncclInt8, peer, comm, s));
                CU_CHECK(api->cuStreamSynchronize(s));
            } else {
                NCCL_CHECK(nccl.Recv(p, n, ncclInt8, peer, comm, s));
                CU_CHECK(api->cuStreamSynchronize(s));
                NCCL_CHECK(nccl.Send(p, n, ncclInt8, peer, comm, s));
                CU_CHECK(api->cuStreamSynchronize(s));
            }
            if (i >= 0) half.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / 2);
        }
        std::sort(half.begin(), half.end());
        if (rank == 0) row(path, "lat", n, half[half.size() / 2], "us", "send/recv ping-pong, half round trip");
    }
    for (size_t size : {size_t{64} << 10, size_t{1} << 20, size_t{16} << 20, size_t{256} << 20}) {
        size_t count = std::max<size_t>(8, (size_t{4} << 30) * scale / size / (mode == "socket" ? 8 : 1));
        std::vector<double> reps;
        for (int rep = 0; rep < 4; ++rep) {
            auto t0 = Clock::now();
            for (size_t i = 0; i < count; ++i) {
                if (rank == 0) NCCL_CHECK(nccl.Send(p, size, ncclInt8, peer, comm, s));
                else NCCL_CHECK(nccl.Recv(p, size, ncclInt8, peer, comm, s));
            }
            // The receiver answers once everything arrived: the sender's clock stops at the receiver's view.
            if (rank == 0) NCCL_CHECK(nccl.Recv(p, 1, ncclInt8, peer, comm, s));
            else NCCL_CHECK(nccl.Send(p, 1, ncclInt8, peer, comm, s));
            CU_CHECK(api->cuStreamSynchronize(s));
            double sec = std::chrono::duration<double>(Clock::now() - t0).count();
            if (rep > 0) reps.push_back(count * size / sec / 1e9);
        }
        std::sort(reps.begin(), reps.end());
        if (rank == 0)
            row(path, "bw", size, reps[reps.size() / 2], "GB/s",
                std::to_string(count) + " sends, receiver's view, median of 3");
    }
    nccl.CommDestroy(comm);
    api->cuMemFree(buf);
    api->cuStreamDestroy(s);
    (void)out_fd;
    return 0;
}

} // namespace

int main(int argc, char **argv) {
    std::string mode = "p2p", idhex;
    int rank = 0, gpu_a = 0, gpu_b = 1, scale = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string k = argv[i], v = argv[i + 1];
        if (k == "--mode") mode = v;
        else if (k == "--rank") rank = std::atoi(v.c_str());
        else if (k == "--gpus") std::sscanf(v.c_str(), "%d,%d", &gpu_a, &gpu_b);
        else if (k == "--scale") scale = std::max(1, std::atoi(v.c_str()));
    }
    std::string why;
    if (!load_nccl(&why)) {
        std::printf("| nccl %-21s | skipped    |        - |            -      | libnccl.so.2: %s\n", mode.c_str(),
                    why.c_str());
        return 0;
    }
    if (gdx::cuda::driver() == nullptr || gdx::cuda::driver()->device_count < std::max(gpu_a, gpu_b) + 1) {
        std::printf("| nccl %-21s | skipped    |        - |            -      | needs GPUs %d,%d\n", mode.c_str(),
                    gpu_a, gpu_b);
        return 0;
    }
    ncclUniqueId id;
    if (rank == 1) { // the id arrives on stdin (a pipe from rank 0): not on a command line others can read
        char line[512] = {};
        if (read(0, line, sizeof(line) - 1) < static_cast<ssize_t>(2 * sizeof(id.internal))) return 2;
        idhex = line;
        for (size_t i = 0; i < sizeof(id.internal); ++i)
            id.internal[i] = static_cast<char>(std::stoi(idhex.substr(2 * i, 2), nullptr, 16));
        return run(1, gpu_b, id, mode, scale, -1);
    }
    // Both ranks must see the same transport switches before NCCL initializes.
    if (mode != "p2p") setenv("NCCL_P2P_DISABLE", "1", 1);
    if (mode == "socket") setenv("NCCL_SHM_DISABLE", "1", 1);
    int v = 0;
    if (nccl.GetVersion) nccl.GetVersion(&v);
    std::printf("# NCCL %d, mode %s, GPU %d -> GPU %d\n", v, mode.c_str(), gpu_a, gpu_b);
    NCCL_CHECK(nccl.GetUniqueId(&id)); // handed to rank 1 through a pipe on its stdin
    std::string hex = gdx::test::hex(id.internal, sizeof(id.internal)) + "\n";
    std::string self = "/proc/self/exe", gb = std::to_string(gpu_a) + "," + std::to_string(gpu_b),
                sc = std::to_string(scale);
    std::vector<std::string> args{self, "--rank", "1", "--mode", mode, "--gpus", gb, "--scale", sc};
    std::vector<char *> av;
    for (auto &a : args) av.push_back(a.data());
    av.push_back(nullptr);
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) != 0) return 2;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, pfd[0], 0);
    pid_t pid;
    int sp = posix_spawn(&pid, self.c_str(), &fa, nullptr, av.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    close(pfd[0]);
    if (sp != 0) return 2;
    if (write(pfd[1], hex.data(), hex.size()) != static_cast<ssize_t>(hex.size())) return 2;
    close(pfd[1]);
    int rc = run(0, gpu_a, id, mode, scale, 1);
    int st = 0;
    waitpid(pid, &st, 0);
    return rc | (WIFEXITED(st) ? WEXITSTATUS(st) : 1);
}
