// Lanes: the helper threads' side (see tcp_lane.h for who owns what, and wire.h for the frames).
#include "transport/tcp/tcp_lane.h"

#include "core/error.h"
#include "transport/tcp/tcp_internal.h"

#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

namespace gdx::tp::tcp {

namespace {
constexpr size_t kLaneReadBudget = 8u << 20; // bytes one lane reads before the others get a turn
constexpr int kTickMs = 100;                 // how often a worker looks at its lanes' silence clocks

void drain_eventfd(int fd) {
    uint64_t v;
    while (read(fd, &v, sizeof(v)) < 0 && errno == EINTR) {}
}
void signal_eventfd(int fd) {
    uint64_t one = 1;
    // EAGAIN only when the counter is about to overflow: it is readable then anyway.
    while (write(fd, &one, sizeof(one)) < 0 && errno == EINTR) {}
}
} // namespace

// ---- Lane (worker thread) ----------------------------------------------------------------------------------

Lane::Lane(TcpEndpoint *owner_ep, unsigned idx, int fd, std::shared_ptr<LaneShared> shared, std::string peer,
           uint32_t peer_max_stripes)
    : owner(owner_ep), index(idx), shared_(std::move(shared)), peer_(std::move(peer)), fd_(fd),
      peer_max_(peer_max_stripes), last_activity_(Clock::now()) {}

Lane::~Lane() {
    if (fd_ >= 0) ::close(fd_);
}

bool Lane::busy() const {
    return !tx_.empty() || !unacked_.empty() || !acks_.empty() || ack_len_ > 0 ||
           (rx_ != Rx::Header && rx_ != Rx::Held) || rx_got_ > 0;
}

void Lane::update_watch(LaneWorker &w) {
    if (failed_ || fd_ < 0) return;
    bool want_read = rx_ != Rx::Held;
    bool want_write = want_write_ && (!tx_.empty() || !acks_.empty() || ack_len_ > 0);
    unsigned mask = (want_read ? 1u : 0u) | (want_write ? 2u : 0u);
    if (mask == watched_) return;
    w.watch(fd_, this, mask, watched_);
    watched_ = mask;
}

void Lane::fail(LaneWorker &w, gdx_status_t st, const std::string &why) {
    if (failed_) return;
    failed_ = true;
    status_ = st;
    size_t outstanding = tx_.size() + unacked_.size();
    // An idle lane the peer closes is ordinary teardown (its endpoint went); anything else is an error line.
    bool ordinary = st == GDX_ERR_CONNECTION_RESET && !busy();
    ::gdx::fail(st, ordinary ? log::Level::Debug : log::Level::Error, "tcp", "lane %u of the connection to %s %s: %s%s",
                index, peer_.c_str(), ordinary ? "closed" : "failed", why.c_str(),
                outstanding > 0 ? "; its stripes in flight fail with this status" : "");
    if (watched_ != 0) w.watch(fd_, this, 0, watched_);
    watched_ = 0;
    ::close(fd_);
    fd_ = -1;
    auto me = shared_from_this();
    for (const StripeJob &j : tx_) w.pool().post({LaneEvent::StripeDone, me, j.tag, st});
    for (const StripeJob &j : unacked_) w.pool().post({LaneEvent::StripeDone, me, j.tag, st});
    tx_.clear();
    unacked_.clear();
    acks_.clear();
    ack_len_ = ack_sent_ = 0;
    tx_sent_ = 0;
    w.pool().post({LaneEvent::Failed, me, 0, st});
}

void Lane::queue(LaneWorker &w, const StripeJob &job) {
    if (failed_) {
        w.pool().post({LaneEvent::StripeDone, shared_from_this(), job.tag, status_});
        return;
    }
    if (!busy()) last_activity_ = Clock::now(); // the silence clock starts when there is something to wait for
    tx_.push_back(job);
}

// Acks first (they unblock the peer), then our stripes; a frame partly written is always finished first.
void Lane::flush_tx(LaneWorker &w) {
    want_write_ = false;
    while (!failed_) {
        iovec iov[2];
        int niov = 0;
        bool ack = false;
        if (ack_sent_ < ack_len_) {
            iov[niov++] = {ack_buf_ + ack_sent_, ack_len_ - ack_sent_};
            ack = true;
        } else if (tx_sent_ == 0 && !acks_.empty()) {
            ack_len_ = ack_sent_ = 0;
            while (!acks_.empty() && ack_len_ + wire::kHeaderSize <= sizeof(ack_buf_)) {
                wire::encode_header({wire::MsgType::PutAck, acks_.front().second, acks_.front().first, 0, 0, 0},
                                    ack_buf_ + ack_len_);
                ack_len_ += wire::kHeaderSize;
                acks_.pop_front();
            }
            continue;
        } else if (!tx_.empty()) {
            const StripeJob &j = tx_.front();
            if (tx_sent_ == 0)
                wire::encode_header({wire::MsgType::Put, GDX_OK, j.after_main + 1, j.key_id, j.addr, j.len}, tx_head_);
            if (tx_sent_ < wire::kHeaderSize) iov[niov++] = {tx_head_ + tx_sent_, wire::kHeaderSize - tx_sent_};
            size_t poff = tx_sent_ > wire::kHeaderSize ? tx_sent_ - wire::kHeaderSize : 0;
            if (poff < j.len) iov[niov++] = {const_cast<uint8_t *>(j.src) + poff, j.len - poff};
        } else {
            break;
        }
        size_t want = 0;
        for (int i = 0; i < niov; ++i) want += iov[i].iov_len;
        msghdr msg{};
        msg.msg_iov = iov;
        msg.msg_iovlen = static_cast<size_t>(niov);
        ssize_t n = sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            int err = errno;
            if (err == EINTR) continue;
            if (err == EAGAIN || err == EWOULDBLOCK) {
                want_write_ = true;
                break;
            }
            fail(w, status_of_errno(err), std::string("sendmsg: ") + std::strerror(err));
            return;
        }
        last_activity_ = Clock::now();
        if (ack) {
            ack_sent_ += static_cast<size_t>(n);
            if (ack_sent_ == ack_len_) ack_len_ = ack_sent_ = 0;
        } else {
            tx_sent_ += static_cast<size_t>(n);
            if (tx_sent_ == wire::kHeaderSize + tx_.front().len) {
                unacked_.push_back(tx_.front());
                tx_.pop_front();
                tx_sent_ = 0;
            }
        }
        if (static_cast<size_t>(n) < want) { // the socket buffer is full
            want_write_ = true;
            break;
        }
    }
    update_watch(w);
}

