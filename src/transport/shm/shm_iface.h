// The shm transport: host memory between processes of one host. Active messages through the channel's ring;
// put/get single-copy with cross-memory attach, the TARGET validating every request against its key table
// (README.md explains the protocol and why); a copy through the ring where CMA is refused.
#pragma once

#include "core/log.h"
#include "transport/ep_checks.h"
#include "transport/iface_base.h"
#include "transport/pending_queue.h"
#include "transport/rkey_table.h"
#include "transport/soft_key_md.h"
#include "transport/shm/get_path.h"
#include "transport/shm/hub.h"
#include "transport/shm/peer_map.h"
#include "transport/shm/shm_proto.h"
#include "transport/transport.h"

#include <atomic>
#include <map>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace gdx::tp::shm {

class ShmIface;

// ---- memory domain --------------------------------------------------------------------------------------

// Lets a deregistration wait until no peer is still copying into a range it was granted (see README).
struct GrantQuiescer {
    ShmIface *iface = nullptr; // cleared when the interface closes
};

// A registration whose key, before it is revoked, waits for the copies a peer was granted under it.
class ShmMemHandle final : public SoftKeyMemHandle {
  public:
    ShmMemHandle(void *addr, size_t len, const mem::MemInfo &info, unsigned access, std::shared_ptr<RkeyTable> t,
                 std::shared_ptr<GrantQuiescer> q)
        : SoftKeyMemHandle(addr, len, info, access, wire::TransportId::Shm, std::move(t)), quiescer_(std::move(q)) {}
    ~ShmMemHandle() override;

  private:
    std::shared_ptr<GrantQuiescer> quiescer_;
};

// The software-key domain of the transport base (soft_key_md.h), with shm's shared segments.
class ShmMd final : public SoftKeyMd {
  public:
    ShmMd()
        : SoftKeyMd("shm", wire::TransportId::Shm, "host memory: CPU copies / cross-memory attach",
                    "GPU memory goes by cuda_ipc, or is staged through shared slots"),
          quiescer_(std::make_shared<GrantQuiescer>()) {}
    GrantQuiescer &quiescer() { return *quiescer_; }

    // Shared segments (memfd, 0600, size-sealed) a peer may map once it holds a key to all of one (peer_map.h).
    gdx_status_t alloc_shared(size_t len, void **out) override { return shared_.alloc(len, out); }
    void free_shared(void *p) override { shared_.free(p); }
    const SharedSegments &shared() const { return shared_; }

  private:
    std::unique_ptr<SoftKeyMemHandle> make_handle(void *addr, size_t len, const mem::MemInfo &info,
                                                  unsigned access) override;

    std::shared_ptr<GrantQuiescer> quiescer_;
    SharedSegments shared_{"shm"};
};

// ---- the CMA grant mailboxes (in each segment's extra area; the peer writes both) -----------------------

struct alignas(64) GrantBox { // target -> initiator: "copy [off, off+len) of your op yourself"
    std::atomic<uint64_t> seq;
    uint64_t op, off, len;
    uint32_t kind;
};
struct alignas(64) DoneBox { // initiator -> target: "grant `seq` is done with `status`"
    std::atomic<uint64_t> seq;
    int32_t status;
};
struct ShmExtra {
    GrantBox grant;
    DoneBox done;
};

// ---- endpoint -------------------------------------------------------------------------------------------

class ShmEp final : public RingAmEndpoint, public ChannelOwner {
  public:
    explicit ShmEp(ShmIface *iface);
    ~ShmEp() override;

