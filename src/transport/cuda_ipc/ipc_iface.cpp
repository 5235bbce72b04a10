// cuda_ipc interface and component: one interface per GPU, its copy streams and completion markers, progress.
#include "transport/cuda_ipc/ipc_internal.h"

#include "core/error.h"
#include "transport/config_vars.h"
#include "transport/cuda_ipc/config_vars.h"
#include "transport/shm/config_vars.h"
#include "transport/transport.h" // the Component a build without cuda.h still registers (no devices)

#include <memory>
#include <string_view>
#include <vector>

#if GDX_HAVE_CUDA_H
#include "memtype/cuda_driver.h"
#include "transport/cuda_ipc/cuda_extra.h"

#include <algorithm>
#include <optional>
#include <set>
#endif

namespace gdx::tp::cuda_ipc {

namespace {
constexpr const char *kComp = "cuda_ipc";
}

#if GDX_HAVE_CUDA_H

void register_local_exporter(uint64_t nonce, const std::shared_ptr<ExportState> &s);

namespace {
constexpr size_t kFlagStride = 64; // one cache line per stream's flag
constexpr int64_t kStreamCheckNs = 1'000'000;
} // namespace

gdx_status_t enable_peer_access(int from, int to, std::string *why) {
    static std::mutex m;
    static std::set<std::pair<int, int>> done;
    std::lock_guard<std::mutex> g(m);
    if (done.count({from, to})) return GDX_OK;
    const cuda::DriverApi *api = cuda::driver();
    CUdevice df, dt;
    int can = 0;
    CUresult r = api->cuDeviceGet(&df, from);
    if (r == CUDA_SUCCESS) r = api->cuDeviceGet(&dt, to);
    if (r == CUDA_SUCCESS) r = api->cuDeviceCanAccessPeer(&can, df, dt);
    if (r != CUDA_SUCCESS || !can) {
        *why = r != CUDA_SUCCESS ? "cuDeviceCanAccessPeer: " + cuda::error_text(r)
                                 : "cuDeviceCanAccessPeer(GPU" + std::to_string(from) + ", GPU" + std::to_string(to) +
                                       ") = 0: no peer-to-peer path (PCIe ACS/IOMMU, or no NVLink)";
        return GDX_ERR_UNREACHABLE;
    }
    CUcontext peer_ctx = nullptr;
    if ((r = api->cuDevicePrimaryCtxRetain(&peer_ctx, dt)) != CUDA_SUCCESS) { // kept for the process lifetime
        *why = "retaining GPU " + std::to_string(to) + "'s context: " + cuda::error_text(r);
        return GDX_ERR_DRIVER;
    }
    cuda::DeviceScope scope(from);
    r = api->cuCtxEnablePeerAccess(peer_ctx, 0);
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) {
        *why = "cuCtxEnablePeerAccess(GPU" + std::to_string(from) + " -> GPU" + std::to_string(to) +
               "): " + cuda::error_text(r);
        return GDX_ERR_DRIVER;
    }
    GDX_INFO(kComp, "peer access GPU %d -> GPU %d enabled", from, to);
    done.insert({from, to});
    return GDX_OK;
}