ssize_t Lane::recv_some(LaneWorker &w, uint8_t *dst, size_t len) {
    int err = 0;
    ssize_t n = recv_once(fd_, dst, len, &err);
    if (n > 0) last_activity_ = Clock::now();
    if (n >= 0) return n;
    return recv_error(w, err);
}

ssize_t Lane::recv_error(LaneWorker &w, int err) {
    if (err != 0)
        fail(w, status_of_errno(err), std::string("recv: ") + std::strerror(err));
    else if (rx_ == Rx::Header && rx_got_ == 0)
        fail(w, GDX_ERR_CONNECTION_RESET, "the peer closed the connection");
    else
        fail(w, GDX_ERR_PROTOCOL, "truncated message: the peer closed the connection inside a stripe");
    return -1;
}

void Lane::on_readable(LaneWorker &w) {
    size_t budget = kLaneReadBudget;
    while (!failed_ && rx_ != Rx::Held && budget > 0) {
        ssize_t n = 0;
        int rerr = 0;
        const Rx was = rx_;
        switch (was) {
        case Rx::Header:
            n = recv_some(w, rx_hdr_ + rx_got_, wire::kHeaderSize - rx_got_);
            if (n > 0 && (rx_got_ += static_cast<size_t>(n)) == wire::kHeaderSize) {
                rx_got_ = 0;
                on_header(w);
            }
            break;
        case Rx::Payload: {
            RkeyTable &table = w.pool().table();
            RkeyTable::Pin pin = table.pin();
            uint8_t *ptr = nullptr;
            std::string why;
            // Revoked since the header was checked? Check again with the table pinned for the recv.
            if (table.check(pin, rx_cur_.key_id, reinterpret_cast<uintptr_t>(rx_dst_), rx_left_, kAccessRemoteWrite,
                            &ptr, &why) != GDX_OK) {
                ::gdx::fail(GDX_ERR_ACCESS_DENIED, refusal_level("tcp", peer_, GDX_ERR_ACCESS_DENIED, why), "tcp",
                            "stripe from %s (lane %u) stopped: %s (deregistered mid-transfer); the rest is discarded",
                            peer_.c_str(), index, why.c_str());
                rx_ = Rx::Discard;
                rx_status_ = GDX_ERR_ACCESS_DENIED;
                continue;
            }
            n = recv_once(fd_, rx_dst_, std::min<uint64_t>(rx_left_, budget), &rerr);
            if (n < 0 && rerr == EFAULT) {
                // The destination was unmapped after registration (probed then): fail this stripe's put alone,
                // as a revoked key does, instead of the lane and with it the endpoint.
                ::gdx::fail(GDX_ERR_INVALID_ADDR, refusal_level("tcp", peer_, GDX_ERR_INVALID_ADDR), "tcp",
                            "stripe from %s (lane %u) stopped: the registered destination "
                            "is no longer writable (%s); the rest is discarded",
                            peer_.c_str(), index, std::strerror(rerr));
                rx_ = Rx::Discard;
                rx_status_ = GDX_ERR_INVALID_ADDR;
                continue;
            }
            if (n > 0) last_activity_ = Clock::now();
            if (n < 0) n = recv_error(w, rerr);
            break;
        }
        case Rx::Discard: {
            std::vector<uint8_t> &scratch = w.scratch();
            n = recv_some(w, scratch.data(), std::min<uint64_t>(rx_left_, scratch.size()));
            break;
        }
        case Rx::Held:
            break;
        }
        if (n <= 0) break; // drained (epoll says when there is more) or failed
        budget -= std::min(budget, static_cast<size_t>(n));
        if (was == Rx::Payload || was == Rx::Discard) {
            if (was == Rx::Payload) rx_dst_ += n;
            rx_left_ -= static_cast<uint64_t>(n);
            if (rx_left_ == 0) stripe_landed(w);
        }
    }
    if (!failed_) flush_tx(w); // acks for what landed
}

