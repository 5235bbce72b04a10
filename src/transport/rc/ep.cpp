#include "transport/rc/ep.h"

#include "core/error.h"
#include "core/log.h"
#include "transport/rc/qp_state.h"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstring>
#include <random>
#include <sys/mman.h>

namespace gdx::tp::rc {

namespace {
constexpr uint32_t kAddrMagic = 0x41584447; // "GDXA"
constexpr uint8_t kAddrVersion = 1;

void put_u16(uint8_t *p, uint16_t v) { p[0] = uint8_t(v), p[1] = uint8_t(v >> 8); }
void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (8 * i));
}
void put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; ++i) p[i] = uint8_t(v >> (8 * i));
}
uint16_t get_u16(const uint8_t *p) { return uint16_t(p[0] | p[1] << 8); }
uint32_t get_u32(const uint8_t *p) { return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24; }
uint64_t get_u64(const uint8_t *p) { return uint64_t(get_u32(p)) | uint64_t(get_u32(p + 4)) << 32; }

// What a failed work completion means for the caller.
gdx_status_t status_of(ibv_wc_status s) {
    switch (s) {
    case IBV_WC_SUCCESS: return GDX_OK;
    case IBV_WC_REM_ACCESS_ERR:  // the peer's NIC refused the rkey, range or rights
    case IBV_WC_LOC_PROT_ERR:    // our lkey does not cover the buffer or lacks the right
    case IBV_WC_LOC_ACCESS_ERR: return GDX_ERR_ACCESS_DENIED;
    case IBV_WC_RETRY_EXC_ERR:   // no ACK within the transport timeout x retries: the peer is gone
    case IBV_WC_RNR_RETRY_EXC_ERR:
    case IBV_WC_REM_ABORT_ERR: return GDX_ERR_CONNECTION_RESET;
    case IBV_WC_REM_INV_REQ_ERR: // e.g. a message longer than the peer's receive buffer
    case IBV_WC_LOC_LEN_ERR:
    case IBV_WC_BAD_RESP_ERR: return GDX_ERR_PROTOCOL;
    case IBV_WC_WR_FLUSH_ERR: return GDX_ERR_CANCELED;
    default: return GDX_ERR_IO;
    }
}
} // namespace

// ---- life cycle -------------------------------------------------------------------------------------------

