// shm interface and component: configuration, capabilities, progress across endpoints, wakeup.
#include "core/error.h"
#include "transport/config_vars.h"
#include "transport/shm/config_vars.h"
#include "transport/shm/shm_iface.h"

#include <algorithm>
#include <new>
#include <sched.h>

namespace gdx::tp::shm {

namespace {
constexpr const char *kComp = "shm";
constexpr size_t kMaxAmShort = 240; // header + payload of a 256-byte record (16-byte RecHdr: four cells)
} // namespace

gdx_status_t ShmIface::create(const Config &cfg, std::unique_ptr<Interface> *out) {
    std::unique_ptr<ShmIface> ifc(new ShmIface);
    HubConfig hc = HubConfig::from(cfg, "shm", wire::TransportId::Shm);
    hc.extra_size = sizeof(ShmExtra);
    hc.cma = cfg.ternary(ShmVar::SHM_CMA);
    gdx_status_t st = Hub::create(hc, &ifc->hub_);
    if (st != GDX_OK) return st;
    ifc->tun_.cma_thresh = cfg.size(ShmVar::SHM_CMA_THRESH);
    ifc->tun_.cma_split = std::max<size_t>(cfg.size(ShmVar::SHM_CMA_SPLIT), 8192);
    ifc->tun_.peer_timeout_ns = cfg.duration(TransportVar::PEER_TIMEOUT).count();
    ifc->tun_.silence_timeout_ns = cfg.duration(TransportVar::PEER_SILENCE_TIMEOUT).count();
    ifc->tun_.cma_learn = cfg.boolean(ShmVar::SHM_CMA_LEARN);
    ifc->get_paths_ = GetPathChooser(ifc->tun_.cma_learn);
    ifc->md_.quiescer().iface = ifc.get();

    size_t max_rec = hc.ring_size / 8;
    Capabilities &c = ifc->caps_;
    c.flags = kCapPut | kCapGet | kCapAmShort | kCapAmBcopy | kCapAmZcopy | kCapFlush | kCapFence | kCapWakeup |
              kCapIntraNode | kCapErrHandling | kCapPeerMap | kCapAmInPlace | kCapAmZcopyCopies;
    c.direct_types = type_bit(mem::MemType::HostPageable) | type_bit(mem::MemType::HostPinned) |
                     type_bit(mem::MemType::HostRegistered);
    c.max_put = c.max_get = size_t{1} << 40;
    c.max_am_short = kMaxAmShort;
    c.max_am_bcopy = max_rec - sizeof(RecHdr);
    c.max_am_zcopy = max_rec - sizeof(RecHdr);
    c.latency_ns = 400;
    c.bandwidth_Bps = 12e9;
    GDX_DEBUG(kComp, "interface open: ring %zu, cma %s (threshold %zu, split %zu); %s", hc.ring_size,
              ternary_name(hc.cma), ifc->tun_.cma_thresh, ifc->tun_.cma_split, c.describe().c_str());
    *out = std::move(ifc);
    return GDX_OK;
}

ShmIface::~ShmIface() {
    md_.quiescer().iface = nullptr;
    if (!eps_.empty())
        GDX_WARN(kComp, "interface closed with %zu endpoint(s) still open: destroy endpoints first", eps_.size());
}

gdx_status_t ShmIface::ep_create(std::unique_ptr<Endpoint> *out) {
    if (out == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "ep_create: null output");
    *out = std::make_unique<ShmEp>(this);
    return GDX_OK;
}

void ShmIface::remove_ep(ShmEp *ep) { eps_.erase(std::remove(eps_.begin(), eps_.end(), ep), eps_.end()); }

uint8_t *ShmIface::pack_buffer() {
    if (!pack_buf_) {
        pack_buf_.reset(new (std::nothrow) uint8_t[caps_.max_am_bcopy]);
        if (!pack_buf_)
            GDX_FAIL(GDX_ERR_NO_MEMORY, kComp, "out of memory for a %zu-byte am_bcopy buffer", caps_.max_am_bcopy);
    }
    return pack_buf_.get();
}

void ShmIface::service_grants() {
    for (ShmEp *ep : eps_) ep->service_grant();
}

void ShmIface::quiesce_key(uint64_t key) {
    int64_t start = Hub::now_ns();
    for (unsigned spins = 0;; ++spins) {
        bool busy = false;
        for (ShmEp *ep : eps_) busy |= ep->grant_outstanding() && ep->grant_key() == key;
        if (!busy) return;
        service_grants(); // a peer waiting on us in the other direction must not wait forever
        if (spins > 4096) sched_yield();
        if ((spins & 1023) == 0) {
            hub_->progress_ctrl(true); // notices a peer that died meanwhile (its endpoint fails: no grant left)
            if (Hub::now_ns() - start > tun_.peer_timeout_ns) {
                GDX_ERROR(kComp, "deregistration: a peer still copies into a granted range after GDX_PEER_TIMEOUT; "
                                 "revoking anyway");
                return;
            }
        }
    }
}

unsigned ShmIface::progress() {
    probe_out_ = false;
    if (!retired_.empty()) [[unlikely]] retired_.clear(); // no idle probe looks at them any more (retire())
    unsigned n = hub_->progress_ctrl();
    // Index loop: an AM handler may create endpoints (appending to eps_).
    for (size_t i = 0; i < eps_.size(); ++i) {
        ShmEp *ep = eps_[i];
        if (!ep->quiet()) n += ep->progress_work();
    }
    return n;
}

bool ShmIface::quiet() {
    for (ShmEp *ep : eps_)
        if (!ep->quiet()) return false;
    return hub_->ctrl_quiet(); // last: it counts the calls it answers (the control-socket look comes every 32nd)
}

bool ShmIface::fill_idle_probe(IdleProbe *probe) {
    probe->n = 0;
    probe_out_ = true;
    if (!hub_->ctrl_idle()) return false;
    for (ShmEp *ep : eps_)
        if (!ep->add_probe_words(probe)) return false;
    return true;
}

gdx_status_t ShmIface::arm_wakeup() {
    for (ShmEp *ep : eps_)
        if (ep->has_work()) return GDX_ERR_BUSY;
    gdx_status_t st = hub_->arm();
    if (st != GDX_OK) return st;
    // A grant posted between has_work() and arm() would not signal the eventfd: look once more.
    for (ShmEp *ep : eps_) {
        if (ep->has_work()) {
            hub_->disarm();
            return GDX_ERR_BUSY;
        }
    }
    return GDX_OK;
}

gdx_status_t ShmComponent::query_devices(std::vector<DeviceDesc> *out) {
    if (out == nullptr) return GDX_ERR_INVALID_PARAM;
    out->push_back({"memory", "", true});
    return GDX_OK;
}

gdx_status_t ShmComponent::open(const DeviceDesc &dev, const Config &cfg, std::unique_ptr<Interface> *out) {
    if (dev.name != "memory")
        return GDX_FAIL(GDX_ERR_NO_DEVICE, kComp, "shm has one device, 'memory', not '%s'", dev.name.c_str());
    if (out == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "open: null output");
    return ShmIface::create(cfg, out);
}

Component *shm_component() {
    static ShmComponent c;
    return &c;
}

} // namespace gdx::tp::shm
