// A Channel is one endpoint's connection to one peer endpoint in another (or the same) process on this host:
// a control socket (SOCK_SEQPACKET, carries the handshake and file descriptors), and two shared segments, one
// per side. Each side's segment holds its receive ring (the peer produces into it) and an `extra` area the
// owning transport uses (cuda_ipc: the flags its GPU writes). Both shm and cuda_ipc endpoints are built on it.
//
// Connection (both endpoints call connect() with the other's address, UCT's connect-to-ep model): the side with
// the smaller (interface nonce, endpoint id) connects its socket to the other interface's listener and sends
// HELLO with its segment and eventfd; the other side checks the peer's uid (SO_PEERCRED) and that HELLO comes
// from the endpoint it was told to connect to, maps the segment and answers HELLO_ACK with its own. Either side
// is up as soon as it has mapped the other's segment; its first ring record is CAPS (may it use cross-memory
// attach on the peer?), so CAPS precedes every request in the peer's ring.
//
// Peer death: the kernel closes a dead process's socket, the hub sees the hang-up and the channel fails with
// GDX_ERR_CONNECTION_RESET; owners then fail their outstanding operations. A connection that does not come up
// within GDX_CONN_TIMEOUT fails with GDX_ERR_TIMEOUT.
#pragma once

#include "transport/shm/ring.h"
#include "transport/shm/segment.h"
#include "transport/shm/sock.h"
#include "transport/wire.h"

#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <vector>

namespace gdx::tp::shm {

class Hub;

// Record types the channel itself uses; owners use kRecOwnerFirst and above.
inline constexpr uint8_t kRecCaps = 1;
inline constexpr uint8_t kRecOwnerFirst = 8;
// Control-socket message types the channel uses; owners use kCtrlOwnerFirst and above.
inline constexpr uint16_t kCtrlHello = 1, kCtrlHelloAck = 2, kCtrlReject = 3, kCtrlOwnerFirst = 16;
inline constexpr size_t kCtrlHdrSize = 8; // magic(4) type(2) reserved(2)
// HELLO: header, the sender's address, then to_ep, seg_size, ring_size, probe_addr, probe_value, flags, reserved.
inline constexpr size_t kHelloTailSize = 48;

// What an endpoint built on a channel implements. Calls come from Hub::progress_ctrl() and Channel::poll(), on
// the thread driving the interface. Besides these, an owner has `bool on_record(const RecHdr &, const uint8_t *rec)`,
// which Channel::poll(owner, budget) calls by the owner's own type (no virtual call on the path of every message):
// one record from the peer; false leaves it in the ring (the owner waits for something, e.g. a GPU flag) and stops
// this poll, and it is offered again next time.
class ChannelOwner {
  public:
    // A control message of an owner type; the owner takes the descriptors.
    virtual void on_ctrl(uint16_t type, const uint8_t *body, size_t len, const int *fds, size_t nfds) = 0;
    virtual void on_up() {}
    virtual void on_failed(gdx_status_t status) = 0;

  protected:
    ~ChannelOwner() = default;
};

// The fixed part of an endpoint address (owners append their own bytes).
struct EpAddress {
    wire::TransportId transport = wire::TransportId::Shm;
    uint64_t host_id = 0;
    uint32_t uid = 0, pid = 0;
    uint64_t iface_nonce = 0, ep_id = 0;
};
inline constexpr size_t kEpAddressSize = 40;

class Channel {
  public:
    enum class State : uint8_t { Idle, Connecting, Up, Failed };

    Channel(Hub *hub, ChannelOwner *owner, size_t extra_addr_len);
    ~Channel();
    Channel(const Channel &) = delete;
    Channel &operator=(const Channel &) = delete;

