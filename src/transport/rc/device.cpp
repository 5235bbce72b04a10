#include "transport/rc/device.h"

#include "core/error.h"
#include "core/log.h"
#include "transport/rc/config_vars.h"
#include "transport/rc/odp_check.h"

#include <arpa/inet.h>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <sys/mman.h>
#include <unistd.h>

namespace gdx::tp::rc {

std::string errno_name(int err) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
    if (const char *n = strerrorname_np(err)) return n;
#endif
    return "errno " + std::to_string(err);
}

std::string NicGdrSupport::summary() const {
    std::string s = dmabuf ? "dma-buf yes" : "no dma-buf (" + errno_name(dmabuf_errno) + ")";
    s += peermem ? ", peer memory yes" : ", no peer memory";
    if (odp) s += ", " + odp_text();
    return s;
}

std::string NicGdrSupport::odp_text() const {
    if (!odp) return odp_why.empty() ? "no ODP" : odp_why;
    std::string s = "ODP yes (explicit; implicit ";
    s += odp_implicit ? "yes" : implicit_errno ? "no: " + errno_name(implicit_errno) : "no";
    s += odp_prefetch ? "; prefetch yes" : "; prefetch no: ibv_advise_mr " + errno_name(prefetch_errno);
    return s + (odp_check.empty() ? ")" : "; data check: " + odp_check + ")");
}

topo::NicGdrCaps NicGdrSupport::caps() const {
    topo::NicGdrCaps c;
    c.known = true;
    c.dmabuf = dmabuf;
    c.peermem = peermem;
    c.odp = odp;
    c.summary = summary();
    return c;
}

bool detect_peermem(std::string *how) {
    static std::once_flag once;
    static bool found = false;
    static std::string evidence;
    std::call_once(once, [] {
        // nv_peer_mem (MLNX_OFED), nvidia-peermem (driver ≥ 470) and the peer-memory core of MLNX_OFED each
        // leave one of these; DGX OS 25.01 dropped the first (NCCL#1676), hence checking all of them.
        for (const char *p : {"/sys/kernel/mm/memory_peers/nv_mem/version", "/sys/module/nvidia_peermem/version",
                              "/sys/module/nv_peer_mem/version"}) {
            if (access(p, F_OK) == 0) {
                found = true;
                evidence = p;
                return;
            }
        }
        // A peer-memory capable ib_core exports this symbol even when the client's sysfs files are missing
        // (NCCL#1537/#1939); libfabric's verbs provider checks it the same way.
        FILE *f = std::fopen("/proc/kallsyms", "re");
        if (f != nullptr) {
            char line[512];
            while (std::fgets(line, sizeof(line), f) != nullptr) {
                const char *sym = std::strstr(line, " ib_register_peer_memory_client");
                if (sym != nullptr && (sym[31] == '\n' || sym[31] == '\t' || sym[31] == '\0' || sym[31] == ' ')) {
                    found = true;
                    evidence = "/proc/kallsyms ib_register_peer_memory_client";
                    break;
                }
            }
            std::fclose(f);
        }
        if (!found) evidence = "no nv_mem/nvidia_peermem/nv_peer_mem sysfs entry, no peer-memory symbol";
    });
    if (how) *how = evidence;
    return found;
}