gdx_status_t CudaIpcIface::create(const Config &cfg, int device, std::unique_ptr<Interface> *out) {
    const cuda::DriverApi *api = cuda::driver();
    if (api == nullptr) return GDX_FAIL(GDX_ERR_NO_DEVICE, kComp, "no CUDA: %s", cuda::why_unavailable().c_str());
    if (device < 0 || device >= api->device_count)
        return GDX_FAIL(GDX_ERR_NO_DEVICE, kComp, "no GPU %d (%d present)", device, api->device_count);
    std::unique_ptr<CudaIpcIface> ifc(new CudaIpcIface);
    ifc->device_ = device;
    ifc->name_ = "GPU" + std::to_string(device);
    for (const cuda::DeviceInfo &d : cuda::list_devices())
        if (d.ordinal == device) ifc->bus_id_ = d.pci_bus_id;
    ifc->p2p_ = cfg.ternary(CudaIpcVar::P2P);
    shm::HubConfig hc;
    hc.transport = "cuda_ipc";
    hc.tid = wire::TransportId::CudaIpc;
    hc.ring_size = cfg.size(ShmVar::SHM_RING_SIZE);
    hc.cma = Ternary::No; // GPU bytes never go through the CPU here
    hc.conn_timeout_ns = cfg.duration(TransportVar::CONN_TIMEOUT).count();
    gdx_status_t st = shm::Hub::create(hc, &ifc->hub_);
    if (st != GDX_OK) return st;
    ifc->exports_ = std::make_shared<ExportState>();
    register_local_exporter(ifc->hub_->nonce(), ifc->exports_);
    ifc->md_ = std::make_unique<IpcMd>(device, ifc->hub_->nonce(), ifc->p2p_, ifc->exports_);
    ifc->cache_ = std::make_unique<ImportCache>(device, cfg.uint(CudaIpcVar::CUDA_IPC_CACHE));

    cuda::DeviceScope scope(device);
    if (!scope.ok())
        return GDX_FAIL(GDX_ERR_DRIVER, kComp, "binding GPU %d: %s", device, cuda::error_text(scope.status()).c_str());
    size_t nstreams = std::clamp<uint64_t>(cfg.uint(CudaIpcVar::CUDA_IPC_STREAMS), 1, 16);
    ifc->streams_.resize(nstreams);
    for (Stream &s : ifc->streams_) {
        CUresult r = api->cuStreamCreate(&s.s, CU_STREAM_NON_BLOCKING);
        if (r != CUDA_SUCCESS)
            return GDX_FAIL(GDX_ERR_DRIVER, kComp, "cuStreamCreate on GPU %d: %s", device, cuda::error_text(r).c_str());
    }
    const ExtraApi *x = extra_api();
    bool want_flags = cfg.str(CudaIpcVar::CUDA_IPC_SIGNAL) == "flag";
    if (want_flags && x && x->cuStreamWriteValue32) {
        CUresult r = api->cuMemHostAlloc(&ifc->flags_host_, kFlagStride * nstreams,
                                         CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
        CUdeviceptr dev = 0;
        if (r == CUDA_SUCCESS) r = api->cuMemHostGetDevicePointer(&dev, ifc->flags_host_, 0);
        if (r == CUDA_SUCCESS) {
            std::memset(ifc->flags_host_, 0, kFlagStride * nstreams);
            for (size_t i = 0; i < nstreams; ++i) {
                ifc->streams_[i].flag = reinterpret_cast<volatile uint32_t *>(static_cast<uint8_t *>(ifc->flags_host_) +
                                                                              i * kFlagStride);
                ifc->streams_[i].flag_dev = dev + i * kFlagStride;
            }
            ifc->use_flags_ = true;
        } else {
            GDX_INFO(kComp, "completion flags unavailable (%s): using events", cuda::error_text(r).c_str());
        }
    }
    Capabilities &c = ifc->caps_;
    c.flags = kCapPut | kCapGet | kCapAmShort | kCapAmBcopy | kCapAmZcopy | kCapFlush | kCapFence | kCapWakeup |
              kCapIntraNode | kCapErrHandling;
    c.direct_types = type_bit(mem::MemType::CudaDevice) | type_bit(mem::MemType::CudaVmm) |
                     type_bit(mem::MemType::CudaPool);
    c.max_put = c.max_get = size_t{1} << 40;
    c.max_am_short = 240;
    c.max_am_bcopy = c.max_am_zcopy = hc.ring_size / 8 - sizeof(shm::RecHdr);
    c.latency_ns = 4000;
    c.bandwidth_Bps = 300e9;
    GDX_DEBUG(kComp, "interface GPU %d (%s): %zu streams, completion by %s, P2P %s; %s", device, ifc->bus_id_.c_str(),
              nstreams, ifc->use_flags_ ? "flag" : "event", ternary_name(ifc->p2p_), c.describe().c_str());
    *out = std::move(ifc);
    return GDX_OK;
}

CudaIpcIface::~CudaIpcIface() {
    if (!eps_.empty()) GDX_WARN(kComp, "interface closed with %zu endpoint(s) still open", eps_.size());
    const cuda::DriverApi *api = cuda::driver();
    sync_streams();
    poll_streams();
    cuda::DeviceScope scope(device_);
    for (Stream &s : streams_) {
        for (Marker &m : s.fifo)
            if (m.ev) api->cuEventDestroy(m.ev);
        for (CUevent e : s.spare) api->cuEventDestroy(e);
        if (s.s) api->cuStreamDestroy(s.s);
    }
    if (flags_host_) api->cuMemFreeHost(flags_host_);
    cache_.reset(); // closes the imported mappings (no copy uses them any more)
}

gdx_status_t CudaIpcIface::ep_create(std::unique_ptr<Endpoint> *out) {
    if (out == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "ep_create: null output");
    *out = std::make_unique<CudaIpcEp>(this);
    return GDX_OK;
}

void CudaIpcIface::remove_ep(CudaIpcEp *ep) { eps_.erase(std::remove(eps_.begin(), eps_.end(), ep), eps_.end()); }

gdx_status_t CudaIpcIface::set_am_handler(uint8_t id, AmHandler fn, void *arg) {
    if (id >= kMaxAmId) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "set_am_handler: id %u >= %u", id, kMaxAmId);
    handlers_[id] = {fn, arg};
    return GDX_OK;
}