gdx_status_t RcEndpoint::init() {
    RcInterface &I = *iface_;
    DeviceCtx &D = *I.dev_;
    if (gdx_status_t st = I.reserve_cq(I.tx_len_, I.rx_len_); st != GDX_OK) return st;
    serial_ = I.next_serial_++;
    if (serial_ == 0) serial_ = I.next_serial_++; // 0 never names an endpoint
    I.eps_[serial_] = this;

    ibv_qp_init_attr qa{};
    qa.send_cq = I.send_cq_;
    qa.recv_cq = I.recv_cq_;
    qa.qp_type = IBV_QPT_RC;
    qa.cap.max_send_wr = I.tx_len_;
    qa.cap.max_recv_wr = I.rx_len_;
    qa.cap.max_send_sge = 2; // am_zcopy: header + payload
    qa.cap.max_recv_sge = 1;
    qa.cap.max_inline_data = static_cast<uint32_t>(I.max_inline_);
    qp_ = ibv_create_qp(D.pd(), &qa);
    if (qp_ == nullptr && I.max_inline_ > 0) { // some providers refuse inline sizes they cannot do: retry without
        qa.cap.max_inline_data = 0;
        qp_ = ibv_create_qp(D.pd(), &qa);
    }
    if (qp_ == nullptr) return fail_errno(GDX_ERR_NO_RESOURCE, errno, kComp, "%s: ibv_create_qp(RC)", I.port_name_.c_str());
    max_inline_ = qa.cap.max_inline_data;

    // Remote write and read on the QP; the MRs still decide per region.
    if (int rc = qp_to_init(qp_, D.port(), IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ))
        return fail_errno(GDX_ERR_DRIVER, rc, kComp, "%s: ibv_modify_qp(INIT)", I.port_name_.c_str());

    slots_.resize(I.tx_len_);
    sq_free_ = I.tx_len_;
    std::random_device rd;
    psn_ = rd() & 0xffffff;

    // Receive buffers, registered once; posted now (a QP in INIT accepts receives) so the peer may send as
    // soon as both sides are connected.
    rx_slab_len_ = I.seg_size_ * I.rx_len_;
    void *p = mmap(nullptr, rx_slab_len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return fail_errno(GDX_ERR_NO_MEMORY, errno, kComp, "mmap(%zu) for receive buffers", rx_slab_len_);
    rx_slab_ = static_cast<char *>(p);
    rx_mr_ = ibv_reg_mr(D.pd(), rx_slab_, rx_slab_len_, IBV_ACCESS_LOCAL_WRITE);
    if (rx_mr_ == nullptr) return fail_errno(GDX_ERR_NO_MEMORY, errno, kComp, "%s: ibv_reg_mr(receive buffers)", I.port_name_.c_str());
    // The credit word the peer writes, opened for remote write and nothing else; our announcement source apart.
    p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return fail_errno(GDX_ERR_NO_MEMORY, errno, kComp, "mmap(credit words)");
    ctrl_ = static_cast<uint64_t *>(p);
    ctrl_remote_mr_ = ibv_reg_mr(D.pd(), &ctrl_[0], 8, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    ctrl_local_mr_ = ctrl_remote_mr_ ? ibv_reg_mr(D.pd(), &ctrl_[8], 8, IBV_ACCESS_LOCAL_WRITE) : nullptr;
    if (ctrl_local_mr_ == nullptr) return fail_errno(GDX_ERR_NO_MEMORY, errno, kComp, "%s: ibv_reg_mr(credit words)", I.port_name_.c_str());
    for (unsigned i = 0; i < I.rx_len_; ++i)
        if (gdx_status_t st = repost(i); st != GDX_OK) return st;
    return GDX_OK;
}

RcEndpoint::~RcEndpoint() {
    RcInterface &I = *iface_;
    I.eps_.erase(serial_);
    if (in_busy_) std::erase(I.busy_, this);
    if (qp_ != nullptr) {
        drain();
        if (int rc = ibv_destroy_qp(qp_)) fail_errno(GDX_ERR_DRIVER, rc, kComp, "%s: ibv_destroy_qp", I.port_name_.c_str());
    }
    for (Slot &s : slots_)
        if (s.txbuf >= 0) I.txbuf_put(s.txbuf);
    if (ctrl_local_mr_) ibv_dereg_mr(ctrl_local_mr_);
    if (ctrl_remote_mr_) ibv_dereg_mr(ctrl_remote_mr_);
    if (ctrl_) munmap(ctrl_, 4096);
    if (rx_mr_) ibv_dereg_mr(rx_mr_);
    if (rx_slab_) munmap(rx_slab_, rx_slab_len_);
    if (serial_ != 0) I.release_cq(I.tx_len_, I.rx_len_);
}

void RcEndpoint::drain() {
    // Flush the QP and collect its completions before it goes, so the shared CQs hold nothing of it afterwards
    // (other endpoints' completions are kept for the next progress()). Outstanding Completions are not called:
    // destroying an endpoint abandons them (flush first to know they are done).
    RcInterface &I = *iface_;
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_ERR;
    if (int rc = ibv_modify_qp(qp_, &a, IBV_QP_STATE)) {
        fail_errno(GDX_ERR_DRIVER, rc, kComp, "%s: ibv_modify_qp(ERR) before destroy", I.port_name_.c_str());
        return;
    }
    unsigned sends = static_cast<unsigned>(slots_.size()) - sq_free_, recvs = rx_posted_;
    // Some of ours may already sit in the stash (polled by arm_wakeup or by another endpoint's drain).
    std::erase_if(I.stash_, [&](const std::pair<ibv_wc, bool> &e) {
        if (static_cast<uint32_t>(e.first.wr_id >> 32) != serial_) return false;
        if (e.second) {
            --sends;
            Slot &s = slots_[e.first.wr_id & 0xffffffff];
            if (s.txbuf >= 0) I.txbuf_put(s.txbuf), s.txbuf = -1;
        } else {
            --recvs;
        }
        return true;
    });
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while ((sends > 0 || recvs > 0) && std::chrono::steady_clock::now() < deadline) {
        for (bool send : {true, false}) {
            ibv_wc wc[16];
            int n = ibv_poll_cq(send ? I.send_cq_ : I.recv_cq_, 16, wc);
            for (int i = 0; i < n; ++i) {
                if (static_cast<uint32_t>(wc[i].wr_id >> 32) != serial_) {
                    I.stash_.emplace_back(wc[i], send);
                    continue;
                }
                if (send) {
                    --sends;
                    Slot &s = slots_[wc[i].wr_id & 0xffffffff];
                    if (s.txbuf >= 0) I.txbuf_put(s.txbuf), s.txbuf = -1;
                } else {
                    --recvs;
                }
            }
        }
    }
    if (sends > 0 || recvs > 0)
        GDX_WARN(kComp, "%s: QP %u still had %u send and %u receive completions after 2 s of flushing",
                 I.port_name_.c_str(), qp_->qp_num, sends, recvs);
}

// ---- connection -------------------------------------------------------------------------------------------

std::vector<uint8_t> RcEndpoint::address() const {
    const DeviceCtx &D = *iface_->dev_;
    std::vector<uint8_t> b(kAddrSize, 0);
    put_u32(&b[0], kAddrMagic);
    b[4] = kAddrVersion;
    b[5] = D.port_attr().link_layer;
    b[6] = static_cast<uint8_t>(D.port_attr().active_mtu);
    put_u32(&b[8], qp_->qp_num);
    put_u32(&b[12], psn_);
    put_u16(&b[16], D.is_roce() ? 0 : D.port_attr().lid);
    put_u32(&b[20], iface_->rx_len_);
    put_u32(&b[24], static_cast<uint32_t>(iface_->seg_size_));
    put_u32(&b[28], ctrl_remote_mr_->rkey);
    put_u64(&b[32], reinterpret_cast<uintptr_t>(&ctrl_[0]));
    if (D.is_roce()) std::memcpy(&b[40], D.gid().raw, 16);
    return b;
}

gdx_status_t RcEndpoint::connect(std::span<const uint8_t> ra) {
    RcInterface &I = *iface_;
    const DeviceCtx &D = *I.dev_;
    const char *port = I.port_name_.c_str();
    if (connected_ || error_ != GDX_OK)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "%s: connect on an endpoint already %s (use a new endpoint)",
                        port, connected_ ? "connected" : "failed");
    if (ra.size() != kAddrSize || get_u32(ra.data()) != kAddrMagic || ra[4] != kAddrVersion)
        return GDX_FAIL(GDX_ERR_PROTOCOL, kComp, "%s: connect: not an rc endpoint address (%zu bytes, magic/version)",
                        port, ra.size());
    const uint8_t *b = ra.data();
    uint32_t qpn = get_u32(b + 8), rpsn = get_u32(b + 12), rx = get_u32(b + 20), seg = get_u32(b + 24);
    uint64_t credit_addr = get_u64(b + 32);
    if (b[5] != D.port_attr().link_layer)
        return GDX_FAIL(GDX_ERR_UNREACHABLE, kComp, "%s: connect: the peer's port is %s, ours %s", port,
                        b[5] == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand",
                        D.is_roce() ? "Ethernet" : "InfiniBand");
    if (b[6] < IBV_MTU_256 || b[6] > IBV_MTU_4096 || qpn == 0 || qpn > 0xffffff || rpsn > 0xffffff || rx == 0 ||
        credit_addr == 0)
        return GDX_FAIL(GDX_ERR_PROTOCOL, kComp, "%s: connect: invalid address fields (mtu %u, qpn %u, psn %u, rx %u)",
                        port, b[6], qpn, rpsn, rx);
    if (seg != I.seg_size_)
        return GDX_FAIL(GDX_ERR_INVALID_CONFIG, kComp,
                        "%s: connect: GDX_RC_SEG_SIZE differs (%zu here, %u at the peer); set it alike on both sides",
                        port, I.seg_size_, seg);

    QpPath path;
    path.port = D.port();
    path.mtu = static_cast<ibv_mtu>(std::min<int>(b[6], D.port_attr().active_mtu));
    path.dest_qpn = qpn;
    path.rq_psn = rpsn;
    path.max_dest_rd_atomic = static_cast<uint8_t>(std::min(D.dev_attr().orig_attr.max_qp_rd_atom, 16));
    path.global = D.is_roce();
    if (path.global) {
        std::memcpy(path.dgid.raw, b + 40, 16);
        path.sgid_index = static_cast<uint8_t>(D.gid_index());
    } else {
        path.dlid = get_u16(b + 16);
    }
    if (int rc = qp_to_rtr(qp_, path))
        return fail_errno(GDX_ERR_UNREACHABLE, rc, kComp, "%s: ibv_modify_qp(RTR) to QP %u", port, qpn);
    if (int rc = qp_to_rts(qp_, I.timing_.timeout, I.timing_.retry_cnt, psn_,
                           static_cast<uint8_t>(std::min(D.dev_attr().orig_attr.max_qp_init_rd_atom, 16))))
        return fail_errno(GDX_ERR_DRIVER, rc, kComp, "%s: ibv_modify_qp(RTS)", port);
    peer_rx_len_ = rx;
    peer_credit_addr_ = credit_addr;
    peer_credit_rkey_ = get_u32(b + 28);
    connected_ = true;
    GDX_DEBUG(kComp, "%s: QP %u connected to QP %u (path MTU %d, peer credits %u)", port, qp_->qp_num, qpn,
              128 << path.mtu, rx);
    if (!pending_.empty()) I.mark_busy(this);
    return GDX_OK;
}

gdx_status_t RcEndpoint::state() const {
    if (error_ != GDX_OK) return error_;
    return connected_ ? GDX_OK : GDX_INPROGRESS;
}

gdx_status_t RcEndpoint::ready(const char *op) const {
    if (error_ != GDX_OK)
        return ::gdx::fail(error_, log::Level::Debug, kComp, "%s: %s on a failed endpoint (%s)",
                           iface_->port_name_.c_str(), op, gdx_status_string(error_));
    if (!connected_ || pending_.holds_back()) return GDX_ERR_NO_RESOURCE; // parked requests go first (pending_queue.h)
    return GDX_OK;
}

void RcEndpoint::fail(gdx_status_t st, const char *fmt, ...) {
    if (error_ != GDX_OK) return; // the first error is the one every outstanding operation reports
    error_ = st;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    ::gdx::fail(st, log::Level::Error, kComp, "%s: QP %u: %s", iface_->port_name_.c_str(), qp_->qp_num, msg);
    // Every outstanding request now flushes with an error; pending requests run to see it.
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_ERR;
    ibv_modify_qp(qp_, &a, IBV_QP_STATE);
    if (!pending_.empty()) iface_->mark_busy(this);
}

// ---- resources --------------------------------------------------------------------------------------------

int64_t RcEndpoint::credits() const {
    // The peer's re-posted count arrives by RDMA WRITE at any time: read it once, atomically.
    uint64_t returned = __atomic_load_n(&ctrl_[0], __ATOMIC_ACQUIRE);
    return static_cast<int64_t>(peer_rx_len_) - static_cast<int64_t>(am_sent_ - returned);
}

bool RcEndpoint::has_resources() const {
    return error_ != GDX_OK || (connected_ && sq_free_ > 1 && credits() > 0 && !iface_->tx_free_.empty());
}

bool RcEndpoint::busy() const {
    // Credits come back by RDMA WRITE, which raises no completion here: a request parked for credits must be
    // polled for (arm_wakeup says BUSY), while one parked for send slots or buffers waits for a completion.
    bool credit_bound = connected_ && error_ == GDX_OK && credits() <= 0;
    return (credit_owed_ && sq_free_ > 0) || (!pending_.empty() && (has_resources() || credit_bound));
}

gdx_status_t RcEndpoint::repost(unsigned idx) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(rx_slab_ + static_cast<size_t>(idx) * iface_->seg_size_),
                static_cast<uint32_t>(iface_->seg_size_), rx_mr_->lkey};
    ibv_recv_wr wr{}, *bad = nullptr;
    wr.wr_id = uint64_t(serial_) << 32 | idx;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    if (int rc = ibv_post_recv(qp_, &wr, &bad))
        return fail_errno(GDX_ERR_DRIVER, rc, kComp, "%s: ibv_post_recv", iface_->port_name_.c_str());
    ++rx_posted_;
    return GDX_OK;
}

