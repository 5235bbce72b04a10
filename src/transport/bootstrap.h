// A small out-of-band rendezvous over TCP (Boost.Asio) for tools and tests: N processes exchange byte
// strings (endpoint addresses, packed remote keys) with allgather, and synchronise with barrier.
//
// Two ways to start, both a star around rank 0:
//   like ib_write_bw   server: Bootstrap::listen({host, port, size});   clients: Bootstrap::join({host, port})
//                      (clients get ranks 1..size-1 in arrival order unless they ask for one)
//   under mpirun       Bootstrap::from_env(host, port, timeout): OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE
//                      say who is who; rank 0 listens on host:port, the others join it.
// Every step is bounded by `timeout` (the caller's; gdx_ext_oob_* take it in milliseconds) and fails with a line
// that says what was being waited for. Messages are framed and validated like the transport's wire format
// (little-endian, lengths bounded), so a stray client cannot make a rank allocate without bound or hang it.
//
// Not a transport: it moves a few kilobytes once per run, blocking the caller.
#pragma once

#include "gdx/status.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace gdx::tp {

class Bootstrap {
  public:
    struct Options {
        std::string host = "127.0.0.1"; // rank 0 listens here; the others connect here (address or name)
        uint16_t port = 0;              // rank 0: 0 picks a free port (see port()); the others: required
        int rank = -1;                  // join(): -1 lets rank 0 assign one; listen(): ignored (always 0)
        int size = 0;                   // listen(): number of processes, >= 1; join(): 0 or the expected size
        std::chrono::nanoseconds timeout = std::chrono::seconds(10); // bound of each step
    };

    static constexpr size_t kMaxBlob = 1u << 20; // per rank per allgather
    static constexpr int kMaxSize = 4096;

    // Rank 0: binds and listens at once (so the port can be published); the others are accepted during the
    // first collective.
    static gdx_status_t listen(const Options &opt, std::unique_ptr<Bootstrap> *out);
    // Rank > 0: connects (retrying while rank 0 is not listening yet, until the timeout) and learns its rank.
    static gdx_status_t join(const Options &opt, std::unique_ptr<Bootstrap> *out);
    // mpirun: rank and size from OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE. GDX_ERR_NOT_FOUND when they are
    // unset, GDX_ERR_INVALID_PARAM when malformed.
    static gdx_status_t from_env(const std::string &host, uint16_t port, std::chrono::nanoseconds timeout,
                                 std::unique_ptr<Bootstrap> *out);

    ~Bootstrap();
    int rank() const { return rank_; }
    int size() const { return size_; }
    uint16_t port() const { return port_; } // where rank 0 listens

    // out[r] = what rank r passed. Every rank must call it, with at most kMaxBlob bytes.
    gdx_status_t allgather(std::span<const uint8_t> mine, std::vector<std::vector<uint8_t>> *out);
    gdx_status_t barrier();

    struct Impl;

  private:
    Bootstrap();
    std::unique_ptr<Impl> impl_;
    int rank_ = 0, size_ = 1;
    uint16_t port_ = 0;
};

} // namespace gdx::tp
