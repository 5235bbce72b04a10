// Internals of the tcp transport: the interface (listener, Asio io_context, wakeup), the endpoint (what the
// user holds), the connection (one socket, its send rings, its receive state machine) and, in tcp_lane.h, the
// lanes (extra connections for stripes of large puts, driven by helper threads).
//
// Ownership and lifetime: a TcpEndpoint holds a shared_ptr<Conn>; every pending Asio handler holds one too, so
// a Conn outlives its endpoint until its aborted handlers have run. The interface keeps raw pointers to live
// connections (for deadlines) and shared_ptrs to accepted connections not yet claimed by an endpoint. Its
// destructor closes everything and drains the io_context before any member goes away.
//
// Data path without copies: PUT sends [header | user buffer] with one sendmsg (the user buffer is never
// copied); the target reads the 40-byte header, validates key/range/rights, then recv()s the payload
// straight into the registered memory. GET replies are sent from the registered memory the same way.
// Only active messages are copied (bcopy/short by definition; the receiver assembles an AM in one buffer
// because the handler sees it contiguous).
#pragma once

#include "core/config.h"
#include "transport/iface_base.h"
#include "transport/pending_queue.h"
#include "transport/tcp/tcp.h"
#include "transport/tcp/tcp_address.h"
#include "transport/tcp/tcp_lane.h"
#include "transport/refusal_log.h"
#include "transport/tcp/tcp_md.h"
#include "transport/transport.h"
#include "transport/wire.h"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <cerrno>
#include <chrono>
#include <deque>
#include <memory>
#include <sys/socket.h>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace gdx::tp::tcp {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

// Limits stated in Capabilities and enforced on receipt.
inline constexpr size_t kMaxAmShort = 256;               // payload bytes of am_short; also am_zcopy's header
inline constexpr size_t kMaxAmBcopy = 8192;              // payload bytes of am_bcopy (one pool buffer)
inline constexpr size_t kMaxAmZcopy = 1u << 20;          // header + payload of am_zcopy (receiver buffers it)
inline constexpr uint64_t kMaxBulk = uint64_t{1} << 40;  // one put or get
inline constexpr unsigned kMaxTxDepth = 4096;            // GDX_TCP_TX_DEPTH upper bound (= wire limit)
inline constexpr size_t kMaxSockBuf = 1u << 30;  // GDX_TCP_SOCKBUF and SNDBUF/RCVBUF: at most 1G (an int)
inline constexpr size_t kReadBudget = 32u << 20;         // bytes one readable event may consume before yielding
inline constexpr size_t kMaxUnclaimed = 128;             // accepted sockets waiting for HELLO or for connect()
inline constexpr size_t kBcopyPoolMax = 1024;            // am_bcopy buffers per interface (8 MiB at most)
static_assert(8 * wire::kMaxLanes <= kMaxAmShort, "a FENCE's lane counts travel in a TxDesc head");

inline Clock::time_point add_sat(Clock::time_point t, Clock::duration d) {
    if (d >= Clock::time_point::max() - t) return Clock::time_point::max();
    return t + d;
}

// A failed socket call's errno as the status its operations complete with.
inline gdx_status_t status_of_errno(int err) {
    if (err == ETIMEDOUT) return GDX_ERR_TIMEOUT; // TCP_USER_TIMEOUT or keepalive gave up
    if (err == EHOSTUNREACH || err == ENETUNREACH) return GDX_ERR_UNREACHABLE;
    return GDX_ERR_CONNECTION_RESET;
}

// One non-blocking recv(), retried on EINTR: > 0 bytes read, 0 would block, -1 the peer closed the stream
// (*err = 0) or recv failed (*err = errno). The caller says which message was cut short, and where.
inline ssize_t recv_once(int fd, uint8_t *dst, size_t len, int *err) {
    for (;;) {
        ssize_t n = ::recv(fd, dst, len, MSG_DONTWAIT);
        if (n > 0) return n;
        *err = n == 0 ? 0 : errno;
        if (n == 0) return -1;
        if (*err == EINTR) continue;
        return *err == EAGAIN || *err == EWOULDBLOCK ? 0 : -1;
    }
}

