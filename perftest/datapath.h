// What gdx_perftest drives: one connected pair, seen from one side. The implementation moves the bytes with
// gdx (never on its own) and reports, per row, which path carried them. gdx_perftest does not decide direct
// vs staged: the data path below it does, and says what it did.
#pragma once

#include "core/config.h"
#include "core/error.h"
#include "gdx/status.h"
#include "memory.h"
#include "report.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gdx::perf {

// Active-message ids gdx_perftest uses.
enum AmId : uint8_t { kAmData = 1, kAmAck = 2, kAmPing = 3, kAmPong = 4 };

// Called from progress() with the payload of an active message (valid during the call only, host memory).
using AmCallback = void (*)(void *arg, uint8_t id, const void *data, size_t len);

// Counts operations in flight; wait() drives progress until all are done (or the deadline passes).
struct Pending {
    int64_t outstanding = 0;
    gdx_status_t first_error = GDX_OK;
};

class DataPath {
  public:
    virtual ~DataPath() = default;

    virtual std::string transport() const = 0; // the transport that carries the bytes ("tcp")
    virtual std::string device() const = 0;    // its device ("lo")
    virtual size_t max_am() const = 0;         // largest active-message payload
    // "" when an active message of `len` bytes can be sent from the registered buffer; else why not.
    virtual std::string am_unreachable(size_t len) const = 0;

    // Registers the test buffer for local and remote access; *packed_key gets the bytes the peer needs
    // (remote key and buffer address). *reach describes how this side's memory is reached ("host",
    // "dma-buf", "none: ...").
    virtual gdx_status_t register_buffer(Buffer &buf, std::string *packed_key, std::string *reach,
                                         std::string *why) = 0;
    // This side's endpoint address for the peer.
    virtual std::string address() const = 0;
    // Connects to the peer (its address) and accepts its key (packed_key from its register_buffer).
    virtual gdx_status_t connect(const std::string &peer_address, const std::string &peer_key,
                                 std::string *why) = 0;
    // GDX_OK when the connection is up; GDX_INPROGRESS while connecting; an error.
    virtual gdx_status_t connected(std::string *why) = 0;

    virtual void set_am_callback(AmCallback cb, void *arg) = 0;

    // Non-blocking operations on the registered buffers (offsets from each side's buffer start).
    // GDX_ERR_NO_RESOURCE: nothing queued, retry after progress(). Completions are counted in *p. A put or get
    // completes when every byte is in the destination buffer (gdx's engine semantics).
    virtual gdx_status_t put(size_t local_off, size_t len, size_t remote_off, Pending *p) = 0;
    virtual gdx_status_t get(size_t local_off, size_t len, size_t remote_off, Pending *p) = 0;
    virtual gdx_status_t am(uint8_t id, size_t local_off, size_t len, Pending *p) = 0; // payload from buffer
    virtual gdx_status_t am_signal(uint8_t id, uint64_t value) = 0;                    // 8-byte payload
    virtual gdx_status_t flush(Pending *p) = 0;
    virtual unsigned progress() = 0;

    // The path the operations since the last call took (bytes direct vs staged, with the details), then
    // resets the tally.
    virtual PathUsed take_path_report() = 0;
};

// Opens the data path for `transport` ("tcp", "shm", "cuda_ipc", "rc" or "auto": *chosen says which) for the
// memory pair (local, remote) with the peer on the same host or not. `path` asks for forced staging or
// demands directness (the data path's own options).
gdx_status_t open_datapath(const Config &cfg, const std::string &transport, const MemSpec &local,
                           const MemSpec &remote, bool peer_same_host, PathMode path,
                           std::unique_ptr<DataPath> *out, std::string *why);

// Transports compiled into this build, in preference order (for messages).
std::vector<std::string> available_transports();

// Waits until p->outstanding reaches 0, driving progress; fails after timeout_s without any progress event.
gdx_status_t wait_pending(DataPath &dp, Pending *p, double timeout_s, const char *what, std::string *why);
// Issues op() until it is accepted (progressing on back-pressure), at most timeout_s.
template <typename Op>
gdx_status_t post(DataPath &dp, double timeout_s, const char *what, std::string *why, Op op) {
    auto last = std::chrono::steady_clock::now();
    for (;;) {
        gdx_status_t st = op();
        if (st != GDX_ERR_NO_RESOURCE) {
            if (st != GDX_OK && st != GDX_INPROGRESS)
                *why = std::string(what) + " failed: " + gdx_status_string(st) + " (" + gdx::last_error() + ")";
            return st == GDX_INPROGRESS ? GDX_OK : st;
        }
        if (dp.progress() != 0) {
            last = std::chrono::steady_clock::now();
        } else if (std::chrono::steady_clock::now() - last > std::chrono::duration<double>(timeout_s)) {
            *why = std::string(what) + ": the transport stayed out of resources for " +
                   std::to_string(static_cast<int>(timeout_s)) + " s with no progress (peer stalled?)";
            return GDX_ERR_TIMEOUT;
        }
    }
}

} // namespace gdx::perf
