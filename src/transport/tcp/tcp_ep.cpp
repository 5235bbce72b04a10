// The endpoint: argument checks, connection role, back-pressure (pending queue).
#include "core/error.h"
#include "transport/ep_checks.h"
#include "transport/tcp/tcp_internal.h"

#include <cinttypes>

namespace gdx::tp::tcp {

TcpEndpoint::TcpEndpoint(TcpIface *iface, uint64_t id) : iface_(iface), id_(id) {}

TcpEndpoint::~TcpEndpoint() {
    if (probe_fd_ >= 0) ::close(probe_fd_);
    if (iface_ == nullptr) return; // the interface went first and already closed us (orphan())
    if (conn_) {
        conn_->detach_endpoint();
        conn_->close(GDX_ERR_CANCELED, "endpoint destroyed");
        conn_.reset();
    }
    forget_lanes();
    fail_early(GDX_ERR_CANCELED);
    if (!pending_.empty())
        GDX_DEBUG("tcp", "endpoint 0x%016" PRIx64 " destroyed with parked requests; they are dropped", id_);
    iface_->ep_destroyed(this);
    // Outstanding operations were completed with GDX_ERR_CANCELED: report them now, while their Completion
    // objects are certainly alive.
    iface_->deliver_completions();
}

void TcpEndpoint::orphan() {
    if (conn_) {
        conn_->detach_endpoint();
        conn_->close(GDX_ERR_CANCELED, "interface destroyed before its endpoint");
        conn_.reset();
    }
    forget_lanes();
    if (error_ == GDX_OK) error_ = GDX_ERR_CANCELED;
    iface_ = nullptr;
}

std::vector<uint8_t> TcpEndpoint::address() const {
    if (iface_ == nullptr) return {};
    TcpAddress a = iface_->listen_address();
    a.ep_id = id_;
    std::vector<uint8_t> out(kAddressSize);
    encode_address(a, out.data());
    return out;
}

gdx_status_t TcpEndpoint::connect(std::span<const uint8_t> remote_address) {
    if (iface_ == nullptr) return GDX_FAIL(GDX_ERR_CANCELED, "tcp", "connect: the interface was destroyed");
    if (connect_called_) return GDX_FAIL(GDX_ERR_INVALID_PARAM, "tcp", "connect: endpoint 0x%016" PRIx64 " already connected or connecting", id_);
    TcpAddress a;
    std::string why;
    if (decode_address(remote_address, &a, &why) != GDX_OK)
        return GDX_FAIL(GDX_ERR_INVALID_ADDR, "tcp", "connect: %s", why.c_str());
    if (a.iface_id == iface_->id() && a.ep_id == id_)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, "tcp", "connect: endpoint 0x%016" PRIx64 " given its own address", id_);
    remote_ = a;
    connect_called_ = true;
    connect_deadline_ = add_sat(Clock::now(), iface_->conn_timeout());
    iface_->deadline_hint(connect_deadline_);
    // Both sides call connect(); exactly one dials. The side with the smaller (interface id, endpoint id)
    // connects, the other waits for the HELLO that names its endpoint id: no crossed connections to resolve.
    bool dial = std::make_pair(iface_->id(), id_) < std::make_pair(a.iface_id, a.ep_id);
    dialer_ = dial;
    if (dial) {
        asio::ip::tcp::endpoint peer = peer_endpoint();
        std::shared_ptr<Conn> c;
        try {
            c = std::make_shared<Conn>(iface_);
        } catch (const std::bad_alloc &) {
            return GDX_FAIL(GDX_ERR_NO_MEMORY, "tcp", "connect: out of memory for a connection");
        }
        gdx_status_t st = c->start_active(this, peer, a.iface_id, a.ep_id);
        if (st != GDX_OK) {
            error_ = st;
            return st;
        }
        conn_ = std::move(c);
    } else if (std::shared_ptr<Conn> c = iface_->take_unclaimed(id_, a.ep_id)) {
        if (c->hello_src_iface() != a.iface_id) {
            c->close(GDX_ERR_PROTOCOL, "HELLO came from an interface other than the one in the peer's address");
        } else {
            c->claim(this);
        }
    }
    GDX_DEBUG("tcp", "endpoint 0x%016" PRIx64 " %s %s:%u endpoint 0x%016" PRIx64, id_,
              dial ? "dials" : "waits for", a.ip_text().c_str(), a.port, a.ep_id);
    return state();
}