template <class T>
class Ring {
  public:
    void reset(size_t capacity) {
        slots_.assign(capacity, T{});
        head_ = count_ = 0;
    }
    size_t capacity() const { return slots_.size(); }
    size_t size() const { return count_; }
    bool empty() const { return count_ == 0; }
    bool full() const { return count_ == slots_.size(); }
    T &at(size_t i) { return slots_[(head_ + i) % slots_.size()]; } // i-th from the oldest
    T &front() { return slots_[head_]; }
    T &push_back() { return slots_[(head_ + count_++) % slots_.size()]; }
    void pop_front() {
        slots_[head_] = T{};
        head_ = (head_ + 1) % slots_.size();
        --count_;
    }

  private:
    std::vector<T> slots_;
    size_t head_ = 0, count_ = 0;
};

// One message to send: [head (frame header + inline bytes)] then [payload, sent from where it lives].
struct TxDesc {
    uint8_t head[wire::kHeaderSize + kMaxAmShort];
    uint32_t head_len = 0;
    const uint8_t *payload = nullptr;
    size_t payload_len = 0;
    size_t sent = 0;              // of head_len + payload_len
    uint64_t src_key = 0;         // GET_REPLY: key whose range holds payload; rechecked before each send
    uint8_t *bcopy = nullptr;     // pool buffer holding the payload (am_bcopy); returned once written
    Completion *comp = nullptr;   // am_zcopy: completed once written (the buffer may be reused)
    bool counts_peer_request = false; // a reply: frees one of the peer's announced request slots once written
    size_t total() const { return head_len + payload_len; }
};

// An operation waiting for its reply. op_id on the wire = gen << 32 | (index + 1), so stale or forged ids
// are told apart from live ones.
struct OpSlot {
    wire::MsgType type = wire::MsgType::Put;
    bool in_use = false;
    uint32_t gen = 0;
    Completion *comp = nullptr;
    uint8_t *dst = nullptr; // GET: where the reply's payload goes
    uint64_t len = 0;
    uint64_t key_id = 0, addr = 0; // for the log line if the target refuses
};

class TcpIface;
class TcpEndpoint;

// GDX_TCP_LANES resolved ('auto' from the CPUs this process may use); GDX_ERR_INVALID_CONFIG if malformed.
gdx_status_t lanes_from_config(const Config &cfg, unsigned *out);

// Options every connected socket of the interface gets (main connections and lanes): no Nagle, and the kernel's
// timeouts derived from GDX_PEER_TIMEOUT. Buffer sizes come earlier (set_buffer_sizes).
gdx_status_t configure_socket(const TcpIface &iface, int fd, const std::string &peer);
// GDX_TCP_SOCKBUF (or the interface's SNDBUF/RCVBUF) on a socket not yet connected or listening; `what` names it.
gdx_status_t set_buffer_sizes(const TcpIface &iface, int fd, const std::string &what);

class Conn : public std::enable_shared_from_this<Conn> {
  public:
    enum class State : uint8_t { Connecting, AwaitHello, AwaitHelloAck, Unclaimed, Up, Closed };

    explicit Conn(TcpIface *iface);
    ~Conn();

    // Active side: connects to `peer` on behalf of `ep`, sends HELLO, waits for HELLO_ACK.
    gdx_status_t start_active(TcpEndpoint *ep, const asio::ip::tcp::endpoint &peer, uint64_t peer_iface,
                              uint64_t peer_ep);
    // Passive side: a socket the listener accepted; waits for HELLO.
    gdx_status_t start_passive(asio::ip::tcp::socket sock);
    // Passive side: the endpoint named by HELLO claims this connection: HELLO_ACK, then Up.
    void claim(TcpEndpoint *ep);
    // Ends the connection: every queued and outstanding operation completes with `st` (through the
    // interface's completion queue); the endpoint learns the status. `why` goes into the log line.
    void close(gdx_status_t st, const std::string &why);
    void detach_endpoint() { ep_ = nullptr; }

