// The interface: listener, endpoint table, progress, deadlines and the wakeup descriptor.
//
// Wakeup: Asio keeps its own epoll set private, so the interface keeps a second, level-triggered one for the
// user: the listener, every socket (read interest while reading, write interest while messages are queued)
// and a timerfd set to the next deadline (connection set-up, silent peer). Everything else that can make
// progress() useful (completions to deliver, parked requests, a read that yielded) is produced on the
// progress thread itself, so arm_wakeup() checks those queues directly; an eventfd would carry nothing.
#include "core/error.h"
#include "transport/config_vars.h"
#include "transport/tcp/config_vars.h"
#include "transport/tcp/tcp_internal.h"

#include <cerrno>
#include <cinttypes>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

namespace gdx::tp::tcp {

TcpIface::TcpIface(std::string device, const Config &cfg)
    : InterfaceBase("tcp"), device_(std::move(device)), work_(asio::make_work_guard(io_)), acceptor_(io_) {
    tx_depth_ = static_cast<uint32_t>(cfg.uint(TcpVar::TCP_TX_DEPTH));
    peer_timeout_ = cfg.duration(TransportVar::PEER_TIMEOUT);
    silence_timeout_ = cfg.duration(TransportVar::PEER_SILENCE_TIMEOUT);
    conn_timeout_ = cfg.duration(TransportVar::CONN_TIMEOUT);
    sndbuf_ = rcvbuf_ = static_cast<int>(cfg.size(TcpVar::TCP_SOCKBUF));
    if (lanes_from_config(cfg, &lanes_cfg_) != GDX_OK) lanes_cfg_ = 0; // open() checked it first
    lane_threads_ = static_cast<unsigned>(cfg.uint(TcpVar::TCP_LANE_THREADS));
    stripe_min_ = cfg.size(TcpVar::TCP_STRIPE_MIN);
}

TcpIface::~TcpIface() {
    boost::system::error_code ec;
    acceptor_.close(ec);
    // Endpoints should be destroyed before their interface; any left are closed and cut loose.
    std::vector<TcpEndpoint *> eps;
    for (auto &kv : eps_) eps.push_back(kv.second);
    for (TcpEndpoint *ep : eps) ep->orphan();
    eps_.clear();
    scan_.assign(live_.begin(), live_.end());
    for (Conn *c : scan_) c->close(GDX_ERR_CANCELED, "interface closed");
    unclaimed_.clear();
    read_again_.clear();
    deliver_completions();
    // Let the aborted handlers run: they hold the last references to closed connections, whose sockets
    // belong to io_ and must go before it.
    work_.reset();
    for (int i = 0; i < 1000 && io_.poll() > 0; ++i) {}
    if (epoll_fd_ >= 0) ::close(epoll_fd_);
    if (timer_fd_ >= 0) ::close(timer_fd_);
}

gdx_status_t TcpIface::init(const asio::ip::address &listen_ip, bool loopback, double link_Bps) {
    gdx_status_t st = secure_random_u64(&id_);
    if (st != GDX_OK) return st;
    if (id_ == 0) id_ = 1;
    limits_.max_bulk = kMaxBulk;
    limits_.max_am = kMaxAmZcopy;
    limits_.max_am_id = kMaxAmId;

    caps_.flags = kCapPut | kCapGet | kCapAmShort | kCapAmBcopy | kCapAmZcopy | kCapFlush | kCapFence | kCapWakeup |
                  kCapErrHandling | (loopback ? uint64_t{kCapIntraNode} : uint64_t{0});
    caps_.direct_types = type_bit(mem::MemType::HostPageable) | type_bit(mem::MemType::HostPinned) |
                         type_bit(mem::MemType::HostRegistered);
    caps_.max_put = caps_.max_get = kMaxBulk;
    caps_.max_am_short = kMaxAmShort;
    caps_.max_am_bcopy = kMaxAmBcopy;
    caps_.max_am_zcopy = kMaxAmZcopy;
    // Rough figures for ranking transports, not promises: a loopback round trip through two socket calls
    // and the scheduler, or a LAN hop; bandwidth from the link speed (loopback: memory-copy bound).
    caps_.latency_ns = loopback ? 10e3 : 25e3;
    caps_.bandwidth_Bps = link_Bps;

    boost::system::error_code ec;
    asio::ip::tcp::endpoint ep(listen_ip, 0);
    acceptor_.open(ep.protocol(), ec);
    if (!ec && set_buffer_sizes(*this, acceptor_.native_handle(), "the listening socket") != GDX_OK)
        return GDX_ERR_IO; // said why; accepted sockets inherit the listener's sizes
    if (!ec) acceptor_.bind(ep, ec); // port 0: the kernel picks a free ephemeral port
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (!ec) acceptor_.non_blocking(true, ec);
    asio::ip::tcp::endpoint bound;
    if (!ec) bound = acceptor_.local_endpoint(ec);
    if (ec)
        return GDX_FAIL(GDX_ERR_IO, "tcp", "cannot listen on %s (GDX_TCP_ADDR) for device %s: %s",
                        listen_ip.to_string().c_str(), device_.c_str(), ec.message().c_str());
    listen_.port = bound.port();
    if (listen_ip.is_v4()) {
        listen_.family = 4;
        auto b = listen_ip.to_v4().to_bytes();
        std::copy(b.begin(), b.end(), listen_.ip.begin());
    } else {
        listen_.family = 6;
        auto b = listen_ip.to_v6().to_bytes();
        std::copy(b.begin(), b.end(), listen_.ip.begin());
    }
    listen_.iface_id = id_;

    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd_ < 0) return fail_errno(GDX_ERR_IO, errno, "tcp", "epoll_create1 for the wakeup descriptor");
    timer_fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (timer_fd_ < 0) return fail_errno(GDX_ERR_IO, errno, "tcp", "timerfd_create for the wakeup descriptor");
    try {
        lane_pool_ = std::make_unique<LanePool>(md_.table(), limits_, silence_timeout_, lane_threads_);
    } catch (const std::bad_alloc &) {
        return GDX_FAIL(GDX_ERR_NO_MEMORY, "tcp", "out of memory opening the interface");
    }
    st = lane_pool_->init();
    if (st != GDX_OK) return st;
    for (int fd : {timer_fd_, static_cast<int>(acceptor_.native_handle()), lane_pool_->notify_fd()}) {
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.fd = fd;
        if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0)
            return fail_errno(GDX_ERR_IO, errno, "tcp", "epoll_ctl(ADD fd %d) for the wakeup descriptor", fd);
    }
    try {
        discard_.resize(64 * 1024);
        done_.reserve(256);
        delivering_.reserve(256);
    } catch (const std::bad_alloc &) {
        return GDX_FAIL(GDX_ERR_NO_MEMORY, "tcp", "out of memory opening the interface");
    }
    start_accept();
    GDX_INFO("tcp", "interface %s listening on %s:%u (id 0x%016" PRIx64 "): %s", device_.c_str(),
             listen_.ip_text().c_str(), listen_.port, id_, caps_.describe().c_str());
    return GDX_OK;
}

