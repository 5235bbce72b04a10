// Lane choice: which transport of a multi-transport endpoint carries a put or get. The C API's endpoints keep one
// lane per transport both peers agreed on (src/api/endpoint.h: cuda_ipc and shm to a peer on this host, say), each
// with its own staging engine; the api hands the lanes it has to fb::submit, which decides here, in the layer that
// also decides per fragment how the bytes go, and submits the request to the chosen lane's engine:
//
//   1. the first lane whose transport reaches both buffers directly over the whole range (nothing is faster);
//   2. else the first lane that can stage (Engine::can_stage: it reaches pinned host memory and carries active
//      messages), so the request is staged where staging works;
//   3. else the first lane with both a registration and a key (its engine then says why it cannot move the bytes).
//
// A lane lacking this memory's registration or the peer's key for its transport is never chosen; none having both
// is GDX_ERR_UNREACHABLE. The choice reads only what the registrations say about reachability (range-safe: an
// out-of-range request is direct nowhere); the request's range and rights are checked once, by the chosen engine
// where the request enters it (Engine::put/get, RegionTable::check_request). The chosen lane's transport name
// leads the request's path text (gdx_request_path: "shm: staged[...]"); at debug level the choice is logged with
// its reason.
#pragma once

#include "fallback/engine.h"

#include <cstddef>
#include <cstdint>
#include <span>

namespace gdx::fb {

inline constexpr size_t kMaxLanes = 16; // as many as an endpoint address blob may list

// One transport to the peer, with what a request needs of it.
struct Lane {
    Engine *engine = nullptr;
    tp::Endpoint *ep = nullptr;
    Region *local = nullptr;              // this memory's registration with `engine` (nullptr: none)
    const RemoteRegion *remote = nullptr; // the peer's key for this transport (nullptr: the key has no entry)
};

struct Transfer {
    bool is_put = true;
    size_t local_off = 0, remote_off = 0, len = 0;
    const uint64_t *notify = nullptr; // a put with notification: its value (Engine::put_notify)
};

// The lane the rules above pick for `t`, and why ("reaches both buffers directly", ...); SIZE_MAX when no lane has
// both a registration and a key.
size_t choose_lane(std::span<const Lane> lanes, const Transfer &t, const char **why);

// Chooses the lane and submits `t` to its engine: put, put_notify or get, as Engine's (GDX_INPROGRESS, or GDX_OK
// at once for an empty request). *chosen = the lane's index, set whenever a lane was chosen.
gdx_status_t submit(std::span<const Lane> lanes, const Transfer &t, Request *req, size_t *chosen);

} // namespace gdx::fb
