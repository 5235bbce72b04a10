#include "transport/rc/reg_ladder.h"

#include "core/error.h"
#include "core/log.h"
#include "transport/rc/config_vars.h"
#include "topo/config_vars.h"

#include <algorithm>
#include <cerrno>
#include <map>
#include <mutex>
#include <sys/resource.h>
#include <unistd.h>

namespace gdx::tp::rc {

const char *rung_name(Rung r) {
    switch (r) {
    case Rung::Dmabuf: return "dma-buf";
    case Rung::PeerMem: return "peer memory";
    case Rung::Odp: return "ODP";
    case Rung::kCount: break;
    }
    return "?";
}

// ---- verbs --------------------------------------------------------------------------------------------------

RegAttempt VerbsRegistrar::reg_va(void *addr, size_t len, int access) {
    RegAttempt a;
    errno = 0;
    a.mr = ibv_reg_mr(dev_->pd(), addr, len, access);
    if (a.mr == nullptr) a.err = errno ? errno : EIO;
    return a;
}

RegAttempt VerbsRegistrar::reg_dmabuf(int fd, uint64_t offset, size_t len, uint64_t iova, int access) {
    RegAttempt a;
    errno = 0;
    a.mr = ibv_reg_dmabuf_mr(dev_->pd(), offset, len, iova, fd, access);
    if (a.mr == nullptr) a.err = errno ? errno : EIO;
    return a;
}

RegAttempt VerbsRegistrar::reg_odp(void *addr, size_t len, int access) {
    return reg_va(addr, len, access | IBV_ACCESS_ON_DEMAND);
}

void VerbsRegistrar::dereg(ibv_mr *mr) {
    if (mr == nullptr) return;
    if (int rc = ibv_dereg_mr(mr)) fail_errno(GDX_ERR_DRIVER, rc, kComp, "%s: ibv_dereg_mr", dev_->name().c_str());
}

std::shared_ptr<ibv_mr> VerbsRegistrar::implicit_odp(int *err) {
    std::lock_guard<std::mutex> lock(implicit_mu_);
    if (implicit_ == nullptr) {
        // Local access only: an implicit MR's rkey would open the whole address space to the peer.
        RegAttempt a = reg_odp(nullptr, SIZE_MAX, IBV_ACCESS_LOCAL_WRITE);
        if (a.mr == nullptr) {
            *err = a.err;
            return nullptr;
        }
        std::shared_ptr<DeviceCtx> dev = dev_; // the PD outlives the MR
        implicit_ = std::shared_ptr<ibv_mr>(a.mr, [dev](ibv_mr *mr) {
            if (int rc = ibv_dereg_mr(mr))
                fail_errno(GDX_ERR_DRIVER, rc, kComp, "%s: ibv_dereg_mr (implicit ODP)", dev->name().c_str());
        });
    }
    *err = 0;
    return implicit_;
}

int VerbsRegistrar::prefetch(ibv_mr *mr, void *addr, size_t len, bool write) {
    // One SGE holds at most 4 GiB - 1: cut larger ranges into 1 GiB pieces.
    const size_t kPiece = 1ull << 30;
    char *p = static_cast<char *>(addr);
    for (size_t off = 0; off < len; off += kPiece) {
        ibv_sge sge{reinterpret_cast<uintptr_t>(p + off), static_cast<uint32_t>(std::min(kPiece, len - off)), mr->lkey};
        int rc = ibv_advise_mr(dev_->pd(), write ? IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE : IBV_ADVISE_MR_ADVICE_PREFETCH,
                               0, &sge, 1);
        if (rc != 0) return rc;
    }
    return 0;
}

// ---- configuration and the learned table ------------------------------------------------------------------

LadderConfig LadderConfig::from(const Config &cfg) {
    LadderConfig c;
    c.gdr = cfg.ternary(topo::TopoVar::GDR);
    c.order.clear();
    for (const std::string &m : cfg.list(RcVar::REG_METHODS)) {
        Rung r = m == "dmabuf" ? Rung::Dmabuf : m == "peermem" ? Rung::PeerMem : Rung::Odp;
        if (std::find(c.order.begin(), c.order.end(), r) == c.order.end()) c.order.push_back(r);
    }
    c.chunk = cfg.size(RcVar::RC_REG_CHUNK);
    c.odp_min = cfg.size(RcVar::RC_ODP_MIN);
    return c;
}

bool LadderConfig::odp() const { return std::find(order.begin(), order.end(), Rung::Odp) != order.end(); }

namespace {
struct Learned {
    RungState state[static_cast<int>(Rung::kCount)] = {};
};
std::mutex g_mu;
std::map<std::string, Learned> g_learned; // key: device + "/" + memory type

std::string key_of(const std::string &dev, mem::MemType t) { return dev + "/" + mem::type_name(t); }

// Refusals that mean "this device/kernel never does it", as opposed to "not this buffer" (EFAULT, ENOMEM,
// EINVAL for one range). 524 is the kernel's ENOTSUPP leaking out (UCX PR #11584).
bool never_errno(int e) { return e == EOPNOTSUPP || e == EPROTONOSUPPORT || e == ENOSYS || e == 524; }

// Device-resident GPU memory that the peer-memory client can pin (nvidia_p2p_get_pages): not managed memory,
// and not stream-ordered pool memory (UCX types pools as managed for the same reason).
bool peermem_type(mem::MemType t) {
    return t == mem::MemType::CudaDevice || t == mem::MemType::CudaVmm || t == mem::MemType::CudaIpcImported;
}
} // namespace

RungState learned_state(const std::string &device, mem::MemType type, Rung r) {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_learned.find(key_of(device, type));
    return it == g_learned.end() ? RungState::Untried : it->second.state[static_cast<int>(r)];
}

void reset_learned_for_test() {
    std::lock_guard<std::mutex> lock(g_mu);
    g_learned.clear();
}

size_t chunk_size_for(size_t len, uint64_t cfg_chunk) {
    if (cfg_chunk == 0 || len <= cfg_chunk) return len;
    const size_t align = 64 * 1024; // GPU pages: chunk edges stay on them
    size_t per = std::max<size_t>(cfg_chunk, (len + kMaxChunks - 1) / kMaxChunks);
    return (per + align - 1) / align * align;
}

// ---- the ladder ---------------------------------------------------------------------------------------------

namespace {

// One rung on one chunk. Returns true with *mr when it registered the chunk; false with *why saying why not
// (not applicable, or the errno it failed with). Updates the learned state on definite outcomes.
bool try_rung(Registrar &reg, DmabufExport exporter, Rung r, char *p, size_t n, const mem::MemInfo &info,
              int access, Learned &learned, std::string *why, ibv_mr **mr) {
    const NicGdrSupport &sup = reg.support();
    RungState &st = learned.state[static_cast<int>(r)];
    RegAttempt a;
    switch (r) {
    case Rung::Dmabuf: {
        if (!sup.dmabuf) {
            *why = "no dma-buf (" + errno_name(sup.dmabuf_errno) + ")";
            st = RungState::Never;
            return false;
        }
        if (!info.dmabuf_allowed) {
            *why = std::string("dma-buf not allowed for ") + mem::type_name(info.type) + " memory";
            return false;
        }
        if (st == RungState::Never) {
            *why = "dma-buf refused before (not tried again)";
            return false;
        }
        if (exporter == nullptr) {
            *why = "no dma-buf exporter for this memory kind";
            return false;
        }
        int fd = -1;
        uint64_t off = 0;
        gdx_status_t es = exporter(p, n, &fd, &off);
        if (es != GDX_OK) {
            *why = std::string("dma-buf export failed (") + gdx_status_string(es) + ")";
            return false;
        }
        a = reg.reg_dmabuf(fd, off, n, reinterpret_cast<uintptr_t>(p), access);
        close(fd); // the MR holds its own reference to the dma-buf
        break;
    }
    case Rung::PeerMem:
        if (!sup.peermem) {
            *why = "no peer memory";
            st = RungState::Never;
            return false;
        }
        if (!peermem_type(info.type)) {
            *why = std::string("peer memory does not pin ") + mem::type_name(info.type) + " memory";
            return false;
        }
        if (st == RungState::Never) {
            *why = "peer memory refused before (not tried again)";
            return false;
        }
        a = reg.reg_va(p, n, access);
        break;
    case Rung::Odp:
        if (!sup.odp) {
            *why = sup.odp_why.empty() ? "no ODP" : sup.odp_why;
            st = RungState::Never;
            return false;
        }
        if (st == RungState::Never) {
            *why = "ODP refused before (not tried again)";
            return false;
        }
        a = reg.reg_odp(p, n, access);
        break;
    case Rung::kCount: return false;
    }
    if (a.mr != nullptr) {
        st = RungState::Works;
        *why = rung_name(r);
        *mr = a.mr;
        return true;
    }
    *why = std::string(rung_name(r)) + ": " + errno_name(a.err);
    if (never_errno(a.err)) st = RungState::Never;
    return false;
}

std::string join(const std::vector<std::string> &v) {
    std::string s;
    for (const std::string &x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
}

} // namespace

gdx_status_t register_gpu(Registrar &reg, DmabufExport exporter, const LadderConfig &cfg, void *addr, size_t len,
                          const mem::MemInfo &info, int access, const topo::GdrDecision &gate,
                          const std::string &gpu_name, std::vector<Chunk> *out) {
    out->clear();
    const std::string &dev = reg.device_name();
    const std::string log_key = "gdr:" + gpu_name + ":" + dev + ":" + mem::type_name(info.type);
    size_t cs = chunk_size_for(len, cfg.chunk);
    auto all_none = [&](const std::string &why) {
        for (size_t off = 0; off < len; off += cs) out->push_back({{off, std::min(cs, len - off), Reach::None, why}});
        if (out->empty()) out->push_back({{0, 0, Reach::None, why}});
    };
    if (!gate.direct) {
        if (cfg.gdr == Ternary::Yes)
            return GDX_FAIL(GDX_ERR_UNSUPPORTED, kComp, "GDX_GDR=yes, but %s memory on %s cannot be reached by %s: %s",
                            mem::type_name(info.type), gpu_name.c_str(), dev.c_str(), gate.reason.c_str());
        GDX_LOG_ONCE(log::Level::Info, kComp, log_key, "GPUDirect unavailable for %s / %s: %s: staging",
                     gpu_name.c_str(), dev.c_str(), gate.reason.c_str());
        all_none(gate.reason);
        return GDX_OK;
    }

    std::unique_lock<std::mutex> lock(g_mu); // the learned table; registrations are rare next to lookups
    Learned &learned = g_learned[key_of(dev, info.type)];
    char *base = static_cast<char *>(addr);
    std::string staged_why, failover;
    Rung used = Rung::kCount;
    for (size_t off = 0; off < len; off += cs) {
        size_t n = std::min(cs, len - off);
        // Rungs that worked before go first (sticky), then the configured order.
        std::vector<Rung> order = cfg.order;
        std::stable_sort(order.begin(), order.end(), [&](Rung a, Rung b) {
            return (learned.state[static_cast<int>(a)] == RungState::Works) >
                   (learned.state[static_cast<int>(b)] == RungState::Works);
        });
        std::vector<std::string> why_not;
        Chunk c{{off, n, Reach::None, ""}};
        for (Rung r : order) {
            std::string why;
            ibv_mr *mr = nullptr;
            if (try_rung(reg, exporter, r, base + off, n, info, access, learned, &why, &mr)) {
                c.mr = mr;
                c.reg.reach = r == Rung::Dmabuf ? Reach::Dmabuf : r == Rung::PeerMem ? Reach::PeerMem : Reach::Odp;
                c.reg.reason = why_not.empty() ? why : why + " (after " + join(why_not) + ")";
                if (!why_not.empty() && failover.empty()) failover = c.reg.reason;
                used = r;
                break;
            }
            why_not.push_back(why);
        }
        if (c.mr == nullptr) {
            c.reg.reason = (why_not.empty() ? std::string("no registration method in GDX_REG_METHODS")
                                            : join(why_not));
            if (staged_why.empty()) staged_why = c.reg.reason;
        }
        out->push_back(std::move(c));
    }
    lock.unlock();

    if (!staged_why.empty() && cfg.gdr == Ternary::Yes) {
        for (Chunk &c : *out)
            if (c.mr != nullptr) reg.dereg(c.mr);
        out->clear();
        return GDX_FAIL(GDX_ERR_UNSUPPORTED, kComp,
                        "GDX_GDR=yes, but %s memory on %s cannot be registered with %s: %s (GDX_REG_METHODS order)",
                        mem::type_name(info.type), gpu_name.c_str(), dev.c_str(), staged_why.c_str());
    }
    if (used == Rung::kCount) {
        GDX_LOG_ONCE(log::Level::Info, kComp, log_key, "GPUDirect unavailable for %s / %s: %s: staging",
                     gpu_name.c_str(), dev.c_str(), staged_why.c_str());
    } else {
        GDX_LOG_ONCE(log::Level::Info, kComp, log_key, "GPUDirect for %s / %s (%s memory): %s%s%s", gpu_name.c_str(),
                     dev.c_str(), mem::type_name(info.type), rung_name(used),
                     staged_why.empty() ? "" : "; some chunks staged: ", staged_why.c_str());
        if (!failover.empty())
            GDX_LOG_ONCE(log::Level::Info, kComp, log_key + ":failover", "%s / %s (%s memory): %s", gpu_name.c_str(),
                         dev.c_str(), mem::type_name(info.type), failover.c_str());
    }
    return GDX_OK;
}

// ---- host memory: pinned, or ODP ------------------------------------------------------------------------

namespace {

// The kernel's "you may not pin that much" (ib_umem_get over RLIMIT_MEMLOCK without CAP_IPC_LOCK).
bool pin_refused(int e) { return e == ENOMEM || e == EAGAIN || e == EPERM; }

std::string memlock_text() {
    rlimit rl{};
    if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0) return "RLIMIT_MEMLOCK unknown: " + errno_name(errno);
    return "RLIMIT_MEMLOCK " + (rl.rlim_cur == RLIM_INFINITY ? std::string("unlimited") : format_size(rl.rlim_cur));
}

gdx_status_t status_of(int e) { return e == ENOMEM ? GDX_ERR_NO_MEMORY : e == EFAULT ? GDX_ERR_INVALID_ADDR : GDX_ERR_DRIVER; }

// One ODP registration of [addr, addr+len): the implicit MR for local-only access where the device has one,
// else an explicit MR; then a prefetch where the device has ibv_advise_mr. false with *why on failure.
bool odp_register(Registrar &reg, const NicGdrSupport &sup, void *addr, size_t len, int access, HostReg *out,
                  std::string *why) {
    const int remote = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;
    if (sup.odp_implicit && (access & remote) == 0) {
        int err = 0;
        out->shared = reg.implicit_odp(&err);
        out->mr = out->shared.get();
        if (out->mr == nullptr)
            GDX_LOG_ONCE(log::Level::Info, kComp, "odp-implicit:" + reg.device_name(),
                         "%s: implicit ODP MR refused (%s): explicit ODP MRs instead", reg.device_name().c_str(),
                         errno_name(err).c_str());
    }
    if (out->mr == nullptr) {
        RegAttempt a = reg.reg_odp(addr, len, access);
        if (a.mr == nullptr) {
            *why = "ibv_reg_mr ON_DEMAND: " + errno_name(a.err);
            return false;
        }
        out->mr = a.mr;
    }
    out->reach = Reach::Odp;
    if (sup.odp_prefetch) {
        if (int rc = reg.prefetch(out->mr, addr, len, (access & IBV_ACCESS_LOCAL_WRITE) != 0))
            GDX_DEBUG(kComp, "%s: ibv_advise_mr prefetch of [%p, +%zu): %s (a hint; the NIC faults pages in instead)",
                      reg.device_name().c_str(), addr, len, errno_name(rc).c_str());
    }
    return true;
}

} // namespace

gdx_status_t register_host(Registrar &reg, const LadderConfig &cfg, void *addr, size_t len, const mem::MemInfo &info,
                           int access, HostReg *out) {
    *out = HostReg{};
    const std::string &dev = reg.device_name();
    // Pinned and registered host memory is resident already: pinning it costs nothing, ODP would gain nothing.
    const bool want_odp = cfg.odp() && info.type == mem::MemType::HostPageable;
    const NicGdrSupport *sup = want_odp ? &reg.support() : nullptr;
    if (want_odp && !sup->odp)
        GDX_LOG_ONCE(log::Level::Info, kComp, "host-odp:" + dev,
                     "%s: GDX_REG_METHODS has odp, but %s: pageable host memory is pinned", dev.c_str(),
                     sup->odp_text().c_str());
    std::string odp_failed;
    auto via_odp = [&](const char *kind, const std::string &because) {
        std::string why;
        if (!odp_register(reg, *sup, addr, len, access, out, &why)) {
            odp_failed = "ODP failed (" + why + ")";
            return false;
        }
        out->reason = "ODP" + std::string(out->shared ? " (implicit MR)" : "") + ": " + because;
        GDX_LOG_ONCE(log::Level::Info, kComp, "host-odp-used:" + dev + ":" + kind,
                     "%s: pageable host memory registered with on-demand paging (nothing pinned): %s%s", dev.c_str(),
                     because.c_str(), sup->odp_prefetch ? "" : "; no prefetch (ibv_advise_mr refused at the probe)");
        GDX_DEBUG(kComp, "%s: [%p, +%zu): %s", dev.c_str(), addr, len, out->reason.c_str());
        return true;
    };
    if (want_odp && sup->odp && len >= cfg.odp_min &&
        via_odp("size", std::to_string(len) + " bytes >= GDX_RC_ODP_MIN=" + format_size(cfg.odp_min)))
        return GDX_OK;

    RegAttempt a = reg.reg_va(addr, len, access);
    if (a.mr != nullptr) {
        out->mr = a.mr;
        out->reason = odp_failed.empty() ? "host memory (pinned)" : "host memory (pinned; " + odp_failed + ")";
        return GDX_OK;
    }
    if (want_odp && pin_refused(a.err)) {
        const std::string refusal = "ibv_reg_mr: " + errno_name(a.err) + ", " + memlock_text();
        if (sup->odp && odp_failed.empty() && via_odp("refused", "pinning refused (" + refusal + ")")) return GDX_OK;
        return GDX_FAIL(status_of(a.err), kComp, "%s: pinning %zu bytes of %s memory at %p refused (%s), and %s", dev.c_str(),
                        len, mem::type_name(info.type), addr, refusal.c_str(),
                        !odp_failed.empty() ? odp_failed.c_str() : sup->odp ? "ODP failed" : sup->odp_text().c_str());
    }
    const char *hint = !pin_refused(a.err) ? ""
                       : cfg.odp()         ? " (locked-memory limit? see ulimit -l)"
                                           : " (locked-memory limit? see ulimit -l; GDX_REG_METHODS=...,odp registers "
                                             "pageable memory on demand where the device has ODP)";
    return fail_errno(status_of(a.err), a.err, kComp, "%s: ibv_reg_mr(%p, %zu, %s)%s", dev.c_str(), addr, len,
                      mem::type_name(info.type), hint);
}

std::string host_reg_policy(const LadderConfig &cfg, const NicGdrSupport &sup) {
    if (!cfg.odp()) return "pageable host memory is pinned (GDX_REG_METHODS has no odp)";
    if (!sup.odp) return "pageable host memory is pinned: GDX_REG_METHODS has odp, but " + sup.odp_text();
    std::string s = "pageable host memory is pinned, and registered with ODP where pinning is refused (" +
                    memlock_text() + ")";
    if (cfg.odp_min != UINT64_MAX) s = "pageable host memory of at least GDX_RC_ODP_MIN=" + format_size(cfg.odp_min) +
                                       " is registered with ODP, smaller is pinned (ODP where pinning is refused)";
    return s + "; " + sup.odp_text();
}

} // namespace gdx::tp::rc
