// The endpoint's side of lanes (tcp_lane.h): dialing them, cutting large puts into stripes, the FENCE and
// flush bookkeeping, and the results the helper threads send back. All of it runs on the progress thread.
#include "core/error.h"
#include "transport/tcp/tcp_internal.h"

#include <cinttypes>
#include <cstring>
#include <sys/socket.h>
#include <unistd.h>

namespace gdx::tp::tcp {

struct TcpEndpoint::LaneDial {
    explicit LaneDial(asio::io_context &io) : sock(io) {}
    asio::ip::tcp::socket sock;
    TcpEndpoint *ep = nullptr; // null once the endpoint no longer wants it
    unsigned index = 0;
};

// Lanes are opened on the first put of at least GDX_TCP_STRIPE_MIN from either side, so endpoints that only
// ever carry small messages (most of an all-to-all job's) cost one socket, not 1 + GDX_TCP_LANES.
void TcpEndpoint::want_lanes() {
    if (lanes_wanted_ || lanes_closed_ || lanes_.empty() || error_ != GDX_OK || !conn_) return;
    if (dialer_) {
        lanes_wanted_ = true;
        dial_lanes();
    } else if (conn_->post_lane_want() == GDX_OK) { // otherwise asked again on the next large put
        lanes_wanted_ = true;
        GDX_DEBUG("tcp", "endpoint 0x%016" PRIx64 " asks %s for its %zu lanes", id_, conn_->peer_name().c_str(),
                  lanes_.size());
    }
}

// The dialing side opens the lanes when either side first wants them; each announces itself with LANE_HELLO and
// is used at once (the peer takes it over when its progress() reads that HELLO; bytes wait in the socket until
// then). A lane that cannot connect is not an error: the endpoint stripes over those that did.
void TcpEndpoint::dial_lanes() {
    asio::ip::tcp::endpoint peer = peer_endpoint();
    for (unsigned i = 0; i < lanes_.size(); ++i) {
        auto d = std::make_shared<LaneDial>(iface_->io());
        d->ep = this;
        d->index = i;
        boost::system::error_code ec;
        d->sock.open(peer.protocol(), ec);
        if (!ec) d->sock.non_blocking(true, ec);
        if (!ec && set_buffer_sizes(*iface_, d->sock.native_handle(), "lane " + std::to_string(i)) != GDX_OK) {
            d->sock.close(ec);
            continue; // said why; this endpoint uses the lanes that connect
        }
        if (ec) {
            GDX_WARN("tcp", "lane %u to %s: socket: %s; this endpoint uses the lanes that connect", i,
                     conn_->peer_name().c_str(), ec.message().c_str());
            continue;
        }
        dials_.push_back(d);
        d->sock.async_connect(peer, [d](const boost::system::error_code &e) {
            TcpEndpoint *ep = d->ep;
            if (ep == nullptr) return; // the endpoint went or closed
            d->ep = nullptr;
            std::erase(ep->dials_, d);
            const std::string &peer_name = ep->conn_->peer_name();
            if (e) {
                GDX_WARN("tcp", "lane %u to %s: connect: %s; this endpoint uses the lanes that connect", d->index,
                         peer_name.c_str(), e.message().c_str());
                return;
            }
            int fd = d->sock.native_handle();
            if (configure_socket(*ep->iface_, fd, peer_name) != GDX_OK) return; // said why
            uint8_t hello[wire::kHeaderSize + wire::kHelloBodySize];
            wire::encode_header({wire::MsgType::LaneHello, GDX_OK, ep->iface_->id(), ep->id_, ep->remote_.ep_id,
                                 wire::kHelloBodySize},
                                hello);
            wire::encode_hello_body({ep->iface_->tx_depth(), static_cast<uint16_t>(d->index)}, hello + wire::kHeaderSize);
            // A fresh connection's send buffer is empty: 48 bytes go at once or the connection is broken.
            ssize_t n = send(fd, hello, sizeof(hello), MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n != static_cast<ssize_t>(sizeof(hello))) {
                GDX_WARN("tcp", "lane %u to %s: sending LANE_HELLO: %s; this endpoint uses the lanes that connect",
                         d->index, peer_name.c_str(), n < 0 ? std::strerror(errno) : "short write");
                return;
            }
            boost::system::error_code rec;
            fd = d->sock.release(rec);
            if (rec) {
                GDX_WARN("tcp", "lane %u to %s: %s", d->index, peer_name.c_str(), rec.message().c_str());
                return;
            }
            ep->attach_lane(d->index, fd, ep->conn_->peer_max_requests());
        });
    }
}

gdx_status_t TcpEndpoint::attach_lane(unsigned index, int fd, uint32_t peer_max) {
    if (error_ != GDX_OK || lanes_closed_ || !conn_ || index >= lanes_.size() || lanes_[index]) {
        ::close(fd);
        return GDX_FAIL(GDX_ERR_INTERNAL, "tcp", "lane %u of endpoint 0x%016" PRIx64 " arrived when it cannot be used",
                        index, id_);
    }
    std::shared_ptr<Lane> lane;
    try {
        lane = std::make_shared<Lane>(this, index, fd, lane_shared_, conn_->peer_name(), peer_max);
        if (striped_.empty()) {
            striped_.resize(iface_->tx_depth());
            for (uint32_t i = static_cast<uint32_t>(striped_.size()); i-- > 0;) striped_free_.push_back(i);
        }
    } catch (const std::bad_alloc &) {
        ::close(fd);
        return GDX_FAIL(GDX_ERR_NO_MEMORY, "tcp", "out of memory for lane %u", index);
    }
    gdx_status_t st = iface_->lane_pool().attach(lane, id_ + index);
    if (st != GDX_OK) return st; // the lane's destructor closes the socket
    lanes_[index] = std::move(lane);
    ++lanes_up_;
    GDX_DEBUG("tcp", "endpoint 0x%016" PRIx64 ": lane %u to %s is up (%u of %zu)", id_, index,
              conn_->peer_name().c_str(), lanes_up_, lanes_.size());
    return GDX_OK;
}

gdx_status_t TcpEndpoint::before_main_op() {
    if (!fence_owed_) return GDX_OK;
    uint64_t counts[wire::kMaxLanes] = {};
    for (size_t i = 0; i < lanes_.size(); ++i) counts[i] = lanes_[i] ? lanes_[i]->issued : 0;
    gdx_status_t st = conn_->post_fence(counts, static_cast<unsigned>(lanes_.size()));
    if (st != GDX_OK) return st;
    fence_owed_ = false;
    stripes_since_fence_ = false;
    return GDX_OK;
}

// Stripes are cut at page multiples, at least GDX_TCP_STRIPE_MIN each, one per lane, lanes taken in turn.
gdx_status_t TcpEndpoint::put_striped(const uint8_t *buf, size_t len, uint64_t key, uint64_t addr, Completion *comp) {
    if (striped_free_.empty()) return GDX_ERR_NO_RESOURCE;
    gdx_status_t st = before_main_op(); // a FENCE owed goes first, so the mark below counts it
    if (st != GDX_OK) return st;
    uint64_t n = std::min<uint64_t>(lanes_up_, std::max<uint64_t>(1, len / iface_->stripe_min()));
    uint64_t piece = ((len / n) + 4095) & ~uint64_t{4095};
    uint32_t tag = striped_free_.back();
    striped_free_.pop_back();
    StripedPut &r = striped_[tag];
    r = StripedPut{comp, 0, ++striped_seq_, GDX_OK};
    // r.left counts the stripes as they go: their results come back through progress(), never in this loop.
    for (uint64_t k = 0, off = 0; k < n && off < len; ++k) {
        uint64_t l = k + 1 == n ? len - off : std::min<uint64_t>(piece, len - off);
        while (!lanes_[next_lane_ % lanes_.size()]) ++next_lane_;
        const std::shared_ptr<Lane> &lane = lanes_[next_lane_++ % lanes_.size()];
        ++lane->issued;
        ++r.left;
        lane->worker->submit(lane, {buf + off, l, key, addr + off, fence_mark_, tag});
        off += l;
    }
    stripes_since_fence_ = true;
    return GDX_INPROGRESS;
}

void TcpEndpoint::stripe_done(uint32_t tag, gdx_status_t st) {
    StripedPut &r = striped_[tag];
    if (st != GDX_OK && r.status == GDX_OK) r.status = st;
    if (--r.left > 0) return;
    iface_->complete_later(r.comp, r.status);
    r = StripedPut{};
    striped_free_.push_back(tag);
    if (striped_free_.size() == striped_.size()) {
        // Every stripe was acknowledged, so every one has landed: a later message needs no FENCE.
        fence_owed_ = false;
        stripes_since_fence_ = false;
    }
    if (!flushes_.empty()) finish_flushes();
    room_freed();
}

bool TcpEndpoint::striped_done_through(uint64_t seq) const {
    for (const StripedPut &r : striped_)
        if (r.left > 0 && r.seq <= seq) return false;
    return true;
}

// A flush completes when the main connection's FLUSH does and every striped put issued before it is
// acknowledged (an acknowledged stripe has landed in the target's memory).
gdx_status_t TcpEndpoint::flush_with_stripes(Completion *comp) {
    std::unique_ptr<FlushWait> w;
    try {
        w = std::make_unique<FlushWait>();
    } catch (const std::bad_alloc &) {
        return GDX_FAIL(GDX_ERR_NO_MEMORY, "tcp", "flush: out of memory");
    }
    w->ep = this;
    w->user = comp;
    w->after_seq = striped_seq_;
    w->count = 1;
    w->cb = [](Completion *c) {
        auto *f = static_cast<FlushWait *>(c);
        f->main_done = true;
        f->ep->finish_flushes();
    };
    bool done_now = false;
    gdx_status_t st = conn_->post_flush(w.get(), &done_now);
    if (st != GDX_OK && st != GDX_INPROGRESS) return st;
    w->main_done = done_now;
    flushes_.push_back(std::move(w));
    return GDX_INPROGRESS;
}

void TcpEndpoint::finish_flushes() {
    while (!flushes_.empty()) {
        FlushWait &f = *flushes_.front();
        if (!f.main_done || !striped_done_through(f.after_seq)) return;
        Completion *user = f.user;
        gdx_status_t st = f.status;
        flushes_.pop_front(); // may be the Completion whose callback runs now: nothing touches it after
        iface_->complete_later(user, st);
    }
}

void TcpEndpoint::close_lanes(gdx_status_t st) {
    for (auto &d : dials_) {
        d->ep = nullptr;
        boost::system::error_code ec;
        d->sock.close(ec); // its handler runs with operation_aborted and finds ep == nullptr
    }
    dials_.clear();
    if (!lanes_closed_) {
        lanes_closed_ = true;
        lanes_up_ = 0;
        for (auto &l : lanes_) {
            if (!l) continue;
            l->worker->remove(l); // returns once the worker let go of it
            std::vector<StripeJob> left;
            left.swap(l->leftovers);
            for (const StripeJob &j : left) stripe_done(j.tag, st);
        }
    }
    // Flushes waiting on stripes whose results were just reported.
    finish_flushes();
}

// The endpoint goes. Results the workers posted before letting go are still queued and name these lanes:
// handle them while the endpoint is alive, then cut the lanes loose (a result found later is dropped).
void TcpEndpoint::forget_lanes() {
    close_lanes(GDX_ERR_CANCELED);
    if (iface_ != nullptr) iface_->drain_lane_events();
    for (auto &l : lanes_)
        if (l) l->owner = nullptr;
}

void TcpEndpoint::on_lane_event(const LaneEvent &ev) {
    switch (ev.kind) {
    case LaneEvent::StripeDone:
        stripe_done(ev.tag, ev.status);
        break;
    case LaneEvent::Landed:
        if (conn_) conn_->fence_recheck();
        break;
    case LaneEvent::Failed:
        // The lane said why; stripes cannot be re-sent elsewhere (some bytes may have landed), so the endpoint
        // fails as it would if its main connection broke.
        if (conn_ && error_ == GDX_OK)
            conn_->close(ev.status, "lane " + std::to_string(ev.lane->index) + " failed (see above)");
        break;
    }
}

void TcpEndpoint::on_main_performed(uint64_t n) {
    lane_shared_->main_performed.store(n, std::memory_order_seq_cst);
    for (auto &l : lanes_) {
        if (!l) continue;
        uint64_t want = l->waiting_main();
        // Whoever clears the wait pokes, so a lane is poked once per wait (see Lane::try_resume).
        if (want != 0 && want <= n && l->clear_wait(want)) l->worker->poke(l);
    }
}

bool TcpEndpoint::lanes_landed(const uint8_t *counts, unsigned n) const {
    for (unsigned i = 0; i < n; ++i) {
        uint64_t need = wire::load_le64(counts + 8 * i);
        uint64_t have = i < lanes_.size() && lanes_[i] ? lanes_[i]->landed() : 0;
        if (need > have) return false;
    }
    return true;
}

} // namespace gdx::tp::tcp