NicGdrSupport probe_gdr_support(ibv_context *ctx, ibv_pd *pd, const ibv_device_attr_ex &attr) {
    NicGdrSupport s;
    // The dma-buf probe of UCX and NCCL: an invalid fd reaches the provider only if it implements
    // reg_dmabuf_mr (EBADF); libibverbs' default stub answers EOPNOTSUPP (EPROTONOSUPPORT on old kernels).
    errno = 0;
    ibv_mr *mr = ibv_reg_dmabuf_mr(pd, 0, 0, 0, -1, IBV_ACCESS_LOCAL_WRITE);
    if (mr != nullptr) { // no provider should accept fd -1; if one does, it certainly implements it
        ibv_dereg_mr(mr);
        s.dmabuf = true;
        s.dmabuf_errno = 0;
    } else {
        s.dmabuf_errno = errno;
        s.dmabuf = errno == EBADF;
    }
    s.peermem = detect_peermem(&s.peermem_how);

    // ODP: the capability bits, and a trial registration whose refusal is what the log quotes.
    const uint32_t need = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ;
    bool caps = (attr.odp_caps.general_caps & IBV_ODP_SUPPORT) && (attr.odp_caps.per_transport_caps.rc_odp_caps & need) == need;
    long page = sysconf(_SC_PAGESIZE);
    void *buf = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf != MAP_FAILED) {
        errno = 0;
        ibv_mr *omr = ibv_reg_mr(pd, buf, page, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND);
        s.odp_errno = omr ? 0 : errno ? errno : EIO;
        if (omr != nullptr && caps) {
            // Prefetch is a later addition to some providers (rxe): learn here whether this one has it.
            ibv_sge sge{reinterpret_cast<uintptr_t>(buf), static_cast<uint32_t>(page), omr->lkey};
            s.prefetch_errno = ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, IBV_ADVISE_MR_FLAG_FLUSH, &sge, 1);
            s.odp_prefetch = s.prefetch_errno == 0;
        }
        if (omr != nullptr && ibv_dereg_mr(omr) != 0)
            GDX_DEBUG(kComp, "%s: ibv_dereg_mr of the ODP trial MR: %s", ibv_get_device_name(ctx->device),
                      std::strerror(errno));
        if (munmap(buf, page) != 0)
            GDX_DEBUG(kComp, "munmap of the ODP trial page: %s", std::strerror(errno));
    } else {
        s.odp_errno = errno;
    }
    s.odp = caps && s.odp_errno == 0;
    if (s.odp && (attr.odp_caps.general_caps & IBV_ODP_SUPPORT_IMPLICIT)) {
        // Implicit ODP: one MR over the whole address space (addr 0, length SIZE_MAX), as verbs defines it.
        errno = 0;
        ibv_mr *imr = ibv_reg_mr(pd, nullptr, SIZE_MAX, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND);
        s.implicit_errno = imr ? 0 : errno ? errno : EIO;
        s.odp_implicit = imr != nullptr;
        if (imr != nullptr && ibv_dereg_mr(imr) != 0)
            GDX_DEBUG(kComp, "%s: ibv_dereg_mr of the implicit ODP trial MR: %s", ibv_get_device_name(ctx->device),
                      std::strerror(errno));
    }
    if (!s.odp) {
        s.odp_why = std::string("no ODP (device reports ") + (caps ? "RC ODP" : "none") + "; ibv_reg_mr ON_DEMAND: " +
                    (s.odp_errno ? errno_name(s.odp_errno) : "ok") + ")";
    }
    GDX_DEBUG(kComp, "%s: GPUDirect probe: dma-buf %s (probe errno %s), peer memory %s (%s), %s",
              ibv_get_device_name(ctx->device), s.dmabuf ? "yes" : "no", errno_name(s.dmabuf_errno).c_str(),
              s.peermem ? "yes" : "no", s.peermem_how.c_str(), s.odp_text().c_str());
    return s;
}

// ---- DeviceCtx --------------------------------------------------------------------------------------------

DeviceCtx::~DeviceCtx() {
    if (pd_ != nullptr) {
        if (int rc = ibv_dealloc_pd(pd_)) fail_errno(GDX_ERR_DRIVER, rc, kComp, "%s: ibv_dealloc_pd", name_.c_str());
    }
    if (ctx_ != nullptr) ibv_close_device(ctx_);
}

