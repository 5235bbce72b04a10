#include "transport/shm/hub.h"

#include "core/error.h"
#include "core/membarrier.h"
#include "transport/config_vars.h"
#include "transport/rkey_table.h"
#include "transport/shm/config_vars.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

namespace gdx::tp::shm {

namespace {
// Hang-up detection latency while idle (the coarse clock it is read with rounds it up to a kernel tick).
constexpr int64_t kCtrlPollIntervalNs = 1'000'000;
} // namespace

size_t segment_size(size_t ring_size, size_t extra_size) {
    return round_up(kRingDataOff + ring_size + round_up(extra_size, kRecAlign), page_size());
}

uint64_t host_identity() {
    static const uint64_t id = [] {
        std::string s;
        std::ifstream f("/proc/sys/kernel/random/boot_id");
        if (!(f >> s)) {
            char host[256] = {};
            gethostname(host, sizeof(host) - 1);
            s = host;
        }
        uint64_t h = 0xcbf29ce484222325ull; // FNV-1a
        for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
        return h;
    }();
    return id;
}


HubConfig HubConfig::from(const Config &cfg, const char *transport, wire::TransportId tid) {
    HubConfig hc;
    hc.transport = transport;
    hc.tid = tid;
    hc.ring_size = cfg.size(ShmVar::SHM_RING_SIZE);
    hc.membarrier = cfg.ternary(ShmVar::SHM_MEMBARRIER);
    hc.fault_membarrier = cfg.boolean(ShmVar::FAULT_SHM_MEMBARRIER);
    hc.conn_timeout_ns = cfg.duration(TransportVar::CONN_TIMEOUT).count();
    return hc;
}


gdx_status_t Hub::create(const HubConfig &cfg, std::unique_ptr<Hub> *out) {
    if (cfg.ring_size < 65536 || (cfg.ring_size & (cfg.ring_size - 1)) != 0 || cfg.ring_size > (1ull << 30))
        return GDX_FAIL(GDX_ERR_INVALID_CONFIG, cfg.transport,
                        "GDX_SHM_RING_SIZE=%zu: must be a power of two between 64K and 1G", cfg.ring_size);
    std::unique_ptr<Hub> h(new Hub);
    h->cfg_ = cfg;
    h->host_id_ = host_identity();
    gdx_status_t st = secure_random_u64(&h->nonce_);
    if (st != GDX_OK) return st;
    h->name_ = socket_name(cfg.transport, static_cast<uint32_t>(getpid()), h->nonce_);
    if ((st = listen_abstract(h->name_, &h->listen_fd_)) != GDX_OK) return st;
    h->event_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (h->event_fd_ < 0) return fail_errno(GDX_ERR_IO, errno, cfg.transport, "eventfd");
    h->epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    if (h->epoll_fd_ < 0) return fail_errno(GDX_ERR_IO, errno, cfg.transport, "epoll_create1");
    h->watch(h->listen_fd_);
    h->watch(h->event_fd_);
    if (cfg.membarrier != Ternary::No) {
        std::string why;
        h->membarrier_ = sys::membarrier_register(sys::Barrier::Global, &why) == GDX_OK;
        if (!h->membarrier_ && cfg.membarrier == Ternary::Yes)
            return GDX_FAIL(GDX_ERR_UNSUPPORTED, cfg.transport, "GDX_SHM_MEMBARRIER=yes: %s", why.c_str());
        if (!h->membarrier_)
            GDX_DEBUG(cfg.transport, "wakeup handshake: a fence on every send (%s)", why.c_str());
    }
    *out = std::move(h);
    return GDX_OK;
}

Hub::~Hub() {
    // Endpoints (and their channels) are destroyed before the interface that owns the hub.
    for (size_t i = pending_.size(); i-- > 0;) drop_pending(i);
    if (epoll_fd_ >= 0) close(epoll_fd_);
    if (event_fd_ >= 0) close(event_fd_);
    if (listen_fd_ >= 0) close(listen_fd_);
}

uint64_t Hub::add_channel(Channel *c) {
    channels_.push_back(c);
    return next_ep_id_++;
}

void Hub::remove_channel(Channel *c) { channels_.erase(std::remove(channels_.begin(), channels_.end(), c), channels_.end()); }

void Hub::watch(int fd) {
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0)
        fail_errno(GDX_ERR_IO, errno, cfg_.transport, "epoll_ctl(ADD fd %d)", fd);
    next_poll_ns_ = 0; // look at it at the next progress
}