void CudaIpcIface::deliver_am(CudaIpcEp *ep, uint8_t id, const void *data, size_t len) {
    if (id >= kMaxAmId || handlers_[id].fn == nullptr) {
        GDX_LOG_ONCE(log::Level::Warn, kComp, "cuda_ipc:no-am-handler", "active message id %u without handler: dropped",
                     id);
        return;
    }
    handlers_[id].fn(handlers_[id].arg, ep, data, len);
}

gdx_status_t CudaIpcIface::submit_copy(void *dst, const void *src, size_t len, CudaIpcEp *ep, uint64_t op_id,
                                       Mapping *map) {
    const cuda::DriverApi *api = cuda::driver();
    cuda::DeviceScope scope(device_);
    Stream &s = streams_[rr_++ % streams_.size()];
    CUresult r = api->cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src), len, s.s);
    if (r != CUDA_SUCCESS)
        return GDX_FAIL(GDX_ERR_DRIVER, kComp, "cuMemcpyAsync(%p <- %p, %zu bytes) on GPU %d: %s", dst, src, len,
                        device_, cuda::error_text(r).c_str());
    Marker m{ep, op_id, map, 0, nullptr};
    if (use_flags_) {
        m.seq = ++s.issued;
        // Default flags: the write is ordered after the copy's memory traffic.
        r = extra_api()->cuStreamWriteValue32(s.s, s.flag_dev, m.seq, CU_STREAM_WRITE_VALUE_DEFAULT);
    } else {
        if (!s.spare.empty()) {
            m.ev = s.spare.back();
            s.spare.pop_back();
        } else {
            r = api->cuEventCreate(&m.ev, CU_EVENT_DISABLE_TIMING);
        }
        if (r == CUDA_SUCCESS) r = api->cuEventRecord(m.ev, s.s);
    }
    if (r != CUDA_SUCCESS) {
        // The copy is queued but cannot be tracked: wait for it here so the caller may reuse its buffer.
        api->cuStreamSynchronize(s.s);
        if (m.ev) s.spare.push_back(m.ev);
        if (use_flags_) --s.issued;
        return GDX_FAIL(GDX_ERR_DRIVER, kComp, "completion marker after a copy on GPU %d: %s", device_,
                        cuda::error_text(r).c_str());
    }
    if (map) ++map->inflight;
    s.fifo.push_back(m);
    return GDX_OK;
}