void TcpIface::start_accept() {
    acceptor_.async_accept([this](const boost::system::error_code &ec, asio::ip::tcp::socket sock) {
        on_accept(ec, std::move(sock));
    });
}

void TcpIface::on_accept(const boost::system::error_code &ec, asio::ip::tcp::socket sock) {
    if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
    if (ec) {
        // Out of descriptors or a connection reset before accept: this socket is lost, the listener is not.
        GDX_WARN("tcp", "accept on %s: %s", device_.c_str(), ec.message().c_str());
        start_accept();
        return;
    }
    if (unclaimed_.size() >= kMaxUnclaimed) {
        GDX_WARN("tcp", "refusing a connection on %s: %zu accepted connections already wait for HELLO or connect()",
                 device_.c_str(), unclaimed_.size());
        boost::system::error_code ignored;
        sock.close(ignored);
    } else {
        try {
            auto c = std::make_shared<Conn>(this);
            if (c->start_passive(std::move(sock)) == GDX_OK) unclaimed_.push_back(std::move(c));
        } catch (const std::bad_alloc &) {
            GDX_ERROR("tcp", "out of memory accepting a connection on %s; refused", device_.c_str());
        }
    }
    start_accept();
}

TcpEndpoint *TcpIface::find_ep(uint64_t id) {
    auto it = eps_.find(id);
    return it == eps_.end() ? nullptr : it->second;
}