asio::ip::tcp::endpoint TcpEndpoint::peer_endpoint() const {
    asio::ip::address ip;
    if (remote_.family == 4) {
        asio::ip::address_v4::bytes_type b;
        std::copy_n(remote_.ip.begin(), 4, b.begin());
        ip = asio::ip::address_v4(b);
    } else {
        asio::ip::address_v6::bytes_type b;
        std::copy_n(remote_.ip.begin(), 16, b.begin());
        ip = asio::ip::address_v6(b);
    }
    return asio::ip::tcp::endpoint(ip, remote_.port);
}

gdx_status_t TcpEndpoint::state() const {
    if (error_ != GDX_OK) return error_;
    if (conn_ && conn_->state() == Conn::State::Up) return GDX_OK;
    return GDX_INPROGRESS;
}

void TcpEndpoint::on_up() {
    connect_deadline_ = Clock::time_point::max();
    lanes_.resize(conn_ ? conn_->lanes_agreed() : 0); // opened on the first large put (want_lanes)
    drain_early();
    if (!pending_.empty()) iface_->pending_changed(true);
}

void TcpEndpoint::on_closed(gdx_status_t st) {
    if (error_ == GDX_OK) error_ = st;
    connect_deadline_ = Clock::time_point::max();
    fail_early(error_);
    close_lanes(st);
    // Parked requests run once more so their owners learn the error from the calls they make.
    if (!pending_.empty() && iface_ != nullptr) iface_->pending_changed(true);
}

void TcpEndpoint::room_freed() {
    drain_early();
    if (!pending_.empty() && iface_ != nullptr) iface_->pending_changed(true);
}

gdx_status_t TcpEndpoint::am_early(uint8_t id, const void *inline_data, size_t inline_len, const void *payload,
                                   size_t len, bool copy_payload, Completion *comp) {
    EarlyAm e{id, copy_payload, {}, {}, payload, len, comp};
    const auto *h = static_cast<const uint8_t *>(inline_data);
    const auto *p = static_cast<const uint8_t *>(payload);
    try {
        if (inline_len) e.inline_bytes.assign(h, h + inline_len);
        if (copy_payload && len) e.payload_copy.assign(p, p + len);
        early_.push_back(std::move(e));
    } catch (const std::bad_alloc &) {
        return GDX_ERR_NO_RESOURCE;
    }
    return comp != nullptr ? GDX_INPROGRESS : GDX_OK;
}

// An active message: sent now when the connection is up and nothing issued earlier waits, kept in early_ while it
// comes up (room there), GDX_ERR_NO_RESOURCE otherwise.
gdx_status_t TcpEndpoint::am_post(uint8_t id, const void *inline_data, size_t inline_len, const void *payload,
                                  size_t len, bool copy_payload, Completion *comp) {
    const bool up = conn_ && conn_->state() == Conn::State::Up;
    if (!up && error_ == GDX_OK && connect_called_ && early_.size() < kEarlyMax && !pending_.holds_back())
        return am_early(id, inline_data, inline_len, payload, len, copy_payload, comp);
    gdx_status_t st = ready_for_op("am");
    if (st == GDX_OK) st = before_main_op();
    if (st != GDX_OK) return st;
    return conn_->post_am(id, inline_data, inline_len, payload, len, copy_payload, comp);
}

void TcpEndpoint::drain_early() {
    if (draining_early_) return; // post_am() frees room as it writes, and room_freed() comes here again
    draining_early_ = true;
    while (!early_.empty() && conn_ && conn_->state() == Conn::State::Up) {
        EarlyAm e = std::move(early_.front());
        early_.pop_front();
        const void *payload = e.copy_payload ? e.payload_copy.data() : e.payload;
        gdx_status_t st = before_main_op();
        if (st == GDX_OK)
            st = conn_->post_am(e.id, e.inline_bytes.data(), e.inline_bytes.size(), payload, e.len, e.copy_payload,
                                e.comp);
        if (st == GDX_ERR_NO_RESOURCE) { // room_freed() comes back here
            early_.push_front(std::move(e));
            break;
        }
        if (st != GDX_OK && st != GDX_INPROGRESS && e.comp != nullptr) iface_->complete_later(e.comp, st);
    }
    draining_early_ = false;
}