    std::vector<uint8_t> address() const override;
    gdx_status_t connect(std::span<const uint8_t> remote_address) override;
    gdx_status_t state() const override { return ch_.status(); }
    gdx_status_t put(const void *buf, size_t len, const MemHandle *lmemh, uint64_t remote_addr,
                     const RemoteKey &rkey, Completion *comp) override;
    gdx_status_t get(void *buf, size_t len, const MemHandle *lmemh, uint64_t remote_addr, const RemoteKey &rkey,
                     Completion *comp) override;
    // am_short, am_bcopy: RingAmEndpoint's (through am_zcopy); the UCX glue calls these two instead (kCapAmInPlace)
    gdx_status_t am_short_iov(uint8_t id, std::span<const AmSeg> segs) override;
    gdx_status_t am_short_hdr(uint8_t id, uint64_t header, const void *payload, size_t len) override;
    gdx_status_t am_bcopy_pack(uint8_t id, AmPackFn pack, void *arg, size_t *len) override;
    gdx_status_t am_zcopy(uint8_t id, const void *header, size_t header_len, const void *payload, size_t len,
                          const MemHandle *memh, Completion *comp) override;
    gdx_status_t flush(Completion *comp) override;
    gdx_status_t fence() override;
    gdx_status_t pending_add(PendingRequest *req) override;
    gdx_status_t map_remote(const RemoteKey &rkey, uint8_t **local) override;

    // Interface hooks. ShmIface::progress() asks quiet() inline and calls progress_work() only past it.
    unsigned progress_work();
    // Adds this endpoint's idle-probe words (IdleProbe); false when it has work now or the probe is full.
    bool add_probe_words(IdleProbe *probe);
    // IdleProbe::deliver for this endpoint's ring word (ctx: the endpoint).
    static IdleProbe::Delivered deliver_probed(void *ctx, IdleProbe::Word *w, const AmSink &sink);
    // progress() would return 0 at once: the channel is not up, or nothing waits (idle()).
    bool quiet();
    bool has_work();
    bool service_grant(); // performs a grant the peer posted for one of our operations
    // Target side: a part we granted to the peer is still being copied (for key grant_key()).
    bool grant_outstanding() const;
    uint64_t grant_key() const { return grant_key_; }
    Channel &channel() { return ch_; }
    ShmIface *iface() const { return iface_; }
    size_t outstanding() const { return active_; }

    // ChannelOwner (on_record: Channel::poll's). An active message with no granted copy in flight is handed to the
    // user here, inline in Channel::poll; every other record goes through on_other_record().
    bool on_record(const RecHdr &hdr, const uint8_t *rec);
    void on_ctrl(uint16_t type, const uint8_t *body, size_t len, const int *fds, size_t nfds) override;
    void on_failed(gdx_status_t status) override;

  private:
    struct ProbedDelivery;
    bool on_other_record(const RecHdr &hdr, const uint8_t *rec);
    // An active-message record to the user (its body: after the header).
    void deliver_am(const RecHdr &h, const uint8_t *rec);
    enum class OpKind : uint8_t { Put = 1, Get = 2 };
    struct Op {
        Completion *comp = nullptr;
        uint64_t seq = 0;
        uint32_t gen = 0;
        bool active = false;
        OpKind kind = OpKind::Put;
        uint8_t *local = nullptr;
        uint64_t raddr = 0, len = 0, key = 0;
        uint64_t sent = 0; // ring-copy put: bytes pushed so far
        gdx_status_t status = GDX_OK;
        bool granted_done = false; // the target granted us part of the copy and we did it
    };
    struct Reply { // a record for the peer that did not fit in its ring yet
        uint8_t type;
        uint16_t flags;
        std::vector<uint8_t> body;
    };
    struct GetStream { // a ring-copy get we serve as target
        uint64_t op, key, raddr, len, off;
        bool measured = false;  // asked for CMA, served through the ring: its rate goes to get_paths()
        bool probed = false;    // its source passed the access probe (serve_get_streams)
        int64_t copy_ns = 0;    // time spent copying its records, when measured
    };