gdx_status_t RcEndpoint::post(Wr *wrs, unsigned n, Completion *comp, int txbuf, OpKind kind) {
    for (unsigned i = 0; i < n; ++i) {
        uint64_t slot = next_slot_++ % slots_.size();
        Slot &s = slots_[slot];
        s.comp = i + 1 == n ? comp : nullptr;
        s.txbuf = i + 1 == n ? txbuf : -1;
        s.seq = ++posted_seq_;
        s.kind = kind;
        ibv_send_wr &w = wrs[i].wr;
        w.wr_id = uint64_t(serial_) << 32 | slot;
        w.sg_list = wrs[i].sge;
        w.send_flags |= IBV_SEND_SIGNALED;
        if (fence_next_ && kind != OpKind::Credit) w.send_flags |= IBV_SEND_FENCE, fence_next_ = false;
        w.next = i + 1 < n ? &wrs[i + 1].wr : nullptr;
    }
    ibv_send_wr *bad = nullptr;
    if (int rc = ibv_post_send(qp_, &wrs[0].wr, &bad)) {
        // The requests before `bad` were queued and will complete (flushed, since the endpoint fails now);
        // the rest never were: release their slots so the accounting (and the drain) stays exact. The caller
        // gets the error and keeps its Completion and buffers.
        unsigned posted = 0;
        for (ibv_send_wr *w = &wrs[0].wr; w != nullptr && w != bad; w = w->next) ++posted;
        for (unsigned i = posted; i < n; ++i) {
            Slot &s = slots_[wrs[i].wr.wr_id & 0xffffffff];
            s.comp = nullptr;
            s.txbuf = -1;
        }
        sq_free_ -= posted;
        posted_seq_ -= n - posted;
        next_slot_ -= n - posted;
        fail(GDX_ERR_DRIVER, "ibv_post_send: %s (errno %d)", std::strerror(rc), rc);
        return error_;
    }
    sq_free_ -= n;
    return GDX_OK;
}

