#include "options.h"

#include <gdx/gdx_ext.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>

namespace gdx::perf {

namespace {

constexpr const char *kTestNames[] = {"put_bw", "get_bw", "put_lat"};
constexpr const char *kKindNames[] = {"host", "host-pinned", "cuda", "cuda-managed", "cuda-vmm"};
constexpr const char *kTransports[] = {"tcp", "shm", "cuda_ipc", "rc", "auto"};
constexpr const char *kAcceptedKinds = "host, host-pinned[:N], cuda[:N], cuda-managed[:N], cuda-vmm[:N]";

bool parse_u64(std::string_view s, uint64_t *out) {
    if (s.empty()) return false;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
    return ec == std::errc() && p == s.data() + s.size();
}

uint64_t round_down_pow2(uint64_t v) { return v == 0 ? 0 : (1ull << (63 - __builtin_clzll(v))); }

std::vector<std::string_view> split(std::string_view s, char sep) {
    std::vector<std::string_view> parts;
    size_t start = 0;
    for (;;) {
        size_t p = s.find(sep, start);
        parts.push_back(s.substr(start, p == std::string_view::npos ? std::string_view::npos : p - start));
        if (p == std::string_view::npos) break;
        start = p + 1;
    }
    return parts;
}

bool one_size(std::string_view s, uint64_t *out, std::string *why) {
    std::string reason;
    if (gdx_ext_size_parse(std::string(s).c_str(), out) != GDX_OK) reason = gdx_last_error();
    if (!reason.empty() || *out == UINT64_MAX) {
        *why = "bad size '" + std::string(s) + "' in -s: " + (reason.empty() ? "not a finite size" : reason) +
               " (a number with an optional K, M or G suffix, e.g. 8, 4K, 1M)";
        return false;
    }
    if (*out == 0) {
        *why = "bad size '" + std::string(s) + "' in -s: sizes start at 1 byte";
        return false;
    }
    if (*out > kMaxSize) {
        *why = "bad size '" + std::string(s) + "' in -s: larger than the " + size_text(kMaxSize) + " maximum";
        return false;
    }
    return true;
}

std::string join_accepted(const char *const *names, size_t n) {
    std::string s;
    for (size_t i = 0; i < n; ++i) s += (i ? ", " : "") + std::string(names[i]);
    return s;
}

} // namespace

const char *test_name(Test t) { return kTestNames[static_cast<unsigned>(t)]; }
bool test_is_latency(Test t) { return t == Test::PutLat; }
std::optional<Test> parse_test(std::string_view s) {
    for (Test t : kAllTests)
        if (s == test_name(t)) return t;
    return std::nullopt;
}

const char *mem_kind_name(MemKindOpt k) { return kKindNames[static_cast<unsigned>(k)]; }
bool mem_kind_is_gpu(MemKindOpt k) { return k != MemKindOpt::Host; }

std::string MemSpec::text() const {
    if (kind == MemKindOpt::Host) return "host";
    return std::string(mem_kind_name(kind)) + ":" + std::to_string(gpu);
}

bool parse_mem_spec(std::string_view s, MemSpec *out, std::string *why) {
    std::string_view name = s, index;
    size_t colon = s.find(':');
    if (colon != std::string_view::npos) {
        name = s.substr(0, colon);
        index = s.substr(colon + 1);
    }
    MemSpec m;
    bool found = false;
    for (unsigned k = 0; k < std::size(kKindNames); ++k) {
        if (name == kKindNames[k]) {
            m.kind = static_cast<MemKindOpt>(k);
            found = true;
        }
    }
    if (!found) {
        *why = "unknown memory kind '" + std::string(s) + "' (accepted: " + kAcceptedKinds + ")";
        return false;
    }
    if (colon != std::string_view::npos) {
        uint64_t g = 0;
        if (m.kind == MemKindOpt::Host) {
            *why = "memory kind 'host' takes no GPU index (got '" + std::string(s) + "'; use host-pinned:N for "
                   "pinned memory of GPU N)";
            return false;
        }
        if (!parse_u64(index, &g) || g > 1023) {
            *why = "bad GPU index '" + std::string(index) + "' in memory kind '" + std::string(s) +
                   "' (a GPU ordinal: 0, 1, ...)";
            return false;
        }
        m.gpu = static_cast<int>(g);
    }
    *out = m;
    return true;
}

const char *path_mode_name(PathMode m) {
    switch (m) {
    case PathMode::Auto: return "auto";
    case PathMode::Direct: return "direct";
    case PathMode::Staged: return "staged";
    }
    return "?";
}

std::string size_text(uint64_t bytes) { return gdx_ext_size_text(bytes); }

bool parse_sizes(std::string_view s, std::vector<uint64_t> *out, std::string *why) {
    out->clear();
    if (s.empty()) {
        *why = "empty size list in -s (e.g. -s 1:1G or -s 8,4K,1M)";
        return false;
    }
    size_t colon = s.find(':');
    if (colon != std::string_view::npos) {
        uint64_t lo = 0, hi = 0;
        if (s.find(',') != std::string_view::npos) {
            *why = "bad size list '" + std::string(s) + "' in -s: use either a range A:B or a list A,B,C";
            return false;
        }
        if (!one_size(s.substr(0, colon), &lo, why) || !one_size(s.substr(colon + 1), &hi, why)) return false;
        if (lo > hi) {
            *why = "bad size range '" + std::string(s) + "' in -s: the first size is larger than the last";
            return false;
        }
        // Powers of two from lo (rounded up) to hi (rounded down); a range inside one octave keeps lo.
        uint64_t p = round_down_pow2(lo);
        if (p < lo) p <<= 1;
        for (; p <= hi && p != 0; p <<= 1) out->push_back(p);
        if (out->empty()) out->push_back(lo);
        return true;
    }
    for (std::string_view part : split(s, ',')) {
        uint64_t v = 0;
        if (part.empty()) {
            *why = "bad size list '" + std::string(s) + "' in -s: empty element";
            return false;
        }
        if (!one_size(part, &v, why)) return false;
        out->push_back(v);
    }
    return true;
}

uint64_t Options::window_for(Test t, uint64_t size) const {
    if (test_is_latency(t)) return 1;
    if (window != 0) return window;
    return std::clamp<uint64_t>((64ull << 20) / size, 1, 32);
}

uint64_t Options::iterations_for(Test t, uint64_t size) const {
    if (iterations != 0) return iterations;
    // About 128M bytes per latency size and 1G per bandwidth size, within [3, 5000] iterations: small messages
    // run long enough for a stable rate, large ones stay bounded in time.
    if (test_is_latency(t)) return std::clamp<uint64_t>((128ull << 20) / size, 3, 5000);
    return std::clamp<uint64_t>((1ull << 30) / (size * window_for(t, size)), 3, 5000);
}

uint64_t Options::warmup_for(Test t, uint64_t size) const {
    if (warmup != UINT64_MAX) return warmup;
    return std::clamp<uint64_t>(iterations_for(t, size) / 10, 1, 100);
}

std::string Options::serialize() const {
    std::string s = "-t ";
    for (size_t i = 0; i < tests.size(); ++i) s += (i ? "," : "") + std::string(test_name(tests[i]));
    s += " -s ";
    for (size_t i = 0; i < sizes.size(); ++i) s += (i ? "," : "") + std::to_string(sizes[i]);
    if (iterations) s += " -n " + std::to_string(iterations);
    if (warmup != UINT64_MAX) s += " -w " + std::to_string(warmup);
    if (window) s += " -W " + std::to_string(window);
    if (!mem_pairs.empty()) s += " -m " + mem_pairs[0].first.text() + " -M " + mem_pairs[0].second.text();
    s += " -x " + transport + " --path " + path_mode_name(path);
    if (validate) s += " --validate";
    return s;
}

void print_usage(FILE *f) {
    std::fprintf(f,
        "Usage: gdx_perftest [options]              server: waits for one client (GDX_TCP_ADDR, port -p)\n"
        "       gdx_perftest HOST [options]         client: runs the tests against the server on HOST\n"
        "       gdx_perftest --loopback [options]   both sides on this machine in one command\n"
        "       mpirun -np 2 gdx_perftest [HOST]    rank 0 serves (on HOST when given), rank 1 runs the tests\n"
        "Tests and sizes:\n"
        "  -t, --test LIST       put_bw,get_bw,put_lat or all (default put_bw,put_lat)\n"
        "  -s, --sizes SPEC      A:B powers of two from A to B, or a list A,B,C; K/M/G suffixes\n"
        "                        (default 8:16M; --loopback 8:4M)\n"
        "  -n, --iters N         iterations per size (default: automatic, 3..5000 by size)\n"
        "  -w, --warmup N        warm-up iterations per size (default: a tenth of -n, 1..100)\n"
        "  -W, --window N        operations in flight per bandwidth iteration (default: 32, fewer above 2M)\n"
        "Memory and path:\n"
        "  -m, --mem KIND[:GPU]  this side's buffer: host, host-pinned, cuda, cuda-managed, cuda-vmm\n"
        "  -M, --remote-mem K    the peer's buffer (the client decides both; default host)\n"
        "  -x, --transport T     tcp, shm, cuda_ipc, rc or auto (default auto)\n"
        "      --path P          auto, direct (fail if any byte is staged) or staged (force staging)\n"
        "      --validate        fill a pattern per iteration, check it at the receiver (exit 3 on mismatch)\n"
        "Output:\n"
        "      --csv             CSV rows on stdout instead of the table\n"
        "      --json FILE       also write the results as JSON to FILE\n"
        "      --no-decisions    do not print the path decision lines at start\n"
        "Launch:\n"
        "  -p, --port N          TCP port of the server (default 18515; server: 0 picks a free one)\n"
        "      --timeout SEC     longest single wait: connection, control message, completion (default 60)\n"
        "      --mps auto|no     --loopback with both sides on one GPU: start a CUDA MPS daemon for the run\n"
        "                        unless one runs (auto, default), so the two processes do not time-slice\n"
        "  -h, --help            this help\n"
        "Exit status: 0 success, 1 run failed, 2 bad arguments, 3 data validation mismatch.\n");
}

bool parse_options(const std::vector<std::string> &args, Options *out, std::string *why, bool *usage_requested,
                   EnvLookup env) {
    if (env == nullptr) env = [](const char *n) -> const char * { return std::getenv(n); };
    *usage_requested = false;
    Options o;
    std::vector<std::string> positional;
    bool loopback = false, sizes_given = false;
    std::optional<MemSpec> local_mem, remote_mem;

    for (size_t i = 0; i < args.size(); ++i) {
        std::string arg = args[i], value;
        bool has_inline = false;
        if (arg.starts_with("--") && arg.find('=') != std::string::npos) {
            value = arg.substr(arg.find('=') + 1);
            arg = arg.substr(0, arg.find('='));
            has_inline = true;
        }
        auto need = [&](const char *what) -> bool {
            if (has_inline) return true;
            if (i + 1 >= args.size()) {
                *why = "option " + arg + " needs a value (" + what + ")";
                return false;
            }
            value = args[++i];
            return true;
        };
        auto count = [&](const char *what, uint64_t *dst, bool zero_ok) -> bool {
            if (!need(what)) return false;
            if (!parse_u64(value, dst) || (!zero_ok && *dst == 0) || *dst > (1ull << 40)) {
                *why = "bad value '" + value + "' for " + arg + ": expected " + what;
                return false;
            }
            return true;
        };
        if (arg == "-h" || arg == "--help") {
            *usage_requested = true;
            return false;
        } else if (arg == "-t" || arg == "--test") {
            if (!need("a test list")) return false;
            o.tests.clear();
            for (std::string_view t : split(value, ',')) {
                if (t == "all") {
                    o.tests.assign(std::begin(kAllTests), std::end(kAllTests));
                    continue;
                }
                auto parsed = parse_test(t);
                if (t == "am_bw" || t == "am_lat") {
                    *why = "test '" + std::string(t) + "' was removed: gdx.h has no active messages (only UCX reaches "
                           "gdx's, through the UCX module: measure them with ucx_perftest -t " + std::string(t) + ")";
                    return false;
                }
                if (!parsed) {
                    *why = "unknown test '" + std::string(t) + "' in -t (accepted: " +
                           join_accepted(kTestNames, std::size(kTestNames)) + ", all)";
                    return false;
                }
                if (std::find(o.tests.begin(), o.tests.end(), *parsed) == o.tests.end()) o.tests.push_back(*parsed);
            }
        } else if (arg == "-s" || arg == "--sizes") {
            if (!need("a size range or list") || !parse_sizes(value, &o.sizes, why)) return false;
            sizes_given = true;
        } else if (arg == "-n" || arg == "--iters") {
            if (!count("a positive number of iterations", &o.iterations, false)) return false;
        } else if (arg == "-w" || arg == "--warmup") {
            if (!count("a number of warm-up iterations (0 or more)", &o.warmup, true)) return false;
        } else if (arg == "-W" || arg == "--window") {
            if (!count("a positive window (operations in flight)", &o.window, false)) return false;
            if (o.window > 4096) {
                *why = "bad value '" + value + "' for " + arg + ": the window is at most 4096";
                return false;
            }
        } else if (arg == "-m" || arg == "--mem" || arg == "-M" || arg == "--remote-mem") {
            if (!need("a memory kind")) return false;
            MemSpec m;
            std::string reason;
            if (!parse_mem_spec(value, &m, &reason)) {
                *why = "in " + arg + ": " + reason;
                return false;
            }
            (arg == "-m" || arg == "--mem" ? local_mem : remote_mem) = m;
        } else if (arg == "-x" || arg == "--transport") {
            if (!need("a transport")) return false;
            if (std::find(std::begin(kTransports), std::end(kTransports), value) == std::end(kTransports)) {
                *why = "unknown transport '" + value + "' in -x (accepted: " +
                       join_accepted(kTransports, std::size(kTransports)) + ")";
                return false;
            }
            o.transport = value;
        } else if (arg == "--path") {
            if (!need("auto, direct or staged")) return false;
            if (value == "auto") o.path = PathMode::Auto;
            else if (value == "direct") o.path = PathMode::Direct;
            else if (value == "staged") o.path = PathMode::Staged;
            else {
                *why = "unknown path '" + value + "' in --path (accepted: auto, direct, staged)";
                return false;
            }
        } else if (arg == "--validate") {
            o.validate = true;
        } else if (arg == "--csv") {
            o.csv = true;
        } else if (arg == "--json") {
            if (!need("a file name")) return false;
            if (value.empty()) {
                *why = "option --json needs a file name";
                return false;
            }
            o.json_file = value;
        } else if (arg == "--no-decisions") {
            o.quiet_decisions = true;
        } else if (arg == "-p" || arg == "--port") {
            if (!need("a port number")) return false;
            uint64_t p = 0;
            if (!parse_u64(value, &p) || p > 65535) {
                *why = "bad port '" + value + "' in " + arg + ": expected a number from 1 to 65535";
                return false;
            }
            o.port = static_cast<uint16_t>(p);
            o.port_given = true;
        } else if (arg == "--timeout") {
            if (!need("seconds")) return false;
            char *end = nullptr;
            double t = std::strtod(value.c_str(), &end);
            if (value.empty() || end == nullptr || *end != '\0' || !(t > 0) || t > 86400) {
                *why = "bad value '" + value + "' for --timeout: expected seconds, more than 0 and at most 86400";
                return false;
            }
            o.timeout_s = t;
        } else if (arg == "--loopback") {
            loopback = true;
        } else if (arg == "--mps") {
            if (!need("auto or no")) return false;
            if (value != "auto" && value != "no") {
                *why = "bad value '" + value + "' for --mps (accepted: auto, no)";
                return false;
            }
            o.mps = value;
        } else if (arg == "--report-fd") { // internal: the loopback peer reports its port on this fd
            uint64_t fd = 0;
            if (!count("a file descriptor", &fd, true)) return false;
            o.report_fd = static_cast<int>(fd);
        } else if (arg.size() > 1 && arg[0] == '-') {
            *why = "unknown option '" + arg + "' (see gdx_perftest -h)";
            return false;
        } else {
            positional.push_back(arg);
        }
    }

    if (positional.size() > 1) {
        *why = "unexpected argument '" + positional[1] + "': give at most one server address";
        return false;
    }
    if (!positional.empty()) o.host = positional[0];
    if (!positional.empty() && o.host.empty()) {
        *why = "missing server address: the HOST argument is empty";
        return false;
    }

    // Launch role: mpirun (Open MPI's environment), --loopback, client (HOST given) or server.
    const char *size_env = env("OMPI_COMM_WORLD_SIZE");
    const char *rank_env = env("OMPI_COMM_WORLD_RANK");
    if (size_env != nullptr && rank_env != nullptr && o.report_fd < 0) {
        uint64_t size = 0, rank = 0;
        if (!parse_u64(size_env, &size) || !parse_u64(rank_env, &rank) || rank >= size) {
            *why = std::string("bad Open MPI environment: OMPI_COMM_WORLD_RANK=") + rank_env +
                   " OMPI_COMM_WORLD_SIZE=" + size_env;
            return false;
        }
        if (size != 2) {
            *why = "under mpirun gdx_perftest needs exactly 2 ranks (OMPI_COMM_WORLD_SIZE=" + std::string(size_env) +
                   "): mpirun -np 2 gdx_perftest [HOST]";
            return false;
        }
        if (loopback) {
            *why = "--loopback starts both sides itself: do not combine it with mpirun";
            return false;
        }
        o.mpi = true;
        o.mpi_rank = static_cast<int>(rank);
        if (o.host.empty()) {
            const char *local = env("OMPI_COMM_WORLD_LOCAL_SIZE");
            if (local == nullptr || std::string_view(local) != "2") {
                *why = "missing server address: the 2 ranks are on different nodes, so rank 1 cannot guess where "
                       "rank 0 listens; give rank 0's host name: mpirun -np 2 --host A,B gdx_perftest A";
                return false;
            }
        }
        o.role = rank == 0 ? Role::Server : Role::Client;
        if (o.role == Role::Client && o.host.empty()) o.host = "127.0.0.1";
    } else if (loopback) {
        if (!o.host.empty()) {
            *why = "--loopback runs both sides here: do not give a server address ('" + o.host + "')";
            return false;
        }
        o.role = Role::Loopback;
    } else {
        o.role = o.host.empty() ? Role::Server : Role::Client;
    }
    if (o.port == 0 && o.role == Role::Client) {
        *why = "bad port '0' in -p: a client needs the server's port (1 to 65535)";
        return false;
    }
    if (o.role == Role::Loopback && o.port_given) {
        *why = "-p is not used with --loopback (the peer picks a free port)";
        return false;
    }

    if (!sizes_given) parse_sizes(o.role == Role::Loopback ? "8:4M" : "8:16M", &o.sizes, why);
    o.mem_given = local_mem || remote_mem;
    if (o.mem_given) o.mem_pairs.push_back({local_mem.value_or(MemSpec{}), remote_mem.value_or(MemSpec{})});
    *out = std::move(o);
    return true;
}

bool apply_client_spec(std::string_view line, Options *server, std::string *why) {
    std::vector<std::string> args;
    for (std::string_view w : split(line, ' '))
        if (!w.empty()) args.emplace_back(w);
    args.emplace_back("--loopback"); // parsed as a standalone run so no launch rule interferes
    Options c;
    bool usage = false;
    std::string reason;
    if (!parse_options(args, &c, &reason, &usage, [](const char *) -> const char * { return nullptr; })) {
        *why = "the client's parameters are not valid here: " + reason;
        return false;
    }
    server->tests = c.tests;
    server->sizes = c.sizes;
    server->iterations = c.iterations;
    server->warmup = c.warmup;
    server->window = c.window;
    server->transport = c.transport;
    server->path = c.path;
    server->validate = c.validate;
    server->mem_pairs.clear();
    if (!c.mem_pairs.empty()) server->mem_pairs.push_back({c.mem_pairs[0].second, c.mem_pairs[0].first});
    return true;
}

} // namespace gdx::perf
