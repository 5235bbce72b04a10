// Connection set-up, teardown and deadlines.
#include "core/error.h"
#include "transport/tcp/tcp_internal.h"

#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

namespace gdx::tp::tcp {

namespace {

std::string endpoint_text(const asio::ip::tcp::endpoint &e) {
    boost::system::error_code ec;
    std::string ip = e.address().to_string(ec);
    if (ec) ip = "?";
    return (e.address().is_v6() ? "[" + ip + "]" : ip) + ":" + std::to_string(e.port());
}

gdx_status_t status_of(const boost::system::error_code &ec) {
    if (ec == asio::error::connection_refused || ec == asio::error::host_unreachable ||
        ec == asio::error::network_unreachable)
        return GDX_ERR_UNREACHABLE;
    if (ec == asio::error::timed_out) return GDX_ERR_TIMEOUT;
    return GDX_ERR_CONNECTION_RESET;
}

} // namespace

Conn::Conn(TcpIface *iface) : iface_(iface), sock_(iface->io()), last_activity_(Clock::now()) {
    slots_.resize(iface->tx_depth());
    free_slots_.reserve(slots_.size());
    for (uint32_t i = static_cast<uint32_t>(slots_.size()); i-- > 0;) free_slots_.push_back(i);
    req_ring_.reset(iface->tx_depth());
    ctl_ring_.reset(2); // HELLO or HELLO_ACK; resized to the peer's announced request count once known
}

Conn::~Conn() {
    boost::system::error_code ec;
    sock_.close(ec);
}

// Before connect() or listen(): the window scale is agreed in the handshake from the receive buffer then, so a
// buffer shrunk afterwards leaves windows that round to zero and stall on the kernel's persist timer.
gdx_status_t set_buffer_sizes(const TcpIface &iface, int fd, const std::string &what) {
    for (auto [name, value, text] : {std::tuple{SO_SNDBUF, iface.sndbuf(), "SO_SNDBUF"},
                                     std::tuple{SO_RCVBUF, iface.rcvbuf(), "SO_RCVBUF"}}) {
        if (value > 0 && setsockopt(fd, SOL_SOCKET, name, &value, sizeof(value)) != 0)
            return fail_errno(GDX_ERR_IO, errno, "tcp", "setsockopt(%s=%d) on %s", text, value, what.c_str());
    }
    return GDX_OK;
}

gdx_status_t configure_socket(const TcpIface &iface, int fd, const std::string &peer) {
    auto opt = [&](int level, int name, int value, const char *what) {
        if (setsockopt(fd, level, name, &value, sizeof(value)) != 0)
            return fail_errno(GDX_ERR_IO, errno, "tcp", "setsockopt(%s=%d) on the connection to %s", what, value,
                              peer.c_str());
        return GDX_OK;
    };
    gdx_status_t st = opt(IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY"); // small messages and acks go out at once
    Clock::duration t = iface.peer_timeout();
    if (st == GDX_OK && t != Clock::duration::max()) {
        // Keepalive probes, answered by the peer's kernel however busy its process is, find a host or link that
        // is down while nothing is in flight (ETIMEDOUT within the peer timeout); with data in flight
        // Conn::check_deadlines watches the kernel's last acknowledgement instead. No TCP_USER_TIMEOUT: it also
        // ends a connection whose live peer keeps its receive window closed (a rank computing for minutes).
        long ms = std::chrono::duration_cast<std::chrono::milliseconds>(t).count();
        int idle = static_cast<int>(std::clamp<long>(ms / 2000, 1, 32767));
        int intvl = static_cast<int>(std::clamp<long>(ms / 6000, 1, 32767));
        st = opt(SOL_SOCKET, SO_KEEPALIVE, 1, "SO_KEEPALIVE");
        if (st == GDX_OK) st = opt(IPPROTO_TCP, TCP_KEEPIDLE, idle, "TCP_KEEPIDLE");
        if (st == GDX_OK) st = opt(IPPROTO_TCP, TCP_KEEPINTVL, intvl, "TCP_KEEPINTVL");
        if (st == GDX_OK) st = opt(IPPROTO_TCP, TCP_KEEPCNT, 3, "TCP_KEEPCNT");
    }
    return st;
}

gdx_status_t Conn::start_active(TcpEndpoint *ep, const asio::ip::tcp::endpoint &peer, uint64_t peer_iface,
                                uint64_t peer_ep) {
    ep_ = ep;
    active_ = true;
    peer_iface_ = peer_iface;
    peer_ep_ = peer_ep;
    peer_name_ = endpoint_text(peer);
    boost::system::error_code ec;
    sock_.open(peer.protocol(), ec);
    if (!ec) sock_.non_blocking(true, ec);
    if (ec)
        return GDX_FAIL(GDX_ERR_IO, "tcp", "socket for the connection to %s: %s", peer_name_.c_str(),
                        ec.message().c_str());
    fd_ = sock_.native_handle();
    if (gdx_status_t st = set_buffer_sizes(*iface_, fd_, "the socket for " + peer_name_); st != GDX_OK) return st;
    state_ = State::Connecting;
    connect_deadline_ = add_sat(Clock::now(), iface_->conn_timeout());
    iface_->deadline_hint(connect_deadline_);
    iface_->conn_opened(this);
    update_watch();
    auto self = shared_from_this();
    sock_.async_connect(peer, [self](const boost::system::error_code &e) { self->on_connected(e); });
    GDX_DEBUG("tcp", "connecting to %s (endpoint 0x%016" PRIx64 ")", peer_name_.c_str(), peer_ep);
    return GDX_OK;
}

void Conn::on_connected(const boost::system::error_code &ec) {
    if (state_ != State::Connecting) return; // closed meanwhile (timeout, endpoint destroyed)
    if (ec) {
        close(status_of(ec), "connect to " + peer_name_ + " failed: " + ec.message());
        return;
    }
    if (configure_socket(*iface_, fd_, peer_name_) != GDX_OK) {
        close(GDX_ERR_IO, "could not configure the socket (see the line above)");
        return;
    }
    // HELLO: who we are (interface, endpoint), which endpoint we want, how many requests we may have in flight.
    wire::FrameHeader h;
    h.type = wire::MsgType::Hello;
    h.op_id = iface_->id();
    h.key_id = ep_->id();
    h.addr = peer_ep_;
    h.length = wire::kHelloBodySize;
    TxDesc *d = ctl_push();
    wire::encode_header(h, d->head);
    wire::encode_hello_body({iface_->tx_depth(), static_cast<uint16_t>(iface_->lanes())}, d->head + wire::kHeaderSize);
    d->head_len = wire::kHeaderSize + wire::kHelloBodySize;
    state_ = State::AwaitHelloAck;
    last_activity_ = Clock::now();
    wait_readable();
    flush_tx();
}

gdx_status_t Conn::start_passive(asio::ip::tcp::socket sock) {
    sock_ = std::move(sock);
    fd_ = sock_.native_handle();
    boost::system::error_code ec;
    auto remote = sock_.remote_endpoint(ec);
    peer_name_ = ec ? std::string("?") : endpoint_text(remote);
    sock_.non_blocking(true, ec);
    if (ec) return GDX_FAIL(GDX_ERR_IO, "tcp", "accepted socket from %s: %s", peer_name_.c_str(), ec.message().c_str());
    gdx_status_t st = configure_socket(*iface_, fd_, peer_name_);
    if (st != GDX_OK) return st;
    state_ = State::AwaitHello;
    connect_deadline_ = add_sat(Clock::now(), iface_->conn_timeout());
    iface_->deadline_hint(connect_deadline_);
    iface_->conn_opened(this);
    update_watch();
    wait_readable();
    return GDX_OK;
}

void Conn::claim(TcpEndpoint *ep) {
    ep_ = ep;
    ep->attach(shared_from_this());
    ctl_ring_.reset(static_cast<size_t>(peer_max_requests_) + 2);
    lanes_agreed_ = static_cast<uint16_t>(std::min<unsigned>(iface_->lanes(), hello_lanes_));
    wire::FrameHeader h;
    h.type = wire::MsgType::HelloAck;
    h.op_id = iface_->id();
    h.key_id = ep->id();
    h.addr = hello_.key_id;
    h.length = wire::kHelloBodySize;
    TxDesc *d = ctl_push();
    wire::encode_header(h, d->head);
    wire::encode_hello_body({iface_->tx_depth(), lanes_agreed_}, d->head + wire::kHeaderSize);
    d->head_len = wire::kHeaderSize + wire::kHelloBodySize;
    go_up();
    stopped_reading_ = false;
    update_watch();
    flush_tx();
    if (state_ != State::Closed) on_readable();
}

void Conn::go_up() {
    state_ = State::Up;
    connect_deadline_ = Clock::time_point::max();
    last_activity_ = Clock::now();
    GDX_DEBUG("tcp", "connection %s %s is up (peer allows %u requests in flight; %u lanes)", active_ ? "to" : "from",
              peer_name_.c_str(), peer_max_requests_, lanes_agreed_);
    if (ep_ != nullptr) ep_->on_up();
}

void Conn::update_watch() {
    if (fd_ < 0 || state_ == State::Closed) return;
    bool want_read = !stopped_reading_ && !fence_held_ && state_ != State::Connecting;
    bool want_write = state_ == State::Connecting || !ctl_ring_.empty() || !req_ring_.empty();
    unsigned mask = (want_read ? 1u : 0u) | (want_write ? 2u : 0u);
    if (mask == watched_) return;
    iface_->watch(fd_, want_read, want_write, watched_ == kNotWatched);
    watched_ = mask;
}

bool Conn::busy() const {
    return !req_ring_.empty() || !ctl_ring_.empty() || free_slots_.size() != slots_.size() || fence_held_;
}

void Conn::performed_one() {
    ++performed_;
    if (ep_ != nullptr) ep_->on_main_performed(performed_);
}

bool Conn::fence_satisfied() const {
    return ep_ != nullptr && ep_->lanes_landed(fence_buf_, static_cast<unsigned>(rx_cur_.length / 8));
}

void Conn::fence_recheck() {
    if (!fence_held_ || state_ == State::Closed) return;
    last_activity_ = Clock::now(); // the lanes move: the peer is not silent
    if (!fence_satisfied()) return;
    fence_held_ = false;
    performed_one();
    update_watch();
    on_readable();
}

int Conn::hand_over_socket() {
    auto keep = shared_from_this();
    if (fd_ >= 0 && watched_ != kNotWatched) iface_->unwatch(fd_);
    watched_ = kNotWatched;
    boost::system::error_code ec;
    int fd = sock_.release(ec); // cancels the pending wait (its handler sees operation_aborted)
    if (ec) {
        close(GDX_ERR_IO, "handing the socket to its lane: " + ec.message());
        return -1;
    }
    fd_ = -1;
    state_ = State::Closed;
    iface_->conn_closed(this);
    return fd;
}

void Conn::became_busy() {
    if (busy()) return;
    // The silence clock starts when there is something to wait for, not at the last packet of an idle period.
    last_activity_ = Clock::now();
    next_host_check_ = add_sat(last_activity_, iface_->peer_timeout());
    iface_->deadline_hint(std::min(next_host_check_, add_sat(last_activity_, iface_->silence_timeout())));
}

void Conn::fail_ops(gdx_status_t st) {
    for (uint32_t i = 0; i < slots_.size(); ++i) {
        if (!slots_[i].in_use) continue;
        iface_->complete_later(slots_[i].comp, st);
        release_slot(i);
    }
    while (!req_ring_.empty()) {
        TxDesc &d = req_ring_.front();
        if (d.bcopy != nullptr) iface_->bcopy_put(d.bcopy);
        if (d.comp != nullptr) iface_->complete_later(d.comp, st);
        req_ring_.pop_front();
    }
    while (!ctl_ring_.empty()) ctl_ring_.pop_front();
}

void Conn::close(gdx_status_t st, const std::string &why) {
    if (state_ == State::Closed) return;
    auto keep = shared_from_this(); // the interface or endpoint may drop its reference below
    bool had_work = busy();
    State was = state_;
    state_ = State::Closed;
    // An idle connection the peer or the user ends is ordinary teardown; anything else is worth an error line.
    // So is a connection closed before its first byte where we wait for a HELLO: a peer's liveness probe of our
    // listener (tcp_ep_probe.cpp).
    bool ordinary = st == GDX_ERR_CANCELED || (st == GDX_ERR_CONNECTION_RESET && was == State::Up && !had_work) ||
                    (st == GDX_ERR_CONNECTION_RESET && was == State::AwaitHello && !active_);
    std::string msg = std::string("connection ") + (active_ ? "to " : "from ") + peer_name_ + " closed: " +
                      gdx_status_string(st) + ": " + why +
                      (had_work ? "; its outstanding operations fail with this status" : "");
    if (ordinary)
        GDX_DEBUG("tcp", "%s", msg.c_str());
    else
        GDX_FAIL(st, "tcp", "%s", msg.c_str());
    if (fd_ >= 0 && watched_ != kNotWatched) iface_->unwatch(fd_);
    boost::system::error_code ec;
    sock_.close(ec); // cancels the pending waits: their handlers run with operation_aborted and do nothing
    fd_ = -1;
    fail_ops(st);
    iface_->conn_closed(this);
    if (ep_ != nullptr) {
        TcpEndpoint *ep = ep_;
        ep_ = nullptr;
        ep->on_closed(st);
    }
}

Clock::time_point Conn::check_peer_host(Clock::time_point now) {
    const Clock::duration limit = iface_->peer_timeout();
    if (limit == Clock::duration::max()) return Clock::time_point::max();
    if (now < next_host_check_) return next_host_check_;
    // The peer's kernel acknowledges data, window probes and keepalives while its host and the link are up,
    // whatever its process does: gone means nothing acknowledged for the whole timeout while something waited
    // for an acknowledgement (data in flight, or two window or keepalive probes unanswered: a live kernel answers
    // the first within a round trip). An idle connection is the keepalive's (configure_socket).
    tcp_info ti{};
    socklen_t len = sizeof(ti);
    if (getsockopt(fd_, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) {
        close(GDX_ERR_IO, std::string("getsockopt(TCP_INFO) on the connection to ") + peer_name_ +
                              " failed: " + std::strerror(errno));
        return Clock::time_point::max();
    }
    const auto since_ack = std::chrono::milliseconds(ti.tcpi_last_ack_recv);
    if (since_ack > limit && (ti.tcpi_unacked > 0 || ti.tcpi_probes >= 2)) {
        char buf[200];
        std::snprintf(buf, sizeof(buf),
                      "the peer's host acknowledged nothing for %s (GDX_PEER_TIMEOUT %s) with operations "
                      "outstanding: host or link down",
                      format_duration(since_ack).c_str(), format_duration(limit).c_str());
        close(GDX_ERR_TIMEOUT, buf);
        return Clock::time_point::max();
    }
    next_host_check_ = now + std::max<Clock::duration>(limit - since_ack, limit / 8);
    return next_host_check_;
}

Clock::time_point Conn::check_deadlines(Clock::time_point now) {
    if (state_ == State::Closed) return Clock::time_point::max();
    if (state_ == State::AwaitHello || state_ == State::AwaitHelloAck) {
        // The TCP connection is up, so the peer's kernel answers: a peer that has not answered the HELLO yet is
        // busy (a rank that has not entered MPI), not gone. GDX_CONN_TIMEOUT does not end it; a host or link
        // that goes down does (check_peer_host, the keepalive), and so does the peer's process ending (reset).
        if (now >= connect_deadline_ && !slow_setup_said_) {
            slow_setup_said_ = true;
            GDX_INFO("tcp", "connection to %s: no %s within GDX_CONN_TIMEOUT=%s; the peer's host answers, so it "
                            "is busy, not gone: still waiting",
                     peer_name_.c_str(), state_ == State::AwaitHello ? "HELLO" : "HELLO_ACK",
                     format_duration(iface_->conn_timeout()).c_str());
        }
        Clock::time_point next = check_peer_host(now);
        return now < connect_deadline_ ? std::min(next, connect_deadline_) : next;
    }
    if (state_ != State::Up) {
        if (now < connect_deadline_) return connect_deadline_;
        char buf[160];
        std::snprintf(buf, sizeof(buf), "connection set-up not finished within GDX_CONN_TIMEOUT=%s (%s)",
                      format_duration(iface_->conn_timeout()).c_str(),
                      state_ == State::Connecting ? "TCP connect pending" : "no endpoint called connect() for it");
        close(GDX_ERR_TIMEOUT, buf);
        return Clock::time_point::max();
    }
    // A peer whose kernel still answers is alive however long it does not progress (computing, stopped): only
    // GDX_PEER_SILENCE_TIMEOUT, off by default, turns that into an error. A gone peer fails in the kernel.
    if (!busy()) return Clock::time_point::max();
    Clock::time_point next = check_peer_host(now);
    if (state_ == State::Closed || iface_->silence_timeout() == Clock::duration::max()) return next;
    Clock::time_point deadline = add_sat(last_activity_, iface_->silence_timeout());
    if (now < deadline) return std::min(next, deadline);
    char buf[240];
    std::snprintf(buf, sizeof(buf),
                  "peer silent for %s (GDX_PEER_SILENCE_TIMEOUT) with %zu operations outstanding and %zu messages "
                  "unsent%s",
                  format_duration(iface_->silence_timeout()).c_str(), slots_.size() - free_slots_.size(),
                  req_ring_.size() + ctl_ring_.size(),
                  fence_held_ ? "; a FENCE waited that long for stripes its lanes never delivered" : "");
    close(GDX_ERR_TIMEOUT, buf);
    return Clock::time_point::max();
}

} // namespace gdx::tp::tcp