    State state() const { return state_; }
    uint64_t hello_src_ep() const { return hello_.key_id; }    // Unclaimed: endpoint id the peer claims
    uint64_t hello_src_iface() const { return hello_.op_id; }
    uint64_t hello_dst_ep() const { return hello_.addr; }
    const std::string &peer_name() const { return peer_name_; }

    // Operations (the endpoint validated the arguments). GDX_ERR_NO_RESOURCE when a ring or op slot is full.
    gdx_status_t post_put(const uint8_t *buf, size_t len, uint64_t key_id, uint64_t addr, Completion *comp);
    gdx_status_t post_get(uint8_t *buf, size_t len, uint64_t key_id, uint64_t addr, Completion *comp);
    gdx_status_t post_am(uint8_t id, const void *hdr, size_t hdr_len, const void *payload, size_t len,
                         bool copy_payload, Completion *comp);
    gdx_status_t post_flush(Completion *comp, bool *done_now);
    // LANE_WANT: asks the dialing side for the lanes (not a request: no reply, not counted).
    gdx_status_t post_lane_want();
    // FENCE: `n` per-lane stripe counts; the target performs nothing after it until its lanes landed them.
    gdx_status_t post_fence(const uint64_t *counts, unsigned n);
    uint64_t posted() const { return posted_; } // requests written to this stream (what a stripe may wait for)
    unsigned lanes_agreed() const { return lanes_agreed_; }
    uint32_t peer_max_requests() const { return peer_max_requests_; }
    unsigned hello_lane_index() const { return hello_lanes_; }
    // Passive side of a lane: hands the socket to the caller and ends this object without a log line.
    int hand_over_socket();
    // A held FENCE may go on: a lane of this endpoint landed a stripe.
    void fence_recheck();
    // Room for `messages` more requests (an owed FENCE goes before the next one).
    bool has_room(size_t messages = 1) const {
        return state_ == State::Up && req_ring_.size() + messages <= req_ring_.capacity() && !free_slots_.empty();
    }
    // An active message is complete once the kernel holds all of it (UCX's tcp counts it so too): a flush waits
    // for the peer only where a request of ours waits on its answer, never on its progress for AMs alone.
    bool quiet() const { return req_ring_.empty() && free_slots_.size() == slots_.size(); }

    // Deadline work: closes the connection when set-up or a silent peer exceeded its bound. Returns the
    // next instant this connection needs a look (Clock::time_point::max() when none).
    Clock::time_point check_deadlines(Clock::time_point now);
    // Continues reading after a readable event used up its budget.
    void resume_reading() { on_readable(); }

  private:
    // ---- tcp_conn.cpp: set-up, close, deadlines
    void on_connected(const boost::system::error_code &ec);
    void go_up();
    void fail_ops(gdx_status_t st);
    void became_busy();
    bool busy() const;
    // Closes the connection when the peer's kernel acknowledged nothing for GDX_PEER_TIMEOUT; the next check.
    Clock::time_point check_peer_host(Clock::time_point now);
    void update_watch(); // epoll interest follows what this connection waits for
    void performed_one(); // a request of the peer was performed (stripes after a fence wait for the count)
    bool fence_satisfied() const;

    // ---- tcp_conn_tx.cpp: send rings
    TxDesc *ctl_push();
    TxDesc &req_push(bool request); // false: LANE_WANT, which the target does not count
    void flush_tx();
    void wait_writable();
    void tx_written(TxDesc &d, bool is_ctl);
    gdx_status_t recheck_sources(const RkeyTable::Pin &pin);
    void queue_reply(wire::MsgType type, uint64_t op_id, gdx_status_t status, const uint8_t *payload,
                     uint64_t len, uint64_t src_key);
    gdx_status_t alloc_slot(wire::MsgType type, uint32_t *index);
    void release_slot(uint32_t index);
    static uint64_t op_id_of(const OpSlot &s, uint32_t index) {
        return (static_cast<uint64_t>(s.gen) << 32) | (index + 1);
    }

