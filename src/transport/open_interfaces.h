// Components -> devices -> open, written once for every caller that opens interfaces: the api (one interface
// per transport GDX_TLS allows), the UCX glue (one interface per UCT memory domain, its anchor) and the tools,
// benchmarks and tests (a named transport on a named device).
#pragma once

#include "core/config.h"
#include "transport/transport.h"

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace gdx::tp {

struct OpenRequest {
    // The transports to open, in preference order (registry.cpp): those `allow` accepts; every one when null.
    std::function<bool(std::string_view transport)> allow;
    // The device: empty for the transport's choice (the current CUDA context's GPU first, prefer_current_gpu,
    // then in the order the component lists them), or the name of one.
    std::string device;
    // Whether a device that fails to open gives way to the next (the UCX glue offers whichever opens), or the
    // first is the only one tried (the api: its one interface belongs on the GPU this process is bound to).
    bool try_next_device = true;
};

// What became of one transport open_interfaces() tried.
struct OpenOutcome {
    Component *component = nullptr;
    // GDX_OK: `iface` is open on `device`. Else why not: the status of query_devices when it failed;
    // GDX_ERR_NO_DEVICE when it listed none (none of that name); else the status of the last open tried.
    gdx_status_t status = GDX_ERR_NO_DEVICE;
    size_t devices = 0; // how many devices it listed (that match the request's device name)
    DeviceDesc device;
    std::unique_ptr<Interface> iface;
    // Each device that failed to open, "name: the error it left" joined by "; " (also where a later one opened).
    std::string failures;
};

// Opens, for each transport `req` allows, one interface on the first of its devices that opens with `cfg`.
// One outcome per transport tried, opened or not: what to make of one that did not is the caller's judgement.
std::vector<OpenOutcome> open_interfaces(const Config &cfg, const OpenRequest &req);

// The same for one transport (req.allow is not asked): the UCX glue's memory domain, a tool's named transport.
OpenOutcome open_interface(Component &c, const Config &cfg, const OpenRequest &req);

} // namespace gdx::tp