void TcpIface::hello_received(const std::shared_ptr<Conn> &c) {
    TcpEndpoint *ep = find_ep(c->hello_dst_ep());
    char buf[160];
    if (ep == nullptr) {
        std::snprintf(buf, sizeof(buf), "HELLO names endpoint 0x%016" PRIx64 ", which does not exist here",
                      c->hello_dst_ep());
        c->close(GDX_ERR_PROTOCOL, buf);
        return;
    }
    if (!ep->connect_called()) return; // stays unclaimed until connect() (or the set-up deadline)
    const TcpAddress &r = ep->remote();
    if (r.ep_id != c->hello_src_ep() || r.iface_id != c->hello_src_iface() || ep->state() != GDX_INPROGRESS ||
        ep->has_conn()) {
        std::snprintf(buf, sizeof(buf), "HELLO for endpoint 0x%016" PRIx64 " from an endpoint it is not connecting to",
                      ep->id());
        c->close(GDX_ERR_PROTOCOL, buf);
        return;
    }
    std::shared_ptr<Conn> keep = c;
    std::erase(unclaimed_, keep);
    keep->claim(ep);
}

std::shared_ptr<Conn> TcpIface::take_unclaimed(uint64_t ep_id, uint64_t peer_ep) {
    for (auto it = unclaimed_.begin(); it != unclaimed_.end(); ++it) {
        Conn *c = it->get();
        if (c->state() == Conn::State::Unclaimed && c->hello_dst_ep() == ep_id && c->hello_src_ep() == peer_ep) {
            std::shared_ptr<Conn> out = std::move(*it);
            unclaimed_.erase(it);
            return out;
        }
    }
    return nullptr;
}

// The passive side of a lane: LANE_HELLO must name a connected endpoint of ours, come from the peer that
// endpoint is connected to, and name a lane index agreed and not yet taken. Otherwise the socket is closed
// (the dialing side then stripes over its other lanes, or fails if it already used this one).
void TcpIface::lane_hello_received(const std::shared_ptr<Conn> &c) {
    TcpEndpoint *ep = find_ep(c->hello_dst_ep());
    unsigned index = c->hello_lane_index();
    char why[160] = "";
    if (ep == nullptr)
        std::snprintf(why, sizeof(why), "names endpoint 0x%016" PRIx64 ", which does not exist here", c->hello_dst_ep());
    else if (ep->state() != GDX_OK)
        std::snprintf(why, sizeof(why), "for endpoint 0x%016" PRIx64 ", which is not connected", ep->id());
    else if (ep->remote().ep_id != c->hello_src_ep() || ep->remote().iface_id != c->hello_src_iface())
        std::snprintf(why, sizeof(why), "for endpoint 0x%016" PRIx64 " from an endpoint it is not connected to", ep->id());
    else if (index >= ep->lane_count())
        std::snprintf(why, sizeof(why), "names lane %u; %u were agreed", index, ep->lane_count());
    else if (ep->has_lane(index))
        std::snprintf(why, sizeof(why), "names lane %u, which is already connected", index);
    if (why[0] != '\0') {
        c->close(GDX_ERR_PROTOCOL, std::string("LANE_HELLO ") + why);
        return;
    }
    std::shared_ptr<Conn> keep = c;
    std::erase(unclaimed_, keep);
    uint32_t peer_max = keep->peer_max_requests();
    int fd = keep->hand_over_socket();
    if (fd >= 0) ep->attach_lane(index, fd, peer_max);
}