void CudaIpcIface::finish(Stream &s, gdx_status_t st) {
    while (!s.fifo.empty()) {
        Marker m = s.fifo.front();
        s.fifo.pop_front();
        if (m.ev) s.spare.push_back(m.ev);
        if (m.map) --m.map->inflight;
        if (m.ep) m.ep->on_copy_done(m.op_id, st);
    }
}

unsigned CudaIpcIface::poll_streams() {
    const cuda::DriverApi *api = cuda::driver();
    unsigned n = 0;
    std::optional<cuda::DeviceScope> scope; // bound only when a driver call is needed (events, stream checks)
    for (Stream &s : streams_) {
        if (!s.fifo.empty() && !use_flags_ && !scope) scope.emplace(device_);
        while (!s.fifo.empty()) {
            Marker m = s.fifo.front();
            bool done;
            if (use_flags_) {
                done = static_cast<int32_t>(*s.flag - m.seq) >= 0;
            } else {
                CUresult r = api->cuEventQuery(m.ev);
                if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY) {
                    finish(s, GDX_FAIL(GDX_ERR_DRIVER, kComp, "copy on GPU %d failed: %s", device_,
                                       cuda::error_text(r).c_str()));
                    break;
                }
                done = r == CUDA_SUCCESS;
            }
            if (!done) break;
            s.fifo.pop_front();
            if (m.ev) s.spare.push_back(m.ev);
            if (m.map) --m.map->inflight;
            if (m.ep) m.ep->on_copy_done(m.op_id, GDX_OK); // may issue new copies (pushed at the back)
            ++n;
        }
        if (s.fifo.empty() || !use_flags_) continue;
        // A failed copy never writes its flag: ask the stream now and then, so errors surface instead of hanging.
        int64_t now = shm::Hub::now_ns();
        if (now < s.next_check_ns) continue;
        s.next_check_ns = now + kStreamCheckNs;
        if (!scope) scope.emplace(device_);
        CUresult r = api->cuStreamQuery(s.s);
        if (r == CUDA_SUCCESS) {
            n += static_cast<unsigned>(s.fifo.size());
            finish(s, GDX_OK); // all work done (flag writes included)
        } else if (r != CUDA_ERROR_NOT_READY) {
            finish(s, GDX_FAIL(GDX_ERR_DRIVER, kComp, "copy stream of GPU %d failed: %s", device_,
                               cuda::error_text(r).c_str()));
        }
    }
    if (n) cache_->collect(); // stale mappings whose last copy just finished
    return n;
}

void CudaIpcIface::sync_streams() {
    const cuda::DriverApi *api = cuda::driver();
    cuda::DeviceScope scope(device_);
    for (Stream &s : streams_)
        if (s.s) api->cuStreamSynchronize(s.s);
}

void CudaIpcIface::forget(CudaIpcEp *ep) {
    for (Stream &s : streams_)
        for (Marker &m : s.fifo)
            if (m.ep == ep) m.ep = nullptr;
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
    for (Stream &s : streams_)
        if (!s.fifo.empty()) return GDX_ERR_BUSY; // a GPU flag cannot signal our eventfd
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
        for (const cuda::DeviceInfo &d : cuda::list_devices())
            out->push_back({"GPU" + std::to_string(d.ordinal), d.pci_bus_id, true});
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

#else // no cuda.h: the transport exists but has no devices

namespace {
class IpcComponent final : public Component {
  public:
    std::string_view name() const override { return "cuda_ipc"; }
    gdx_status_t query_devices(std::vector<DeviceDesc> *) override { return GDX_OK; }
    gdx_status_t open(const DeviceDesc &, const Config &, std::unique_ptr<Interface> *) override {
        return GDX_FAIL(GDX_ERR_NO_DEVICE, kComp, "built without cuda.h");
    }
};
} // namespace

#endif

Component *cuda_ipc_component() {
    static IpcComponent c;
    return &c;
}

} // namespace gdx::tp::cuda_ipc