void Lane::on_header(LaneWorker &w) {
    wire::FrameHeader h;
    std::string why;
    if (wire::decode_header({rx_hdr_, wire::kHeaderSize}, w.pool().limits(), &h, &why) != GDX_OK) {
        fail(w, GDX_ERR_PROTOCOL, why);
        return;
    }
    if (h.type == wire::MsgType::PutAck) {
        if (unacked_.empty() || h.op_id != unacked_.front().after_main + 1) {
            fail(w, GDX_ERR_PROTOCOL, "PUT_ACK for a stripe that is not the oldest one outstanding on this lane");
            return;
        }
        gdx_status_t st = static_cast<gdx_status_t>(h.status);
        if (st != GDX_OK)
            ::gdx::fail(st, refusal_level("tcp", peer_, st), "tcp",
                        "stripe of %" PRIu64 " bytes at 0x%" PRIx64 " (key 0x%016" PRIx64 ") failed at %s: %s",
                        unacked_.front().len, unacked_.front().addr, unacked_.front().key_id, peer_.c_str(),
                        gdx_status_string(st));
        w.pool().post({LaneEvent::StripeDone, shared_from_this(), unacked_.front().tag, st});
        unacked_.pop_front();
        return;
    }
    if (h.type != wire::MsgType::Put) {
        fail(w, GDX_ERR_PROTOCOL,
             std::string("unexpected ") + wire::msg_type_name(static_cast<uint8_t>(h.type)) + " on a lane");
        return;
    }
    if (acks_.size() >= peer_max_) { // each of the peer's striped puts puts at most one stripe on a lane
        fail(w, GDX_ERR_PROTOCOL,
             "peer has more stripes unacknowledged than the " + std::to_string(peer_max_) + " it announced");
        return;
    }
    rx_cur_ = h;
    rx_ = Rx::Held;
    if (!try_resume(w)) update_watch(w); // the main connection is behind: stop reading until it catches up
}