    gdx_status_t check_op(const char *what, size_t len, const RemoteKey &rkey, uint64_t raddr, unsigned need,
                          const SoftRemoteKey **key);
    gdx_status_t issue(OpKind kind, uint8_t *local, size_t len, uint64_t raddr, const SoftRemoteKey &key,
                       Completion *comp);
    Op *alloc_op();
    Op *find_op(uint64_t id);
    uint64_t op_id(const Op &op) const;
    void complete_op(Op &op, gdx_status_t st);
    void check_flushes();
    bool push_put_data(Op &op);
    void reply(uint8_t type, uint16_t flags, const void *body, size_t len);
    void op_done(uint64_t op, gdx_status_t st, bool granted);
    bool drain_replies();
    bool serve_get_streams();
    void handle_cma_request(bool put, const uint8_t *body, size_t len);
    // A get the initiator asked to be served by CMA that get_paths() gives to the ring instead.
    bool serve_by_ring(const ReqBody &r);
    void handle_put_data(const RecHdr &h, const uint8_t *body, size_t len);
    void handle_get_data(const RecHdr &h, const uint8_t *body, size_t len);
    // What a fence waits for: operations issued and not completed, ring-copy puts with fragments left.
    bool fence_waits_on() const { return active_ > 0 || !sendq_.empty(); }
    bool resources_free();
    // am_short_hdr past its common case (any payload, every check).
    [[gnu::noinline]] gdx_status_t am_short_general(uint8_t id, uint64_t header, const void *payload, size_t len);
    // Whether an active message may go now: GDX_OK, GDX_ERR_NO_RESOURCE (connecting, or held behind a fence), or
    // the endpoint's error. Inline up to the common case: every message asks.
    gdx_status_t am_ready() {
        if (ch_.up() && fence_.open(fence_waits_on()) && !pending_.holds_back()) [[likely]]
            return GDX_OK;
        return am_not_ready();
    }
    gdx_status_t am_not_ready();
    // An active message of `total` bytes that fill(p) writes straight into the peer's ring.
    template <typename Fill> gdx_status_t am_in_ring(uint8_t id, size_t total, Fill fill);
    // Nothing to do: no record, no grant for us, nothing queued, parked or outstanding.
    bool idle();
    // The peer posted a grant (a part of one of our operations to copy) that we have not performed yet.
    bool grant_posted() const {
        auto *mine = reinterpret_cast<const ShmExtra *>(ch_.local_extra());
        return mine->grant.seq.load(std::memory_order_acquire) != serviced_grant_;
    }
    // Fails the channel when the peer has been silent for GDX_PEER_SILENCE_TIMEOUT while operations are outstanding.
    void check_silence();
    void protocol_error(const char *what);
    // A refused request's log line: WARN the first time per peer and status, then debug (refusal_log.h).
    void log_refusal(gdx_status_t st, std::string_view cause, const char *fmt, ...) const
        __attribute__((format(printf, 4, 5)));
    void failed_at_peer(const Op &op, gdx_status_t st);

    ShmIface *iface_;
    Channel ch_;
    std::vector<Op> ops_;
    std::vector<uint32_t> free_ops_;
    size_t active_ = 0;
    uint64_t next_seq_ = 1;
    FenceGate fence_;
    std::vector<std::pair<uint64_t, Completion *>> flushes_;
    std::deque<Op *> sendq_;   // ring-copy puts with fragments left to push
    std::deque<Reply> replies_;
    std::deque<GetStream> gets_;
    std::unordered_map<uint64_t, gdx_status_t> put_errors_; // ring-copy puts that failed part-way (target side)
    PendingQueue pending_;
    uint64_t grant_seq_ = 0, serviced_grant_ = 0, grant_key_ = 0;
    // The peer-silence clock (Hub::coarse_ns()): when the outstanding count last rose from 0, when records were
    // last seen arriving, and the channel's record count at that look.
    int64_t busy_since_ns_ = 0, last_rx_ns_ = 0;
    uint64_t rx_seen_ = 0;
    PeerMapper peer_map_; // map_remote, and answers to the peer's (its pending requests count for the clock)
};

// ---- interface ------------------------------------------------------------------------------------------

struct ShmTunables {
    size_t cma_thresh = 1u << 20;
    size_t cma_split = 262144;
    bool cma_learn = true; // GDX_SHM_CMA_LEARN
    int64_t peer_timeout_ns = 10'000'000'000;  // GDX_PEER_TIMEOUT: bounds waits for a peer that may be gone
    int64_t silence_timeout_ns = INT64_MAX;       // GDX_PEER_SILENCE_TIMEOUT: check_silence
};

