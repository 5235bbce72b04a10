// gdx_info -t: for each (GPU, RDMA device) pair the PCIe path class and what gdx does with GPU memory there
// (direct GPUDirect registration or staging through host memory), with the reason; then each GPU's nearest
// NIC. From GDX_TOPO_FILE when set (GPUs and NICs as the file describes them; NIC capabilities not probed),
// else this machine (CUDA driver, libibverbs, hwloc, and a probe of each NIC).
#include "api/context.h"
#include "core/error.h"
#include "info_sections.h"
#include "memtype/cuda_driver.h"
#include "transport/rc/device.h"
#include "transport/topo/topology.h"

#include <cstdio>

namespace gdx::tools {

namespace {

struct Nic {
    std::string name, bus_id;
    topo::NicGdrCaps caps;
    bool allowed = true;
};

std::string join_list(const std::vector<std::string> &v) {
    std::string s;
    for (const std::string &x : v) s += (s.empty() ? "" : ",") + x;
    return s;
}

} // namespace

void print_topology(const Context &ctx) {
    const Config &cfg = ctx.config();
    topo::GdrPolicy pol = topo::GdrPolicy::from(cfg);
    std::printf("# Topology and path decisions\n");
    std::shared_ptr<const topo::Topology> t;
    gdx_status_t st = topo::Topology::shared(cfg, &t);
    if (st != GDX_OK) {
        std::printf("#   topology unavailable: %s\n", last_error().c_str());
        return;
    }
    std::printf("#   source: %s\n", t->from_file() ? ("GDX_TOPO_FILE=" + t->file() + " (NIC capabilities not probed)").c_str()
                                                  : "this machine (hwloc, CUDA driver, libibverbs)");
    std::printf("#   GDX_GDR=%s GDX_GDR_LEVEL=%s GDX_PCI_P2P_DISABLE=%s GDX_NET_DEVICES=%s GDX_REG_METHODS=%s\n",
                ternary_name(pol.gdr), topo::path_name(pol.level), pol.p2p_disabled ? "yes" : "no",
                join_list(cfg.list(ConfigId::NET_DEVICES)).c_str(),
                join_list(cfg.list(ConfigId::REG_METHODS)).c_str());

    std::vector<topo::PciDevice> gpus;
    std::vector<Nic> nics;
    std::string no_gpu_why = "none in the topology file";
    if (t->from_file()) {
        gpus = t->gpus();
        for (const topo::PciDevice &n : t->nics()) nics.push_back({n.name, n.bus_id, {}, true});
    } else {
#if GDX_HAVE_CUDA_H
        for (const cuda::DeviceInfo &d : cuda::list_devices())
            gpus.push_back({"GPU" + std::to_string(d.ordinal), topo::normalize_bus_id(d.pci_bus_id)});
        no_gpu_why = cuda::why_unavailable();
#else
        no_gpu_why = "gdx was built without CUDA headers";
#endif
        std::vector<tp::rc::PortDesc> ports;
        tp::rc::list_ports(&ports);
        for (const tp::rc::PortDesc &p : ports) {
            if (!nics.empty() && nics.back().name == p.device) continue; // one line per device, not per port
            Nic n{p.device, p.bus_id, {}, true};
            std::shared_ptr<tp::rc::DeviceCtx> dev;
            if (tp::rc::DeviceCtx::open(p.device, p.port, cfg, &dev) == GDX_OK) n.caps = dev->gdr_support().caps();
            nics.push_back(n);
        }
    }
    for (Nic &n : nics) n.allowed = topo::net_device_allowed(cfg, n.name);

    if (!t->from_file())
        for (const Nic &n : nics)
            std::printf("#   %s: PCI %s, %s\n", n.name.c_str(), n.bus_id.empty() ? "none (software device)" : n.bus_id.c_str(),
                        n.caps.known ? n.caps.summary.c_str() : "not probed (cannot open)");
    if (gpus.empty()) {
        std::printf("no GPU (%s) → host memory only, nothing to decide%s\n", no_gpu_why.c_str(),
                    nics.empty() ? "; no RDMA device → TCP/shm only" : "");
        return;
    }
    bool any_allowed = false;
    for (const Nic &n : nics) any_allowed |= n.allowed;
    if (!any_allowed) {
        for (const topo::PciDevice &g : gpus) {
            if (nics.empty()) std::printf("%s: no RDMA device → staged (TCP/shm only)\n", g.name.c_str());
            else
                std::printf("%s: no RDMA device allowed by GDX_NET_DEVICES=%s → staged (TCP/shm only)\n", g.name.c_str(),
                            join_list(cfg.list(ConfigId::NET_DEVICES)).c_str());
        }
        return;
    }

    std::vector<std::vector<topo::PathClass>> paths;
    std::vector<std::string> names;
    std::vector<bool> allowed;
    for (const Nic &n : nics) names.push_back(n.name), allowed.push_back(n.allowed);
    for (const topo::PciDevice &g : gpus) {
        paths.emplace_back();
        for (const Nic &n : nics) {
            std::string why;
            topo::PathClass p = t->path(g.bus_id, n.bus_id, &why);
            paths.back().push_back(p);
            std::string where = topo::path_name(p);
            if (p == topo::PathClass::Unknown) where += " (" + why + ")";
            if (!n.allowed) {
                std::printf("%s → %s: %s, not in GDX_NET_DEVICES → not used\n", g.name.c_str(), n.name.c_str(), where.c_str());
                continue;
            }
            topo::GdrDecision d = topo::decide_gdr(pol, p, n.caps);
            std::string text = d.reason.rfind(topo::path_name(p), 0) == 0 ? d.reason : where + ", " + d.reason;
            if (p == topo::PathClass::Unknown && d.reason.rfind("no PCIe path", 0) == 0) text = where + d.reason.substr(12);
            std::printf("%s → %s: %s → %s%s\n", g.name.c_str(), n.name.c_str(), text.c_str(), d.direct ? "direct" : "staged",
                        d.direct && !n.caps.known ? " (if the NIC has dma-buf or peer memory)" : "");
        }
    }
    std::vector<int> best = topo::nearest_nics(paths, names, allowed);
    for (size_t g = 0; g < gpus.size(); ++g)
        if (best[g] >= 0)
            std::printf("%s nearest: %s (%s)\n", gpus[g].name.c_str(), names[best[g]].c_str(),
                        topo::path_name(paths[g][best[g]]));
}

} // namespace gdx::tools
