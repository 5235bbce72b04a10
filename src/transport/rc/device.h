// One opened RDMA device port for the rc transport: context + protection domain, the port's addressing (RoCE
// GID or InfiniBand LID), and what the NIC can do with GPU memory (probed once per device per process).
#pragma once

#include "core/config.h"
#include "gdx/status.h"
#include "topo/topology.h"

#include <infiniband/verbs.h>

#include <memory>
#include <string>
#include <vector>

namespace gdx::tp::rc {

inline constexpr const char *kComp = "rc";

// "EOPNOTSUPP" for an errno value (strerrorname_np where glibc has it), "errno N" otherwise.
std::string errno_name(int err);

// GPUDirect-relevant abilities of a NIC, learned once per device name. Each "why" is what the log and the
// chunk reasons quote.
struct NicGdrSupport {
    bool dmabuf = false;     // ibv_reg_dmabuf_mr(fd = -1) failed with EBADF: the provider implements it
    int dmabuf_errno = 0;    // the probe's errno (EBADF when supported)
    bool peermem = false;    // an NVIDIA peer-memory client is loaded in this kernel
    std::string peermem_how; // which evidence: "/sys/module/nvidia_peermem/version", "/proc/kallsyms ..."
    bool odp = false;        // device reports RC ODP for read, write, send and recv
    int odp_errno = 0;       // errno of a trial ON_DEMAND registration (0 when it worked)
    std::string odp_why;     // "no ODP (device reports none; ibv_reg_mr ON_DEMAND: EINVAL)"
    bool odp_implicit = false; // IBV_ODP_SUPPORT_IMPLICIT claimed and a whole-address-space MR was made
    int implicit_errno = 0;    // the implicit trial's errno (0: worked or not claimed)
    bool odp_prefetch = false; // ibv_advise_mr(PREFETCH_WRITE) worked on the trial ODP MR
    int prefetch_errno = 0;    // its errno otherwise (EOPNOTSUPP: provider or kernel has no advise_mr)
    std::string odp_check;     // the loopback data check's outcome (odp_check.h); "" when not run
    std::string odp_text() const; // "ODP yes (explicit; implicit no; prefetch no: EOPNOTSUPP; ...)", or odp_why
    std::string summary() const; // "dma-buf yes, peer memory no, ODP no"
    topo::NicGdrCaps caps() const;
};

// Peer-memory client presence (host-wide, cached): the sysfs files of nv_peer_mem / nvidia-peermem, then
// /proc/kallsyms for ib_register_peer_memory_client (MLNX_OFED kernels whose module has no sysfs version).
// `how` names the evidence found, or what was checked.
bool detect_peermem(std::string *how);

// Device context and protection domain, shared by an interface, its memory domain and every registration
// made through it (so MRs are deregistered before the PD goes).
class DeviceCtx {
  public:
    ~DeviceCtx();
    DeviceCtx(const DeviceCtx &) = delete;
    DeviceCtx &operator=(const DeviceCtx &) = delete;

    // Opens device `dev` ("rxe0", "mlx5_0"), picks port `port` (0: first ACTIVE one) and its GID (RoCE).
    static gdx_status_t open(const std::string &dev, uint8_t port, const Config &cfg,
                             std::shared_ptr<DeviceCtx> *out);

    ibv_context *ctx() const { return ctx_; }
    ibv_pd *pd() const { return pd_; }
    const std::string &name() const { return name_; }
    std::string port_name() const { return name_ + ":" + std::to_string(port_); }
    uint8_t port() const { return port_; }
    const ibv_port_attr &port_attr() const { return port_attr_; }
    const ibv_device_attr_ex &dev_attr() const { return dev_attr_; }
    bool is_roce() const { return port_attr_.link_layer == IBV_LINK_LAYER_ETHERNET; }
    int gid_index() const { return gid_index_; } // -1 on InfiniBand (LID addressing)
    const ibv_gid &gid() const { return gid_; }
    const std::string &gid_text() const { return gid_text_; }
    const std::string &bus_id() const { return bus_id_; } // "" for software devices
    // Probed on first use (with the ODP data check where the device claims ODP); process-wide per device name.
    const NicGdrSupport &gdr_support();

  private:
    DeviceCtx() = default;
    gdx_status_t select_gid(const Config &cfg);
    ibv_context *ctx_ = nullptr;
    ibv_pd *pd_ = nullptr;
    std::string name_;
    uint8_t port_ = 0;
    ibv_port_attr port_attr_{};
    ibv_device_attr_ex dev_attr_{};
    int gid_index_ = -1;
    ibv_gid gid_{};
    std::string gid_text_;
    std::string bus_id_;
    const NicGdrSupport *support_ = nullptr;
};

// Probes one opened device (dma-buf fd=-1 probe, ODP caps + a trial registration). Exposed for tests.
NicGdrSupport probe_gdr_support(ibv_context *ctx, ibv_pd *pd, const ibv_device_attr_ex &attr);

// Every RDMA device and ACTIVE port ("rxe0:1") with its PCI bus id.
struct PortDesc {
    std::string device;
    uint8_t port = 0;
    std::string bus_id;
};
gdx_status_t list_ports(std::vector<PortDesc> *out);

} // namespace gdx::tp::rc