void RcEndpoint::announce_credits(bool force) {
    // Publish the re-posted count when a quarter of the peer's credits is owed (or when asked to flush it).
    // No deadlock without forcing the rest: a sender out of credits has rx_len messages unannounced here,
    // which is at least the threshold once they are consumed. Announcing less often halves the packets of a
    // ping-pong (an immediate announcement per message was measured to triple AM latency on rxe).
    uint64_t owed = rx_reposted_ - rx_announced_;
    unsigned threshold = std::max(1u, iface_->rx_len_ / 4);
    if (owed == 0 || !connected_ || error_ != GDX_OK) {
        credit_owed_ = false;
        return;
    }
    if (!force && owed < threshold) return;
    if (sq_free_ == 0) { // retried by progress() once a send completes
        credit_owed_ = true;
        return;
    }
    Wr w{};
    w.wr.opcode = IBV_WR_RDMA_WRITE;
    w.wr.num_sge = 1;
    w.wr.wr.rdma.remote_addr = peer_credit_addr_;
    w.wr.wr.rdma.rkey = peer_credit_rkey_;
    ctrl_[8] = rx_reposted_; // monotonic: a later write of a larger value may overtake nothing that matters
    w.sge[0] = {reinterpret_cast<uintptr_t>(&ctrl_[8]), 8, ctrl_local_mr_->lkey};
    if (max_inline_ >= 8) w.wr.send_flags = IBV_SEND_INLINE;
    if (post(&w, 1, nullptr, -1, OpKind::Credit) == GDX_OK) {
        rx_announced_ = rx_reposted_;
        credit_owed_ = false;
    }
}