gdx_status_t DeviceCtx::open(const std::string &dev, uint8_t port, const Config &cfg,
                             std::shared_ptr<DeviceCtx> *out) {
    int n = 0;
    ibv_device **list = ibv_get_device_list(&n);
    if (list == nullptr) return fail_errno(GDX_ERR_NO_DEVICE, errno, kComp, "ibv_get_device_list");
    ibv_device *found = nullptr;
    for (int i = 0; i < n; ++i)
        if (dev == ibv_get_device_name(list[i])) found = list[i];
    std::shared_ptr<DeviceCtx> d(new DeviceCtx);
    d->name_ = dev;
    if (found != nullptr) d->ctx_ = ibv_open_device(found);
    int open_err = errno;
    ibv_free_device_list(list);
    if (found == nullptr) return GDX_FAIL(GDX_ERR_NO_DEVICE, kComp, "RDMA device '%s' not found", dev.c_str());
    if (d->ctx_ == nullptr) return fail_errno(GDX_ERR_NO_DEVICE, open_err, kComp, "ibv_open_device(%s)", dev.c_str());
    if (int rc = ibv_query_device_ex(d->ctx_, nullptr, &d->dev_attr_))
        return fail_errno(GDX_ERR_DRIVER, rc, kComp, "ibv_query_device_ex(%s)", dev.c_str());
    unsigned nports = d->dev_attr_.orig_attr.phys_port_cnt;
    for (unsigned p = port ? port : 1; p <= (port ? port : nports); ++p) {
        ibv_port_attr pa{};
        if (int rc = ibv_query_port(d->ctx_, p, &pa))
            return fail_errno(GDX_ERR_DRIVER, rc, kComp, "ibv_query_port(%s, %u)", dev.c_str(), p);
        if (pa.state == IBV_PORT_ACTIVE) {
            d->port_ = static_cast<uint8_t>(p);
            d->port_attr_ = pa;
            break;
        }
        if (port != 0)
            return GDX_FAIL(GDX_ERR_NO_DEVICE, kComp, "%s:%u is %s, not ACTIVE", dev.c_str(), p,
                            ibv_port_state_str(pa.state));
    }
    if (d->port_ == 0) return GDX_FAIL(GDX_ERR_NO_DEVICE, kComp, "%s has no ACTIVE port", dev.c_str());
    if (gdx_status_t st = d->select_gid(cfg); st != GDX_OK) return st;
    d->pd_ = ibv_alloc_pd(d->ctx_);
    if (d->pd_ == nullptr) return fail_errno(GDX_ERR_NO_RESOURCE, errno, kComp, "ibv_alloc_pd(%s)", dev.c_str());
    d->bus_id_ = topo::rdma_device_bus_id(dev);
    GDX_DEBUG(kComp, "%s: opened, %s, %s %s, active MTU %d, PCI %s", d->port_name().c_str(),
              d->is_roce() ? "RoCE" : "InfiniBand", d->is_roce() ? "GID" : "LID",
              d->is_roce() ? (std::to_string(d->gid_index_) + " " + d->gid_text_).c_str()
                           : std::to_string(d->port_attr_.lid).c_str(),
              128 << d->port_attr_.active_mtu, d->bus_id_.empty() ? "none (software device)" : d->bus_id_.c_str());
    *out = std::move(d);
    return GDX_OK;
}

namespace {
bool ipv4_mapped(const ibv_gid &g) {
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return std::memcmp(g.raw, prefix, sizeof(prefix)) == 0;
}
bool link_local(const ibv_gid &g) { return g.raw[0] == 0xfe && (g.raw[1] & 0xc0) == 0x80; }
std::string gid_to_text(const ibv_gid &g) {
    char buf[INET6_ADDRSTRLEN] = {};
    inet_ntop(AF_INET6, g.raw, buf, sizeof(buf));
    return buf;
}
} // namespace

