#include "transport/shm/channel.h"

#include "core/error.h"
#include "transport/shm/cma.h"
#include "transport/shm/hub.h"
#include "transport/rkey_table.h"

#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace gdx::tp::shm {

namespace {

constexpr uint32_t kAddrMagic = 0x49584447; // "GDXI"
constexpr uint32_t kCtrlMagic = 0x43584447; // "GDXC"
// 2: ring records publish themselves (RecHdr grew a seq word, RingCtl carries the nonce; ring.h). A peer of
// another version would read our ring wrongly, so its address is refused.
constexpr uint8_t kAddrVersion = 2;
constexpr uint32_t kCapsCma = 1;
// HELLO flags: the sender may try cross-memory attach; the sender's receiver issues membarrier() before it sleeps
// (Hub::membarrier_wakeup), so a producer registered itself may skip the fence of every send.
constexpr uint32_t kHelloCma = 1, kHelloMembarrier = 2;

// 64 random bits, or, where getrandom fails, the clock mixed with `salt`: for values that must differ between
// channels and runs (the CMA probe word, the ring's nonce), not for secrets.
uint64_t random_or_clock(uint64_t salt) {
    uint64_t r = 0;
    if (secure_random_u64(&r) != GDX_OK) r = static_cast<uint64_t>(Hub::now_ns()) * 0x9e3779b97f4a7c15ull ^ salt;
    return r;
}

void close_fds(const int *fds, size_t n) {
    for (size_t i = 0; i < n; ++i)
        if (fds[i] >= 0) close(fds[i]);
}

} // namespace

using wire::load_le32;
using wire::load_le64;
using wire::store_le32;
using wire::store_le64;

void encode_ep_address(const EpAddress &a, uint8_t out[kEpAddressSize]) {
    store_le32(out, kAddrMagic);
    out[4] = kAddrVersion;
    out[5] = static_cast<uint8_t>(a.transport);
    out[6] = out[7] = 0;
    store_le64(out + 8, a.host_id);
    store_le32(out + 16, a.uid);
    store_le32(out + 20, a.pid);
    store_le64(out + 24, a.iface_nonce);
    store_le64(out + 32, a.ep_id);
}

gdx_status_t decode_ep_address(std::span<const uint8_t> in, EpAddress *out, std::string *why) {
    if (in.size() < kEpAddressSize) {
        *why = "address of " + std::to_string(in.size()) + " bytes is too short";
        return GDX_ERR_INVALID_PARAM;
    }
    const uint8_t *p = in.data();
    if (load_le32(p) != kAddrMagic) {
        *why = "not an intra-node endpoint address (bad magic)";
        return GDX_ERR_INVALID_PARAM;
    }
    if (p[4] != kAddrVersion) {
        *why = "peer's intra-node address is version " + std::to_string(p[4]) + ", this gdx speaks " +
               std::to_string(kAddrVersion) + ": both processes must run the same gdx";
        return GDX_ERR_INVALID_PARAM;
    }
    out->transport = static_cast<wire::TransportId>(p[5]);
    out->host_id = load_le64(p + 8);
    out->uid = load_le32(p + 16);
    out->pid = load_le32(p + 20);
    out->iface_nonce = load_le64(p + 24);
    out->ep_id = load_le64(p + 32);
    return GDX_OK;
}

Channel::Channel(Hub *hub, ChannelOwner *owner, size_t extra_addr_len)
    : hub_(hub), owner_(owner), extra_addr_len_(extra_addr_len) {
    ep_id_ = hub_->add_channel(this);
    probe_word_ = random_or_clock(ep_id_) | 1;
}

Channel::~Channel() {
    if (sock_ >= 0) {
        hub_->unwatch(sock_);
        close(sock_);
    }
    for (Stash &s : stash_)
        close_stash(s);
    for (OutCtrl &o : ctrl_out_) close_fds(o.fds, o.nfds);
    release_peer();
    hub_->remove_channel(this);
}

