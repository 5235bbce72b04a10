// gdx_ext.h's out-of-band exchange: gdx's bootstrap (transport/bootstrap.h) behind a C handle, so gdx_perftest
// meets its peer the way gdx's own tests do, without a second implementation.
#include "api/ext_util.h"
#include "api/handles.h"
#include "gdx/gdx_ext.h"
#include "transport/bootstrap.h"

#include <algorithm>
#include <chrono>

struct gdx_ext_oob {
    std::unique_ptr<gdx::tp::Bootstrap> bs;
    std::vector<std::vector<uint8_t>> parts; // the last allgather's result, by rank
};

namespace {

using gdx::api::guarded;
using gdx::tp::Bootstrap;

std::chrono::nanoseconds to_ns(uint64_t ms) {
    // A day at most: the bootstrap adds it to the clock.
    return std::chrono::milliseconds(std::min<uint64_t>(ms, 86'400'000));
}

// listen() (rank 0) or join() (the others) with these options, behind a handle.
gdx_status_t open(bool listen, const char *what, const char *host, uint16_t port, int rank, int size,
                  uint64_t timeout_ms, gdx_ext_oob_t **oob_p) {
    if (host == nullptr || oob_p == nullptr)
        return GDX_EXT_FAIL(GDX_ERR_INVALID_PARAM, "%s: NULL %s", what, host ? "oob_p" : "host");
    Bootstrap::Options o;
    o.host = host;
    o.port = port;
    o.rank = rank;
    o.size = size;
    o.timeout = to_ns(timeout_ms);
    auto h = std::make_unique<gdx_ext_oob>();
    gdx_status_t st = listen ? Bootstrap::listen(o, &h->bs) : Bootstrap::join(o, &h->bs);
    if (st != GDX_OK) return st; // the bootstrap said why
    *oob_p = h.release();
    return GDX_OK;
}

} // namespace

extern "C" {

gdx_status_t gdx_ext_oob_listen(const char *host, uint16_t port, int size, uint64_t timeout_ms, gdx_ext_oob_t **oob_p) {
    return guarded("gdx_ext_oob_listen",
                   [&] { return open(true, "gdx_ext_oob_listen", host, port, 0, size, timeout_ms, oob_p); });
}

gdx_status_t gdx_ext_oob_join(const char *host, uint16_t port, int rank, int size, uint64_t timeout_ms,
                              gdx_ext_oob_t **oob_p) {
    return guarded("gdx_ext_oob_join",
                   [&] { return open(false, "gdx_ext_oob_join", host, port, rank, size, timeout_ms, oob_p); });
}

gdx_status_t gdx_ext_oob_from_env(const char *host, uint16_t port, uint64_t timeout_ms, gdx_ext_oob_t **oob_p) {
    return guarded("gdx_ext_oob_from_env", [&] {
        if (host == nullptr || oob_p == nullptr)
            return GDX_EXT_FAIL(GDX_ERR_INVALID_PARAM, "gdx_ext_oob_from_env: NULL %s", host ? "oob_p" : "host");
        auto h = std::make_unique<gdx_ext_oob>();
        if (gdx_status_t st = Bootstrap::from_env(host, port, to_ns(timeout_ms), &h->bs); st != GDX_OK) return st;
        *oob_p = h.release();
        return GDX_OK;
    });
}

int gdx_ext_oob_rank(const gdx_ext_oob_t *oob) { return oob == nullptr ? -1 : oob->bs->rank(); }
int gdx_ext_oob_size(const gdx_ext_oob_t *oob) { return oob == nullptr ? 0 : oob->bs->size(); }
uint16_t gdx_ext_oob_port(const gdx_ext_oob_t *oob) { return oob == nullptr ? 0 : oob->bs->port(); }

gdx_status_t gdx_ext_oob_allgather(gdx_ext_oob_t *oob, const void *mine, size_t len) {
    return guarded("gdx_ext_oob_allgather", [&] {
        if (oob == nullptr || (mine == nullptr && len != 0))
            return GDX_EXT_FAIL(GDX_ERR_INVALID_PARAM, "gdx_ext_oob_allgather: NULL %s", oob ? "data" : "oob");
        oob->parts.clear();
        return oob->bs->allgather({static_cast<const uint8_t *>(mine), len}, &oob->parts);
    });
}

gdx_status_t gdx_ext_oob_part(const gdx_ext_oob_t *oob, int rank, const void **data, size_t *len) {
    if (oob == nullptr || data == nullptr || len == nullptr)
        return GDX_EXT_FAIL(GDX_ERR_INVALID_PARAM, "gdx_ext_oob_part: NULL argument");
    if (rank < 0 || static_cast<size_t>(rank) >= oob->parts.size())
        return GDX_EXT_FAIL(GDX_ERR_INVALID_PARAM, "gdx_ext_oob_part: no part of rank %d (%zu gathered)", rank,
                            oob->parts.size());
    *data = oob->parts[rank].data();
    *len = oob->parts[rank].size();
    return GDX_OK;
}

void gdx_ext_oob_destroy(gdx_ext_oob_t *oob) { delete oob; }

} // extern "C"
