#include "topo/topology.h"

#include "core/error.h"
#include "core/log.h"
#include "topo/config_vars.h"

#include <hwloc.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <strings.h>
#include <unistd.h>

namespace gdx::topo {

namespace {
constexpr const char *kComp = "topo";

bool is_bridge(hwloc_obj_t o) { return o->type == HWLOC_OBJ_BRIDGE; }
bool is_host_bridge(hwloc_obj_t o) {
    return is_bridge(o) && o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST;
}

std::string bus_id_of(hwloc_obj_t o) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%04x:%02x:%02x.%x", o->attr->pcidev.domain, o->attr->pcidev.bus,
                  o->attr->pcidev.dev, o->attr->pcidev.func);
    return buf;
}
} // namespace

const char *path_name(PathClass p) {
    switch (p) {
    case PathClass::LOC: return "LOC";
    case PathClass::PIX: return "PIX";
    case PathClass::PXB: return "PXB";
    case PathClass::PHB: return "PHB";
    case PathClass::SYS: return "SYS";
    case PathClass::Unknown: return "unknown";
    }
    return "?";
}

bool parse_path_class(std::string_view s, PathClass *out) {
    for (PathClass p : {PathClass::LOC, PathClass::PIX, PathClass::PXB, PathClass::PHB, PathClass::SYS}) {
        const char *n = path_name(p);
        if (s.size() == std::strlen(n) && strncasecmp(s.data(), n, s.size()) == 0) {
            *out = p;
            return true;
        }
    }
    return false;
}

std::string normalize_bus_id(std::string_view s) {
    // domain:bus:dev.fn in hex; CUDA writes an 8-digit domain and upper case.
    std::string t(s);
    if (t.empty() || t.find_first_not_of("0123456789abcdefABCDEF:.") != std::string::npos) return "";
    unsigned dom = 0, bus = 0, dev = 0, fn = 0;
    int used = 0;
    if (std::sscanf(t.c_str(), "%x:%x:%x.%x%n", &dom, &bus, &dev, &fn, &used) != 4 ||
        static_cast<size_t>(used) != t.size() || dom > 0xffff || bus > 0xff || dev > 0x1f || fn > 7)
        return "";
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%04x:%02x:%02x.%x", dom, bus, dev, fn);
    return buf;
}

std::string rdma_device_bus_id(const std::string &ibdev) {
    // /sys/class/infiniband/<dev>/device links to the PCI function for hardware NICs and to a virtual
    // device (or nothing) for software ones; the last path component is then not a bus id.
    std::string link = "/sys/class/infiniband/" + ibdev + "/device";
    char *real = realpath(link.c_str(), nullptr);
    if (real == nullptr) return "";
    std::string p(real);
    std::free(real);
    size_t slash = p.rfind('/');
    return normalize_bus_id(slash == std::string::npos ? p : p.substr(slash + 1));
}

Topology::~Topology() {
    if (topo_ != nullptr) hwloc_topology_destroy(topo_);
}

namespace {
// A topology with PCI bridges and devices kept (hwloc drops I/O objects by default, even from XML).
gdx_status_t make_topology(const char *xml, hwloc_topology_t *out) {
    hwloc_topology_t t = nullptr;
    if (hwloc_topology_init(&t) != 0) return fail_errno(GDX_ERR_NO_MEMORY, errno, kComp, "hwloc_topology_init");
    hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_ALL);
    // PCI from Linux sysfs rather than hwloc's libpciaccess component, which leaks its device-name database
    // on every load (Debian 12, hwloc 2.9) and adds nothing the path classes need.
    if (xml == nullptr) hwloc_topology_set_components(t, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "pci");
    if (xml != nullptr && hwloc_topology_set_xml(t, xml) != 0) {
        int err = errno;
        hwloc_topology_destroy(t);
        return fail_errno(GDX_ERR_INVALID_CONFIG, err, kComp, "GDX_TOPO_FILE=%s: cannot be read as hwloc XML", xml);
    }
    if (hwloc_topology_load(t) != 0) {
        int err = errno;
        hwloc_topology_destroy(t);
        return fail_errno(xml ? GDX_ERR_INVALID_CONFIG : GDX_ERR_IO, err, kComp, "hwloc_topology_load(%s)",
                          xml ? xml : "this machine");
    }
    *out = t;
    return GDX_OK;
}
} // namespace