    // This endpoint's address: EpAddress then `extra` (the owner's bytes, extra_addr_len of them).
    std::vector<uint8_t> address(std::span<const uint8_t> extra) const;
    // Validates the peer's address (transport, host, uid, size) and starts connecting; GDX_INPROGRESS.
    // *peer_extra receives the owner's bytes of the peer address.
    gdx_status_t connect(std::span<const uint8_t> remote, std::vector<uint8_t> *peer_extra);
    gdx_status_t status() const; // GDX_OK up, GDX_INPROGRESS, or the error that broke it
    // status() as an operation sees it: a connecting channel first completes what of its handshake has already
    // arrived (no wait), so the first send after both sides called connect() finds it up, as UCT's
    // connect-to-ep contract expects. Reads no control message but the handshake's.
    gdx_status_t op_status() { return state_ == State::Connecting ? finish_connect() : status(); }
    State state() const { return state_; }
    bool up() const { return state_ == State::Up; }
    void fail(gdx_status_t status, const char *why);

    // ---- ring ----
    size_t max_record() const { return max_record_; }
    bool can_push(size_t len) { return up() && tx_.can_reserve(len); }
    // Writes header + body + payload as one record and publishes it (waking the peer if it sleeps). False when
    // the ring is full or the channel is not up; nothing is written then.
    bool push(uint8_t type, uint8_t id, uint16_t flags, const void *body, size_t body_len, const void *payload,
              size_t payload_len);
    // A record whose body the caller writes in place, with no buffer in between: begin_record() returns where the
    // body goes, with room for `max_body` bytes (nullptr when the ring has not that much free, or the channel is
    // not up); end_record() ends it at `body_len` <= max_body bytes, writes its header and publishes it as push()
    // does. Nothing else is pushed in between; a begun record that is never ended is never seen.
    // (Inline, with signal_peer: the path of every small message.)
    [[gnu::always_inline]] uint8_t *begin_record(size_t max_body) {
        if (state_ != State::Up || max_body > max_record_ - sizeof(RecHdr)) return nullptr;
        open_rec_ = tx_.begin(sizeof(RecHdr) + max_body);
        return open_rec_ != nullptr ? open_rec_ + sizeof(RecHdr) : nullptr;
    }
    [[gnu::always_inline]] void end_record(uint8_t type, uint8_t id, uint16_t flags, size_t body_len) {
        size_t len = sizeof(RecHdr) + body_len;
        RecHdr h{static_cast<uint32_t>(len), type, id, flags, 0};
        std::memcpy(open_rec_, &h, kRecSeqOff); // seq is publish()'s, written last
        open_rec_ = nullptr;
        tx_.commit_publish(len);
        signal_peer();
    }
    // begin_record/end_record for a record of one cell (header + body <= kRecAlign bytes: a small active message),
    // where RingWriter::begin_cell finds it a place; nullptr: take begin_record().
    [[gnu::always_inline]] uint8_t *begin_cell_record() { return state_ == State::Up ? tx_.begin_cell() : nullptr; }
    [[gnu::always_inline]] void end_cell_record(uint8_t *rec, uint8_t type, uint8_t id, uint16_t flags,
                                                size_t body_len) {
        RecHdr h{static_cast<uint32_t>(sizeof(RecHdr) + body_len), type, id, flags, 0};
        std::memcpy(rec, &h, kRecSeqOff); // seq is publish_cell()'s, written last
        tx_.publish_cell();
        signal_peer();
    }
    // Wakes the peer if it sleeps on its wakeup fd (push() does this; for writers of the extra area).
    void signal_peer() {
        // Dekker with Hub::arm(): our seq store (RingWriter::publish), then a fence, then the load of the peer's
        // sleeping flag; the peer stores sleeping, fences, then loads the seq word at its head (RingReader::empty).
        // One of us sees the other. The fence waits until the record's line is ours (a cache miss to the peer's
        // core on every message), so where both processes are registered for membarrier the peer's arm() provides
        // it instead, and here only the compiler keeps the load after the store.
        if (fence_free_) std::atomic_signal_fence(std::memory_order_seq_cst);
        else std::atomic_thread_fence(std::memory_order_seq_cst);
        if (reinterpret_cast<RingCtl *>(peer_seg_.base())->sleeping.load(std::memory_order_relaxed) != 0) wake_peer();
    }
    // Dispatches up to `budget` records to `owner`, this channel's owner as its own type (the call is direct, and
    // inline where the owner's on_record is: the path of every received message); returns how many.
    template <typename Owner> unsigned poll(Owner &owner, unsigned budget) {
        if (state_ != State::Up) return 0;
        unsigned n = 0;
        while (n < budget) {
            RecHdr h;
            const uint8_t *rec = nullptr;
            const RingReader::Peek pk = rx_.peek(&h, &rec);
            if (pk != RingReader::Peek::Record) [[unlikely]] {
                if (pk == RingReader::Peek::Corrupt) {
                    corrupt_record();
                    return n;
                }
                break;
            }
            if (h.type == kRecCaps) [[unlikely]] take_caps(h, rec);
            else if (!owner.on_record(h, rec)) break;
            if (state_ != State::Up) return n; // the owner failed the channel while handling the record
            rx_.consume(h);
            ++n;
        }
        if (n) {
            rx_.release();
            rx_records_ += n;
        }
        return n;
    }
    // poll() of the one record an idle probe's word announced (RingReader::peek_announced), for the owner's probed
    // delivery: take(hdr, rec) says whether it took the record. True when it did: consumed, and *word / *expected
    // re-pointed at the next record's seq word (rx_head_word()) with *up true, unless the channel failed meanwhile
    // (*up false: nothing more is read from it). False leaves the record, a PAD or a bad header to poll(). The whole
    // path inline, and what follows the record worked out before take() runs (the compiler would reload it after
    // that opaque call): it is the receive path of every small message through UCX.
    template <typename Take>
    [[gnu::always_inline]] bool take_announced(Take take, const std::atomic<uint64_t> **word, uint64_t *expected,
                                               bool *up) {
        RecHdr h;
        const uint8_t *rec;
        if (state_ != State::Up || !rx_.peek_announced(&h, &rec)) [[unlikely]]
            return false;
        const RingReader::Next next = rx_.next(h);
        if (!take(h, rec)) return false;
        *up = state_ == State::Up;
        if (!*up) [[unlikely]]
            return true; // the owner failed the channel while handling the record
        rx_.consume_and_release(next);
        ++rx_records_;
        *word = next.word;
        *expected = next.expected;
        return true;
    }
    bool rx_empty() { return !up() || rx_.empty(); }
    // The idle probe's word for the receive ring and the value it will hold (RingReader::head_word); false when
    // the channel is not up.
    bool rx_head_word(const std::atomic<uint64_t> **word, uint64_t *expected) const {
        if (!up()) return false;
        *word = rx_.head_word(expected);
        return true;
    }
    // This side's segment (its receive ring and extra area), moved out for the owner to unmap later: an idle probe
    // may still read it (IdleProbe). Only just before the channel is destroyed.
    Segment take_own_segment() { return static_cast<Segment &&>(own_); }
    RingCtl *rx_ctl() const { return rx_.ctl(); }