    // ---- tcp_conn_rx.cpp: receive state machine
    void wait_readable();
    void on_readable();
    // One recv into [dst, dst+len); >0 bytes read, 0 would block, <0 the connection was closed.
    // >0 bytes read, 0 nothing to read, -1 closed, kRecvSwitched: a put's destination faulted and the
    // connection moved to discarding its payload.
    ssize_t recv_some(uint8_t *dst, size_t len);
    static constexpr ssize_t kRecvSwitched = -2;
    bool on_header();
    bool on_hello_body();
    bool on_payload_done();
    bool on_reply_header(const wire::FrameHeader &h);
    OpSlot *find_slot(uint64_t op_id, wire::MsgType expect, uint32_t *index);
    void protocol_error(const std::string &why);

    TcpIface *iface_;
    TcpEndpoint *ep_ = nullptr;
    asio::ip::tcp::socket sock_;
    int fd_ = -1;
    State state_ = State::Connecting;
    bool active_ = false;
    std::string peer_name_ = "?";
    uint64_t peer_iface_ = 0, peer_ep_ = 0; // expected identity (active side)
    wire::FrameHeader hello_;               // what the peer said in HELLO (passive side)
    uint32_t peer_max_requests_ = 0;
    uint32_t peer_requests_ = 0; // requests of the peer received and not yet fully answered
    uint16_t lanes_agreed_ = 0;  // lanes both sides use (from HELLO_ACK)
    uint16_t hello_lanes_ = 0;   // passive side: lanes the peer offered in HELLO, or LANE_HELLO's lane index
    uint64_t posted_ = 0;        // our requests written to the stream, in order
    uint64_t performed_ = 0;     // the peer's requests performed, in order
    bool fence_held_ = false;    // a FENCE waits for stripes on the lanes: nothing after it is read yet

    Clock::time_point connect_deadline_ = Clock::time_point::max();
    Clock::time_point last_activity_;
    Clock::time_point next_host_check_{}; // check_peer_host: when to ask the kernel again
    bool slow_setup_said_ = false;        // the one line for a set-up that outlived GDX_CONN_TIMEOUT

    // send side
    Ring<TxDesc> req_ring_; // our requests and active messages
    Ring<TxDesc> ctl_ring_; // HELLO/HELLO_ACK and replies to the peer's requests
    // The front request is partly written, so it goes first (a partly written reply is the ctl ring's front,
    // and the ctl ring goes first anyway): one message at a time on the stream.
    bool writing_req_ = false;
    bool write_waiting_ = false, read_waiting_ = false, in_flush_tx_ = false;
    static constexpr unsigned kNotWatched = ~0u;
    unsigned watched_ = kNotWatched; // epoll interest registered: bit 0 read, bit 1 write
    std::vector<OpSlot> slots_;
    std::vector<uint32_t> free_slots_;

    // receive side
    enum class Rx : uint8_t { Header, HelloBody, PutPayload, Discard, GetPayload, AmPayload, FencePayload };
    Rx rx_ = Rx::Header;
    uint8_t rx_hdr_[wire::kHeaderSize];
    uint8_t hello_body_[wire::kHelloBodySize];
    size_t rx_got_ = 0;
    wire::FrameHeader rx_cur_;
    uint8_t *rx_dst_ = nullptr;
    uint64_t rx_left_ = 0;
    uint64_t rx_key_ = 0;                  // PutPayload: key rechecked before each recv
    gdx_status_t rx_status_ = GDX_OK;      // Discard: status of the PUT_ACK once drained
    uint32_t rx_slot_ = 0;                 // GetPayload: op slot
    std::vector<uint8_t> am_buf_;
    uint8_t fence_buf_[8 * wire::kMaxLanes];
    bool stopped_reading_ = false;         // Unclaimed: nothing more is expected until claimed

    friend class TcpIface;
};

class TcpEndpoint final : public Endpoint {
  public:
    TcpEndpoint(TcpIface *iface, uint64_t id);
    ~TcpEndpoint() override;

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