void TcpEndpoint::fail_early(gdx_status_t st) {
    for (EarlyAm &e : early_)
        if (e.comp != nullptr && iface_ != nullptr) iface_->complete_later(e.comp, st);
    if (!early_.empty())
        GDX_DEBUG("tcp", "endpoint 0x%016" PRIx64 ": %zu active messages issued before the connection came up are "
                         "dropped: %s", id_, early_.size(), gdx_status_string(st));
    early_.clear();
}

gdx_status_t TcpEndpoint::ready_for_op(const char *what) {
    if (error_ != GDX_OK) {
        // The failure itself was logged once when the connection closed; repeat it only at debug level.
        GDX_DEBUG("tcp", "%s on endpoint 0x%016" PRIx64 ": connection failed earlier: %s", what, id_,
                  gdx_status_string(error_));
        return error_;
    }
    if (!conn_ || conn_->state() != Conn::State::Up) return GDX_ERR_NO_RESOURCE; // still connecting
    if (!early_.empty()) return GDX_ERR_NO_RESOURCE; // active messages issued while connecting go first
    if (pending_.holds_back()) return GDX_ERR_NO_RESOURCE; // parked requests go first (pending_queue.h)
    return GDX_OK;
}

// The initiator's checks of a put or get (check_local, check_remote). Under gdx_put they repeat what the staging
// layer checked once (fallback/region_table.h); they stay because the UCX module calls this transport directly,
// where they are the only initiator-side check, and they refuse a bad key without a round trip. What protects
// the target is its own check against its record (rkey_table.cpp).
gdx_status_t TcpEndpoint::check_local(const char *what, const void *buf, size_t len, const MemHandle *memh,
                                      unsigned need) {
    if (gdx_status_t st = check_rma_buffer(*iface_, what, buf, len, kMaxBulk); st != GDX_OK) return st;
    if (memh == nullptr) return GDX_OK; // host memory needs no local registration with tcp
    if (SoftKeyMemHandle::of(memh, wire::TransportId::Tcp) == nullptr)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, "tcp", "%s: memory handle registered with another transport", what);
    uintptr_t b = reinterpret_cast<uintptr_t>(buf), base = reinterpret_cast<uintptr_t>(memh->addr());
    if (!wire::range_inside(b, len, base, memh->length()))
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, "tcp", "%s: buffer %p+%zu lies outside its registration %p+%zu", what,
                        buf, len, memh->addr(), memh->length());
    if ((memh->access() & need) != need)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, "tcp", "%s: buffer registered without %s access", what,
                        need == kAccessLocalRead ? "local-read" : "local-write");
    if (!memh->direct(b - base, len))
        return GDX_FAIL(GDX_ERR_UNSUPPORTED, "tcp", "%s: %s memory is not reachable by tcp (host memory only); stage it",
                        what, mem::type_name(memh->info().type));
    return GDX_OK;
}

gdx_status_t TcpEndpoint::check_remote(const char *what, uint64_t addr, size_t len, const RemoteKey &rkey,
                                       unsigned need, uint64_t *key_id) {
    const SoftRemoteKey *k = SoftRemoteKey::of(rkey, wire::TransportId::Tcp);
    if (k == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, "tcp", "%s: remote key unpacked by another transport", what);
    if (gdx_status_t st = check_key_claims(*iface_, what, addr, len, rkey, need); st != GDX_OK) return st;
    *key_id = k->key_id();
    return GDX_OK;
}

// Every operation checks its arguments (ep_checks.h reads the interface's caps), then the connection. An endpoint
// whose interface went first (orphan()) has no interface to check against: it answers its error at once.
gdx_status_t TcpEndpoint::put(const void *buf, size_t len, const MemHandle *lmemh, uint64_t remote_addr,
                              const RemoteKey &rkey, Completion *comp) {
    if (iface_ == nullptr) return ready_for_op("put");
    uint64_t key = 0;
    gdx_status_t st = check_local("put", buf, len, lmemh, kAccessLocalRead);
    if (st == GDX_OK) st = check_remote("put", remote_addr, len, rkey, kAccessRemoteWrite, &key);
    if (st == GDX_OK) st = ready_for_op("put");
    if (st != GDX_OK) return st;
    if (len >= iface_->stripe_min() && !lanes_.empty()) {
        if (!lanes_wanted_) want_lanes(); // they come up asynchronously; this put takes the main connection
        if (lanes_up_ > 0) {
            st = put_striped(static_cast<const uint8_t *>(buf), len, key, remote_addr, comp);
            if (st != GDX_ERR_NO_RESOURCE) return st; // otherwise no record free: the main connection takes it
        }
    }
    if ((st = before_main_op()) != GDX_OK) return st;
    return conn_->post_put(static_cast<const uint8_t *>(buf), len, key, remote_addr, comp);
}