std::vector<uint8_t> Channel::address(std::span<const uint8_t> extra) const {
    std::vector<uint8_t> v(kEpAddressSize + extra_addr_len_, 0);
    EpAddress a;
    a.transport = hub_->config().tid;
    a.host_id = hub_->host_id();
    a.uid = static_cast<uint32_t>(geteuid());
    a.pid = static_cast<uint32_t>(getpid());
    a.iface_nonce = hub_->nonce();
    a.ep_id = ep_id_;
    encode_ep_address(a, v.data());
    if (!extra.empty()) std::memcpy(v.data() + kEpAddressSize, extra.data(), std::min(extra.size(), extra_addr_len_));
    return v;
}

bool Channel::initiator() const {
    uint64_t mine = hub_->nonce(), theirs = remote_.iface_nonce;
    return mine != theirs ? mine < theirs : ep_id_ < remote_.ep_id;
}

gdx_status_t Channel::status() const {
    switch (state_) {
    case State::Up: return GDX_OK;
    case State::Failed: return error_;
    default: return GDX_INPROGRESS;
    }
}

gdx_status_t Channel::make_segment() {
    const HubConfig &c = hub_->config();
    char name[48];
    std::snprintf(name, sizeof(name), "gdx-%s-ring", c.transport);
    gdx_status_t st = Segment::create(segment_size(c.ring_size, c.extra_size), name, &own_);
    if (st != GDX_OK) return st;
    // The consumer (us) starts the ring; the producer reads these when it maps the segment. The nonce keeps stale
    // body bytes of earlier laps from passing for a published header (ring.h).
    auto *ctl = new (own_.base()) RingCtl{};
    ctl->nonce = ring_nonce(random_or_clock(ep_id_));
    local_extra_ = own_.base() + kRingDataOff + c.ring_size;
    return GDX_OK;
}

gdx_status_t Channel::connect(std::span<const uint8_t> remote, std::vector<uint8_t> *peer_extra) {
    const char *tn = hub_->config().transport;
    if (state_ != State::Idle)
        return GDX_FAIL(GDX_ERR_BUSY, tn, "endpoint %" PRIu64 " is already connected or connecting", ep_id_);
    std::string why;
    EpAddress a;
    if (decode_ep_address(remote, &a, &why) != GDX_OK)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, tn, "connect: %s", why.c_str());
    if (remote.size() != kEpAddressSize + extra_addr_len_ || a.transport != hub_->config().tid)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, tn, "connect: address is for transport %s (%zu bytes), not %s",
                        wire::transport_id_name(static_cast<uint8_t>(a.transport)), remote.size(), tn);
    if (a.host_id != hub_->host_id())
        return GDX_FAIL(GDX_ERR_UNREACHABLE, tn, "connect: peer pid %u runs on another host (or boot)", a.pid);
    if (a.uid != geteuid())
        return GDX_FAIL(GDX_ERR_ACCESS_DENIED, tn, "connect: peer pid %u runs as uid %u, we run as uid %u", a.pid,
                        a.uid, static_cast<unsigned>(geteuid()));
    if (a.iface_nonce == hub_->nonce() && a.ep_id == ep_id_)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, tn, "connect: endpoint %" PRIu64 " given its own address", ep_id_);
    remote_ = a;
    remote_extra_.assign(remote.begin() + kEpAddressSize, remote.end());
    if (peer_extra) *peer_extra = remote_extra_;
    gdx_status_t st = make_segment();
    if (st != GDX_OK) return st;
    state_ = State::Connecting;
    hub_->note_connecting();
    deadline_ns_ = Hub::now_ns() + hub_->config().conn_timeout_ns;
    // Early HELLOs: the one from the endpoint we were just named is answered; the others came from endpoints the
    // peer has replaced since (or, when we initiate, should not have come at all) and are closed.
    std::deque<Stash> early = std::move(stash_);
    stash_.clear();
    bool answered = false;
    for (Stash &s : early) {
        if (!answered && !initiator() && hello_from_remote(s.msg.data(), s.msg.size())) {
            answered = true;
            on_hello(s.fd, s.cred, s.msg.data(), s.msg.size(), s.fds, s.nfds);
        } else {
            GDX_DEBUG(tn, "endpoint %" PRIu64 ": early HELLO from pid %d is not from the endpoint named in connect(); "
                          "closed", ep_id_, static_cast<int>(s.cred.pid));
            close_stash(s);
        }
    }
    // A peer that connected first has its HELLO waiting already: answering it now makes both sides up without
    // a progress call in between.
    if (state_ == State::Connecting) finish_connect();
    return state_ == State::Failed ? error_ : state_ == State::Up ? GDX_OK : GDX_INPROGRESS;
}