gdx_status_t DeviceCtx::select_gid(const Config &cfg) {
    if (!is_roce()) {
        // InfiniBand: LID routing within the subnet; GID 0 only matters across routers (not supported).
        if (port_attr_.lid == 0)
            return GDX_FAIL(GDX_ERR_NO_DEVICE, kComp, "%s: InfiniBand port has no LID (no subnet manager?)",
                            port_name().c_str());
        gid_index_ = -1;
        return GDX_OK;
    }
    const std::string &want = cfg.str(RcVar::IB_GID_INDEX);
    long forced = -1;
    if (want != "auto") {
        char *end = nullptr;
        errno = 0;
        forced = std::strtol(want.c_str(), &end, 10);
        if (want.empty() || *end != '\0' || errno != 0 || forced < 0 || forced >= port_attr_.gid_tbl_len)
            return GDX_FAIL(GDX_ERR_INVALID_CONFIG, kComp,
                            "GDX_IB_GID_INDEX=%s is invalid (accepted: auto or 0..%d for %s)", want.c_str(),
                            port_attr_.gid_tbl_len - 1, port_name().c_str());
    }
    // The whole table in one ioctl (reading 1024 sysfs slots one by one is slow, under emulation very slow).
    size_t cap = 0;
    for (unsigned p = 1; p <= dev_attr_.orig_attr.phys_port_cnt; ++p) {
        ibv_port_attr pa{};
        if (ibv_query_port(ctx_, p, &pa) == 0) cap += pa.gid_tbl_len;
    }
    std::vector<ibv_gid_entry> gids(cap ? cap : 1);
    ssize_t ng = ibv_query_gid_table(ctx_, gids.data(), gids.size(), 0);
    if (ng < 0) return fail_errno(GDX_ERR_DRIVER, static_cast<int>(-ng), kComp, "ibv_query_gid_table(%s)", name_.c_str());
    // Rank: RoCE v2 IPv4-mapped (routable, what rdma_cm picks for IPv4), RoCE v2 link-local (always present,
    // one L2 segment), other RoCE v2 (global IPv6), RoCE v1 last.
    int best = -1, best_rank = 99;
    for (ssize_t i = 0; i < ng; ++i) {
        const ibv_gid_entry &e = gids[i];
        if (e.port_num != port_) continue;
        if (forced >= 0) {
            if (static_cast<long>(e.gid_index) == forced) best = static_cast<int>(i);
            continue;
        }
        int rank = e.gid_type == IBV_GID_TYPE_ROCE_V2 ? (ipv4_mapped(e.gid) ? 0 : link_local(e.gid) ? 1 : 2) : 3;
        if (rank < best_rank) {
            best_rank = rank;
            best = static_cast<int>(i);
        }
    }
    if (best < 0) {
        if (forced >= 0)
            return GDX_FAIL(GDX_ERR_INVALID_CONFIG, kComp, "GDX_IB_GID_INDEX=%ld: no valid GID at that index on %s",
                            forced, port_name().c_str());
        return GDX_FAIL(GDX_ERR_NO_DEVICE, kComp, "%s: RoCE port without any valid GID (interface down?)",
                        port_name().c_str());
    }
    gid_index_ = static_cast<int>(gids[best].gid_index);
    gid_ = gids[best].gid;
    gid_text_ = gid_to_text(gid_);
    return GDX_OK;
}

const NicGdrSupport &DeviceCtx::gdr_support() {
    if (support_ != nullptr) return *support_;
    static std::mutex mu;
    static std::map<std::string, std::unique_ptr<NicGdrSupport>> probed; // process-wide, per device
    std::lock_guard<std::mutex> lock(mu);
    auto &slot = probed[name_];
    if (!slot) {
        slot = std::make_unique<NicGdrSupport>(probe_gdr_support(ctx_, pd_, dev_attr_));
        if (slot->odp) {
            OdpCheck c = check_odp_loopback(ctx_, pd_, port_, port_attr_, gid_index_, gid_);
            slot->odp_check = c.result;
            if (!c.ok && odp_check_binding()) {
                slot->odp = false;
                slot->odp_why = "no ODP (the device claims it, but a loopback data check through ODP MRs failed: " +
                                c.result + ")";
            } else if (!c.ok) {
                slot->odp_check += " (not binding: tests)";
            }
            GDX_DEBUG(kComp, "%s: ODP data check: %s", name_.c_str(), slot->odp_check.c_str());
        }
    }
    support_ = slot.get();
    return *support_;
}

gdx_status_t list_ports(std::vector<PortDesc> *out) {
    out->clear();
    int n = 0;
    ibv_device **list = ibv_get_device_list(&n);
    if (list == nullptr) {
        // No provider or no uverbs in this kernel: no devices, not an error for a query.
        GDX_DEBUG(kComp, "ibv_get_device_list: %s", std::strerror(errno));
        return GDX_OK;
    }
    for (int i = 0; i < n; ++i) {
        const char *name = ibv_get_device_name(list[i]);
        ibv_context *ctx = ibv_open_device(list[i]);
        if (ctx == nullptr) {
            GDX_DEBUG(kComp, "ibv_open_device(%s): %s; skipped", name, std::strerror(errno));
            continue;
        }
        ibv_device_attr attr{};
        if (ibv_query_device(ctx, &attr) == 0) {
            for (uint8_t p = 1; p <= attr.phys_port_cnt; ++p) {
                ibv_port_attr pa{};
                if (ibv_query_port(ctx, p, &pa) == 0 && pa.state == IBV_PORT_ACTIVE)
                    out->push_back({name, p, topo::rdma_device_bus_id(name)});
            }
        }
        ibv_close_device(ctx);
    }
    ibv_free_device_list(list);
    return GDX_OK;
}

} // namespace gdx::tp::rc
