// NUMA placement of the bounce pools (numa_placement.h): the policy. The topology (hwloc) is src/topo's.
#include "fallback/numa_placement.h"

#include "core/error.h"
#include "core/log.h"
#include "topo/topology.h"

namespace gdx::fb {

namespace {
constexpr const char *kComp = "fallback";
} // namespace

Placement place_near_pci(const std::string &bus_id, const std::string &label, const std::string &topo_file) {
    Placement p;
    if (topo::Topology::shared(topo_file, &p.topology) != GDX_OK) {
        p.text = "hwloc topology unavailable (" + last_error() + "): default policy";
        return p;
    }
    if (p.topology->numa_nodes() <= 1) {
        p.text = "single NUMA node";
        return p;
    }
    std::string why;
    p.nodes = p.topology->nodes_near(bus_id, &why);
    if (p.nodes.empty()) {
        p.text = label + " (bus " + (bus_id.empty() ? "?" : bus_id) + ") not found in the hwloc topology (" + why +
                 "): default policy";
        return p;
    }
    p.text = "NUMA node " + p.nodes + " (nearest " + label + " at " + bus_id + ")";
    if (p.topology->from_file()) p.text += "; from GDX_TOPO_FILE, so not bound here";
    return p;
}

Placement place_near_device(int device, const std::string &topo_file) {
    if (device < 0) return Placement{"", "no device affinity (host memory): default policy", nullptr};
    // The ops table knows the GPU's PCI location; the topology knows what is near it.
    return place_near_pci(mem::device_bus_id(mem::MemKind::Cuda, device), "GPU " + std::to_string(device), topo_file);
}

gdx_status_t alloc_placed(const Placement &where, const HostAllocFn &alloc, size_t len, void **out, std::string *text) {
    *text = where.text;
    const bool bind = !where.nodes.empty() && where.topology != nullptr && !where.topology->from_file();
    gdx_status_t st;
    {
        std::unique_ptr<topo::Topology::ThreadMembind> guard;
        if (bind) {
            guard = std::make_unique<topo::Topology::ThreadMembind>(*where.topology, where.nodes);
            if (!guard->active()) *text += "; binding the allocating thread failed";
        }
        st = alloc(out);
    }
    if (st != GDX_OK || !bind) return st;
    // For rows that hand back untouched pages (the host row's posix_memalign), the range's own policy decides
    // where the first touch lands; pages already faulted in (cuMemHostAlloc) stay where the thread policy put them.
    if (!where.topology->bind_area(*out, len, where.nodes))
        GDX_DEBUG(kComp, "binding [%p, +%zu) to NUMA node %s failed: pages keep the allocation-time placement", *out,
                  len, where.nodes.c_str());
    return GDX_OK;
}

gdx_status_t alloc_near_device(const mem::Ops &row, size_t len, int device, const std::string &topo_file, void **out,
                               std::string *placement) {
    return alloc_near_device([&](void **p) { return row.host_alloc(len, device, p); }, len, device, topo_file, out,
                             placement);
}

gdx_status_t alloc_near_device(const HostAllocFn &alloc, size_t len, int device, const std::string &topo_file,
                               void **out, std::string *placement) {
    return alloc_placed(place_near_device(device, topo_file), alloc, len, out, placement);
}

} // namespace gdx::fb