std::vector<uint8_t> Channel::hello_body(uint16_t type) const {
    std::vector<uint8_t> m(kCtrlHdrSize + kEpAddressSize + extra_addr_len_ + kHelloTailSize, 0);
    store_le32(m.data(), kCtrlMagic);
    wire::store_le16(m.data() + 4, type);
    std::vector<uint8_t> self = address(std::span<const uint8_t>()); // owner bytes are not needed here
    std::memcpy(m.data() + kCtrlHdrSize, self.data(), self.size());
    uint8_t *t = m.data() + kCtrlHdrSize + self.size();
    store_le64(t, remote_.ep_id);
    store_le64(t + 8, own_.size());
    store_le64(t + 16, hub_->config().ring_size);
    store_le64(t + 24, reinterpret_cast<uintptr_t>(&probe_word_));
    store_le64(t + 32, probe_word_);
    store_le32(t + 40, (hub_->config().cma != Ternary::No ? kHelloCma : 0u) |
                           (hub_->membarrier_wakeup() ? kHelloMembarrier : 0u));
    return m;
}

gdx_status_t Channel::parse_hello(const uint8_t *msg, size_t len, uint64_t *to_ep, uint64_t *seg_size,
                                  uint64_t *probe_addr, uint64_t *probe_value, uint32_t *flags) {
    const char *tn = hub_->config().transport;
    size_t want = kCtrlHdrSize + kEpAddressSize + extra_addr_len_ + kHelloTailSize;
    if (len != want) return GDX_FAIL(GDX_ERR_PROTOCOL, tn, "HELLO of %zu bytes (expected %zu)", len, want);
    EpAddress from;
    std::string why;
    if (decode_ep_address({msg + kCtrlHdrSize, kEpAddressSize}, &from, &why) != GDX_OK)
        return GDX_FAIL(GDX_ERR_PROTOCOL, tn, "HELLO: %s", why.c_str());
    if (from.iface_nonce != remote_.iface_nonce || from.ep_id != remote_.ep_id || from.transport != remote_.transport)
        return GDX_FAIL(GDX_ERR_ACCESS_DENIED, tn,
                        "HELLO from endpoint %016" PRIx64 ":%" PRIu64 ", but endpoint %" PRIu64
                        " was told to connect to %016" PRIx64 ":%" PRIu64,
                        from.iface_nonce, from.ep_id, ep_id_, remote_.iface_nonce, remote_.ep_id);
    const uint8_t *t = msg + kCtrlHdrSize + kEpAddressSize + extra_addr_len_;
    *to_ep = load_le64(t);
    *seg_size = load_le64(t + 8);
    uint64_t ring = load_le64(t + 16);
    *probe_addr = load_le64(t + 24);
    *probe_value = load_le64(t + 32);
    *flags = load_le32(t + 40);
    const HubConfig &c = hub_->config();
    if (*to_ep != ep_id_) return GDX_FAIL(GDX_ERR_PROTOCOL, tn, "HELLO addressed to endpoint %" PRIu64, *to_ep);
    if (ring != c.ring_size)
        return GDX_FAIL(GDX_ERR_INVALID_CONFIG, tn,
                        "peer pid %u uses a %" PRIu64 "-byte ring, this process %zu: GDX_SHM_RING_SIZE must be the "
                        "same in every process",
                        remote_.pid, ring, c.ring_size);
    if (*seg_size != segment_size(c.ring_size, c.extra_size))
        return GDX_FAIL(GDX_ERR_PROTOCOL, tn, "peer announced a %" PRIu64 "-byte segment", *seg_size);
    return GDX_OK;
}