// A stripe may start once the main connection performed the requests a fence put before it. The worker
// publishes what it waits for, then looks again, so a main thread that moves main_performed in between
// sees the wait and pokes (both with sequentially consistent atomics).
bool Lane::try_resume(LaneWorker &w) {
    if (rx_ != Rx::Held) return true;
    uint64_t need = rx_cur_.op_id - 1;
    if (need > shared_->main_performed.load(std::memory_order_seq_cst)) {
        waiting_main_.store(need, std::memory_order_seq_cst);
        if (need > shared_->main_performed.load(std::memory_order_seq_cst)) return false;
    }
    waiting_main_.store(0, std::memory_order_seq_cst);
    begin_put(w);
    return true;
}

void Lane::begin_put(LaneWorker &w) {
    (void)shared_->main_writes.load(std::memory_order_acquire); // see LaneShared::main_writes
    RkeyTable &table = w.pool().table();
    uint8_t *ptr = nullptr;
    std::string why;
    gdx_status_t st;
    {
        RkeyTable::Pin pin = table.pin();
        st = table.check(pin, rx_cur_.key_id, rx_cur_.addr, rx_cur_.length, kAccessRemoteWrite, &ptr, &why);
    }
    rx_left_ = rx_cur_.length;
    if (st != GDX_OK) {
        ::gdx::fail(st, refusal_level("tcp", peer_, st, why), "tcp",
                    "stripe of %" PRIu64 " bytes at 0x%" PRIx64 " from %s (lane %u) refused: %s", rx_cur_.length,
                    rx_cur_.addr, peer_.c_str(), index, why.c_str());
        rx_ = Rx::Discard;
        rx_status_ = st;
    } else {
        rx_ = Rx::Payload;
        rx_dst_ = ptr;
        rx_status_ = GDX_OK;
    }
    if (rx_left_ == 0) stripe_landed(w);
    update_watch(w);
}

void Lane::stripe_landed(LaneWorker &w) {
    rx_ = Rx::Header;
    acks_.emplace_back(rx_cur_.op_id, rx_status_);
    landed_.fetch_add(1, std::memory_order_release);
    w.pool().post({LaneEvent::Landed, shared_from_this(), 0, GDX_OK});
}

// ---- LaneWorker ----------------------------------------------------------------------------------------

LaneWorker::~LaneWorker() {
    if (thread_.joinable()) {
        {
            std::lock_guard<std::mutex> g(mu_);
            stop_ = true;
        }
        wake();
        thread_.join();
    }
    if (epfd_ >= 0) ::close(epfd_);
    if (evfd_ >= 0) ::close(evfd_);
}

gdx_status_t LaneWorker::start(unsigned id) {
    epfd_ = epoll_create1(EPOLL_CLOEXEC);
    if (epfd_ < 0) return fail_errno(GDX_ERR_IO, errno, "tcp", "epoll_create1 for lane thread %u", id);
    evfd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (evfd_ < 0) return fail_errno(GDX_ERR_IO, errno, "tcp", "eventfd for lane thread %u", id);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = nullptr;
    if (epoll_ctl(epfd_, EPOLL_CTL_ADD, evfd_, &ev) != 0)
        return fail_errno(GDX_ERR_IO, errno, "tcp", "epoll_ctl(ADD eventfd) for lane thread %u", id);
    try {
        scratch_.resize(256u << 10);
        thread_ = std::thread([this] { run(); });
    } catch (const std::exception &e) {
        return GDX_FAIL(GDX_ERR_NO_MEMORY, "tcp", "starting lane thread %u: %s", id, e.what());
    }
    GDX_DEBUG("tcp", "lane thread %u started", id);
    return GDX_OK;
}

