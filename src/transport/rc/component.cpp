// The rc component: lists RDMA device ports and opens interfaces on them.
#include "transport/rc/component.h"

#include "core/error.h"
#include "transport/rc/iface.h"
#include "topo/config_vars.h"

#include <cstdlib>

namespace gdx::tp::rc {

namespace {

class RcComponent final : public Component {
  public:
    std::string_view name() const override { return "rc"; }

    gdx_status_t query_devices(std::vector<DeviceDesc> *out) override {
        if (out == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "query_devices: null output");
        out->clear();
        std::vector<PortDesc> ports;
        if (gdx_status_t st = list_ports(&ports); st != GDX_OK) return st;
        // Every ACTIVE port; GDX_NET_DEVICES is applied by open() (it belongs to a context's configuration).
        for (const PortDesc &p : ports) out->push_back({p.device + ":" + std::to_string(p.port), p.bus_id, false});
        return GDX_OK;
    }

    gdx_status_t open(const DeviceDesc &dev, const Config &cfg, std::unique_ptr<Interface> *out) override {
        if (out == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "open: null output");
        std::string name = dev.name;
        unsigned long port = 0;
        if (size_t colon = name.find(':'); colon != std::string::npos) {
            char *end = nullptr;
            port = std::strtoul(name.c_str() + colon + 1, &end, 10);
            if (*end != '\0' || port == 0 || port > 255)
                return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "rc: device '%s' is not like mlx5_0:1", name.c_str());
            name.resize(colon);
        }
        if (!topo::net_device_allowed(cfg, dev.name))
            return GDX_FAIL(GDX_ERR_NO_DEVICE, kComp, "rc: %s is not in GDX_NET_DEVICES=%s", dev.name.c_str(),
                            cfg.text(topo::TopoVar::NET_DEVICES).c_str());
        return RcInterface::open(name, static_cast<uint8_t>(port), cfg, out);
    }
};

} // namespace

Component *component() {
    static RcComponent c;
    return &c;
}

} // namespace gdx::tp::rc