void Channel::close_stash(Stash &s) {
    if (s.fd >= 0) close(s.fd);
    close_fds(s.fds, s.nfds);
    s.fd = -1;
    s.nfds = 0;
}

// Whether a HELLO's sender address is the endpoint connect() named (the full check is parse_hello's).
bool Channel::hello_from_remote(const uint8_t *msg, size_t len) const {
    EpAddress from;
    std::string why;
    if (len < kCtrlHdrSize + kEpAddressSize ||
        decode_ep_address({msg + kCtrlHdrSize, kEpAddressSize}, &from, &why) != GDX_OK)
        return false;
    return from.iface_nonce == remote_.iface_nonce && from.ep_id == remote_.ep_id && from.transport == remote_.transport;
}

void Channel::on_hello(int fd, const PeerCred &cred, const uint8_t *msg, size_t len, int *fds, size_t nfds) {
    const char *tn = hub_->config().transport;
    if (state_ == State::Idle) {
        // The peer called connect() before we did: keep its HELLO until our connect() names the sender.
        if (stash_.size() == kMaxStash) {
            GDX_INFO(tn, "endpoint %" PRIu64 ": %zu HELLOs wait for connect(); the oldest (pid %d) is closed", ep_id_,
                     kMaxStash, static_cast<int>(stash_.front().cred.pid));
            close_stash(stash_.front());
            stash_.pop_front();
        }
        Stash s;
        s.fd = fd;
        s.cred = cred;
        s.msg.assign(msg, msg + len);
        std::memcpy(s.fds, fds, nfds * sizeof(int));
        s.nfds = nfds;
        stash_.push_back(std::move(s));
        return;
    }
    if (state_ != State::Connecting || initiator() || sock_ >= 0 || !hello_from_remote(msg, len)) {
        // Not an error of this endpoint: the sender (a replaced or stray endpoint) sees its socket close.
        GDX_INFO(tn, "endpoint %" PRIu64 " (%s): HELLO from pid %d that it does not wait for refused", ep_id_,
                 state_ == State::Connecting ? "connecting" : state_ == State::Up ? "up" : "failed",
                 static_cast<int>(cred.pid));
        close(fd);
        close_fds(fds, nfds);
        return;
    }
    sock_ = fd;
    hub_->watch(fd);
    peer_pid_ = cred.pid;
    uint64_t to_ep, seg_size, probe_addr, probe_value;
    uint32_t flags;
    gdx_status_t st = parse_hello(msg, len, &to_ep, &seg_size, &probe_addr, &probe_value, &flags);
    if (st == GDX_OK && nfds != 2) st = GDX_FAIL(GDX_ERR_PROTOCOL, tn, "HELLO carried %zu descriptors, not 2", nfds);
    if (st != GDX_OK) {
        close_fds(fds, nfds);
        uint8_t rej[kCtrlHdrSize] = {};
        store_le32(rej, kCtrlMagic);
        wire::store_le16(rej + 4, kCtrlReject);
        send_msg(fd, rej, sizeof(rej), nullptr, 0);
        fail(st, "handshake refused");
        return;
    }
    std::vector<uint8_t> ack = hello_body(kCtrlHelloAck);
    int my_fds[2] = {own_.fd(), hub_->event_fd()};
    st = send_ctrl(kCtrlHelloAck, ack.data() + kCtrlHdrSize, ack.size() - kCtrlHdrSize, my_fds, 2);
    if (st != GDX_OK) {
        close_fds(fds, nfds);
        fail(st, "sending HELLO_ACK");
        return;
    }
    go_up(fds[0], seg_size, fds[1], probe_addr, probe_value, flags);
}

