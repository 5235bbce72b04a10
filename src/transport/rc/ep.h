// One rc endpoint: an RC queue pair, its receive buffers, its credit word and its outstanding operations.
// See iface.h for the protocol.
#pragma once

#include "transport/pending_queue.h"
#include "transport/rc/iface.h"

namespace gdx::tp::rc {

// Endpoint address (kAddrSize bytes, little-endian, written and read field by field):
//   off size field
//    0   4   magic        0x41584447 ("GDXA")
//    4   1   version      1
//    5   1   link_layer   IBV_LINK_LAYER_* of the port (both sides must match)
//    6   1   mtu          active MTU (enum ibv_mtu); the path MTU is the smaller of both
//    7   1   reserved     0
//    8   4   qpn          24-bit QP number
//   12   4   psn          24-bit initial packet sequence number
//   16   2   lid          InfiniBand LID (0 on RoCE)
//   18   2   reserved     0
//   20   4   rx_len       receive buffers posted for this endpoint (the peer's credits)
//   24   4   seg_size     bytes per receive buffer (must equal the peer's GDX_RC_SEG_SIZE)
//   28   4   credit_rkey  rkey of the 8-byte credit word
//   32   8   credit_addr  address of the credit word
//   40  16   gid          RoCE GID (zero on InfiniBand)
inline constexpr size_t kAddrSize = 56;

// Immediate data of an active message: kImmAmTag << 24 | id << 16. Anything else arriving is not ours.
inline constexpr uint32_t kImmAmTag = 0xa5;

class RcEndpoint final : public Endpoint {
  public:
    ~RcEndpoint() override;

    std::vector<uint8_t> address() const override;
    gdx_status_t connect(std::span<const uint8_t> remote_address) override;
    gdx_status_t state() const override;

    gdx_status_t put(const void *buf, size_t len, const MemHandle *lmemh, uint64_t remote_addr,
                     const RemoteKey &rkey, Completion *comp) override;
    gdx_status_t get(void *buf, size_t len, const MemHandle *lmemh, uint64_t remote_addr, const RemoteKey &rkey,
                     Completion *comp) override;
    gdx_status_t am_short(uint8_t id, const void *data, size_t len) override;
    gdx_status_t am_bcopy(uint8_t id, const void *data, size_t len) override;
    gdx_status_t am_zcopy(uint8_t id, const void *header, size_t header_len, const void *payload, size_t len,
                          const MemHandle *memh, Completion *comp) override;
    gdx_status_t flush(Completion *comp) override;
    gdx_status_t fence() override;
    gdx_status_t pending_add(PendingRequest *req) override;

    uint32_t qp_num() const { return qp_->qp_num; }

  private:
    friend class RcInterface;
    explicit RcEndpoint(RcInterface *iface) : iface_(iface) {}
    gdx_status_t init();

    enum class OpKind : uint8_t { Rdma, Am, Credit };
    struct Slot {
        Completion *comp = nullptr;
        int txbuf = -1;
        uint64_t seq = 0;
        OpKind kind = OpKind::Rdma;
    };
    struct Wr {
        ibv_send_wr wr;
        ibv_sge sge[2];
    };

    gdx_status_t ready(const char *op) const;
    int64_t credits() const;
    bool has_resources() const;
    // Posts the chain wrs[0..n); the last one carries comp. Slots are taken in order.
    gdx_status_t post(Wr *wrs, unsigned n, Completion *comp, int txbuf, OpKind kind);
    gdx_status_t rdma(bool write, void *buf, size_t len, const MemHandle *lmemh, uint64_t raddr, const RemoteKey &rkey,
                      Completion *comp);
    gdx_status_t am_send(unsigned id, const void *hdr, size_t hlen, const void *payload, size_t len, uint32_t lkey,
                         Completion *comp, const char *op);
    gdx_status_t repost(unsigned idx);
    void announce_credits(bool force);
    void dispatch_pending();
    void fail(gdx_status_t st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
    void on_send(const ibv_wc &wc);
    void on_recv(const ibv_wc &wc);
    bool busy() const;
    void drain();

    RcInterface *iface_;
    uint32_t serial_ = 0;
    ibv_qp *qp_ = nullptr;
    uint32_t psn_ = 0;
    bool connected_ = false;
    gdx_status_t error_ = GDX_OK;
    bool in_busy_ = false;
    bool fence_next_ = false;
    unsigned max_inline_ = 0;

    // send side
    std::vector<Slot> slots_;
    unsigned sq_free_ = 0;
    uint64_t posted_seq_ = 0, completed_seq_ = 0, next_slot_ = 0;
    uint64_t am_sent_ = 0;
    std::deque<std::pair<uint64_t, Completion *>> flushes_;
    PendingQueue pending_;

    // receive side
    char *rx_slab_ = nullptr;
    size_t rx_slab_len_ = 0;
    ibv_mr *rx_mr_ = nullptr;
    unsigned rx_posted_ = 0;
    uint64_t rx_reposted_ = 0, rx_announced_ = 0;
    bool credit_owed_ = false;

    // credit words: [0] written by the peer (its re-posted count), [1] our source for announcements
    uint64_t *ctrl_ = nullptr;
    ibv_mr *ctrl_remote_mr_ = nullptr, *ctrl_local_mr_ = nullptr;

    // the peer
    unsigned peer_rx_len_ = 0;
    uint64_t peer_credit_addr_ = 0;
    uint32_t peer_credit_rkey_ = 0;
};

} // namespace gdx::tp::rc