void LaneWorker::wake() { signal_eventfd(evfd_); }

void LaneWorker::add(const std::shared_ptr<Lane> &lane) {
    std::lock_guard<std::mutex> g(mu_);
    cmds_.push_back({Cmd::Add, lane, {}});
    wake();
}

void LaneWorker::submit(const std::shared_ptr<Lane> &lane, const StripeJob &job) {
    std::lock_guard<std::mutex> g(mu_);
    cmds_.push_back({Cmd::Submit, lane, job});
    if (cmds_.size() == 1) wake(); // otherwise a wake is already on its way
}

void LaneWorker::poke(const std::shared_ptr<Lane> &lane) {
    std::lock_guard<std::mutex> g(mu_);
    cmds_.push_back({Cmd::Poke, lane, {}});
    if (cmds_.size() == 1) wake();
}

void LaneWorker::remove(const std::shared_ptr<Lane> &lane) {
    std::unique_lock<std::mutex> g(mu_);
    cmds_.push_back({Cmd::Remove, lane, {}});
    wake();
    removed_cv_.wait(g, [&] { return lane->removed_; });
}

void LaneWorker::watch(int fd, Lane *lane, unsigned mask, unsigned was) {
    epoll_event ev{};
    ev.events = ((mask & 1u) ? EPOLLIN : 0u) | ((mask & 2u) ? EPOLLOUT : 0u);
    ev.data.ptr = lane;
    int op = mask == 0 ? EPOLL_CTL_DEL : was == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
    if (epoll_ctl(epfd_, op, fd, &ev) != 0) // only on resource exhaustion; the silence clock then fails the lane
        fail_errno(GDX_ERR_IO, errno, "tcp", "epoll_ctl on lane %u of the connection to %s", lane->index,
                   lane->peer().c_str());
}

void LaneWorker::apply(Cmd &c) {
    Lane &l = *c.lane;
    switch (c.kind) {
    case Cmd::Add:
        lanes_.push_back(c.lane);
        l.update_watch(*this);
        l.on_readable(*this); // bytes that arrived before the lane was handed over
        break;
    case Cmd::Submit:
        l.queue(*this, c.job);
        break;
    case Cmd::Poke:
        if (!l.failed_ && !l.removed_ && l.try_resume(*this)) l.on_readable(*this);
        break;
    case Cmd::Remove: {
        if (!l.failed_ && l.watched_ != 0) watch(l.fd_, &l, 0, l.watched_);
        l.watched_ = 0;
        if (l.fd_ >= 0) ::close(l.fd_);
        l.fd_ = -1;
        l.failed_ = true; // nothing more happens on it
        l.leftovers.assign(l.tx_.begin(), l.tx_.end());
        l.leftovers.insert(l.leftovers.end(), l.unacked_.begin(), l.unacked_.end());
        l.tx_.clear();
        l.unacked_.clear();
        std::erase(lanes_, c.lane);
        std::lock_guard<std::mutex> g(mu_);
        l.removed_ = true;
        removed_cv_.notify_all();
        break;
    }
    }
}

void LaneWorker::check_timeouts() {
    Clock::duration limit = pool_.silence_timeout();
    if (limit == Clock::duration::max()) return;
    Clock::time_point now = Clock::now();
    for (size_t i = 0; i < lanes_.size(); ++i) {
        Lane &l = *lanes_[i];
        if (l.failed_ || !l.busy() || now - l.last_activity_ < limit) continue;
        l.fail(*this, GDX_ERR_TIMEOUT,
               "peer silent for " + format_duration(limit) + " (GDX_PEER_SILENCE_TIMEOUT) with " +
                   std::to_string(l.tx_.size() + l.unacked_.size()) + " stripes outstanding");
    }
}