gdx_status_t TcpEndpoint::get(void *buf, size_t len, const MemHandle *lmemh, uint64_t remote_addr,
                              const RemoteKey &rkey, Completion *comp) {
    if (iface_ == nullptr) return ready_for_op("get");
    uint64_t key = 0;
    gdx_status_t st = check_local("get", buf, len, lmemh, kAccessLocalWrite);
    if (st == GDX_OK) st = check_remote("get", remote_addr, len, rkey, kAccessRemoteRead, &key);
    if (st == GDX_OK) st = ready_for_op("get");
    if (st == GDX_OK) st = before_main_op();
    if (st != GDX_OK) return st;
    return conn_->post_get(static_cast<uint8_t *>(buf), len, key, remote_addr, comp);
}

gdx_status_t TcpEndpoint::am_short(uint8_t id, const void *data, size_t len) {
    if (iface_ == nullptr) return ready_for_op("am_short");
    gdx_status_t st = check_am_short(*iface_, id, data, len);
    if (st != GDX_OK) return st;
    return am_post(id, data, len, nullptr, 0, false, nullptr);
}

gdx_status_t TcpEndpoint::am_bcopy(uint8_t id, const void *data, size_t len) {
    if (iface_ == nullptr) return ready_for_op("am_bcopy");
    gdx_status_t st = check_am_bcopy(*iface_, id, data, len);
    if (st != GDX_OK) return st;
    return am_post(id, nullptr, 0, data, len, true, nullptr);
}

gdx_status_t TcpEndpoint::am_zcopy(uint8_t id, const void *header, size_t header_len, const void *payload, size_t len,
                                   const MemHandle *memh, Completion *comp) {
    if (iface_ == nullptr) return ready_for_op("am_zcopy");
    gdx_status_t st = check_am_zcopy(*iface_, id, header, header_len, payload, len);
    if (st == GDX_OK) st = check_local("am_zcopy", payload, len, memh, kAccessLocalRead);
    if (st != GDX_OK) return st;
    return am_post(id, header, header_len, payload, len, false, comp);
}

gdx_status_t TcpEndpoint::flush(Completion *comp) {
    if (error_ != GDX_OK) return ready_for_op("flush");
    if (!early_.empty()) return GDX_ERR_NO_RESOURCE; // active messages issued while connecting are not sent yet
    if (!conn_) return GDX_OK; // nothing was ever issued: operations need a connection
    if (conn_->state() != Conn::State::Up) return GDX_ERR_NO_RESOURCE;
    if (pending_.holds_back()) return GDX_ERR_NO_RESOURCE; // pending_queue.h: parked requests go first
    if (!striped_.empty() && striped_free_.size() != striped_.size()) return flush_with_stripes(comp);
    bool done_now = false;
    gdx_status_t st = conn_->post_flush(comp, &done_now);
    return done_now ? GDX_OK : st;
}

// The main connection is one ordered stream whose target performs messages in arrival order, so without
// lanes there is nothing to wait for. With stripes in flight on lanes, the order is carried to the target
// instead of waited for here (tcp_lane.h): a FENCE before the next main-connection message lists the stripes
// so far, and every stripe from now on names the main-connection requests to be performed before it.
gdx_status_t TcpEndpoint::fence() {
    if (error_ != GDX_OK) return ready_for_op("fence");
    if (!conn_) return GDX_OK;
    if (stripes_since_fence_) fence_owed_ = true;
    fence_mark_ = conn_->posted() + (fence_owed_ ? 1 : 0);
    return GDX_OK;
}

gdx_status_t TcpEndpoint::pending_add(PendingRequest *req) {
    if (req != nullptr && req->func != nullptr && (iface_ == nullptr || error_ != GDX_OK))
        return ready_for_op("pending_add");
    return pending_.add(req, room_for_request(), "tcp");
}

bool TcpEndpoint::pending_runnable() const { return !pending_.empty() && (error_ != GDX_OK || room_for_request()); }

// A parked request also runs once the endpoint failed, so it learns the error from the operation it retries.
unsigned TcpEndpoint::dispatch_pending() {
    drain_early();
    return pending_.dispatch([this] { return error_ != GDX_OK || room_for_request(); });
}

} // namespace gdx::tp::tcp