void Channel::retry_connect() {
    if (state_ != State::Connecting || !initiator() || sock_ >= 0) return;
    const char *tn = hub_->config().transport;
    std::string name = socket_name(tn, remote_.pid, remote_.iface_nonce);
    int fd = -1;
    gdx_status_t st = connect_abstract(name, &fd);
    if (st == GDX_ERR_NO_RESOURCE) return; // listener backlog full: progress retries until the deadline
    if (st != GDX_OK) return fail(st, "connecting the control socket");
    PeerCred cred;
    st = check_peer_uid(fd, "shm connect", &cred);
    if (st != GDX_OK) {
        close(fd);
        return fail(st, "peer credentials");
    }
    sock_ = fd;
    hub_->watch(fd);
    peer_pid_ = cred.pid;
    std::vector<uint8_t> hello = hello_body(kCtrlHello);
    int my_fds[2] = {own_.fd(), hub_->event_fd()};
    st = send_ctrl(kCtrlHello, hello.data() + kCtrlHdrSize, hello.size() - kCtrlHdrSize, my_fds, 2);
    if (st != GDX_OK) fail(st, "sending HELLO");
}

void Channel::go_up(int peer_seg_fd, uint64_t seg_size, int peer_evfd, uint64_t probe_addr, uint64_t probe_value,
                    uint32_t peer_flags) {
    const HubConfig &c = hub_->config();
    gdx_status_t st = Segment::attach(peer_seg_fd, seg_size, "peer ring segment", &peer_seg_);
    if (st != GDX_OK) {
        close(peer_evfd);
        return fail(st, "mapping the peer's segment");
    }
    // The eventfd is only written; non-blocking so a peer that passed some other descriptor cannot stall us.
    int fl = fcntl(peer_evfd, F_GETFL);
    if (fl < 0 || fcntl(peer_evfd, F_SETFL, fl | O_NONBLOCK) != 0) {
        close(peer_evfd);
        return fail(fail_errno(GDX_ERR_PROTOCOL, errno, c.transport, "peer's wakeup descriptor"), "wakeup fd");
    }
    peer_evfd_ = peer_evfd;
    tx_.init(reinterpret_cast<RingCtl *>(peer_seg_.base()), peer_seg_.base() + kRingDataOff, c.ring_size);
    rx_.init(reinterpret_cast<RingCtl *>(own_.base()), own_.base() + kRingDataOff, c.ring_size);
    max_record_ = c.ring_size / 8;
    own_.close_fd(); // the peer holds its own reference now
    i_can_cma_ = false;
    // Both registered: the peer's arm() sends us a barrier (and we it), so publishing needs no fence of its own.
    fence_free_ = hub_->membarrier_wakeup() && (peer_flags & kHelloMembarrier) != 0;
    if (c.cma != Ternary::No && (peer_flags & kHelloCma) != 0) {
        st = cma_probe(peer_pid_, probe_addr, probe_value, c.cma == Ternary::Yes);
        if (st == GDX_OK) i_can_cma_ = true;
        else if (c.cma == Ternary::Yes) return fail(st, "GDX_SHM_CMA=yes but cross-memory attach is refused");
    }
    state_ = State::Up;
    uint32_t caps = i_can_cma_ ? kCapsCma : 0;
    push(kRecCaps, 0, 0, &caps, sizeof(caps), nullptr, 0); // first record of an empty ring: always fits
    GDX_DEBUG(c.transport, "endpoint %" PRIu64 " up with pid %d (cma %s, wakeup handshake: %s)", ep_id_,
              static_cast<int>(peer_pid_), i_can_cma_ ? "yes" : "no",
              fence_free_ ? "membarrier" : "fence on every send");
    owner_->on_up();
}

void Channel::fail(gdx_status_t status, const char *why) {
    if (state_ == State::Failed) return;
    state_ = State::Failed;
    error_ = status == GDX_OK ? GDX_ERR_INTERNAL : status;
    GDX_DEBUG(hub_->config().transport, "endpoint %" PRIu64 " (peer pid %d) failed: %s: %s", ep_id_,
              static_cast<int>(peer_pid_), why, gdx_status_string(error_));
    if (sock_ >= 0) {
        hub_->unwatch(sock_);
        close(sock_);
        sock_ = -1;
    }
    // The segments stay mapped until the endpoint goes away: a record being handled may point into them.
    owner_->on_failed(error_);
}

void Channel::release_peer() {
    local_extra_ = nullptr;
    own_.reset();
    peer_seg_.reset();
    if (peer_evfd_ >= 0) close(peer_evfd_);
    peer_evfd_ = -1;
}

