// Shared by the intra-node tests, their peer binary and the benchmark: byte patterns, buffers of every memory
// kind, hex codecs for addresses and keys (tests/support/text.h), and Link, a peer process started with exec (never fork alone: CUDA
// does not survive fork) and driven with one-line commands over pipes.
#pragma once

#include "core/config.h"
#include "support/text.h"
#include "transport/transport.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <sys/types.h>
#include <vector>

namespace gdx::test {

uint8_t pattern(uint64_t seed, uint64_t i);
void fill_pattern(uint8_t *p, size_t len, uint64_t seed, uint64_t first = 0);
// Index of the first byte that differs from the pattern, or -1.
long long check_pattern(const uint8_t *p, size_t len, uint64_t seed, uint64_t first = 0);

// This process's shared segments still mapped (memfd names in /proc/self/maps starting with `prefix`).
size_t mapped_segments(const std::string &prefix = "memfd:gdx-shm");

// ---- buffers ----------------------------------------------------------------------------------------------

enum class Kind { Host, Cuda, Managed, Vmm, Pool };
const char *kind_name(Kind k);
bool parse_kind(const std::string &s, Kind *out);
// Why `k` cannot be allocated on `device` here ("" when it can): no driver, no GPU, no VMM support...
std::string kind_unavailable(Kind k, int device);

// A buffer of `size` bytes at `offset` bytes into an allocation (odd offsets test unaligned ranges). Contents
// are moved through host staging for GPU kinds, so tests read and write every kind the same way.
class Buffer {
  public:
    static gdx_status_t make(Kind k, int device, size_t size, size_t offset, std::unique_ptr<Buffer> *out);
    ~Buffer();
    uint8_t *ptr() const { return base_ + offset_; }
    size_t size() const { return size_; }
    Kind kind() const { return kind_; }
    int device() const { return device_; }
    mem::MemInfo info() const; // classification for mem_reg (the memtype query for GPU kinds)
    gdx_status_t write(size_t off, const uint8_t *src, size_t len);
    gdx_status_t read(size_t off, uint8_t *dst, size_t len) const;
    gdx_status_t fill(uint64_t seed);
    long long check(size_t off, size_t len, uint64_t seed, uint64_t first) const;

  private:
    Buffer() = default;
    Kind kind_ = Kind::Host;
    int device_ = -1;
    uint8_t *base_ = nullptr;
    size_t size_ = 0, offset_ = 0, alloc_ = 0;
    unsigned long long vmm_handle_ = 0;
};

// ---- a transport opened for a test --------------------------------------------------------------------------

struct Opened {
    Config cfg;
    std::unique_ptr<tp::Interface> iface;
};
// Opens `transport` on `device` ("memory" for shm, "GPU<n>" for cuda_ipc) with GDX_* overrides.
gdx_status_t open_transport(const std::string &transport, const std::string &device,
                            const Config::Overrides &overrides, Opened *out);
// What connect() may answer: GDX_INPROGRESS, or GDX_OK where the peer connected first and its handshake had
// arrived (Channel::finish_connect).
inline bool connect_started(gdx_status_t st) { return st == GDX_OK || st == GDX_INPROGRESS; }
// Drives progress until `done()` or the deadline; false on timeout.
template <class F> bool progress_until(tp::Interface &ifc, F done, std::chrono::milliseconds limit) {
    auto end = std::chrono::steady_clock::now() + limit;
    while (!done()) {
        ifc.progress();
        if (std::chrono::steady_clock::now() > end) return false;
    }
    return true;
}
// Issues an operation, retrying on GDX_ERR_NO_RESOURCE, and waits for its completion. Returns the final status.
gdx_status_t run_op(tp::Interface &ifc, const std::function<gdx_status_t(tp::Completion *)> &issue,
                    std::chrono::milliseconds limit = std::chrono::milliseconds(30000));

// ---- the peer process -----------------------------------------------------------------------------------

class Link {
  public:
    // Execs `argv[0]` with `argv`, extra environment `env` ("NAME=value"), optionally through `wrapper` (e.g.
    // setpriv ... --). The child's stdin/stdout are our pipes; stderr is inherited.
    static gdx_status_t spawn(const std::vector<std::string> &argv, const std::vector<std::string> &env,
                              std::unique_ptr<Link> *out);
    ~Link(); // closes the pipes and reaps the child (SIGKILL after a grace period)
    pid_t pid() const { return pid_; }
    bool send(const std::string &line);
    // One reply line; while waiting, `tick` runs (to drive our own progress). "" on timeout or EOF.
    std::string recv(std::chrono::milliseconds limit, const std::function<void()> &tick = {});
    std::string call(const std::string &line, std::chrono::milliseconds limit = std::chrono::milliseconds(60000),
                     const std::function<void()> &tick = {});
    void kill9();
    int wait_exit(); // exit status (or 128+signal)
    // For the tests that stop a peer for real (SIGSTOP, SIGCONT): kill(2) with `sig`; false if it failed.
    bool signal(int sig);
    // Waits, running `tick` (or sleeping 1 ms) between looks, until the child has stopped: true; false when it
    // exited instead or `limit` passed.
    bool wait_stopped(std::chrono::milliseconds limit, const std::function<void()> &tick = {});
    // As wait_exit, bounded: -1 while it still runs after `limit`.
    int wait_exit(std::chrono::milliseconds limit, const std::function<void()> &tick = {});
    void close_stdin(); // a peer that serves until its stdin closes then exits on its own

  private:
    // waitpid(WNOHANG | `flags`): true when it reported a stop (WUNTRACED); an exit is recorded in status_.
    bool look(int flags);
    pid_t pid_ = -1;
    int in_ = -1, out_ = -1;
    std::string buf_;
    bool reaped_ = false;
    int status_ = 0;
};

std::string peer_binary();

} // namespace gdx::test