void RcEndpoint::dispatch_pending() { pending_.dispatch([this] { return has_resources(); }); }

gdx_status_t RcEndpoint::pending_add(PendingRequest *req) {
    gdx_status_t st = pending_.add(req, has_resources(), kComp);
    if (st == GDX_OK) iface_->mark_busy(this); // progress() looks at it from now on
    return st;
}

// ---- completions ------------------------------------------------------------------------------------------

void RcEndpoint::on_send(const ibv_wc &wc) {
    Slot &s = slots_[wc.wr_id & 0xffffffff];
    ++sq_free_;
    completed_seq_ = s.seq;
    if (s.txbuf >= 0) iface_->txbuf_put(s.txbuf), s.txbuf = -1;
    gdx_status_t st = GDX_OK;
    if (wc.status != IBV_WC_SUCCESS) {
        if (wc.status == IBV_WC_WR_FLUSH_ERR && error_ == GDX_OK) {
            // Flushed without an error of ours: the QP was moved to the error state by the peer's side (e.g. a
            // remote access error it detected) or by the device.
            fail(GDX_ERR_CONNECTION_RESET, "send flushed: the queue pair entered the error state");
        } else if (wc.status != IBV_WC_WR_FLUSH_ERR) {
            const char *what = wc.status == IBV_WC_REM_ACCESS_ERR
                                   ? "the peer's NIC refused the access (bad rkey, range or rights)"
                               : wc.status == IBV_WC_RETRY_EXC_ERR
                                   ? "no answer from the peer within the transport timeout (GDX_PEER_TIMEOUT)"
                                   : "work request failed";
            fail(status_of(wc.status), "%s: %s (vendor error 0x%x)", what, ibv_wc_status_str(wc.status), wc.vendor_err);
        }
        st = error_ != GDX_OK ? error_ : GDX_ERR_CANCELED;
    }
    Completion *c = s.comp;
    s.comp = nullptr;
    while (!flushes_.empty() && flushes_.front().first <= completed_seq_) {
        Completion *f = flushes_.front().second;
        flushes_.pop_front();
        if (c) c->complete(st), c = nullptr; // an operation completes before the flush that waits for it
        f->complete(error_);
    }
    if (c) c->complete(st);
    if (busy()) iface_->mark_busy(this);
}