void Channel::wake_peer() {
    auto *ctl = reinterpret_cast<RingCtl *>(peer_seg_.base());
    if (ctl->sleeping.exchange(0) != 0) {
        uint64_t one = 1;
        ssize_t n = write(peer_evfd_, &one, sizeof(one));
        (void)n; // EAGAIN: the counter is saturated, so the peer is awake anyway
    }
}

bool Channel::push(uint8_t type, uint8_t id, uint16_t flags, const void *body, size_t body_len, const void *payload,
                   size_t payload_len) {
    uint8_t *p = begin_record(body_len + payload_len);
    if (p == nullptr) return false;
    if (body_len) std::memcpy(p, body, body_len);
    if (payload_len) std::memcpy(p + body_len, payload, payload_len);
    end_record(type, id, flags, body_len + payload_len);
    return true;
}

void Channel::corrupt_record() {
    fail(GDX_FAIL(GDX_ERR_PROTOCOL, hub_->config().transport, "corrupt record in the ring from pid %d",
                  static_cast<int>(peer_pid_)),
         "ring");
}

void Channel::take_caps(const RecHdr &h, const uint8_t *rec) {
    uint32_t caps = 0;
    if (h.len >= sizeof(RecHdr) + sizeof(caps)) std::memcpy(&caps, rec + sizeof(RecHdr), sizeof(caps));
    peer_can_cma_ = (caps & kCapsCma) != 0;
}

gdx_status_t Channel::send_ctrl(uint16_t type, const void *body, size_t len, const int *fds, size_t nfds) {
    if (sock_ < 0) return GDX_FAIL(GDX_ERR_CONNECTION_RESET, hub_->config().transport, "control socket is closed");
    if (kCtrlHdrSize + len > kMaxCtrlMsg || nfds > kMaxFdsPerMsg)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, hub_->config().transport, "control message too large");
    uint8_t msg[kMaxCtrlMsg];
    store_le32(msg, kCtrlMagic);
    wire::store_le16(msg + 4, type);
    wire::store_le16(msg + 6, 0);
    if (len) std::memcpy(msg + kCtrlHdrSize, body, len);
    size_t total = kCtrlHdrSize + len;
    if (ctrl_out_.empty()) {
        gdx_status_t st = send_msg(sock_, msg, total, fds, nfds);
        if (st != GDX_ERR_NO_RESOURCE) return st;
    }
    OutCtrl o;
    o.bytes.assign(msg, msg + total);
    o.nfds = 0;
    for (size_t i = 0; i < nfds; ++i) {
        o.fds[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 0);
        if (o.fds[i] < 0) {
            int e = errno;
            close_fds(o.fds, i);
            return fail_errno(GDX_ERR_IO, e, hub_->config().transport, "dup of a descriptor to send");
        }
        o.nfds = i + 1;
    }
    ctrl_out_.push_back(std::move(o));
    return GDX_OK;
}

void Channel::flush_ctrl() {
    while (!ctrl_out_.empty() && sock_ >= 0) {
        OutCtrl &o = ctrl_out_.front();
        gdx_status_t st = send_msg(sock_, o.bytes.data(), o.bytes.size(), o.fds, o.nfds);
        if (st == GDX_ERR_NO_RESOURCE) return;
        close_fds(o.fds, o.nfds);
        ctrl_out_.pop_front();
        if (st != GDX_OK) return fail(st, "control socket send");
    }
}

gdx_status_t Channel::finish_connect() {
    if (initiator()) {
        retry_connect();
        if (sock_ >= 0) on_socket_readable(true);
    } else {
        hub_->take_hellos();
    }
    return status();
}

