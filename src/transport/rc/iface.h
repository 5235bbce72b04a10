// The rc interface (one device port) and its endpoints (one RC queue pair each).
//
// Data path: put/get are RDMA WRITE/READ straight between registered buffers (the NIC checks the peer's rkey,
// range and rights); active messages are SEND_WITH_IMM (imm = tag + AM id) into receive buffers the peer
// posted for this endpoint. Every send work request is signaled, so the send queue is accounted exactly, and
// its completion completes the caller's Completion.
//
// Flow control, so nothing is ever dropped or retried by the NIC for lack of resources:
//   - send queue: at most GDX_RC_TX_QUEUE_LEN work requests outstanding per endpoint;
//   - receive credits: a sender may have at most the peer's GDX_RC_RX_QUEUE_LEN active messages unconsumed.
//     The receiver publishes how many buffers it has re-posted (a monotonic 64-bit count) by an RDMA WRITE
//     into an 8-byte word the sender registered for it (its address and rkey travel in the endpoint address),
//     so credit returns never consume a receive buffer themselves (no credit deadlock) and need no ordering.
// Exhaustion returns GDX_ERR_NO_RESOURCE; pending_add() parks a request until progress() frees resources.
//
// Errors: a failed work request moves the QP to the error state; the NIC then flushes every outstanding
// request, and each Completion completes with the first error (a dead peer: GDX_ERR_CONNECTION_RESET after
// the transport retries, whose timeout and count are derived from GDX_PEER_TIMEOUT). The endpoint stays
// failed; reconnect with a new endpoint.
#pragma once

#include "transport/iface_base.h"
#include "transport/rc/md.h"

#include <deque>
#include <unordered_map>

namespace gdx::tp::rc {

class RcEndpoint;

// QP timing from GDX_PEER_TIMEOUT: a dead peer is detected within (retry_cnt + 1) * 4.096 us * 2^timeout.
struct QpTiming {
    uint8_t timeout = 0; // 0 = infinite (GDX_PEER_TIMEOUT=inf)
    uint8_t retry_cnt = 6; // not 7: soft-RoCE (rxe_comp.c) treats 7 as "retry forever", like rnr_retry
    double bound_s = 0;  // the detection bound this gives, for logs and tests
    static QpTiming from(std::chrono::nanoseconds peer_timeout);
};

class RcInterface final : public InterfaceBase {
  public:
    static gdx_status_t open(const std::string &dev, uint8_t port, const Config &cfg, std::unique_ptr<Interface> *out);
    ~RcInterface() override;

    std::string_view device_name() const override { return port_name_; }
    MemoryDomain &md() override { return *md_; }
    gdx_status_t ep_create(std::unique_ptr<Endpoint> *out) override;
    unsigned progress() override;
    int wakeup_fd() const override;
    gdx_status_t arm_wakeup() override;

    const QpTiming &timing() const { return timing_; }
    RcMemoryDomain &rc_md() { return *md_; }

  private:
    friend class RcEndpoint;
    RcInterface() : InterfaceBase("rc") {}
    gdx_status_t init(std::shared_ptr<DeviceCtx> dev, const Config &cfg);

    // Bounce buffers for am_short (beyond inline), am_bcopy and am_zcopy headers: one registered slab.
    int txbuf_get();
    void txbuf_put(int i) { tx_free_.push_back(i); }
    char *txbuf(int i) { return tx_slab_ + static_cast<size_t>(i) * seg_size_; }

    gdx_status_t reserve_cq(unsigned send, unsigned recv);
    void release_cq(unsigned send, unsigned recv);
    void handle(const ibv_wc &wc, bool send);
    unsigned poll(ibv_cq *cq, bool send, std::vector<std::pair<ibv_wc, bool>> *stash_to);
    void mark_busy(RcEndpoint *ep);

    std::shared_ptr<DeviceCtx> dev_;
    std::unique_ptr<RcMemoryDomain> md_;
    std::string port_name_;
    QpTiming timing_;
    unsigned tx_len_ = 0, rx_len_ = 0;
    size_t seg_size_ = 0, max_inline_ = 0;

    ibv_comp_channel *channel_ = nullptr;
    ibv_cq *send_cq_ = nullptr, *recv_cq_ = nullptr;
    unsigned send_cq_cap_ = 0, recv_cq_cap_ = 0, send_cq_used_ = 0, recv_cq_used_ = 0;
    unsigned unacked_send_ = 0, unacked_recv_ = 0;

    char *tx_slab_ = nullptr;
    size_t tx_slab_len_ = 0;
    ibv_mr *tx_mr_ = nullptr;
    std::vector<int> tx_free_;

    uint32_t next_serial_ = 1;
    std::unordered_map<uint32_t, RcEndpoint *> eps_; // by serial (the high half of every wr_id)
    std::vector<RcEndpoint *> busy_;                  // endpoints with pending requests or credits to return
    std::vector<std::pair<ibv_wc, bool>> stash_;      // completions polled outside progress(), handled next
};

} // namespace gdx::tp::rc