    // ---- control socket ----
    // Queued when the socket is full; descriptors are duplicated, the caller keeps its own.
    gdx_status_t send_ctrl(uint16_t type, const void *body, size_t len, const int *fds = nullptr, size_t nfds = 0);

    // ---- peer ----
    pid_t peer_pid() const { return peer_pid_; } // in our pid namespace (SO_PEERCRED)
    bool i_can_cma() const { return i_can_cma_; }       // process_vm_* from us on the peer works
    bool peer_can_cma() const { return peer_can_cma_; } // the peer says it works in its direction
    // Sends skip the store-load fence of the wakeup handshake (both processes use membarrier; Hub::arm).
    bool fence_free() const { return fence_free_; }
    uint64_t local_ep_id() const { return ep_id_; }
    const EpAddress &peer() const { return remote_; }
    uint8_t *local_extra() const { return local_extra_; } // this side's extra area (extra_size bytes), or null
    uint8_t *peer_extra_area() const; // the peer's extra area, mapped here
    size_t extra_size() const;
    // Records consumed so far: an owner's peer-silence clock compares it between its own checks, so the delivery
    // path reads no clock.
    uint64_t rx_records() const { return rx_records_; }

    // ---- used by the hub ----
    int sock() const { return sock_; }
    void on_hello(int fd, const PeerCred &cred, const uint8_t *msg, size_t len, int *fds, size_t nfds);
    // until_up: stop once the handshake is done (an operation finishing it must not run owners' handlers).
    void on_socket_readable(bool until_up = false);
    gdx_status_t finish_connect();
    void check_timeout(int64_t now_ns);
    void retry_connect();
    void flush_ctrl();