// Inline: ShmIface::quiet() asks every endpoint on every idle progress call of the UCX module.
// The ring first: a record is what most often makes an endpoint busy, and a call that delivers one stops there.
inline bool ShmEp::idle() {
    return ch_.rx_empty() && active_ + peer_map_.pending() == 0 && replies_.empty() && gets_.empty() &&
           sendq_.empty() && pending_.empty() && !grant_posted();
}
inline bool ShmEp::quiet() { return !ch_.up() || idle(); }

class ShmIface final : public InterfaceBase {
  public:
    static gdx_status_t create(const Config &cfg, std::unique_ptr<Interface> *out);
    ~ShmIface() override;

    std::string_view device_name() const override { return "memory"; }
    MemoryDomain &md() override { return md_; }
    gdx_status_t ep_create(std::unique_ptr<Endpoint> *out) override;
    unsigned progress() override;
    bool quiet() override;
    // Per endpoint its ring's next seq word and its grant mailbox (the two ways a peer gives us work); the
    // segments of endpoints destroyed meanwhile stay mapped until the next progress() (retire()).
    bool fill_idle_probe(IdleProbe *probe) override;
    int wakeup_fd() const override { return hub_->wakeup_fd(); }
    gdx_status_t arm_wakeup() override;

    Hub &hub() { return *hub_; }
    ShmMd &shm_md() { return md_; }
    const ShmTunables &tun() const { return tun_; }
    // How this interface serves peers' large host gets (get_path.h): measured over all its endpoints.
    GetPathChooser &get_paths() { return get_paths_; }
    void add_ep(ShmEp *ep) { eps_.push_back(ep); }
    void remove_ep(ShmEp *ep);
    // A destroyed endpoint's own segment: unmapped at the next progress() while an idle probe filled since the last
    // one may still read it (UCP's async thread can destroy an endpoint while the owner's thread looks without the
    // lock), else at once.
    void retire(Segment seg) {
        if (probe_out_) retired_.push_back(static_cast<Segment &&>(seg));
    }
    // max_am_bcopy bytes for ShmEp::am_bcopy_pack while a ring is too full to pack in place (made on first use;
    // nullptr, logged, when out of memory).
    uint8_t *pack_buffer();
    // Performs grants posted to any endpoint of this interface (called while a target waits for its initiator,
    // so that two processes waiting on each other's grants both move).
    void service_grants();
    // Waits (bounded by hang-up detection and GDX_PEER_TIMEOUT) until no peer copies a part granted under
    // `key`, servicing our own grants meanwhile; called by a deregistration before the key is revoked.
    void quiesce_key(uint64_t key);

  private:
    ShmIface() : InterfaceBase("shm") {}
    std::unique_ptr<Hub> hub_;
    ShmMd md_;
    ShmTunables tun_;
    GetPathChooser get_paths_{true};
    std::vector<ShmEp *> eps_;
    std::vector<Segment> retired_; // retire()
    bool probe_out_ = false;       // fill_idle_probe() handed out words since the last progress()
    std::unique_ptr<uint8_t[]> pack_buf_;
};

class ShmComponent final : public Component {
  public:
    std::string_view name() const override { return "shm"; }
    gdx_status_t query_devices(std::vector<DeviceDesc> *out) override;
    gdx_status_t open(const DeviceDesc &dev, const Config &cfg, std::unique_ptr<Interface> *out) override;
};
Component *shm_component();

inline bool ShmEp::grant_outstanding() const {
    if (grant_seq_ == 0 || !ch_.up()) return false;
    auto *mine = reinterpret_cast<const ShmExtra *>(ch_.local_extra());
    return mine->done.seq.load(std::memory_order_acquire) != grant_seq_;
}

inline void ShmEp::deliver_am(const RecHdr &h, const uint8_t *rec) {
    iface_->dispatch_am(h.id, this, rec + sizeof(RecHdr), h.len - sizeof(RecHdr));
}

inline bool ShmEp::on_record(const RecHdr &h, const uint8_t *rec) {
    if (h.type == kRecAm && !grant_outstanding()) [[likely]] {
        deliver_am(h, rec);
        return true;
    }
    return on_other_record(h, rec);
}

} // namespace gdx::tp::shm
