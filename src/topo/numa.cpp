// NUMA placement from the topology (topology.h, "NUMA"): moved from src/fallback/numa_placement.cpp, so that hwloc
// has one owner and GDX_TOPO_FILE decides placement as it decides the PCIe paths.
#include "topo/topology.h"

#include "core/log.h"

#include <hwloc.h>

#include <cstdlib>

namespace gdx::topo {

namespace {
constexpr const char *kComp = "topo";

// A nodeset parsed from hwloc's list syntax; null when the text is not one.
hwloc_bitmap_t parse_nodes(const std::string &nodes) {
    hwloc_bitmap_t b = hwloc_bitmap_alloc();
    if (b != nullptr && (nodes.empty() || hwloc_bitmap_list_sscanf(b, nodes.c_str()) != 0 || hwloc_bitmap_iszero(b))) {
        hwloc_bitmap_free(b);
        return nullptr;
    }
    return b;
}

std::string nodeset_text(hwloc_const_nodeset_t nodes) {
    char *s = nullptr;
    if (hwloc_bitmap_list_asprintf(&s, nodes) < 0 || s == nullptr) return "";
    std::string out = s;
    free(s);
    return out;
}
} // namespace

int Topology::numa_nodes() const { return hwloc_get_nbobjs_by_type(topo_, HWLOC_OBJ_NUMANODE); }

std::string Topology::nodes_near(std::string_view bus_id, std::string *why) const {
    std::string bus = normalize_bus_id(bus_id);
    hwloc_obj_t pci = bus.empty() ? nullptr : hwloc_get_pcidev_by_busidstring(topo_, bus.c_str());
    hwloc_obj_t anc = pci != nullptr ? hwloc_get_non_io_ancestor_obj(topo_, pci) : nullptr;
    if (anc == nullptr || anc->nodeset == nullptr || hwloc_bitmap_iszero(anc->nodeset)) {
        *why = bus_id.empty() ? "no PCI bus id" : "PCI " + std::string(bus_id) + " not in the topology";
        return "";
    }
    return nodeset_text(anc->nodeset);
}

bool Topology::bind_area(void *p, size_t len, const std::string &nodes) const {
    if (from_file()) return false; // another machine's nodes
    hwloc_bitmap_t set = parse_nodes(nodes);
    if (set == nullptr) return false;
    bool ok = hwloc_set_area_membind(topo_, p, len, set, HWLOC_MEMBIND_BIND, HWLOC_MEMBIND_BYNODESET) == 0;
    if (!ok) GDX_DEBUG(kComp, "hwloc_set_area_membind(%p, %zu, nodes %s) failed", p, len, nodes.c_str());
    hwloc_bitmap_free(set);
    return ok;
}

Topology::ThreadMembind::ThreadMembind(const Topology &t, const std::string &nodes) : t_(t) {
    if (t.from_file()) return; // another machine's nodes
    hwloc_bitmap_t set = parse_nodes(nodes);
    hwloc_bitmap_t old = hwloc_bitmap_alloc();
    hwloc_membind_policy_t policy = HWLOC_MEMBIND_DEFAULT;
    if (set != nullptr && old != nullptr &&
        hwloc_get_membind(t.topo_, old, &policy, HWLOC_MEMBIND_THREAD | HWLOC_MEMBIND_BYNODESET) == 0)
        active_ = hwloc_set_membind(t.topo_, set, HWLOC_MEMBIND_BIND, HWLOC_MEMBIND_THREAD | HWLOC_MEMBIND_BYNODESET) == 0;
    if (set != nullptr) hwloc_bitmap_free(set);
    old_ = old;
    old_policy_ = static_cast<int>(policy);
}

Topology::ThreadMembind::~ThreadMembind() {
    auto old = static_cast<hwloc_bitmap_t>(old_);
    if (active_ && hwloc_set_membind(t_.topo_, old, static_cast<hwloc_membind_policy_t>(old_policy_),
                                     HWLOC_MEMBIND_THREAD | HWLOC_MEMBIND_BYNODESET) != 0)
        GDX_WARN(kComp, "restoring the thread's memory policy after a bound allocation failed");
    if (old != nullptr) hwloc_bitmap_free(old);
}

} // namespace gdx::topo
