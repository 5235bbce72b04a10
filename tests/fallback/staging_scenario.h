// The two-process scenario of the staging tests, shared by the test (rank 0, the initiator) and staging_peer
// (rank 1, the target), both through the public C API, meeting through gdx's bootstrap:
//   each side registers a buffer of buf_size() bytes of its memory kind, filled with its own pattern (seed 1 on
//   rank 0, 2 on the peer), and they exchange endpoint addresses and keys;
//   rank 0 puts its [kPutSrc, +size) to the peer's [kPutDst, +size) and gets the peer's [get_src(), +size) into its
//   [get_dst(), +size), each split into `pieces` requests in flight at once;
//   the peer keeps progressing (it copies staged fragments out and grants slots) until rank 0 says it is done
//   (a bootstrap exchange on a helper thread), then checks every byte of its buffer and reports.
#pragma once

#include "gdx/gdx.h"
#include "loop_fixture.h"
#include "memtype/memory_ops.h"

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace gdx::test {

struct Scenario {
    size_t size = 0;
    unsigned pieces = 1;
    static constexpr size_t kPutSrc = 5, kPutDst = 7;
    size_t buf_size() const { return 2 * size + 256; }
    size_t get_src() const { return size + 131; } // in the peer's buffer
    size_t get_dst() const { return size + 129; } // in rank 0's buffer
    // Final contents: everything keeps its owner's pattern except the range the other side wrote.
    uint8_t rank0_expected(size_t i) const {
        if (i >= get_dst() && i - get_dst() < size) return pattern_byte(2, get_src() + (i - get_dst()));
        return pattern_byte(1, i);
    }
    uint8_t peer_expected(size_t i) const {
        if (i >= kPutDst && i - kPutDst < size) return pattern_byte(1, kPutSrc + (i - kPutDst));
        return pattern_byte(2, i);
    }
    // Piece k of `pieces` covering [0, size): its offset and length.
    std::pair<size_t, size_t> piece(unsigned k) const {
        size_t step = (size + pieces - 1) / pieces;
        size_t off = std::min(size, k * step);
        return {off, std::min(step, size - off)};
    }
};

// A buffer of a named memory kind: host (malloc), pinned, cuda (device), managed, vmm. Filled and read back
// through the memory ops table, so GPU kinds need no kernel.
class KindBuffer {
  public:
    KindBuffer();
    ~KindBuffer();
    // False with *why when this machine cannot make it (no GPU: the caller skips).
    bool allocate(const std::string &kind, size_t size, std::string *why);
    void *data() const { return ptr_; }
    size_t size() const { return size_; }
    bool gpu() const { return gpu_; }
    gdx_status_t write(const std::vector<uint8_t> &host);
    gdx_status_t read(std::vector<uint8_t> *host) const;

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
    void *ptr_ = nullptr;
    size_t size_ = 0;
    bool gpu_ = false;
};

// "" when every byte matches, else where the first mismatch is.
std::string check_bytes(const std::vector<uint8_t> &got, uint8_t (*expected)(const Scenario &, size_t),
                        const Scenario &s);

// Length-prefixed concatenation of blobs (what one rank passes to the bootstrap's allgather).
std::vector<uint8_t> join_blobs(const std::vector<std::vector<uint8_t>> &parts);
bool split_blobs(const std::vector<uint8_t> &in, std::vector<std::vector<uint8_t>> *out);

struct RankOptions {
    int rank = 0;
    std::string kind = "host";
    Scenario sc;
    std::vector<std::pair<std::string, std::string>> config; // gdx_config_set before the context is made
    double timeout_s = 120;
};

struct RankResult {
    std::string error;                  // "" when every step worked and every byte checked out
    gdx_status_t op_status = GDX_OK;    // rank 0: the first error among its requests
    uint64_t bytes_direct = 0, bytes_staged = 0;
    std::string put_path, get_path;     // rank 0: gdx_request_path text of the first put and get
    std::string transports;             // gdx_ep_transports
    std::string peer_report;            // rank 0: the peer's error ("" = its bytes are right)
};

// Runs one side of the scenario on a bootstrap of two ranks (tp::Bootstrap, opaque here).
RankResult run_rank(const RankOptions &o, void *bootstrap);

// Progresses `ctx` until `done()` or the deadline; false on timeout.
template <typename F> bool progress_until(gdx_context_t *ctx, F done, double seconds) {
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (!done()) {
        gdx_progress(ctx);
        if (std::chrono::steady_clock::now() > end) return false;
    }
    return true;
}

} // namespace gdx::test