void Hub::unwatch(int fd) { epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr); }

Channel *Hub::find_by_sock(int fd) const {
    for (Channel *c : channels_)
        if (c->sock() == fd) return c;
    return nullptr;
}

Channel *Hub::find_by_ep(uint64_t ep_id) const {
    for (Channel *c : channels_)
        if (c->local_ep_id() == ep_id) return c;
    return nullptr;
}

void Hub::accept_all() {
    for (;;) {
        int fd = -1;
        if (accept_one(listen_fd_, &fd) != GDX_OK) return;
        PeerCred cred;
        if (check_peer_uid(fd, "shm accept", &cred) != GDX_OK) {
            close(fd); // the refusal was logged with both uids
            continue;
        }
        pending_.push_back({fd, cred, now_ns() + cfg_.conn_timeout_ns});
        watch(fd);
    }
}

void Hub::take_hellos() {
    accept_all();
    for (size_t p = pending_.size(); p-- > 0;) handle_pending(p); // erases p when it handled a HELLO
}

void Hub::drop_pending(size_t i) {
    unwatch(pending_[i].fd);
    close(pending_[i].fd);
    pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
}

void Hub::handle_pending(size_t i) {
    uint8_t buf[kMaxCtrlMsg];
    int fds[kMaxFdsPerMsg];
    size_t len = 0, nfds = 0;
    int fd = pending_[i].fd;
    gdx_status_t st = recv_msg(fd, buf, sizeof(buf), &len, fds, kMaxFdsPerMsg, &nfds);
    if (st == GDX_ERR_NO_RESOURCE) return;
    if (st != GDX_OK || len < kCtrlHdrSize + kEpAddressSize + kHelloTailSize || wire::load_le16(buf + 4) != kCtrlHello) {
        for (size_t k = 0; k < nfds; ++k) close(fds[k]);
        if (st == GDX_OK) GDX_WARN(cfg_.transport, "connection from pid %d: first message is not a HELLO; closed",
                                   static_cast<int>(pending_[i].cred.pid));
        return drop_pending(i);
    }
    // Route by the target endpoint id that follows the sender's address (the channel validates the rest).
    EpAddress from;
    std::string why;
    Channel *c = nullptr;
    if (decode_ep_address({buf + kCtrlHdrSize, kEpAddressSize}, &from, &why) == GDX_OK) {
        // The target endpoint id opens the fixed-size tail of a HELLO (the sender's address before it has a
        // transport-specific length); the channel validates everything else.
        uint64_t to_ep = wire::load_le64(buf + len - kHelloTailSize);
        for (Channel *cand : channels_) {
            if (to_ep == cand->local_ep_id()) {
                c = cand;
                break;
            }
        }
    }
    PeerCred cred = pending_[i].cred;
    unwatch(fd);
    pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
    if (c == nullptr) {
        GDX_INFO(cfg_.transport, "HELLO from pid %d names no endpoint of this interface (closed already?)",
                 static_cast<int>(cred.pid));
        for (size_t k = 0; k < nfds; ++k) close(fds[k]);
        close(fd);
        return;
    }
    c->on_hello(fd, cred, buf, len, fds, nfds);
}

