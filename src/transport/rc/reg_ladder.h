// The registration ladder for GPU memory (and, at the end, host memory's pin-or-ODP choice): per chunk, try the rungs GDX_REG_METHODS names (dma-buf, peer
// memory, ODP) and otherwise report Reach::None so the fallback layer stages that chunk. Which rungs work is
// learned once per (device, memory type) with a sticky policy in the manner of libfabric's verbs provider
// (TRY until an outcome is known; a rung that refused with "not supported" is NEVER tried again; one that
// worked is tried first from then on), and each outcome is logged once at info.
//
// Separate from verbs through Registrar so the decision logic is testable without a NIC (tests/rc).
#pragma once

#include "core/config.h"
#include "memtype/memory_ops.h"
#include "transport/rc/device.h"
#include "topo/topology.h"
#include "transport/transport.h"

#include <cerrno>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace gdx::tp::rc {

enum class Rung : uint8_t { Dmabuf, PeerMem, Odp, kCount };
const char *rung_name(Rung r); // "dma-buf", "peer memory", "ODP"

struct RegAttempt {
    ibv_mr *mr = nullptr;
    int err = 0; // errno when mr is null
};

// What makes memory regions: ibv_reg_* on a protection domain in production (VerbsRegistrar), fakes in tests.
class Registrar {
  public:
    virtual ~Registrar() = default;
    virtual const std::string &device_name() const = 0;
    virtual const NicGdrSupport &support() = 0;
    virtual RegAttempt reg_va(void *addr, size_t len, int access) = 0; // host memory; GPU VA with peer memory
    virtual RegAttempt reg_dmabuf(int fd, uint64_t offset, size_t len, uint64_t iova, int access) = 0;
    virtual RegAttempt reg_odp(void *addr, size_t len, int access) = 0;
    virtual void dereg(ibv_mr *mr) = 0;
    // The one implicit ODP MR (whole address space, local access only) of this registrar's PD, made on first
    // use; null with *err when it cannot be made.
    virtual std::shared_ptr<ibv_mr> implicit_odp(int *err) {
        *err = EOPNOTSUPP;
        return nullptr;
    }
    // ibv_advise_mr prefetch of [addr, addr+len) through `mr`, asynchronous (a hint); 0 or the errno.
    virtual int prefetch(ibv_mr *mr, void *addr, size_t len, bool write) {
        (void)mr, (void)addr, (void)len, (void)write;
        return EOPNOTSUPP;
    }
};

// The memtype row's export (mem::Ops::dmabuf_fd's signature); tests inject failures through it.
using DmabufExport = gdx_status_t (*)(const void *ptr, size_t len, int *fd, uint64_t *offset);

class VerbsRegistrar final : public Registrar {
  public:
    explicit VerbsRegistrar(std::shared_ptr<DeviceCtx> dev) : dev_(std::move(dev)) {}
    const std::string &device_name() const override { return dev_->name(); }
    const NicGdrSupport &support() override { return dev_->gdr_support(); }
    RegAttempt reg_va(void *addr, size_t len, int access) override;
    RegAttempt reg_dmabuf(int fd, uint64_t offset, size_t len, uint64_t iova, int access) override;
    RegAttempt reg_odp(void *addr, size_t len, int access) override;
    void dereg(ibv_mr *mr) override;
    std::shared_ptr<ibv_mr> implicit_odp(int *err) override;
    int prefetch(ibv_mr *mr, void *addr, size_t len, bool write) override;

  private:
    std::shared_ptr<DeviceCtx> dev_;
    std::mutex implicit_mu_;
    std::shared_ptr<ibv_mr> implicit_;
};

struct LadderConfig {
    Ternary gdr = Ternary::Try;
    std::vector<Rung> order{Rung::Dmabuf, Rung::PeerMem};
    uint64_t chunk = 1ull << 30;
    uint64_t odp_min = UINT64_MAX; // GDX_RC_ODP_MIN: pageable host registrations this large go to ODP first
    bool odp() const;              // GDX_REG_METHODS lists odp
    static LadderConfig from(const Config &cfg);
};

// The sticky outcome table, process-wide (all interfaces on a device share what was learned).
enum class RungState : uint8_t { Untried, Works, Never };
RungState learned_state(const std::string &device, mem::MemType type, Rung r);
void reset_learned_for_test();

inline constexpr unsigned kMaxChunks = 16;
// Chunk size for a region of `len`: the whole region up to `cfg_chunk`, else equal 64 KiB-aligned chunks, at
// most kMaxChunks of them.
size_t chunk_size_for(size_t len, uint64_t cfg_chunk);

struct Chunk {
    ChunkReg reg;
    ibv_mr *mr = nullptr; // null when reg.reach == Reach::None
};

// Registers GPU memory [addr, addr+len) described by `info`, chunk by chunk. `gate` is the topology/policy
// decision: when it is not direct every chunk is Reach::None with its reason and nothing is tried. ibv_access
// is the verbs access of the registration. Returns GDX_OK with each chunk's outcome (in order, tiling the
// region), or GDX_ERR_UNSUPPORTED when GDX_GDR=yes and some chunk can only be staged (nothing is left
// registered then).
gdx_status_t register_gpu(Registrar &reg, DmabufExport exporter, const LadderConfig &cfg, void *addr, size_t len,
                          const mem::MemInfo &info, int ibv_access, const topo::GdrDecision &gate,
                          const std::string &gpu_name, std::vector<Chunk> *out);

// A host memory registration: pinned (ibv_reg_mr), or with GDX_REG_METHODS=...,odp pageable memory through
// on-demand paging when pinning is refused (RLIMIT_MEMLOCK) or the region is at least GDX_RC_ODP_MIN. `shared`
// holds the implicit ODP MR when `mr` is it (it is not deregistered with the region then).
struct HostReg {
    ibv_mr *mr = nullptr;
    std::shared_ptr<ibv_mr> shared;
    Reach reach = Reach::Host;
    std::string reason; // "host memory (pinned)", "ODP: pinning refused (ibv_reg_mr: ENOMEM, ...)"
};
gdx_status_t register_host(Registrar &reg, const LadderConfig &cfg, void *addr, size_t len, const mem::MemInfo &info,
                           int ibv_access, HostReg *out);
// One line on what register_host does with pageable host memory on this device (gdx_info -t).
std::string host_reg_policy(const LadderConfig &cfg, const NicGdrSupport &sup);

} // namespace gdx::tp::rc