void LaneWorker::run() {
    epoll_event evs[64];
    Clock::time_point next_tick = Clock::now() + std::chrono::milliseconds(kTickMs);
    for (;;) {
        // The silence clocks need a look only while some lane waits for its peer; idle threads sleep.
        bool any_busy = std::any_of(lanes_.begin(), lanes_.end(), [](const auto &l) { return !l->failed_ && l->busy(); });
        int n = epoll_wait(epfd_, evs, 64, any_busy ? kTickMs : -1);
        if (n < 0 && errno != EINTR) {
            fail_errno(GDX_ERR_IO, errno, "tcp", "epoll_wait in a lane thread");
            std::this_thread::sleep_for(std::chrono::milliseconds(kTickMs));
        }
        bool commands = false;
        for (int i = 0; i < n; ++i) {
            if (evs[i].data.ptr == nullptr) {
                commands = true;
                continue;
            }
            Lane *l = static_cast<Lane *>(evs[i].data.ptr);
            // A lane removed or failed by an earlier event of this batch has left the epoll set already.
            if (l->failed_) continue;
            if ((evs[i].events & (EPOLLERR | EPOLLHUP)) && l->rx_ == Lane::Rx::Held) {
                // Not reading (a stripe waits for the main connection), and the socket reports an error or a
                // hang-up, level-triggered: fail now rather than spin until the wait ends.
                l->fail(*this, GDX_ERR_CONNECTION_RESET, "connection reset while a stripe waited for the main connection");
                continue;
            }
            if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) l->on_readable(*this);
            if (!l->failed_ && (evs[i].events & EPOLLOUT)) l->flush_tx(*this);
        }
        if (commands) {
            drain_eventfd(evfd_);
            {
                std::lock_guard<std::mutex> g(mu_);
                if (stop_) return;
                taking_.swap(cmds_);
            }
            std::vector<Lane *> fresh;
            for (Cmd &c : taking_) {
                bool was_idle = c.kind == Cmd::Submit && c.lane->tx_.empty();
                apply(c);
                if (was_idle) fresh.push_back(c.lane.get());
            }
            for (Lane *l : fresh)
                if (!l->failed_) l->flush_tx(*this);
            taking_.clear();
        }
        if (!any_busy) next_tick = Clock::now() + std::chrono::milliseconds(kTickMs);
        if (Clock::now() >= next_tick) {
            check_timeouts();
            next_tick = Clock::now() + std::chrono::milliseconds(kTickMs);
        }
    }
}

// ---- LanePool ------------------------------------------------------------------------------------------

LanePool::LanePool(RkeyTable &table, const wire::Limits &limits, Clock::duration silence_timeout, unsigned nthreads)
    : table_(table), limits_(limits), silence_timeout_(silence_timeout) {
    workers_.resize(std::max(1u, nthreads));
}

LanePool::~LanePool() {
    workers_.clear(); // joins the threads before the queue below goes
    if (evfd_ >= 0) ::close(evfd_);
}

gdx_status_t LanePool::init() {
    evfd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (evfd_ < 0) return fail_errno(GDX_ERR_IO, errno, "tcp", "eventfd for lane results");
    return GDX_OK;
}

gdx_status_t LanePool::attach(const std::shared_ptr<Lane> &lane, uint64_t slot) {
    size_t i = slot % workers_.size();
    if (!workers_[i]) {
        auto w = std::make_unique<LaneWorker>(*this);
        gdx_status_t st = w->start(static_cast<unsigned>(i));
        if (st != GDX_OK) return st;
        workers_[i] = std::move(w);
    }
    lane->worker = workers_[i].get();
    workers_[i]->add(lane);
    return GDX_OK;
}

void LanePool::post(LaneEvent ev) {
    std::lock_guard<std::mutex> g(mu_);
    events_.push_back(std::move(ev));
    if (!pending_.exchange(true, std::memory_order_acq_rel)) signal_eventfd(evfd_);
}

void LanePool::take(std::vector<LaneEvent> *out) {
    std::lock_guard<std::mutex> g(mu_);
    if (out->empty())
        out->swap(events_);
    else
        out->insert(out->end(), std::make_move_iterator(events_.begin()), std::make_move_iterator(events_.end()));
    events_.clear();
    pending_.store(false, std::memory_order_release);
    drain_eventfd(evfd_);
}

} // namespace gdx::tp::tcp
