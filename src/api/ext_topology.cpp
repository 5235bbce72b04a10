// gdx_ext_topology_text (gdx_info -t, and gdx_perftest's decision lines): for each (GPU, RDMA device) pair the
// PCIe path class and what gdx does with GPU memory there (direct GPUDirect registration or staging through host
// memory), with the reason; then each GPU's nearest NIC. From GDX_TOPO_FILE when set (GPUs and NICs as the file
// describes them; NIC capabilities not probed), else this machine (CUDA driver, libibverbs, hwloc, and a probe of
// each NIC).
#include "api/ext_util.h"
#include "api/handles.h"
#include "core/error.h"
#include "gdx/gdx_ext.h"
#include "memtype/memory_ops.h"
#include "topo/config_vars.h"
#include "topo/topology.h"
#include "transport/rc/config_vars.h"
#include "transport/rc/device.h"
#include "transport/rc/reg_ladder.h"

#include <cstdio>

namespace gdx::api {

namespace {

struct Nic {
    std::string name, bus_id;
    topo::NicGdrCaps caps;
    bool allowed = true;
    std::string host; // what the rc transport does with pageable host memory there (pinning, ODP)
};

std::string join_list(const std::vector<std::string> &v) {
    std::string s;
    for (const std::string &x : v) s += (s.empty() ? "" : ",") + x;
    return s;
}


struct Devices {
    std::vector<topo::PciDevice> gpus;
    std::vector<Nic> nics;
    std::string no_gpu_why = "none in the topology file";
};

// The GPUs and NICs the decisions are about: the topology file's, or this machine's (each NIC probed).
Devices collect_devices(const Config &cfg, const topo::Topology &t) {
    Devices d;
    if (t.from_file()) {
        d.gpus = t.gpus();
        for (const topo::PciDevice &n : t.nics()) d.nics.push_back({n.name, n.bus_id, {}, true, ""});
    } else {
        const mem::Ops &gpu = mem::ops(mem::MemKind::Cuda);
        std::vector<mem::DeviceInfo> gpus;
        gpu.devices(&gpus);
        for (const mem::DeviceInfo &g : gpus)
            d.gpus.push_back({"GPU" + std::to_string(g.ordinal), topo::normalize_bus_id(g.pci_bus_id)});
        d.no_gpu_why = gpu.why_unavailable();
        std::vector<tp::rc::PortDesc> ports;
        tp::rc::list_ports(&ports);
        for (const tp::rc::PortDesc &p : ports) {
            if (!d.nics.empty() && d.nics.back().name == p.device) continue; // one line per device, not per port
            Nic n{p.device, p.bus_id, {}, true, ""};
            std::shared_ptr<tp::rc::DeviceCtx> dev;
            if (tp::rc::DeviceCtx::open(p.device, p.port, cfg, &dev) == GDX_OK) {
                n.caps = dev->gdr_support().caps();
                n.host = tp::rc::host_reg_policy(tp::rc::LadderConfig::from(cfg), dev->gdr_support());
            }
            d.nics.push_back(n);
        }
    }
    for (Nic &n : d.nics) n.allowed = topo::net_device_allowed(cfg, n.name);
    return d;
}

// One line per (GPU, NIC) pair with the path class and the decision, then each GPU's nearest allowed NIC.
void print_pairs(const Config &cfg, const topo::Topology &t, const Devices &dev, TextOut &out) {
    const topo::GdrPolicy pol = topo::GdrPolicy::from(cfg);
    std::vector<std::vector<topo::PathClass>> paths;
    std::vector<std::string> names;
    std::vector<bool> allowed;
    for (const Nic &n : dev.nics) names.push_back(n.name), allowed.push_back(n.allowed);
    for (const topo::PciDevice &g : dev.gpus) {
        paths.emplace_back();
        for (const Nic &n : dev.nics) {
            std::string why;
            topo::PathClass p = t.path(g.bus_id, n.bus_id, &why);
            paths.back().push_back(p);
            std::string where = topo::path_name(p);
            if (p == topo::PathClass::Unknown) where += " (" + why + ")";
            if (!n.allowed) {
                out.printf("%s → %s: %s, not in GDX_NET_DEVICES → not used\n", g.name.c_str(), n.name.c_str(),
                           where.c_str());
                continue;
            }
            topo::GdrDecision d = topo::decide_gdr(pol, p, n.caps);
            std::string text = d.reason.rfind(topo::path_name(p), 0) == 0 ? d.reason : where + ", " + d.reason;
            if (p == topo::PathClass::Unknown && d.reason.rfind("no PCIe path", 0) == 0) text = where + d.reason.substr(12);
            out.printf("%s → %s: %s → %s%s\n", g.name.c_str(), n.name.c_str(), text.c_str(),
                       d.direct ? "direct" : "staged", d.direct && !n.caps.known ? " (if the NIC has dma-buf or peer memory)" : "");
        }
    }
    std::vector<int> best = topo::nearest_nics(paths, names, allowed);
    for (size_t g = 0; g < dev.gpus.size(); ++g)
        if (best[g] >= 0)
            out.printf("%s nearest: %s (%s)\n", dev.gpus[g].name.c_str(), names[best[g]].c_str(),
                       topo::path_name(paths[g][best[g]]));
}

void print_topology(const Context &ctx, TextOut &out) {
    const Config &cfg = ctx.config();
    const topo::GdrPolicy pol = topo::GdrPolicy::from(cfg);
    out.printf("# Topology and path decisions\n");
    std::shared_ptr<const topo::Topology> t;
    if (topo::Topology::shared(cfg, &t) != GDX_OK) {
        out.printf("#   topology unavailable: %s\n", last_error().c_str());
        return;
    }
    out.printf("#   source: %s\n", t->from_file() ? ("GDX_TOPO_FILE=" + t->file() + " (NIC capabilities not probed)").c_str()
                                                  : "this machine (hwloc, CUDA driver, libibverbs)");
    out.printf("#   GDX_GDR=%s GDX_GDR_LEVEL=%s GDX_PCI_P2P_DISABLE=%s GDX_NET_DEVICES=%s GDX_REG_METHODS=%s\n",
               ternary_name(pol.gdr), topo::path_name(pol.level), pol.p2p_disabled ? "yes" : "no",
               join_list(cfg.list(topo::TopoVar::NET_DEVICES)).c_str(),
               join_list(cfg.list(tp::RcVar::REG_METHODS)).c_str());
    const Devices dev = collect_devices(cfg, *t);
    if (!t->from_file())
        for (const Nic &n : dev.nics) {
            out.printf("#   %s: PCI %s, %s\n", n.name.c_str(), n.bus_id.empty() ? "none (software device)" : n.bus_id.c_str(),
                       n.caps.known ? n.caps.summary.c_str() : "not probed (cannot open)");
            if (!n.host.empty()) out.printf("#   %s: %s\n", n.name.c_str(), n.host.c_str());
        }
    if (dev.gpus.empty()) {
        out.printf("no GPU (%s) → host memory only, nothing to decide%s\n", dev.no_gpu_why.c_str(),
                   dev.nics.empty() ? "; no RDMA device → TCP/shm only" : "");
        return;
    }
    bool any_allowed = false;
    for (const Nic &n : dev.nics) any_allowed |= n.allowed;
    if (!any_allowed) {
        for (const topo::PciDevice &g : dev.gpus) {
            if (dev.nics.empty())
                out.printf("%s: no RDMA device → staged (TCP/shm only)\n", g.name.c_str());
            else
                out.printf("%s: no RDMA device allowed by GDX_NET_DEVICES=%s → staged (TCP/shm only)\n", g.name.c_str(),
                           join_list(cfg.list(topo::TopoVar::NET_DEVICES)).c_str());
        }
        return;
    }
    print_pairs(cfg, *t, dev, out);
}

} // namespace

} // namespace gdx::api

extern "C" const char *gdx_ext_topology_text(const gdx_context_t *context) {
    thread_local std::string slot;
    if (context == nullptr) return "# Topology and path decisions\n#   no context given\n";
    return gdx::api::text_section(&slot, "# Topology and path decisions\n#   internal error while probing it\n",
                                  [&](gdx::api::TextOut &out) { gdx::api::print_topology(*context->impl, out); });
}
