// cuda_ipc endpoint and interface (internal: the public face is ipc_iface.h and transport.h).
#pragma once

#include "transport/cuda_ipc/ipc_cache.h"
#include "transport/cuda_ipc/ipc_iface.h"
#include "transport/ep_checks.h"
#include "transport/iface_base.h"
#include "transport/pending_queue.h"
#include "transport/shm/hub.h"

#include <deque>

namespace gdx::tp::cuda_ipc {

class CudaIpcIface;

inline constexpr uint8_t kRecAm = shm::kRecOwnerFirst;         // id = AM id; body = header + payload
inline constexpr uint8_t kRecRevoke = shm::kRecOwnerFirst + 1; // RevokeBody: a registration was deregistered
// After the peer-map service's (shm/peer_map.h: MAP_REQ, MAP_GRANT for shared segments).
inline constexpr uint16_t kCtrlFdReq = shm::kCtrlAfterPeerMap;     // FdReq: importer asks for a descriptor
inline constexpr uint16_t kCtrlFdRep = shm::kCtrlAfterPeerMap + 1; // FdRep (+ the fd when status is GDX_OK)
struct FdReq {
    uint64_t token, buffer_id;
};
struct FdRep {
    uint64_t token;
    int32_t status;
    uint32_t reserved;
};
struct RevokeBody {
    uint64_t buffer_id;
    uint64_t epoch;
};
inline constexpr size_t kBusIdLen = 16;
inline constexpr size_t kAddrExtra = kBusIdLen + 8; // PCI bus id (NUL padded), device ordinal, reserved

class CudaIpcEp final : public RingAmEndpoint, public shm::ChannelOwner {
  public:
    explicit CudaIpcEp(CudaIpcIface *iface);
    ~CudaIpcEp() override;

    std::vector<uint8_t> address() const override;
    gdx_status_t connect(std::span<const uint8_t> remote_address) override;
    gdx_status_t state() const override { return ch_.status(); }
    gdx_status_t put(const void *buf, size_t len, const MemHandle *lmemh, uint64_t remote_addr,
                     const RemoteKey &rkey, Completion *comp) override;
    gdx_status_t get(void *buf, size_t len, const MemHandle *lmemh, uint64_t remote_addr, const RemoteKey &rkey,
                     Completion *comp) override;
    // am_short, am_bcopy: RingAmEndpoint's (through am_zcopy)
    gdx_status_t am_zcopy(uint8_t id, const void *header, size_t header_len, const void *payload, size_t len,
                          const MemHandle *memh, Completion *comp) override;
    gdx_status_t flush(Completion *comp) override;
    gdx_status_t fence() override;
    gdx_status_t pending_add(PendingRequest *req) override;
    // kCapPeerMap: the peer's shared segment a Shared key opens, mapped here (shm/peer_map.h does the work).
    gdx_status_t map_remote(const RemoteKey &rkey, uint8_t **local) override;
    // Connected with a peer-to-peer path to the peer's GPU (or to our own GPU): GPU memory is reached directly.
    bool direct_possible() const override { return p2p_ok_; }

    unsigned progress();
    bool has_work() const;
    void on_copy_done(uint64_t op_id, gdx_status_t st); // from the interface's stream scan
    void queue_revoke(uint64_t buffer_id, uint64_t epoch);
    shm::Channel &channel() { return ch_; }
    size_t outstanding() const { return active_; }

    bool on_record(const shm::RecHdr &hdr, const uint8_t *rec); // Channel::poll's (ChannelOwner)
    void on_ctrl(uint16_t type, const uint8_t *body, size_t len, const int *fds, size_t nfds) override;
    void on_failed(gdx_status_t status) override;