  private:
    bool peer_process_alive() const; // check_timeout: busy or gone
    bool initiator() const;
    gdx_status_t make_segment();
    std::vector<uint8_t> hello_body(uint16_t type) const;
    gdx_status_t parse_hello(const uint8_t *msg, size_t len, uint64_t *to_ep, uint64_t *seg_size, uint64_t *probe_addr,
                             uint64_t *probe_value, uint32_t *flags);
    void go_up(int peer_seg_fd, uint64_t seg_size, int peer_evfd, uint64_t probe_addr, uint64_t probe_value,
               uint32_t peer_flags);
    void release_peer();
    void wake_peer(); // signal_peer() found the peer's sleeping flag set
    void corrupt_record();                                // poll() found a header that fails validation
    void take_caps(const RecHdr &h, const uint8_t *rec); // the peer's CAPS record

    Hub *hub_;
    ChannelOwner *owner_;
    size_t extra_addr_len_;
    uint64_t ep_id_;
    State state_ = State::Idle;
    gdx_status_t error_ = GDX_OK;
    EpAddress remote_{};
    std::vector<uint8_t> remote_extra_;
    int64_t deadline_ns_ = 0;
    bool slow_connect_said_ = false; // check_timeout's one line for a busy peer

    int sock_ = -1;
    pid_t peer_pid_ = 0;
    Segment own_, peer_seg_;
    uint8_t *local_extra_ = nullptr; // in own_: read on every progress call (grant mailboxes)
    int peer_evfd_ = -1;
    RingWriter tx_;
    uint8_t *open_rec_ = nullptr; // begin_record() .. end_record()
    RingReader rx_;
    size_t max_record_ = 0;
    bool i_can_cma_ = false, peer_can_cma_ = false;
    bool fence_free_ = false;
    volatile uint64_t probe_word_ = 0; // the peer reads it with process_vm_readv to learn whether CMA works
    uint64_t rx_records_ = 0;

    // HELLOs that arrived before connect() named our peer (the peer was faster). More than one can come: UCP's
    // wire-up may replace a peer endpoint (destroy it, create another, connect that one to us too) before we are
    // told whom to connect to. connect() takes the one from the named endpoint and closes the others.
    struct Stash {
        int fd = -1;
        PeerCred cred;
        std::vector<uint8_t> msg;
        int fds[kMaxFdsPerMsg] = {-1, -1, -1, -1};
        size_t nfds = 0;
    };
    static constexpr size_t kMaxStash = 4; // beyond it the oldest is closed (its sender sees the hang-up)
    std::deque<Stash> stash_;
    static void close_stash(Stash &s);
    bool hello_from_remote(const uint8_t *msg, size_t len) const;
    struct OutCtrl {
        std::vector<uint8_t> bytes;
        int fds[kMaxFdsPerMsg];
        size_t nfds;
    };
    std::deque<OutCtrl> ctrl_out_;
};

// Encodes/decodes the fixed address part (little-endian, wire codecs).
void encode_ep_address(const EpAddress &a, uint8_t out[kEpAddressSize]);
gdx_status_t decode_ep_address(std::span<const uint8_t> in, EpAddress *out, std::string *why);

} // namespace gdx::tp::shm