unsigned Hub::look_ctrl(bool force) {
    // progress_ctrl() runs on every progress call of the interface: the idle case reads the coarse clock on every
    // 32nd call only (a clock read cost as much as the rest of an idle call; 32 calls are microseconds, the interval
    // ms). Every call while something connects comes here.
    bool connecting = false;
    for (Channel *c : channels_)
        if (c->state() == Channel::State::Connecting) connecting = true;
    maybe_connecting_ = connecting;
    const bool busy = connecting || !pending_.empty();
    if (!busy) ++idle_calls_; // the 32nd idle call (ctrl_quiet counts the others): look, once per tick at most
    int64_t tick = coarse_ns();
    if (!force && !busy && tick < next_poll_ns_) return 0;
    next_poll_ns_ = tick + kCtrlPollIntervalNs;
    int64_t now = now_ns(); // connection deadlines are on this clock
    unsigned n = 0;
    epoll_event evs[32];
    int k = epoll_wait(epoll_fd_, evs, 32, 0);
    for (int i = 0; i < k; ++i) {
        int fd = evs[i].data.fd;
        ++n;
        if (fd == listen_fd_) {
            accept_all();
        } else if (fd == event_fd_) {
            uint64_t v;
            while (read(event_fd_, &v, sizeof(v)) > 0) {
            }
        } else if (Channel *c = find_by_sock(fd)) {
            c->on_socket_readable();
        } else {
            for (size_t p = 0; p < pending_.size(); ++p)
                if (pending_[p].fd == fd) {
                    handle_pending(p);
                    break;
                }
        }
    }
    // Copy: handlers may destroy nothing here, but a failing channel may be skipped safely.
    std::vector<Channel *> snapshot = channels_;
    for (Channel *c : snapshot) {
        c->retry_connect();
        c->flush_ctrl();
        c->check_timeout(now);
    }
    for (size_t p = pending_.size(); p-- > 0;)
        if (now > pending_[p].deadline_ns) {
            GDX_INFO(cfg_.transport, "connection from pid %d sent no HELLO in time; closed",
                     static_cast<int>(pending_[p].cred.pid));
            drop_pending(p);
        }
    return n;
}

gdx_status_t Hub::arm() {
    uint64_t v;
    while (read(event_fd_, &v, sizeof(v)) > 0) {
    }
    for (Channel *c : channels_)
        if (c->up()) c->rx_ctl()->sleeping.store(1, std::memory_order_relaxed);
    // Dekker with Channel::signal_peer(): sleeping stored, fence, then each ring's seq word at its head (the
    // producer's publishing store) is loaded by rx_empty(). A producer that skips its half of the fence (both of
    // us registered, Channel::fence_free_) gets it from membarrier(): every registered thread running now executes
    // a full barrier before the call returns, so either its seq store is visible to our loads below, or its load
    // of `sleeping` comes after the barrier and sees 1.
    int e = 0;
    if (membarrier_) // the fault stands for a seccomp filter added after start
        e = cfg_.fault_membarrier ? EPERM : sys::membarrier_issue(sys::Barrier::Global);
    if (e != 0) {
        disarm();
        if (!barrier_failed_logged_) {
            barrier_failed_logged_ = true;
            GDX_WARN(cfg_.transport, "membarrier(GLOBAL_EXPEDITED) failed (%s): this interface will not sleep on its "
                                     "wakeup fd (arm reports busy); set GDX_SHM_MEMBARRIER=no in every process",
                     std::strerror(e));
        }
        return GDX_ERR_BUSY;
    }
    std::atomic_thread_fence(std::memory_order_seq_cst);
    for (Channel *c : channels_) {
        if (c->up() && !c->rx_empty()) {
            disarm();
            return GDX_ERR_BUSY;
        }
    }
    return GDX_OK;
}

void Hub::disarm() {
    for (Channel *c : channels_)
        if (c->up()) c->rx_ctl()->sleeping.store(0, std::memory_order_relaxed);
}

} // namespace gdx::tp::shm
