// One side of the stopped-peer tests (test_stopped_peer.cpp and its exec'd peer, stop_peer): a context over the
// public C API with a registered host buffer and an endpoint to the other process, met through gdx's bootstrap;
// the requests one side posts to the other; and a teardown that reports what stayed BUSY.
#pragma once

#include "gdx/gdx.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace gdx::test {

class KindBuffer; // staging_scenario.h (not included here: its helpers clash with the intranode tests')

using ConfigList = std::vector<std::pair<std::string, std::string>>;

struct ApiSide {
    gdx_context_t *ctx = nullptr;
    gdx_ep_t *ep = nullptr;
    gdx_mem_t *mem = nullptr;
    gdx_rkey_t *rkey = nullptr; // the other side's buffer
    std::vector<uint8_t> buf;          // the registered buffer when it is host memory
    std::unique_ptr<KindBuffer> other; // ... when it is of another kind (a GPU buffer)
    size_t size = 0;
    std::vector<gdx_request_t *> reqs;

    ApiSide(); // out of line, where KindBuffer is complete
    ApiSide(const ApiSide &) = delete;
    ApiSide &operator=(const ApiSide &) = delete;
    ~ApiSide(); // frees what is left, without waiting

    // Context (with `config`), `size` bytes registered, endpoint, address and key exchanged through `bootstrap`
    // (a tp::Bootstrap of two ranks), connected. "" or what failed. A pair ("kind", K) in `config` is not a GDX_*
    // setting: it makes the buffer a KindBuffer of kind K ("cuda", "managed", ...: staging_scenario.h) instead of
    // host memory; nor is ("bytes", N): the buffer's size, instead of `size` (so that both processes agree).
    std::string open(void *bootstrap, int rank, size_t size, const ConfigList &config, double timeout_s);
    // `count` requests of `len` bytes each into the other side's buffer, puts and gets alternating (or puts only).
    std::string post(unsigned count, size_t len, bool puts_only = false);
    size_t outstanding() const;
    // Frees the requests and the key, then destroys the endpoint and deregisters, each retried while BUSY
    // (progressing) for up to `seconds`: "" or what stayed BUSY. The context stays (destroy_context).
    std::string close(double seconds);
    void destroy_context();
};

} // namespace gdx::test