gdx_status_t Topology::load_xml(const std::string &path, std::unique_ptr<Topology> *out) {
    if (access(path.c_str(), R_OK) != 0)
        return fail_errno(GDX_ERR_INVALID_CONFIG, errno, kComp, "GDX_TOPO_FILE=%s", path.c_str());
    std::unique_ptr<Topology> t(new Topology);
    gdx_status_t st = make_topology(path.c_str(), &t->topo_);
    if (st != GDX_OK) return st;
    t->file_ = path;
    t->list_devices_from_file();
    GDX_DEBUG(kComp, "topology from %s: %zu GPU(s), %zu RDMA device(s)", path.c_str(), t->gpus_.size(),
              t->nics_.size());
    *out = std::move(t);
    return GDX_OK;
}

gdx_status_t Topology::discover(std::unique_ptr<Topology> *out) {
    std::unique_ptr<Topology> t(new Topology);
    gdx_status_t st = make_topology(nullptr, &t->topo_);
    if (st != GDX_OK) return st;
    *out = std::move(t);
    return GDX_OK;
}

gdx_status_t Topology::shared(const Config &cfg, std::shared_ptr<const Topology> *out) {
    return shared(cfg.str(TopoVar::TOPO_FILE), out);
}

gdx_status_t Topology::shared(const std::string &file, std::shared_ptr<const Topology> *out) {
    static std::mutex mu;
    static std::map<std::string, std::shared_ptr<const Topology>> cache; // by file ("" = this machine)
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(file);
    if (it != cache.end()) {
        *out = it->second;
        return GDX_OK;
    }
    std::unique_ptr<Topology> t;
    gdx_status_t st = file.empty() ? discover(&t) : load_xml(file, &t);
    if (st != GDX_OK) return st;
    std::shared_ptr<const Topology> s(std::move(t));
    cache.emplace(file, s);
    *out = s;
    return GDX_OK;
}

void Topology::list_devices_from_file() {
    std::vector<std::string> gpu_bus;
    for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_pcidev(topo_, o)) != nullptr;) {
        unsigned cls = o->attr->pcidev.class_id >> 8;
        if (cls == 0x03 && o->attr->pcidev.vendor_id == 0x10de) gpu_bus.push_back(bus_id_of(o));
    }
    std::sort(gpu_bus.begin(), gpu_bus.end());
    for (size_t i = 0; i < gpu_bus.size(); ++i) gpus_.push_back({"GPU" + std::to_string(i), gpu_bus[i]});
    for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_osdev(topo_, o)) != nullptr;) {
        if (o->attr->osdev.type != HWLOC_OBJ_OSDEV_OPENFABRICS || o->name == nullptr) continue;
        hwloc_obj_t p = o->parent;
        while (p != nullptr && p->type != HWLOC_OBJ_PCI_DEVICE) p = p->parent;
        nics_.push_back({o->name, p ? bus_id_of(p) : ""});
    }
    std::sort(nics_.begin(), nics_.end(), [](const PciDevice &a, const PciDevice &b) { return a.name < b.name; });
}

PathClass Topology::path(std::string_view bus_a, std::string_view bus_b, std::string *why) const {
    auto find = [&](std::string_view b) -> hwloc_obj_t {
        std::string n = normalize_bus_id(b);
        if (n.empty()) return nullptr;
        return hwloc_get_pcidev_by_busidstring(topo_, n.c_str());
    };
    hwloc_obj_t a = find(bus_a), b = find(bus_b);
    if (a == nullptr || b == nullptr) {
        if (why) {
            std::string_view missing = a == nullptr ? bus_a : bus_b;
            *why = missing.empty() ? "not a PCI device" : "PCI " + std::string(missing) + " not in the topology";
        }
        return PathClass::Unknown;
    }
    if (a == b) return PathClass::LOC;
    // Common ancestor by walking up (hwloc's helper compares depths, which I/O objects do not have).
    std::vector<hwloc_obj_t> up_a;
    for (hwloc_obj_t o = a; o != nullptr; o = o->parent) up_a.push_back(o);
    hwloc_obj_t ca = nullptr;
    for (hwloc_obj_t o = b; o != nullptr && ca == nullptr; o = o->parent)
        if (std::find(up_a.begin(), up_a.end(), o) != up_a.end()) ca = o;
    if (ca == nullptr) {
        if (why) *why = "no common ancestor";
        return PathClass::Unknown;
    }
    if (is_bridge(ca)) {
        if (is_host_bridge(ca)) return PathClass::PHB;
        // Below the common switch port: a device directly under one downstream port of a switch has one
        // bridge between it and the switch's upstream port. More means another switch level: PXB.
        auto bridges_below = [&](hwloc_obj_t dev) {
            int n = 0;
            for (hwloc_obj_t o = dev->parent; o != nullptr && o != ca; o = o->parent) n += is_bridge(o);
            return n;
        };
        return bridges_below(a) <= 1 && bridges_below(b) <= 1 ? PathClass::PIX : PathClass::PXB;
    }
    // Ancestor is a CPU-side object: within one package the path crosses host bridges only, else the
    // inter-socket link.
    int packages = ca->cpuset ? hwloc_get_nbobjs_inside_cpuset_by_type(topo_, ca->cpuset, HWLOC_OBJ_PACKAGE) : 0;
    if (packages <= 1 && ca->nodeset != nullptr && hwloc_bitmap_weight(ca->nodeset) > 1 &&
        hwloc_get_nbobjs_by_type(topo_, HWLOC_OBJ_PACKAGE) == 0)
        packages = hwloc_bitmap_weight(ca->nodeset); // no package info: NUMA nodes stand in for sockets
    return packages > 1 ? PathClass::SYS : PathClass::PHB;
}