  private:
    struct Op {
        Completion *comp = nullptr;
        uint64_t seq = 0;
        uint32_t gen = 0;
        bool active = false;
        gdx_status_t status = GDX_OK;
    };
    struct DeferredAm { // an AM issued while earlier put/get were still copying: sent after them (ordering)
        uint8_t id;
        std::vector<uint8_t> bytes;
        uint64_t after_seq;
    };
    gdx_status_t rma(bool put, uint8_t *local, size_t len, uint64_t raddr, const RemoteKey &rkey, const MemHandle *lmemh,
                     Completion *comp);
    // put/get on a peer's shared segment: a CPU copy through the mapping (no GPU and no peer-to-peer path involved).
    gdx_status_t shared_rma(bool put, uint8_t *local, size_t len, uint64_t raddr, const PackedKey &k,
                            const MemHandle *lmemh);
    gdx_status_t resolve(const PackedKey &k, uint64_t raddr, size_t len, uint8_t **remote, Mapping **map);
    // What a fence waits for: operations issued and not completed, active messages deferred behind them.
    bool fence_waits_on() const { return active_ > 0 || !deferred_.empty(); }
    // Whether an operation could go now: what pending_add and the pending dispatch ask (one answer).
    bool has_room() {
        return ch_.up() && !free_ops_.empty() && ch_.can_push(ch_.max_record()) && fence_.open(fence_waits_on());
    }
    gdx_status_t ready_for_op();
    void complete_op(Op &op, gdx_status_t st);
    void check_flushes();
    uint64_t oldest_active() const;
    bool push_am(uint8_t id, const void *h, size_t hl, const void *p, size_t pl);
    void drain();

    CudaIpcIface *iface_;
    shm::Channel ch_;
    int peer_dev_ = -1;    // the peer's GPU in our numbering (-1: not visible here)
    bool p2p_ok_ = false;  // our copy engines may reach the peer's GPU memory
    std::string p2p_why_;
    std::vector<Op> ops_;
    std::vector<uint32_t> free_ops_;
    size_t active_ = 0;
    uint64_t next_seq_ = 1;
    FenceGate fence_;
    std::vector<std::pair<uint64_t, Completion *>> flushes_;
    std::deque<DeferredAm> deferred_;
    size_t deferred_bytes_ = 0;
    std::deque<RevokeBody> revokes_;
    PendingQueue pending_;
    shm::PeerMapper peer_map_; // map_remote, and the answers to the peer's MAP_REQ for our shared segments
};

class CudaIpcIface final : public InterfaceBase {
  public:
    static gdx_status_t create(const Config &cfg, int device, std::unique_ptr<Interface> *out);
    ~CudaIpcIface() override;

    std::string_view device_name() const override { return name_; }
    MemoryDomain &md() override { return *md_; }
    gdx_status_t ep_create(std::unique_ptr<Endpoint> *out) override;
    unsigned progress() override;
    int wakeup_fd() const override { return hub_->wakeup_fd(); }
    gdx_status_t arm_wakeup() override;

    // Data path: a copy on one of our streams (the ops table's copy queue) and a completion marker after it;
    // GDX_OK = queued. Its completion calls ep->on_copy_done(op_id) and releases `map`.
    gdx_status_t submit_copy(void *dst, const void *src, size_t len, CudaIpcEp *ep, uint64_t op_id, Mapping *map);
    void sync_streams();
    unsigned poll_streams();
    void forget(CudaIpcEp *ep);

    shm::Hub &hub() { return *hub_; }
    const IpcMd &ipc_md() const { return *md_; }
    ImportCache &cache() { return *cache_; }
    ExportState &exports() { return *exports_; }
    int device() const { return device_; }
    const std::string &bus_id() const { return bus_id_; }
    Ternary p2p() const { return p2p_; }
    void add_ep(CudaIpcEp *ep) { eps_.push_back(ep); }
    void remove_ep(CudaIpcEp *ep);

  private:
    CudaIpcIface() : InterfaceBase("cuda_ipc") {}
    static void copy_done(void *self, const mem::CopyTag &tag, gdx_status_t st);

    std::unique_ptr<shm::Hub> hub_;
    std::unique_ptr<IpcMd> md_;
    std::shared_ptr<ExportState> exports_;
    std::unique_ptr<ImportCache> cache_;
    // The copy streams, made by the first copy (ensure_queue: no CUDA context before this process copies here).
    gdx_status_t ensure_queue();
    mem::CopyQueueOptions queue_opts_;
    std::unique_ptr<mem::CopyQueue> queue_;
    gdx_status_t queue_error_ = GDX_OK; // why the streams could not be made (ensure_queue tries once)
    std::string name_, bus_id_;
    int device_ = -1;
    Ternary p2p_ = Ternary::Try;
    std::vector<CudaIpcEp *> eps_;
};

} // namespace gdx::tp::cuda_ipc