// Results of the helper threads, in the order they were posted. Nested calls (an endpoint destroyed from a
// callback drains its lanes' results) continue from the same cursor, so each result is handled exactly once.
unsigned TcpIface::drain_lane_events() {
    if (!lane_pool_) return 0;
    lane_pool_->take(&lane_events_);
    ++lane_drain_depth_;
    unsigned n = 0;
    while (lane_cursor_ < lane_events_.size()) {
        LaneEvent ev = std::move(lane_events_[lane_cursor_++]);
        if (ev.lane && ev.lane->owner != nullptr) ev.lane->owner->on_lane_event(ev);
        ++n;
    }
    if (--lane_drain_depth_ == 0) {
        lane_events_.clear();
        lane_cursor_ = 0;
    }
    return n;
}

void TcpIface::conn_closed(Conn *c) {
    live_.erase(c);
    for (auto it = unclaimed_.begin(); it != unclaimed_.end(); ++it) {
        if (it->get() == c) {
            unclaimed_.erase(it); // the caller holds a reference until it returns
            break;
        }
    }
}

void TcpIface::ep_destroyed(TcpEndpoint *ep) { eps_.erase(ep->id()); }

gdx_status_t TcpIface::ep_create(std::unique_ptr<Endpoint> *out) {
    if (out == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, "tcp", "ep_create: null output");
    uint64_t id = 0;
    do {
        gdx_status_t st = secure_random_u64(&id);
        if (st != GDX_OK) return st;
    } while (id == 0 || eps_.count(id) != 0);
    try {
        auto ep = std::make_unique<TcpEndpoint>(this, id);
        eps_.emplace(id, ep.get());
        *out = std::move(ep);
    } catch (const std::bad_alloc &) {
        return GDX_FAIL(GDX_ERR_NO_MEMORY, "tcp", "ep_create: out of memory");
    }
    return GDX_OK;
}

void TcpIface::complete_later(Completion *comp, gdx_status_t st) {
    if (comp == nullptr) return;
    try {
        done_.push_back({comp, st});
    } catch (const std::bad_alloc &) { // bounded by the operations in flight; a failed growth completes now
        comp->complete(st);
    }
}

void TcpIface::deliver_completions() {
    while (!done_.empty()) {
        delivering_.swap(done_); // a callback may issue operations that complete at once
        for (const Done &d : delivering_) d.comp->complete(d.status);
        delivering_.clear();
    }
}

uint8_t *TcpIface::bcopy_get() {
    if (!bcopy_free_.empty()) {
        uint8_t *b = bcopy_free_.back();
        bcopy_free_.pop_back();
        return b;
    }
    if (bcopy_all_.size() >= kBcopyPoolMax) return nullptr; // back-pressure, never unbounded growth
    try {
        bcopy_free_.reserve(kBcopyPoolMax);
        bcopy_all_.push_back(std::make_unique<uint8_t[]>(kMaxAmBcopy));
    } catch (const std::bad_alloc &) {
        return nullptr;
    }
    return bcopy_all_.back().get();
}

void TcpIface::bcopy_put(uint8_t *buf) { bcopy_free_.push_back(buf); }

void TcpIface::watch(int fd, bool read, bool write, bool add) {
    epoll_event ev{};
    ev.events = (read ? EPOLLIN : 0u) | (write ? EPOLLOUT : 0u);
    ev.data.fd = fd;
    if (epoll_ctl(epoll_fd_, add ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, fd, &ev) != 0)
        fail_errno(GDX_ERR_IO, errno, "tcp", "epoll_ctl(%s fd %d) for the wakeup descriptor; a sleeping user may "
                   "wake late", add ? "ADD" : "MOD", fd);
}

void TcpIface::unwatch(int fd) {
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr) != 0 && errno != ENOENT && errno != EBADF)
        fail_errno(GDX_ERR_IO, errno, "tcp", "epoll_ctl(DEL fd %d)", fd);
}

