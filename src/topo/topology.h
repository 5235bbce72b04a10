// The machine's topology (src/topo/README.md): PCIe paths between GPUs and RDMA devices, the GPUDirect decision
// they gate, and the NUMA nodes nearest a device (where the staging engine places its bounce pools).
//
// A separate concern from any transport: it answers "how far apart are these two PCI devices" (NCCL's path
// classes), "which NIC is nearest to this GPU", "may the NIC reach this GPU's memory directly" and "which NUMA
// node is nearest this device". The rc transport asks it before trying any GPU registration rung, the staging
// engine when it places a pool; gdx_info -t prints its answers. It is gdx's one hwloc user: this machine's
// topology, or an hwloc XML named by GDX_TOPO_FILE so tests and what-if runs use real machines' topologies; and
// sysfs. It never touches verbs or CUDA itself: callers hand it bus ids and NIC capabilities.
#pragma once

#include "core/config.h"
#include "gdx/status.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

struct hwloc_topology; // hwloc's handle type (hwloc_topology_t), kept out of this header

namespace gdx::topo {

// NCCL's names, nearest first. LOC: the same PCI device. PIX: at most one PCIe switch between them. PXB:
// several switches, no host bridge. PHB: through a host bridge (same CPU socket). SYS: across the inter-socket
// link. Unknown: a device is not on PCIe at all (software RDMA such as rxe) or not in the topology.
enum class PathClass : uint8_t { LOC, PIX, PXB, PHB, SYS, Unknown };
const char *path_name(PathClass p);
bool parse_path_class(std::string_view s, PathClass *out); // case-insensitive LOC..SYS

// "0000:3B:00.0", "00000000:3b:00.0" → "0000:3b:00.0"; "" when it is not a PCI bus id.
std::string normalize_bus_id(std::string_view s);

// PCI bus id of an RDMA device from sysfs (/sys/class/infiniband/<dev>/device); "" for virtual devices
// (rxe, siw) that sit on no PCI function.
std::string rdma_device_bus_id(const std::string &ibdev);

struct PciDevice {
    std::string name;   // "GPU0", "mlx5_0"
    std::string bus_id; // normalized; "" when the device has none
};

class Topology {
  public:
    ~Topology();
    Topology(const Topology &) = delete;
    Topology &operator=(const Topology &) = delete;

    // The hwloc XML at `path` (GPUs and NICs are then those the file describes).
    static gdx_status_t load_xml(const std::string &path, std::unique_ptr<Topology> *out);
    // This machine, I/O devices included. GPUs and NICs are not listed from it (callers know them from CUDA
    // and libibverbs); only path() is used.
    static gdx_status_t discover(std::unique_ptr<Topology> *out);
    // GDX_TOPO_FILE when set, else this machine; built once per process per source and shared (hwloc
    // discovery costs tens of milliseconds).
    static gdx_status_t shared(const Config &cfg, std::shared_ptr<const Topology> *out);
    // The same for an explicit source: the hwloc XML at `file`, or this machine when it is "".
    static gdx_status_t shared(const std::string &file, std::shared_ptr<const Topology> *out);

    bool from_file() const { return !file_.empty(); }
    const std::string &file() const { return file_; }
    // From a file: NVIDIA display/3D controllers in bus-id order (GPU0, GPU1, ..., the PCI_BUS_ID order) and
    // OpenFabrics devices (their OS device names). From discovery: empty.
    const std::vector<PciDevice> &gpus() const { return gpus_; }
    const std::vector<PciDevice> &nics() const { return nics_; }

    // Path class between the PCI devices with these bus ids. *why (optional) says why it is Unknown.
    PathClass path(std::string_view bus_a, std::string_view bus_b, std::string *why = nullptr) const;

    // ---- NUMA (numa.cpp) ----
    int numa_nodes() const;
    // The NUMA nodes nearest the PCI device `bus_id` (its nearest non-I/O ancestor's nodes), in hwloc's list
    // syntax ("1", "0-1"); "" with *why when the device is not in the topology.
    std::string nodes_near(std::string_view bus_id, std::string *why) const;
    // Binds [p, p+len) to `nodes` (a nodes_near list) before anything touches it. False when hwloc or the kernel
    // refuse, and always for a topology from a file (it is not this machine's).
    bool bind_area(void *p, size_t len, const std::string &nodes) const;
    // While alive, the calling thread's memory policy is bound to `nodes` (restored on destruction), so that an
    // allocator faulting its pages in on this thread (cuMemHostAlloc) puts them there. Never active for a topology
    // from a file.
    class ThreadMembind {
      public:
        ThreadMembind(const Topology &t, const std::string &nodes);
        ~ThreadMembind();
        ThreadMembind(const ThreadMembind &) = delete;
        ThreadMembind &operator=(const ThreadMembind &) = delete;
        bool active() const { return active_; }

      private:
        const Topology &t_;
        void *old_ = nullptr; // hwloc_bitmap_t: the policy's nodes before
        int old_policy_ = 0;  // hwloc_membind_policy_t
        bool active_ = false;
    };

  private:
    Topology() = default;
    void list_devices_from_file();
    ::hwloc_topology *topo_ = nullptr;
    std::string file_;
    std::vector<PciDevice> gpus_, nics_;
};

// ---- decisions --------------------------------------------------------------------------------------------

// What a NIC can do with GPU memory (from the rc transport's probe). known=false: not probed (topology file).
struct NicGdrCaps {
    bool known = false;
    bool dmabuf = false;
    bool peermem = false;
    bool odp = false;
    std::string summary; // "dma-buf yes", "no dma-buf (EOPNOTSUPP), no peer memory"
};

struct GdrPolicy {
    Ternary gdr = Ternary::Try;      // GDX_GDR
    PathClass level = PathClass::PXB; // GDX_GDR_LEVEL
    bool p2p_disabled = false;        // GDX_PCI_P2P_DISABLE
    static GdrPolicy from(const Config &cfg);
};

struct GdrDecision {
    bool direct = false;
    std::string reason; // "SYS > GDX_GDR_LEVEL=PXB", "GDX_GDR=no", "PIX, dma-buf yes"
};

// May the NIC reach GPU memory directly over `path`? Policy first (GDR=no, P2P disabled), then the path
// against GDX_GDR_LEVEL (an Unknown path does not gate: software NICs reach nothing anyway and their rungs
// say so), then the NIC's capabilities when known.
GdrDecision decide_gdr(const GdrPolicy &policy, PathClass path, const NicGdrCaps &caps);

// For each GPU, the index of its nearest allowed NIC (-1: none allowed). Among equally near NICs the choice
// is stable and spreads GPUs: the k-th GPU with a given set of nearest NICs takes the (k mod n)-th of them in
// name order. allowed[i] says whether NIC i may be used (GDX_NET_DEVICES).
std::vector<int> nearest_nics(const std::vector<std::vector<PathClass>> &gpu_nic_paths,
                              const std::vector<std::string> &nic_names, const std::vector<bool> &allowed);

// GDX_NET_DEVICES allows `dev` when it lists "all", the device ("mlx5_0") or one of its ports ("mlx5_0:1").
bool net_device_allowed(const Config &cfg, std::string_view dev);

} // namespace gdx::topo