    uint64_t id() const { return id_; }
    const TcpAddress &remote() const { return remote_; }
    bool connect_called() const { return connect_called_; }
    // From the connection.
    void on_up();
    void on_closed(gdx_status_t st);
    void room_freed(); // a ring entry or op slot came free: parked requests may run
    // The interface is being destroyed first: close, and never touch it again.
    void orphan();
    // Runs parked requests while resources allow (from progress, and when the connection frees room).
    unsigned dispatch_pending();
    bool pending_runnable() const;
    Clock::time_point connect_deadline() const { return connect_deadline_; }
    // A passive endpoint past its GDX_CONN_TIMEOUT: fails it if the peer is gone, else the next check.
    Clock::time_point check_passive(Clock::time_point now);
    void attach(std::shared_ptr<Conn> conn) { conn_ = std::move(conn); }
    bool has_conn() const { return conn_ != nullptr; }

    // ---- lanes (tcp_ep_lanes.cpp)
    unsigned lane_count() const { return static_cast<unsigned>(lanes_.size()); } // agreed with the peer
    unsigned lanes_up() const { return lanes_up_; }
    bool dials() const { return dialer_; }
    // Opens the lanes (dialing side) or asks the peer to (the other side), once; lanes come up asynchronously.
    void want_lanes();
    uint64_t stripes_issued() const { // for tests
        uint64_t n = 0;
        for (const auto &l : lanes_) n += l ? l->issued : 0;
        return n;
    }
    bool has_lane(unsigned index) const { return index < lanes_.size() && lanes_[index] != nullptr; }
    gdx_status_t attach_lane(unsigned index, int fd, uint32_t peer_max);
    void on_lane_event(const LaneEvent &ev);
    void on_main_performed(uint64_t n);                        // the main connection performed n requests
    bool lanes_landed(const uint8_t *counts, unsigned n) const; // a FENCE's counts, against our lanes
    // Acquires what the lanes' threads have landed so far: a request the main connection performs next reads
    // memory their stripes wrote after the peer learned they had landed (the order runs through the peer,
    // where no in-process synchronization would show it; ThreadSanitizer reported that as a race).
    void acquire_lanes() const {
        for (const auto &l : lanes_)
            if (l) (void)l->landed();
    }
    // The other direction: what the main connection wrote (sent from memory) before a lane's next stripe.
    void main_wrote() {
        if (lanes_up_ > 0) lane_shared_->main_writes.fetch_add(1, std::memory_order_release);
    }

  private:
    struct LaneDial;
    struct StripedPut {
        Completion *comp = nullptr;
        uint32_t left = 0;            // stripes not yet acknowledged (0: the record is free)
        uint64_t seq = 0;             // issue order among striped puts
        gdx_status_t status = GDX_OK; // the first error among its stripes
    };
    // A flush that also waits for striped puts: its own completion counts the main connection's FLUSH.
    struct FlushWait : Completion {
        TcpEndpoint *ep = nullptr;
        Completion *user = nullptr;
        uint64_t after_seq = 0; // waits for the striped puts up to this one
        bool main_done = false;
    };
    asio::ip::tcp::endpoint peer_endpoint() const; // where remote_ listens
    gdx_status_t before_main_op();  // writes an owed FENCE first
    bool room_for_request() const { return conn_ && conn_->has_room(fence_owed_ ? 2 : 1); } // FENCE included
    gdx_status_t put_striped(const uint8_t *buf, size_t len, uint64_t key, uint64_t addr, Completion *comp);
    void stripe_done(uint32_t tag, gdx_status_t st);
    void dial_lanes();
    void close_lanes(gdx_status_t st); // lanes let go; stripes not yet reported complete with st
    void forget_lanes();               // the endpoint goes: close_lanes, then handle their queued results
    gdx_status_t flush_with_stripes(Completion *comp);
    void finish_flushes();
    bool striped_done_through(uint64_t seq) const;

