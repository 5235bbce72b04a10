// Shared pieces of intranode_bench (see intranode_bench.cpp for what it measures and how).
#pragma once

#include "core/config.h"
#include "support/text.h"
#include "transport/transport.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace gdx::bench {

using Clock = std::chrono::steady_clock;
inline double secs(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// The other process: this binary again (exec, never fork alone), driven by lines on its stdin/stdout.
class Peer {
  public:
    static std::unique_ptr<Peer> spawn(const std::vector<std::string> &args, const std::vector<std::string> &env);
    ~Peer();
    bool send(const std::string &line);
    // One line; `tick` runs while waiting (drives our progress). "" on timeout/EOF.
    std::string recv(double timeout_s, const std::function<void()> &tick = {});

  private:
    int pid_ = -1, in_ = -1, out_ = -1;
    std::string buf_;
};

// The peer side's line I/O on stdin/stdout (non-blocking read, so it can keep progressing).
bool peer_read_line(std::string *line, std::string *buf);
void peer_write_line(const std::string &line);

struct Transport {
    Config cfg;
    std::unique_ptr<tp::Interface> iface;
    std::unique_ptr<tp::Endpoint> ep;
};
// Opens transport/device with GDX_* from the environment; fails loudly (exit 2) when it cannot.
void open_or_die(const std::string &transport, const std::string &device, Transport *t,
                 const Config::Overrides &overrides = {});
// Address exchange and connection, driving progress.
void connect_or_die(Transport &t, const std::vector<uint8_t> &peer_addr);

using test::hex;
using test::unhex;
using test::words;

// Issue with back-pressure retries.
gdx_status_t issue(tp::Interface &ifc, const std::function<gdx_status_t()> &f);

// GPU helpers (no-ops returning false without CUDA).
bool gpu_alloc(int device, size_t len, void **ptr);
void gpu_free(int device, void *ptr);
bool gpu_memset(int device, void *ptr, int v, size_t len);
mem::MemInfo gpu_info(void *ptr);
int gpu_count();

double median(std::vector<double> v);
std::string size_name(size_t s);
// Runs `count` operations with at most `window` in flight; seconds from the first issue to the last completion
// (-1 on error).
double windowed(Transport &t, size_t count, size_t window, const std::function<gdx_status_t(tp::Completion *)> &op);
std::string machine_header(int argc, char **argv);

// Modes. Lead runs the measurement and prints rows; peer serves it (run from main on --role peer).
int lead_shm(int iters_scale, bool ring);
int lead_ipc(int gpu_a, int gpu_b, int iters_scale);
int peer_main(const std::string &mode, int gpu);

// One result row: "| path | metric | size | value unit | detail |".
void row(const char *path, const char *metric, const std::string &size, double value, const char *unit,
         const std::string &detail = "");

} // namespace gdx::bench
