#include "transport/open_interfaces.h"

#include "core/error.h"
#include "core/log.h"

#include <algorithm>

namespace gdx::tp {

namespace {

// The devices of `c` the request names, in the order they are tried.
gdx_status_t devices_to_try(Component &c, const OpenRequest &req, std::vector<DeviceDesc> *devs) {
    if (gdx_status_t st = c.query_devices(devs); st != GDX_OK) return st;
    if (!req.device.empty())
        std::erase_if(*devs, [&](const DeviceDesc &d) { return d.name != req.device; });
    else
        prefer_current_gpu(devs);
    return GDX_OK;
}

} // namespace

OpenOutcome open_interface(Component &c, const Config &cfg, const OpenRequest &req) {
    OpenOutcome out;
    out.component = &c;
    std::vector<DeviceDesc> devs;
    if (gdx_status_t st = devices_to_try(c, req, &devs); st != GDX_OK) {
        out.status = st;
        return out;
    }
    out.devices = devs.size();
    for (const DeviceDesc &d : devs) {
        out.status = c.open(d, cfg, &out.iface);
        if (out.status == GDX_OK) {
            out.device = d;
            return out;
        }
        out.iface.reset();
        out.failures += (out.failures.empty() ? "" : "; ") + d.name + ": " + last_error();
        GDX_DEBUG("transport", "%s: device %s did not open: %s", std::string(c.name()).c_str(), d.name.c_str(),
                  last_error().c_str());
        if (!req.try_next_device) break;
    }
    return out;
}

std::vector<OpenOutcome> open_interfaces(const Config &cfg, const OpenRequest &req) {
    std::vector<OpenOutcome> outcomes;
    for (Component *c : components()) {
        if (req.allow && !req.allow(c->name())) continue;
        outcomes.push_back(open_interface(*c, cfg, req));
    }
    return outcomes;
}

} // namespace gdx::tp
