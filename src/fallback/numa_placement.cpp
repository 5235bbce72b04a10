#include "fallback/numa_placement.h"

#include "core/log.h"

#include <hwloc.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>

namespace gdx::fb {

namespace {

constexpr const char *kComp = "fallback";

// The machine's topology with PCI devices, loaded once (tens of milliseconds) and kept for the process.
hwloc_topology_t topology() {
    static hwloc_topology_t topo = nullptr;
    static std::once_flag once;
    std::call_once(once, [] {
        hwloc_topology_t t = nullptr;
        if (hwloc_topology_init(&t) != 0) return;
        hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
        if (hwloc_topology_load(t) != 0) {
            hwloc_topology_destroy(t);
            return;
        }
        topo = t;
    });
    return topo;
}

// Restores the calling thread's memory policy when it goes out of scope.
class ThreadMembindGuard {
  public:
    ThreadMembindGuard(hwloc_topology_t topo, hwloc_const_nodeset_t nodes) : topo_(topo) {
        old_ = hwloc_bitmap_alloc();
        if (old_ == nullptr) return;
        if (hwloc_get_membind(topo_, old_, &old_policy_, HWLOC_MEMBIND_THREAD | HWLOC_MEMBIND_BYNODESET) != 0)
            return;
        active_ = hwloc_set_membind(topo_, nodes, HWLOC_MEMBIND_BIND,
                                    HWLOC_MEMBIND_THREAD | HWLOC_MEMBIND_BYNODESET) == 0;
    }
    ~ThreadMembindGuard() {
        if (active_) hwloc_set_membind(topo_, old_, old_policy_, HWLOC_MEMBIND_THREAD | HWLOC_MEMBIND_BYNODESET);
        if (old_ != nullptr) hwloc_bitmap_free(old_);
    }
    bool active() const { return active_; }

  private:
    hwloc_topology_t topo_;
    hwloc_bitmap_t old_ = nullptr;
    hwloc_membind_policy_t old_policy_ = HWLOC_MEMBIND_DEFAULT;
    bool active_ = false;
};

std::string nodeset_text(hwloc_const_nodeset_t nodes) {
    char *s = nullptr;
    if (hwloc_bitmap_list_asprintf(&s, nodes) < 0 || s == nullptr) return "?";
    std::string out = s;
    free(s);
    return out;
}

} // namespace

gdx_status_t alloc_near_device(const mem::Ops &row, size_t len, int device, void **out, std::string *placement) {
    return alloc_near_device([&](void **p) { return row.host_alloc(len, device, p); }, len, device, out, placement);
}

gdx_status_t alloc_near_device(const HostAllocFn &alloc, size_t len, int device, void **out, std::string *placement) {
    hwloc_topology_t topo = device >= 0 ? topology() : nullptr;
    hwloc_const_nodeset_t nodes = nullptr;
    if (device < 0) {
        *placement = "no device affinity (host memory): default policy";
    } else if (topo == nullptr) {
        *placement = "hwloc topology unavailable: default policy";
    } else if (hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE) <= 1) {
        *placement = "single NUMA node";
    } else {
        std::string bus = mem::device_bus_id(mem::MemKind::Cuda, device); // the ops table knows PCI locations
        hwloc_obj_t pci = bus.empty() ? nullptr : hwloc_get_pcidev_by_busidstring(topo, bus.c_str());
        hwloc_obj_t anc = pci != nullptr ? hwloc_get_non_io_ancestor_obj(topo, pci) : nullptr;
        if (anc == nullptr || anc->nodeset == nullptr || hwloc_bitmap_iszero(anc->nodeset)) {
            *placement = "GPU " + std::to_string(device) + " (bus " + (bus.empty() ? "?" : bus) +
                         ") not found in the hwloc topology: default policy";
        } else {
            nodes = anc->nodeset;
            *placement = "NUMA node " + nodeset_text(nodes) + " (nearest GPU " + std::to_string(device) + " at " +
                         bus + ")";
        }
    }
    gdx_status_t st;
    {
        std::unique_ptr<ThreadMembindGuard> guard;
        if (nodes != nullptr) {
            guard = std::make_unique<ThreadMembindGuard>(topo, nodes);
            if (!guard->active()) *placement += "; binding the allocating thread failed";
        }
        st = alloc(out);
    }
    if (st != GDX_OK || nodes == nullptr) return st;
    // For rows that hand back untouched pages (the host row's posix_memalign), the range's own policy decides
    // where the first touch lands; pages already faulted in (cuMemHostAlloc) stay where the thread policy put them.
    if (hwloc_set_area_membind(topo, *out, len, nodes, HWLOC_MEMBIND_BIND, HWLOC_MEMBIND_BYNODESET) != 0)
        GDX_DEBUG(kComp, "hwloc_set_area_membind(%p, %zu) failed: pages keep the allocation-time placement", *out,
                  len);
    return GDX_OK;
}

std::string describe_memory_location(const void *p, size_t len) {
    hwloc_topology_t topo = topology();
    if (topo == nullptr) return "unknown (no hwloc topology)";
    hwloc_bitmap_t where = hwloc_bitmap_alloc();
    if (where == nullptr) return "unknown";
    std::string out = "unknown";
    if (hwloc_get_area_memlocation(topo, p, len, where, HWLOC_MEMBIND_BYNODESET) == 0 && !hwloc_bitmap_iszero(where))
        out = "NUMA node " + nodeset_text(where);
    hwloc_bitmap_free(where);
    return out;
}

} // namespace gdx::fb
