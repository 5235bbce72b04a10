// What gdx_perftest drives: one connected pair, seen from one side, through gdx's public API only (gdx.h: a
// context, an endpoint, a registration, gdx_put / gdx_get / gdx_put_notify, gdx_request_path). It takes the path
// every gdx user takes: gdx picks the transport(s) of the endpoint and, per fragment, direct or staged, and each
// request says what it did; this file only tallies those reports per row.
#pragma once

#include "memory.h"
#include "options.h"
#include "report.h"

#include <gdx/gdx.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gdx::perf {

class DataPath;

// Requests in flight of one phase; DataPath::progress() counts them down as they complete. Going out of scope with
// requests still in flight (a failed phase) detaches them: they are freed when they complete, counting nothing.
struct Pending {
    explicit Pending(DataPath &dp) : dp_(dp) {}
    ~Pending();
    Pending(const Pending &) = delete;
    Pending &operator=(const Pending &) = delete;
    int64_t outstanding = 0;
    gdx_status_t first_error = GDX_OK;
    std::string first_why; // gdx_request_error of the first failed request

  private:
    DataPath &dp_;
};

class DataPath {
  public:
    // A context of its own: the environment's GDX_* values, GDX_TLS=`transport` unless it is "auto" (gdx's own
    // choice), and what --path implies (staged: GDX_FAULT_P2P_EVERY=1; direct: GDX_GDR=yes, GDX_P2P=yes). Then an
    // endpoint and `buf` registered for every access.
    static gdx_status_t open(const std::string &transport, PathMode path, Buffer &buf, std::unique_ptr<DataPath> *out,
                             std::string *why);
    ~DataPath();
    DataPath(const DataPath &) = delete;
    DataPath &operator=(const DataPath &) = delete;

    std::string address() const; // this side's endpoint address, for the peer
    std::string key() const;     // this side's registration key, for the peer
    // Connects to the peer's address and unpacks its key. connected() progresses; GDX_INPROGRESS while connecting.
    gdx_status_t connect(const std::string &peer_address, const std::string &peer_key, std::string *why);
    gdx_status_t connected(std::string *why);

    std::string transport() const; // the endpoint's transports ("tcp", "cuda_ipc+shm"; all of them before connect)
    std::string device() const;    // their devices ("lo", "mlx5_0:1")
    std::string reach() const;     // how they reach this side's buffer ("host", "dma-buf", "staged (...)")

    // Offsets are from each side's buffer start. Errors mean nothing was started (*why says why).
    gdx_status_t put(size_t local_off, size_t len, size_t remote_off, Pending *p, std::string *why);
    gdx_status_t get(size_t local_off, size_t len, size_t remote_off, Pending *p, std::string *why);
    gdx_status_t put_notify(size_t local_off, size_t len, size_t remote_off, uint64_t value, Pending *p,
                            std::string *why);
    // Takes up to `max` notifications the peer's puts delivered here.
    size_t notifications(uint64_t *values, size_t max);
    // gdx_progress, then collects the requests that completed; returns the events processed.
    unsigned progress();

    // The path the requests since the last call took (tallied from gdx_request_path), then resets the tally.
    PathUsed take_path_report();
    // The requests of `p` no longer count into it (Pending's destructor).
    void forget(const Pending *p);

  private:
    DataPath() = default;
    struct InFlight {
        gdx_request_t *req;
        Pending *pending;
    };
    gdx_status_t submit(const char *what, gdx_status_t st, gdx_request_t *req, Pending *p, std::string *why);
    void tally(const gdx_path_info_t &info);

    gdx_context_t *ctx_ = nullptr;
    gdx_ep_t *ep_ = nullptr;
    gdx_mem_t *mem_ = nullptr;
    gdx_rkey_t *rkey_ = nullptr;
    std::vector<InFlight> inflight_;
    // The tally of one row.
    uint64_t bytes_direct_ = 0, bytes_staged_ = 0;
    uint32_t frag_size_ = 0, depth_ = 0;
    std::vector<std::pair<std::string, uint64_t>> texts_; // each distinct path text, with its count
    std::vector<std::string> transports_;
};

// Waits until p->outstanding reaches 0, driving progress; fails after timeout_s without any progress event.
gdx_status_t wait_pending(DataPath &dp, Pending *p, double timeout_s, const char *what, std::string *why);

} // namespace gdx::perf