void Channel::on_socket_readable(bool until_up) {
    const char *tn = hub_->config().transport;
    while (sock_ >= 0 && !(until_up && state_ != State::Connecting)) {
        uint8_t buf[kMaxCtrlMsg];
        int fds[kMaxFdsPerMsg];
        size_t len = 0, nfds = 0;
        gdx_status_t st = recv_msg(sock_, buf, sizeof(buf), &len, fds, kMaxFdsPerMsg, &nfds);
        if (st == GDX_ERR_NO_RESOURCE) return;
        if (st == GDX_ERR_CONNECTION_RESET) {
            char why[96];
            std::snprintf(why, sizeof(why), "peer pid %d closed the connection (exited or crashed)",
                          static_cast<int>(peer_pid_));
            GDX_INFO(tn, "endpoint %" PRIu64 ": %s", ep_id_, why);
            set_last_error(why);
            return fail(GDX_ERR_CONNECTION_RESET, why);
        }
        if (st != GDX_OK) return fail(st, "control socket receive");
        if (len < kCtrlHdrSize || load_le32(buf) != kCtrlMagic) {
            close_fds(fds, nfds);
            return fail(GDX_FAIL(GDX_ERR_PROTOCOL, tn, "malformed control message (%zu bytes)", len), "ctrl");
        }
        uint16_t type = wire::load_le16(buf + 4);
        if (type == kCtrlHelloAck && state_ == State::Connecting && initiator()) {
            uint64_t to_ep, seg_size, probe_addr, probe_value;
            uint32_t flags;
            st = parse_hello(buf, len, &to_ep, &seg_size, &probe_addr, &probe_value, &flags);
            if (st == GDX_OK && nfds != 2) st = GDX_FAIL(GDX_ERR_PROTOCOL, tn, "HELLO_ACK carried %zu fds", nfds);
            if (st != GDX_OK) {
                close_fds(fds, nfds);
                return fail(st, "HELLO_ACK");
            }
            go_up(fds[0], seg_size, fds[1], probe_addr, probe_value, flags);
        } else if (type == kCtrlReject) {
            close_fds(fds, nfds);
            return fail(GDX_FAIL(GDX_ERR_CONNECTION_RESET, tn, "peer pid %d refused the connection (see its log)",
                                 static_cast<int>(peer_pid_)),
                        "rejected");
        } else if (type >= kCtrlOwnerFirst && state_ == State::Up) {
            owner_->on_ctrl(type, buf + kCtrlHdrSize, len - kCtrlHdrSize, fds, nfds);
        } else {
            close_fds(fds, nfds);
            return fail(GDX_FAIL(GDX_ERR_PROTOCOL, tn, "unexpected control message type %u", type), "ctrl");
        }
    }
}

// Whether the process named by the peer's address still runs as our user: the peer of a connection that has not
// come up yet is busy while it does (it has not progressed: a rank that has not entered MPI), gone once it does not.
bool Channel::peer_process_alive() const {
    struct stat st{};
    char path[32];
    std::snprintf(path, sizeof(path), "/proc/%u", remote_.pid);
    return stat(path, &st) == 0 && st.st_uid == geteuid();
}

void Channel::check_timeout(int64_t now_ns) {
    if (state_ != State::Connecting || now_ns <= deadline_ns_) return;
    const char *tn = hub_->config().transport;
    // Our control socket to it, once connected, fails by hang-up when it dies; before that, its process says.
    if (sock_ >= 0 || peer_process_alive()) {
        if (!slow_connect_said_)
            GDX_INFO(tn, "endpoint %" PRIu64 ": pid %u has not completed the connection within GDX_CONN_TIMEOUT; it "
                         "runs, so it is busy, not gone: still waiting", ep_id_, remote_.pid);
        slow_connect_said_ = true;
        deadline_ns_ = now_ns + hub_->config().conn_timeout_ns;
        return;
    }
    fail(GDX_FAIL(GDX_ERR_TIMEOUT, tn,
                  "endpoint %" PRIu64 ": no connection with pid %u within GDX_CONN_TIMEOUT, and that process is "
                  "gone (or runs as another user)", ep_id_, remote_.pid),
         "connect timeout");
}

uint8_t *Channel::peer_extra_area() const {
    return peer_seg_.base() ? peer_seg_.base() + kRingDataOff + hub_->config().ring_size : nullptr;
}
size_t Channel::extra_size() const { return hub_->config().extra_size; }

} // namespace gdx::tp::shm
