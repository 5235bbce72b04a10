// gdx_perftest's command line: what to measure (tests, sizes, iterations), with which memory on each side,
// over which transport and path, and how to launch (server, client, loopback, mpirun). Parsing never exits:
// it returns false and says what was wrong, so main() prints one clear line and exits with status 2.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gdx::perf {

// am_bw and am_lat are gone: transport active messages are reached only through the UCX module (ucx_perftest
// measures them), not through gdx.h (README.md).
enum class Test : uint8_t { PutBw, GetBw, PutLat };
inline constexpr Test kAllTests[] = {Test::PutBw, Test::GetBw, Test::PutLat};
const char *test_name(Test t);
bool test_is_latency(Test t);
std::optional<Test> parse_test(std::string_view s);

// Memory kinds a side's buffer can be allocated as (ucx_perftest -m / -M).
enum class MemKindOpt : uint8_t { Host, HostPinned, Cuda, CudaManaged, CudaVmm };
const char *mem_kind_name(MemKindOpt k);
bool mem_kind_is_gpu(MemKindOpt k); // needs a CUDA driver and a GPU (host-pinned included)

struct MemSpec {
    MemKindOpt kind = MemKindOpt::Host;
    int gpu = 0;                // ordinal for the cuda kinds (and the device host-pinned memory is mapped for)
    std::string text() const;   // "host", "cuda:1"
    bool operator==(const MemSpec &) const = default;
};
// "host", "host-pinned", "cuda", "cuda:1", "cuda-managed:0", "cuda-vmm:2".
bool parse_mem_spec(std::string_view s, MemSpec *out, std::string *why);

enum class PathMode : uint8_t { Auto, Direct, Staged };
const char *path_mode_name(PathMode m);

// Sizes: "1:1G" (powers of two from 1 to 1G, both ends rounded to powers of two), "8,4K,1M" (a list), or one
// size. Each size takes k/K, M, G (binary multiples). Zero, "4Q" and ranges that run backwards are refused.
bool parse_sizes(std::string_view s, std::vector<uint64_t> *out, std::string *why);
std::string size_text(uint64_t bytes); // 4096 -> "4K", 1000 -> "1000"

inline constexpr uint64_t kMaxSize = 1ull << 34; // 16G: beyond this a buffer per side is not a benchmark

enum class Role : uint8_t { Server, Client, Loopback };

// One run's parameters. The client's options are authoritative: it sends them to the server (serialize()),
// which adopts them with the memory sides swapped.
struct Options {
    std::vector<Test> tests{Test::PutBw, Test::PutLat};
    std::vector<uint64_t> sizes;        // empty until defaults are applied
    uint64_t iterations = 0;            // 0 = automatic per size (see iterations_for)
    uint64_t warmup = UINT64_MAX;       // UINT64_MAX = automatic
    uint64_t window = 0;                // operations in flight per bandwidth iteration; 0 = automatic
    std::vector<std::pair<MemSpec, MemSpec>> mem_pairs; // (local, remote) per run; empty = defaults
    bool mem_given = false;             // -m or -M was on the command line
    std::string transport = "auto";     // tcp | shm | cuda_ipc | rc | auto
    PathMode path = PathMode::Auto;
    bool validate = false;
    bool csv = false;
    std::string json_file;
    bool quiet_decisions = false;       // --no-decisions: skip the gdx_info -t style lines at start

    // launch
    Role role = Role::Server;
    std::string host;                   // client: the server; server under mpirun: the address to listen on
    uint16_t port = 18515;              // ib_write_bw's default
    bool port_given = false;
    int report_fd = -1;                 // internal (loopback peer): write the bound port to this fd
    bool mpi = false;                   // launched by Open MPI (OMPI_COMM_WORLD_*)
    int mpi_rank = -1;
    double timeout_s = 60;              // no single wait (connect, a message, a completion) lasts longer
    std::string mps = "auto";           // --mps auto|no: CUDA MPS for a loopback run on one GPU (mps.h)

    uint64_t iterations_for(Test t, uint64_t size) const;
    uint64_t warmup_for(Test t, uint64_t size) const;
    uint64_t window_for(Test t, uint64_t size) const; // 1 for the latency tests

    // The parameters the server needs, as one line of the same options (sides swapped by the reader).
    std::string serialize() const;
};

// Parses argv (argv[0] excluded) into *out. On false, *why is the message to print (without the program
// name); *usage_requested is set for -h. `env` supplies OMPI_COMM_WORLD_RANK/SIZE/LOCAL_SIZE (getenv when
// null) so the mpirun rules can be tested.
using EnvLookup = const char *(*)(const char *name);
bool parse_options(const std::vector<std::string> &args, Options *out, std::string *why, bool *usage_requested,
                   EnvLookup env = nullptr);

// Applies the parameters a client sent (its serialize() line) to a server's options: tests, sizes, counts,
// transport, path, validation; memory sides swapped. Launch options of the server are kept.
bool apply_client_spec(std::string_view line, Options *server, std::string *why);

void print_usage(FILE *f);

} // namespace gdx::perf