// ---- decisions --------------------------------------------------------------------------------------------

GdrPolicy GdrPolicy::from(const Config &cfg) {
    GdrPolicy p;
    p.gdr = cfg.ternary(TopoVar::GDR);
    parse_path_class(cfg.str(TopoVar::GDR_LEVEL), &p.level); // the table's Enum admits only valid names
    p.p2p_disabled = cfg.boolean(TopoVar::PCI_P2P_DISABLE);
    return p;
}

GdrDecision decide_gdr(const GdrPolicy &policy, PathClass path, const NicGdrCaps &caps) {
    GdrDecision d;
    if (policy.gdr == Ternary::No) {
        d.reason = "GDX_GDR=no";
        return d;
    }
    if (policy.p2p_disabled) {
        d.reason = "GDX_PCI_P2P_DISABLE=yes";
        return d;
    }
    std::string where = path_name(path);
    if (path != PathClass::Unknown && static_cast<int>(path) > static_cast<int>(policy.level)) {
        d.reason = where + " > GDX_GDR_LEVEL=" + path_name(policy.level);
        return d;
    }
    if (path == PathClass::Unknown) where = "no PCIe path";
    if (caps.known && !caps.dmabuf && !caps.peermem && !caps.odp) {
        d.reason = where + ", " + caps.summary;
        return d;
    }
    d.direct = true;
    d.reason = where + (caps.known ? ", " + caps.summary : std::string());
    return d;
}

std::vector<int> nearest_nics(const std::vector<std::vector<PathClass>> &paths,
                              const std::vector<std::string> &names, const std::vector<bool> &allowed) {
    std::vector<int> choice(paths.size(), -1);
    std::map<std::vector<int>, unsigned> seen; // candidate set → GPUs that had it so far
    for (size_t g = 0; g < paths.size(); ++g) {
        int best = INT_MAX;
        for (size_t n = 0; n < names.size() && n < paths[g].size(); ++n)
            if (allowed[n]) best = std::min(best, static_cast<int>(paths[g][n]));
        if (best == INT_MAX) continue;
        std::vector<int> cands;
        for (size_t n = 0; n < names.size() && n < paths[g].size(); ++n)
            if (allowed[n] && static_cast<int>(paths[g][n]) == best) cands.push_back(static_cast<int>(n));
        std::sort(cands.begin(), cands.end(), [&](int x, int y) { return names[x] < names[y]; });
        unsigned k = seen[cands]++;
        choice[g] = cands[k % cands.size()];
    }
    return choice;
}

bool net_device_allowed(const Config &cfg, std::string_view dev) {
    std::string_view base = dev.substr(0, dev.find(':'));
    for (const std::string &item : cfg.list(TopoVar::NET_DEVICES)) {
        if (item == "all" || item == dev || item == base) return true;
        // "mlx5_0:1" in the list allows the device "mlx5_0" (some port of it may be used).
        if (dev == base && item.size() > base.size() && item.compare(0, base.size(), base) == 0 &&
            item[base.size()] == ':')
            return true;
    }
    return false;
}

} // namespace gdx::topo