unsigned TcpIface::check_deadlines() {
    Clock::time_point now = Clock::now(), next = Clock::time_point::max();
    uint64_t expirations;
    while (::read(timer_fd_, &expirations, sizeof(expirations)) > 0) {} // drained: re-armed by arm_wakeup()
    unsigned before = static_cast<unsigned>(live_.size());
    scan_.assign(live_.begin(), live_.end());
    for (Conn *c : scan_) next = std::min(next, c->check_deadlines(now));
    // Passive endpoints whose peer never dialled in.
    for (auto &kv : eps_) {
        TcpEndpoint *ep = kv.second;
        // Endpoints with a connection are bounded by its own set-up deadline.
        if (ep->state() != GDX_INPROGRESS || !ep->connect_called() || ep->has_conn()) continue;
        next = std::min(next, now < ep->connect_deadline() ? ep->connect_deadline() : ep->check_passive(now));
    }
    next_deadline_ = next;
    return before - static_cast<unsigned>(live_.size());
}

unsigned TcpIface::progress() {
    unsigned n = static_cast<unsigned>(io_.poll());
    if (lane_pool_->pending()) n += drain_lane_events();
    if (!read_again_.empty()) {
        read_now_.swap(read_again_);
        for (auto &c : read_now_) {
            if (c->state() != Conn::State::Closed) c->resume_reading();
            ++n;
        }
        read_now_.clear();
    }
    if (Clock::now() >= next_deadline_) n += check_deadlines();
    if (pending_dirty_) {
        pending_dirty_ = false;
        for (auto &kv : eps_)
            if (kv.second->pending_runnable()) n += kv.second->dispatch_pending();
    }
    n += static_cast<unsigned>(done_.size());
    deliver_completions();
    return n;
}

gdx_status_t TcpIface::arm_timer() {
    itimerspec its{};
    if (next_deadline_ != Clock::time_point::max()) {
        auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(next_deadline_.time_since_epoch()).count();
        if (ns <= 0) ns = 1;
        its.it_value.tv_sec = ns / 1000000000;
        its.it_value.tv_nsec = ns % 1000000000;
    }
    // steady_clock is CLOCK_MONOTONIC on Linux, so its time points are absolute timerfd times.
    if (timerfd_settime(timer_fd_, TFD_TIMER_ABSTIME, &its, nullptr) != 0)
        return fail_errno(GDX_ERR_IO, errno, "tcp", "timerfd_settime for the wakeup descriptor");
    return GDX_OK;
}

gdx_status_t TcpIface::set_socket_buffers(size_t sndbuf, size_t rcvbuf) {
    for (size_t v : {sndbuf, rcvbuf})
        if (v != SIZE_MAX && v > kMaxSockBuf)
            return GDX_FAIL(GDX_ERR_INVALID_CONFIG, "tcp", "a socket buffer of %zu bytes: at most 1G", v);
    if (sndbuf != SIZE_MAX) sndbuf_ = static_cast<int>(sndbuf);
    if (rcvbuf != SIZE_MAX) rcvbuf_ = static_cast<int>(rcvbuf);
    // Connections accepted from now on take the listener's sizes (a connection's own come before its handshake).
    return acceptor_.is_open() ? set_buffer_sizes(*this, acceptor_.native_handle(), "the listening socket") : GDX_OK;
}

// Like uct_iface_event_arm: says whether it is safe to sleep, runs nothing. Work produced on this thread is
// in the queues checked here; work arriving from outside shows on the level-triggered epoll set (a socket
// Asio will report is readable, writable or in error there too, including a connect that completed at once).
gdx_status_t TcpIface::arm_wakeup() {
    if (!done_.empty() || !read_again_.empty() || pending_dirty_ || lane_pool_->pending()) return GDX_ERR_BUSY;
    if (Clock::now() >= next_deadline_) return GDX_ERR_BUSY;
    gdx_status_t st = arm_timer();
    if (st != GDX_OK) return st;
    epoll_event ev;
    int n = epoll_wait(epoll_fd_, &ev, 1, 0); // level-triggered: a ready socket means progress() has work
    if (n < 0 && errno != EINTR) return fail_errno(GDX_ERR_IO, errno, "tcp", "epoll_wait on the wakeup descriptor");
    return n > 0 ? GDX_ERR_BUSY : GDX_OK;
}

} // namespace gdx::tp::tcp