    gdx_status_t ready_for_op(const char *what);
    // Active messages issued while the connection comes up wait in early_ (in order, at most kEarlyMax), so the
    // first send after both sides called connect() is taken (UCT's connect-to-ep contract; UCX's gtest sends so),
    // and go out first once it is up. A short or bcopy message is copied; a zcopy one keeps its buffer, as zcopy
    // always does, and completes when written.
    struct EarlyAm {
        uint8_t id;
        bool copy_payload;
        std::vector<uint8_t> inline_bytes, payload_copy;
        const void *payload;
        size_t len;
        Completion *comp;
    };
    static constexpr size_t kEarlyMax = 64;
    gdx_status_t am_early(uint8_t id, const void *inline_data, size_t inline_len, const void *payload, size_t len,
                          bool copy_payload, Completion *comp);
    gdx_status_t am_post(uint8_t id, const void *inline_data, size_t inline_len, const void *payload, size_t len,
                         bool copy_payload, Completion *comp);
    void drain_early();
    void fail_early(gdx_status_t st);
    std::deque<EarlyAm> early_;
    bool draining_early_ = false;
    gdx_status_t check_local(const char *what, const void *buf, size_t len, const MemHandle *memh, unsigned need);
    gdx_status_t check_remote(const char *what, uint64_t addr, size_t len, const RemoteKey &rkey, unsigned need,
                              uint64_t *key_id);

    TcpIface *iface_;
    uint64_t id_;
    TcpAddress remote_;
    bool connect_called_ = false;
    gdx_status_t error_ = GDX_OK; // sticky once the connection failed
    Clock::time_point connect_deadline_ = Clock::time_point::max();
    std::shared_ptr<Conn> conn_;
    PendingQueue pending_;
    bool dialer_ = false; // this side dialed the main connection (and dials the lanes)
    // check_passive: a TCP connect to the peer's listener, asking whether the peer that has not dialled is alive
    int probe_fd_ = -1;
    Clock::time_point probe_started_{};
    bool slow_peer_said_ = false;

    std::shared_ptr<LaneShared> lane_shared_ = std::make_shared<LaneShared>();
    std::vector<std::shared_ptr<Lane>> lanes_; // by lane index; null until connected (or if it never did)
    std::vector<std::shared_ptr<LaneDial>> dials_;
    unsigned lanes_up_ = 0, next_lane_ = 0;
    bool lanes_closed_ = false; // let go of (the connection failed or the endpoint goes)
    bool lanes_wanted_ = false; // dialed, or LANE_WANT sent
    std::vector<StripedPut> striped_;
    std::vector<uint32_t> striped_free_;
    bool stripes_since_fence_ = false; // stripes a FENCE has not listed yet
    bool fence_owed_ = false;          // fence() was called after such stripes: FENCE before the next message
    uint64_t fence_mark_ = 0;          // main-connection requests a stripe issued now must wait for
    uint64_t striped_seq_ = 0;         // striped puts issued
    std::deque<std::unique_ptr<FlushWait>> flushes_;
};

class TcpIface final : public InterfaceBase {
  public:
    TcpIface(std::string device, const Config &cfg);
    ~TcpIface() override;
    // Opens the listener on `listen_ip` (port 0: ephemeral) and the wakeup machinery.
    gdx_status_t init(const asio::ip::address &listen_ip, bool loopback, double link_Bps);

    std::string_view device_name() const override { return device_; }
    MemoryDomain &md() override { return md_; }
    gdx_status_t ep_create(std::unique_ptr<Endpoint> *out) override;
    unsigned progress() override;
    int wakeup_fd() const override { return epoll_fd_; }
    gdx_status_t arm_wakeup() override;