void RcEndpoint::on_recv(const ibv_wc &wc) {
    unsigned idx = static_cast<unsigned>(wc.wr_id & 0xffffffff);
    --rx_posted_;
    if (wc.status != IBV_WC_SUCCESS) {
        if (wc.status != IBV_WC_WR_FLUSH_ERR)
            fail(status_of(wc.status), "receive failed: %s (vendor error 0x%x)", ibv_wc_status_str(wc.status),
                 wc.vendor_err);
        else if (connected_ && sq_free_ == slots_.size())
            fail(GDX_ERR_CONNECTION_RESET, "receive flushed: the queue pair entered the error state");
        // With sends outstanding, their completions (flushed or failed) carry the cause: let them report it.
        return;
    }
    uint32_t imm = (wc.wc_flags & IBV_WC_WITH_IMM) ? ntohl(wc.imm_data) : 0;
    unsigned id = (imm >> 16) & 0xff;
    if (wc.opcode != IBV_WC_RECV || (imm >> 24) != kImmAmTag || id >= kMaxAmId) {
        GDX_LOG_ONCE(log::Level::Error, kComp, "rc:badrecv:" + iface_->port_name_,
                     "%s: QP %u: dropped a message that is not a gdx active message (opcode %d, imm 0x%08x)",
                     iface_->port_name_.c_str(), qp_->qp_num, wc.opcode, imm);
    } else {
        iface_->dispatch_am(id, this, rx_slab_ + static_cast<size_t>(idx) * iface_->seg_size_, wc.byte_len);
    }
    if (error_ != GDX_OK || repost(idx) != GDX_OK) return;
    ++rx_reposted_;
    announce_credits(false);
    if (credit_owed_) iface_->mark_busy(this);
}

} // namespace gdx::tp::rc
