#include "transport/rc/iface.h"

#include "core/error.h"
#include "core/log.h"
#include "transport/config_vars.h"
#include "transport/rc/config_vars.h"
#include "transport/rc/ep.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>

namespace gdx::tp::rc {

QpTiming QpTiming::from(std::chrono::nanoseconds peer_timeout) {
    QpTiming t;
    if (peer_timeout == std::chrono::nanoseconds::max()) {
        t.timeout = 0; // the IB spec's "infinite": a silent peer is never declared dead
        t.bound_s = INFINITY;
        return t;
    }
    // The requester gives up after retry_cnt retransmissions, each after 4.096 us * 2^timeout without an ACK:
    // the largest exponent whose total stays within GDX_PEER_TIMEOUT.
    double per_try_us = std::chrono::duration<double, std::micro>(peer_timeout).count() / (t.retry_cnt + 1);
    int e = static_cast<int>(std::floor(std::log2(std::max(per_try_us / 4.096, 2.0))));
    t.timeout = static_cast<uint8_t>(std::clamp(e, 1, 30));
    t.bound_s = (t.retry_cnt + 1) * 4.096e-6 * std::ldexp(1.0, t.timeout);
    return t;
}

gdx_status_t RcInterface::open(const std::string &dev, uint8_t port, const Config &cfg,
                               std::unique_ptr<Interface> *out) {
    std::shared_ptr<DeviceCtx> d;
    if (gdx_status_t st = DeviceCtx::open(dev, port, cfg, &d); st != GDX_OK) return st;
    std::unique_ptr<RcInterface> i(new RcInterface);
    if (gdx_status_t st = i->init(std::move(d), cfg); st != GDX_OK) return st;
    *out = std::move(i);
    return GDX_OK;
}

gdx_status_t RcInterface::init(std::shared_ptr<DeviceCtx> dev, const Config &cfg) {
    dev_ = std::move(dev);
    port_name_ = dev_->port_name();
    const ibv_device_attr &da = dev_->dev_attr().orig_attr;
    tx_len_ = static_cast<unsigned>(std::min<uint64_t>(cfg.uint(RcVar::RC_TX_QUEUE_LEN), da.max_qp_wr));
    rx_len_ = static_cast<unsigned>(std::min<uint64_t>(cfg.uint(RcVar::RC_RX_QUEUE_LEN), da.max_qp_wr));
    seg_size_ = cfg.size(RcVar::RC_SEG_SIZE);
    max_inline_ = cfg.size(RcVar::RC_MAX_INLINE);
    if (tx_len_ < 2 || rx_len_ < 1 || seg_size_ < 64 || seg_size_ > (1u << 30))
        return GDX_FAIL(GDX_ERR_INVALID_CONFIG, kComp,
                        "%s: GDX_RC_TX_QUEUE_LEN=%u (>= 2), GDX_RC_RX_QUEUE_LEN=%u (>= 1) and GDX_RC_SEG_SIZE=%zu "
                        "(64..1G) out of range (device max_qp_wr %d)",
                        port_name_.c_str(), tx_len_, rx_len_, seg_size_, da.max_qp_wr);
    timing_ = QpTiming::from(cfg.duration(TransportVar::PEER_TIMEOUT));
    md_ = std::make_unique<RcMemoryDomain>(dev_, cfg);

    channel_ = ibv_create_comp_channel(dev_->ctx());
    if (channel_ == nullptr) return fail_errno(GDX_ERR_DRIVER, errno, kComp, "%s: ibv_create_comp_channel", port_name_.c_str());
    int fl = fcntl(channel_->fd, F_GETFL);
    if (fl < 0 || fcntl(channel_->fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return fail_errno(GDX_ERR_IO, errno, kComp, "%s: fcntl(O_NONBLOCK) on the completion channel", port_name_.c_str());
    send_cq_cap_ = recv_cq_cap_ = 1024;
    send_cq_ = ibv_create_cq(dev_->ctx(), static_cast<int>(send_cq_cap_), this, channel_, 0);
    recv_cq_ = send_cq_ ? ibv_create_cq(dev_->ctx(), static_cast<int>(recv_cq_cap_), this, channel_, 0) : nullptr;
    if (recv_cq_ == nullptr) return fail_errno(GDX_ERR_NO_RESOURCE, errno, kComp, "%s: ibv_create_cq", port_name_.c_str());

    // Bounce slab: as many buffers as one endpoint's send queue; shared by all endpoints of the interface.
    tx_slab_len_ = seg_size_ * tx_len_;
    void *p = mmap(nullptr, tx_slab_len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return fail_errno(GDX_ERR_NO_MEMORY, errno, kComp, "mmap(%zu) for send buffers", tx_slab_len_);
    tx_slab_ = static_cast<char *>(p);
    tx_mr_ = ibv_reg_mr(dev_->pd(), tx_slab_, tx_slab_len_, IBV_ACCESS_LOCAL_WRITE);
    if (tx_mr_ == nullptr) return fail_errno(GDX_ERR_NO_MEMORY, errno, kComp, "%s: ibv_reg_mr(send buffers, %zu)", port_name_.c_str(), tx_slab_len_);
    for (int i = static_cast<int>(tx_len_) - 1; i >= 0; --i) tx_free_.push_back(i);

    // Capabilities. Direct memory kinds: host always; GPU kinds only when policy and the NIC allow a rung.
    const ibv_port_attr &pa = dev_->port_attr();
    caps_.flags = kCapPut | kCapGet | kCapAmShort | kCapAmBcopy | kCapAmZcopy | kCapFlush | kCapFence | kCapWakeup |
                  kCapErrHandling;
    for (mem::MemType t : {mem::MemType::HostPageable, mem::MemType::HostPinned, mem::MemType::HostRegistered,
                           mem::MemType::CudaVmmHost})
        caps_.direct_types |= type_bit(t);
    topo::GdrPolicy pol = topo::GdrPolicy::from(cfg);
    if (pol.gdr != Ternary::No && !pol.p2p_disabled) {
        const NicGdrSupport &s = dev_->gdr_support();
        if (s.dmabuf || s.peermem)
            for (mem::MemType t : {mem::MemType::CudaDevice, mem::MemType::CudaVmm, mem::MemType::CudaIpcImported})
                caps_.direct_types |= type_bit(t);
        if (s.odp) caps_.direct_types |= type_bit(mem::MemType::CudaManaged);
    }
    caps_.max_put = caps_.max_get = pa.max_msg_sz;
    caps_.max_am_short = std::min<size_t>(max_inline_ ? max_inline_ : 64, seg_size_);
    caps_.max_am_bcopy = caps_.max_am_zcopy = seg_size_;
    bool software = dev_->bus_id().empty();
    caps_.latency_ns = software ? 15000 : 2000;
    // active_speed codes: 1 SDR 2.5, 2 DDR 5, 4 QDR/FDR10 10, 8 FDR10, 16 FDR 14, 32 EDR 25, 64 HDR 50, 128 NDR 100 Gb/s
    // per lane; widths 1, 4, 8, 12, 2 lanes.
    double lane = pa.active_speed >= 128 ? 100 : pa.active_speed >= 64 ? 50 : pa.active_speed >= 32 ? 25
                : pa.active_speed >= 16 ? 14 : pa.active_speed >= 4 ? 10 : pa.active_speed >= 2 ? 5 : 2.5;
    int lanes = pa.active_width == 2 ? 4 : pa.active_width == 4 ? 8 : pa.active_width == 8 ? 12 : pa.active_width == 16 ? 2 : 1;
    caps_.bandwidth_Bps = software ? 50e6 : lane * lanes * 1e9 / 8;
    GDX_DEBUG(kComp, "%s: interface open: tx %u, rx %u, seg %zu, peer timeout bound %.2f s (timeout %u, retry %u); %s",
              port_name_.c_str(), tx_len_, rx_len_, seg_size_, timing_.bound_s, timing_.timeout, timing_.retry_cnt,
              caps_.describe().c_str());
    return GDX_OK;
}

RcInterface::~RcInterface() {
    if (!eps_.empty())
        GDX_ERROR(kComp, "%s: interface destroyed with %zu endpoint(s) alive (destroy endpoints first)",
                  port_name_.c_str(), eps_.size());
    if (send_cq_ && unacked_send_) ibv_ack_cq_events(send_cq_, unacked_send_);
    if (recv_cq_ && unacked_recv_) ibv_ack_cq_events(recv_cq_, unacked_recv_);
    if (tx_mr_) ibv_dereg_mr(tx_mr_);
    if (tx_slab_) munmap(tx_slab_, tx_slab_len_);
    if (send_cq_ && ibv_destroy_cq(send_cq_)) GDX_ERROR(kComp, "ibv_destroy_cq: %s", std::strerror(errno));
    if (recv_cq_ && ibv_destroy_cq(recv_cq_)) GDX_ERROR(kComp, "ibv_destroy_cq: %s", std::strerror(errno));
    if (channel_ && ibv_destroy_comp_channel(channel_)) GDX_ERROR(kComp, "ibv_destroy_comp_channel: %s", std::strerror(errno));
    md_.reset(); // registrations hold the device context themselves; this drops the cache's
}

int RcInterface::txbuf_get() {
    if (tx_free_.empty()) return -1;
    int i = tx_free_.back();
    tx_free_.pop_back();
    return i;
}

gdx_status_t RcInterface::reserve_cq(unsigned send, unsigned recv) {
    // Every outstanding work request of every endpoint must fit in the CQs, or completions are lost.
    auto grow = [&](ibv_cq *cq, unsigned &cap, unsigned used, const char *which) -> gdx_status_t {
        if (used <= cap) return GDX_OK;
        unsigned want = std::max(used, cap * 2);
        if (int rc = ibv_resize_cq(cq, static_cast<int>(want)))
            return fail_errno(GDX_ERR_NO_RESOURCE, rc, kComp, "%s: ibv_resize_cq(%s, %u)", port_name_.c_str(), which, want);
        cap = want;
        return GDX_OK;
    };
    send_cq_used_ += send;
    recv_cq_used_ += recv;
    gdx_status_t st = grow(send_cq_, send_cq_cap_, send_cq_used_, "send");
    if (st == GDX_OK) st = grow(recv_cq_, recv_cq_cap_, recv_cq_used_, "recv");
    if (st != GDX_OK) release_cq(send, recv);
    return st;
}

void RcInterface::release_cq(unsigned send, unsigned recv) {
    send_cq_used_ -= send;
    recv_cq_used_ -= recv;
}

gdx_status_t RcInterface::ep_create(std::unique_ptr<Endpoint> *out) {
    if (out == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "ep_create: null output");
    std::unique_ptr<RcEndpoint> ep(new RcEndpoint(this));
    if (gdx_status_t st = ep->init(); st != GDX_OK) return st;
    *out = std::move(ep);
    return GDX_OK;
}

void RcInterface::mark_busy(RcEndpoint *ep) {
    if (ep->in_busy_) return;
    ep->in_busy_ = true;
    busy_.push_back(ep);
}

void RcInterface::handle(const ibv_wc &wc, bool send) {
    auto it = eps_.find(static_cast<uint32_t>(wc.wr_id >> 32));
    if (it == eps_.end()) return; // an endpoint destroyed meanwhile (its drain normally takes these)
    if (send) it->second->on_send(wc);
    else it->second->on_recv(wc);
}

unsigned RcInterface::poll(ibv_cq *cq, bool send, std::vector<std::pair<ibv_wc, bool>> *stash_to) {
    ibv_wc wc[16];
    int n = ibv_poll_cq(cq, 16, wc);
    if (n < 0) {
        GDX_LOG_ONCE(log::Level::Error, kComp, "rc:pollcq:" + port_name_, "%s: ibv_poll_cq failed (%d)",
                     port_name_.c_str(), n);
        return 0;
    }
    for (int i = 0; i < n; ++i) {
        if (stash_to) stash_to->emplace_back(wc[i], send);
        else handle(wc[i], send);
    }
    return static_cast<unsigned>(n);
}

unsigned RcInterface::progress() {
    unsigned events = 0;
    if (!stash_.empty()) {
        std::vector<std::pair<ibv_wc, bool>> s;
        s.swap(stash_);
        for (auto &[wc, send] : s) handle(wc, send);
        events += static_cast<unsigned>(s.size());
    }
    for (unsigned n; (n = poll(send_cq_, true, nullptr)) > 0;) events += n;
    for (unsigned n; (n = poll(recv_cq_, false, nullptr)) > 0;) events += n;
    if (!busy_.empty()) {
        std::vector<RcEndpoint *> b;
        b.swap(busy_);
        for (RcEndpoint *ep : b) ep->in_busy_ = false;
        for (RcEndpoint *ep : b) {
            // Destroyed endpoints removed themselves from busy_ before the swap; these are alive (callbacks
            // must not destroy endpoints of this interface from within progress()).
            if (ep->credit_owed_) ep->announce_credits(true);
            ep->dispatch_pending();
            if (!ep->pending_.empty() || ep->credit_owed_) mark_busy(ep);
        }
    }
    return events;
}

int RcInterface::wakeup_fd() const { return channel_ ? channel_->fd : -1; }

gdx_status_t RcInterface::arm_wakeup() {
    // Consume the events that woke us, re-arm both CQs, then look once more: a completion that arrived before
    // the re-arm raises no event, so it must be found here (and kept for progress()).
    ibv_cq *cq = nullptr;
    void *ctx = nullptr;
    while (ibv_get_cq_event(channel_, &cq, &ctx) == 0) {
        if (cq == send_cq_) ++unacked_send_;
        else ++unacked_recv_;
    }
    if (errno != EAGAIN) return fail_errno(GDX_ERR_IO, errno, kComp, "%s: ibv_get_cq_event", port_name_.c_str());
    // Acknowledging takes a lock in libibverbs: batch it.
    if (unacked_send_ >= 64) ibv_ack_cq_events(send_cq_, unacked_send_), unacked_send_ = 0;
    if (unacked_recv_ >= 64) ibv_ack_cq_events(recv_cq_, unacked_recv_), unacked_recv_ = 0;
    if (int rc = ibv_req_notify_cq(send_cq_, 0)) return fail_errno(GDX_ERR_DRIVER, rc, kComp, "ibv_req_notify_cq");
    if (int rc = ibv_req_notify_cq(recv_cq_, 0)) return fail_errno(GDX_ERR_DRIVER, rc, kComp, "ibv_req_notify_cq");
    poll(send_cq_, true, &stash_);
    poll(recv_cq_, false, &stash_);
    if (!stash_.empty()) return GDX_ERR_BUSY;
    for (RcEndpoint *ep : busy_)
        if (ep->busy()) return GDX_ERR_BUSY;
    return GDX_OK;
}

} // namespace gdx::tp::rc