    // ---- for connections and endpoints
    asio::io_context &io() { return io_; }
    TcpMd &tcp_md() { return md_; }
    uint64_t id() const { return id_; }
    const TcpAddress &listen_address() const { return listen_; }
    const wire::Limits &limits() const { return limits_; }
    uint32_t tx_depth() const { return tx_depth_; }
    Clock::duration peer_timeout() const { return peer_timeout_; }       // the kernel's bound (configure_socket)
    Clock::duration silence_timeout() const { return silence_timeout_; } // a live peer that does not answer
    Clock::duration conn_timeout() const { return conn_timeout_; }
    int sndbuf() const { return sndbuf_; }
    int rcvbuf() const { return rcvbuf_; }
    gdx_status_t set_socket_buffers(size_t sndbuf, size_t rcvbuf) override;
    void complete_later(Completion *comp, gdx_status_t st);
    void deliver_completions();
    uint8_t *bcopy_get();
    void bcopy_put(uint8_t *buf);
    std::span<uint8_t> discard_buffer() { return discard_; }
    void conn_opened(Conn *c) { live_.insert(c); }
    void conn_closed(Conn *c);
    void read_later(Conn *c) { read_again_.push_back(c->shared_from_this()); }
    void deadline_hint(Clock::time_point t) { if (t < next_deadline_) next_deadline_ = t; }
    // epoll interest of one socket (level-triggered, so a sleeping user wakes while work remains).
    void watch(int fd, bool read, bool write, bool add);
    void unwatch(int fd);
    // Passive set-up: HELLO arrived on `c`; claim it for its endpoint now or keep it until connect().
    void hello_received(const std::shared_ptr<Conn> &c);
    std::shared_ptr<Conn> take_unclaimed(uint64_t ep_id, uint64_t peer_ep);
    void ep_destroyed(TcpEndpoint *ep);
    void pending_changed(bool runnable) { pending_dirty_ |= runnable; }
    TcpEndpoint *find_ep(uint64_t id);
    // Lanes: configuration, the helper threads, the passive side of a lane's set-up, and their results.
    unsigned lanes() const { return lanes_cfg_; }
    uint64_t stripe_min() const { return stripe_min_; }
    LanePool &lane_pool() { return *lane_pool_; }
    void lane_hello_received(const std::shared_ptr<Conn> &c);
    unsigned drain_lane_events();

  private:
    void start_accept();
    void on_accept(const boost::system::error_code &ec, asio::ip::tcp::socket sock);
    unsigned check_deadlines();
    gdx_status_t arm_timer();

    std::string device_;
    TcpMd md_;
    uint64_t id_ = 0;
    TcpAddress listen_;
    wire::Limits limits_;
    uint32_t tx_depth_ = 64;
    Clock::duration peer_timeout_, silence_timeout_, conn_timeout_;
    int sndbuf_ = 0, rcvbuf_ = 0; // GDX_TCP_SOCKBUF, or set_socket_buffers()
    unsigned lanes_cfg_ = 0, lane_threads_ = 1;
    uint64_t stripe_min_ = 0;

    asio::io_context io_{1};
    asio::executor_work_guard<asio::io_context::executor_type> work_;
    asio::ip::tcp::acceptor acceptor_;
    bool accepting_ = false;

    std::unordered_map<uint64_t, TcpEndpoint *> eps_;
    std::vector<std::shared_ptr<Conn>> unclaimed_;
    std::unordered_set<Conn *> live_;
    std::vector<std::shared_ptr<Conn>> read_again_, read_now_;
    Clock::time_point next_deadline_ = Clock::time_point::max();
    bool pending_dirty_ = false; // some endpoint's parked requests may be runnable
    std::vector<Conn *> scan_;   // snapshot of live_ for deadline checks (closing edits live_)

    struct Done {
        Completion *comp;
        gdx_status_t status;
    };
    std::vector<Done> done_, delivering_;
    std::vector<std::unique_ptr<uint8_t[]>> bcopy_all_;
    std::vector<uint8_t *> bcopy_free_;
    std::vector<uint8_t> discard_;

    int epoll_fd_ = -1, timer_fd_ = -1;
    std::vector<LaneEvent> lane_events_; // taken from the pool; drained in order, also by nested calls
    size_t lane_cursor_ = 0;
    unsigned lane_drain_depth_ = 0;
    // Last: its threads stop (joined) before anything they use goes away.
    std::unique_ptr<LanePool> lane_pool_;
};

} // namespace gdx::tp::tcp
