// cuda_ipc interface and component: one interface per GPU, its copy queue (the memory ops table's: streams and
// completion markers, made at the first copy), progress.
#include "transport/cuda_ipc/ipc_internal.h"

#include "core/error.h"
#include "transport/cuda_ipc/config_vars.h"
#include "transport/transport.h"

#include <algorithm>
#include <memory>
#include <string_view>
#include <vector>

namespace gdx::tp::cuda_ipc {

namespace {
constexpr const char *kComp = "cuda_ipc";
const mem::Ops &gpu() { return mem::ops(mem::MemKind::Cuda); }
} // namespace

void register_local_exporter(uint64_t nonce, const std::shared_ptr<ExportState> &s);

gdx_status_t CudaIpcIface::create(const Config &cfg, int device, std::unique_ptr<Interface> *out) {
    if (!gpu().available()) return GDX_FAIL(GDX_ERR_NO_DEVICE, kComp, "no CUDA: %s", gpu().why_unavailable().c_str());
    if (device < 0 || device >= gpu().device_count())
        return GDX_FAIL(GDX_ERR_NO_DEVICE, kComp, "no GPU %d (%d present)", device, gpu().device_count());
    std::unique_ptr<CudaIpcIface> ifc(new CudaIpcIface);
    ifc->device_ = device;
    ifc->name_ = "GPU" + std::to_string(device);
    ifc->bus_id_ = mem::device_bus_id(mem::MemKind::Cuda, device);
    ifc->p2p_ = cfg.ternary(CudaIpcVar::P2P);
    shm::HubConfig hc = shm::HubConfig::from(cfg, "cuda_ipc", wire::TransportId::CudaIpc);
    hc.cma = Ternary::No; // GPU bytes never go through the CPU here
    gdx_status_t st = shm::Hub::create(hc, &ifc->hub_);
    if (st != GDX_OK) return st;
    ifc->exports_ = std::make_shared<ExportState>();
    register_local_exporter(ifc->hub_->nonce(), ifc->exports_);
    ifc->md_ = std::make_unique<IpcMd>(device, ifc->hub_->nonce(), ifc->p2p_, ifc->exports_);
    ifc->cache_ = std::make_unique<ImportCache>(device, cfg.uint(CudaIpcVar::CUDA_IPC_CACHE));

    // The copy streams come with the first copy (ensure_queue): streams belong to the GPU's primary context, and a
    // process that never copies GPU memory here (a host-only MPI rank: UCP opens every memory domain, and this
    // interface with gdx's) must not get a context, and the GPU memory it holds, from opening it.
    ifc->queue_opts_.streams =
        static_cast<unsigned>(std::clamp<uint64_t>(cfg.uint(CudaIpcVar::CUDA_IPC_STREAMS), 1, 16));
    ifc->queue_opts_.flags = cfg.str(CudaIpcVar::CUDA_IPC_SIGNAL) == "flag";
    Capabilities &c = ifc->caps_;
    // kCapPeerMap: the staging engine's pools are shared segments a peer maps (IpcMd::alloc_shared), so where there
    // is no peer-to-peer path (GDX_P2P=no, or it cannot be enabled) staged fragments still cross with no CPU copy.
    c.flags = kCapPut | kCapGet | kCapAmShort | kCapAmBcopy | kCapAmZcopy | kCapFlush | kCapFence | kCapWakeup |
              kCapIntraNode | kCapErrHandling | kCapPeerMap;
    c.direct_types = type_bit(mem::MemType::CudaDevice) | type_bit(mem::MemType::CudaVmm) |
                     type_bit(mem::MemType::CudaPool);
    c.max_put = c.max_get = size_t{1} << 40;
    c.max_am_short = 240;
    c.max_am_bcopy = c.max_am_zcopy = hc.ring_size / 8 - sizeof(shm::RecHdr);
    c.latency_ns = 4000;
    c.bandwidth_Bps = 300e9;
    GDX_DEBUG(kComp, "interface GPU %d (%s): %u streams at the first copy, P2P %s; %s", device, ifc->bus_id_.c_str(),
              ifc->queue_opts_.streams, ternary_name(ifc->p2p_), c.describe().c_str());
    *out = std::move(ifc);
    return GDX_OK;
}

CudaIpcIface::~CudaIpcIface() {
    if (!eps_.empty()) GDX_WARN(kComp, "interface closed with %zu endpoint(s) still open", eps_.size());
    if (queue_) {
        sync_streams();
        poll_streams();
        queue_.reset(); // its streams, events and flags
    }
    cache_.reset(); // closes the imported mappings (no copy uses them any more)
}

gdx_status_t CudaIpcIface::ep_create(std::unique_ptr<Endpoint> *out) {
    if (out == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "ep_create: null output");
    *out = std::make_unique<CudaIpcEp>(this);
    return GDX_OK;
}

void CudaIpcIface::remove_ep(CudaIpcEp *ep) { eps_.erase(std::remove(eps_.begin(), eps_.end(), ep), eps_.end()); }

gdx_status_t CudaIpcIface::ensure_queue() {
    if (queue_) [[likely]]
        return GDX_OK;
    if (queue_error_ != GDX_OK) return queue_error_; // said once, when it failed: no retry and no line per copy
    if (gdx_status_t st = gpu().copy_queue(device_, queue_opts_, &queue_); st != GDX_OK)
        return queue_error_ = GDX_FAIL(st, kComp, "GPU %d: its copy streams: %s (this interface's copies fail)",
                                       device_, last_error().c_str());
    GDX_DEBUG(kComp, "GPU %d: %u copy streams, completion by %s", device_, queue_opts_.streams, queue_->signal_name());
    return GDX_OK;
}

gdx_status_t CudaIpcIface::submit_copy(void *dst, const void *src, size_t len, CudaIpcEp *ep, uint64_t op_id,
                                       Mapping *map) {
    if (gdx_status_t st = ensure_queue(); st != GDX_OK) return st;
    gdx_status_t st = queue_->copy(dst, src, len, mem::CopyTag{ep, op_id, map});
    if (st != GDX_OK) return st;
    if (map) ++map->inflight;
    return GDX_OK;
}

void CudaIpcIface::copy_done(void *self, const mem::CopyTag &tag, gdx_status_t st) {
    (void)self;
    if (auto *map = static_cast<Mapping *>(tag.extra)) --map->inflight;
    if (auto *ep = static_cast<CudaIpcEp *>(tag.owner)) ep->on_copy_done(tag.id, st); // may issue new copies
}

unsigned CudaIpcIface::poll_streams() {
    if (!queue_) return 0;
    unsigned n = queue_->poll(copy_done, this);
    if (n) cache_->collect(); // stale mappings whose last copy just finished
    return n;
}

void CudaIpcIface::sync_streams() {
    if (queue_) queue_->sync();
}

void CudaIpcIface::forget(CudaIpcEp *ep) {
    if (queue_) queue_->forget(ep);
}

unsigned CudaIpcIface::progress() {
    unsigned n = hub_->progress_ctrl(cache_->waiting()); // descriptor answers are awaited: look every time
    n += poll_streams();
    std::vector<std::pair<uint64_t, uint64_t>> revoked;
    {
        std::lock_guard<std::mutex> g(exports_->mutex);
        revoked.swap(exports_->to_revoke);
    }
    for (const auto &[id, epoch] : revoked)
        for (CudaIpcEp *ep : eps_) ep->queue_revoke(id, epoch);
    for (size_t i = 0; i < eps_.size(); ++i) n += eps_[i]->progress();
    return n;
}

gdx_status_t CudaIpcIface::arm_wakeup() {
    if (queue_ && !queue_->idle()) return GDX_ERR_BUSY; // a GPU flag cannot signal our eventfd
    for (CudaIpcEp *ep : eps_)
        if (ep->has_work()) return GDX_ERR_BUSY;
    if (cache_->waiting()) return GDX_ERR_BUSY;
    return hub_->arm();
}

namespace {
class IpcComponent final : public Component {
  public:
    std::string_view name() const override { return "cuda_ipc"; }
    gdx_status_t query_devices(std::vector<DeviceDesc> *out) override {
        if (out == nullptr) return GDX_ERR_INVALID_PARAM;
        std::vector<mem::DeviceInfo> gpus;
        gpu().devices(&gpus); // none without a driver (or without cuda.h at build time)
        for (const mem::DeviceInfo &d : gpus) out->push_back({"GPU" + std::to_string(d.ordinal), d.pci_bus_id, true});
        return GDX_OK;
    }
    gdx_status_t open(const DeviceDesc &dev, const Config &cfg, std::unique_ptr<Interface> *out) override {
        if (out == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "open: null output");
        if (dev.name.rfind("GPU", 0) != 0 || dev.name.size() < 4 ||
            dev.name.find_first_not_of("0123456789", 3) != std::string::npos)
            return GDX_FAIL(GDX_ERR_NO_DEVICE, kComp, "cuda_ipc devices are GPU<n>, not '%s'", dev.name.c_str());
        return CudaIpcIface::create(cfg, std::stoi(dev.name.substr(3)), out);
    }
};
} // namespace

Component *cuda_ipc_component() {
    static IpcComponent c;
    return &c;
}

} // namespace gdx::tp::cuda_ipc
