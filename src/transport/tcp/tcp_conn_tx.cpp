// Send side: bounded rings of messages, written with scatter-gather sendmsg straight from where the bytes
// live (user buffers, registered memory), partial writes resumed where they stopped.
#include "core/error.h"
#include "memtype/access_probe.h"
#include "transport/tcp/tcp_internal.h"

#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <optional>
#include <sys/socket.h>
#include <sys/uio.h>

namespace gdx::tp::tcp {

namespace {
constexpr size_t kMaxIov = 64;
} // namespace

gdx_status_t Conn::alloc_slot(wire::MsgType type, uint32_t *index) {
    if (free_slots_.empty()) return GDX_ERR_NO_RESOURCE;
    uint32_t i = free_slots_.back();
    free_slots_.pop_back();
    OpSlot &s = slots_[i];
    uint32_t gen = s.gen + 1;
    s = OpSlot{};
    s.type = type;
    s.in_use = true;
    s.gen = gen;
    *index = i;
    return GDX_OK;
}

void Conn::release_slot(uint32_t index) {
    OpSlot &s = slots_[index];
    s.in_use = false;
    s.comp = nullptr;
    s.dst = nullptr;
    free_slots_.push_back(index);
}

// Every message of ours goes through here; a request (anything the target performs, FENCE included) is counted,
// since stripes after a fence wait for the target to have performed that many.
TxDesc &Conn::req_push(bool request) {
    if (request) ++posted_;
    TxDesc &d = req_ring_.push_back();
    d = TxDesc{};
    return d;
}

TxDesc *Conn::ctl_push() {
    TxDesc &d = ctl_ring_.push_back();
    d = TxDesc{};
    return &d;
}

gdx_status_t Conn::post_put(const uint8_t *buf, size_t len, uint64_t key_id, uint64_t addr, Completion *comp) {
    if (state_ != State::Up || req_ring_.full() || free_slots_.empty()) return GDX_ERR_NO_RESOURCE;
    became_busy();
    uint32_t i = 0;
    alloc_slot(wire::MsgType::Put, &i);
    OpSlot &s = slots_[i];
    s.comp = comp;
    s.len = len;
    s.key_id = key_id;
    s.addr = addr;
    TxDesc &d = req_push(true);
    wire::encode_header({wire::MsgType::Put, GDX_OK, op_id_of(s, i), key_id, addr, len}, d.head);
    d.head_len = wire::kHeaderSize;
    d.payload = buf; // sent from the user's buffer: no copy
    d.payload_len = len;
    flush_tx();
    return GDX_INPROGRESS;
}

gdx_status_t Conn::post_get(uint8_t *buf, size_t len, uint64_t key_id, uint64_t addr, Completion *comp) {
    if (state_ != State::Up || req_ring_.full() || free_slots_.empty()) return GDX_ERR_NO_RESOURCE;
    became_busy();
    uint32_t i = 0;
    alloc_slot(wire::MsgType::GetReq, &i);
    OpSlot &s = slots_[i];
    s.comp = comp;
    s.dst = buf; // the reply's payload is received straight into it
    s.len = len;
    s.key_id = key_id;
    s.addr = addr;
    TxDesc &d = req_push(true);
    wire::encode_header({wire::MsgType::GetReq, GDX_OK, op_id_of(s, i), key_id, addr, len}, d.head);
    d.head_len = wire::kHeaderSize;
    flush_tx();
    return GDX_INPROGRESS;
}

gdx_status_t Conn::post_am(uint8_t id, const void *inline_data, size_t inline_len, const void *payload,
                           size_t len, bool copy_payload, Completion *comp) {
    if (state_ != State::Up || req_ring_.full()) return GDX_ERR_NO_RESOURCE;
    uint8_t *bcopy = nullptr;
    if (copy_payload && len > 0) {
        bcopy = iface_->bcopy_get();
        if (bcopy == nullptr) return GDX_ERR_NO_RESOURCE;
        std::memcpy(bcopy, payload, len);
    }
    became_busy();
    TxDesc &d = req_push(true);
    wire::encode_header({wire::MsgType::Am, GDX_OK, 0, id, 0, inline_len + len}, d.head);
    if (inline_len > 0) std::memcpy(d.head + wire::kHeaderSize, inline_data, inline_len);
    d.head_len = static_cast<uint32_t>(wire::kHeaderSize + inline_len);
    d.bcopy = bcopy;
    d.payload = bcopy != nullptr ? bcopy : static_cast<const uint8_t *>(payload);
    d.payload_len = len;
    d.comp = comp;
    flush_tx();
    return comp != nullptr ? GDX_INPROGRESS : GDX_OK;
}

gdx_status_t Conn::post_flush(Completion *comp, bool *done_now) {
    *done_now = false;
    if (state_ == State::Up && quiet()) {
        *done_now = true;
        return GDX_OK;
    }
    if (state_ != State::Up || req_ring_.full() || free_slots_.empty()) return GDX_ERR_NO_RESOURCE;
    // The target answers FLUSH after every earlier message of this stream was performed (it handles them in
    // order), and its answer follows every earlier reply: FLUSH_ACK means everything before it completed.
    became_busy();
    uint32_t i = 0;
    alloc_slot(wire::MsgType::Flush, &i);
    slots_[i].comp = comp;
    TxDesc &d = req_push(true);
    wire::encode_header({wire::MsgType::Flush, GDX_OK, op_id_of(slots_[i], i), 0, 0, 0}, d.head);
    d.head_len = wire::kHeaderSize;
    flush_tx();
    return GDX_INPROGRESS;
}

gdx_status_t Conn::post_lane_want() {
    if (state_ != State::Up || req_ring_.full()) return GDX_ERR_NO_RESOURCE;
    TxDesc &d = req_push(false);
    wire::encode_header({wire::MsgType::LaneWant, GDX_OK, 0, 0, 0, 0}, d.head);
    d.head_len = wire::kHeaderSize;
    flush_tx();
    return GDX_OK;
}

gdx_status_t Conn::post_fence(const uint64_t *counts, unsigned n) {
    if (state_ != State::Up || req_ring_.full()) return GDX_ERR_NO_RESOURCE;
    if (n == 0 || n > lanes_agreed_) return GDX_FAIL(GDX_ERR_INTERNAL, "tcp", "FENCE over %u of %u lanes", n, lanes_agreed_);
    became_busy();
    TxDesc &d = req_push(true);
    wire::encode_header({wire::MsgType::Fence, GDX_OK, 0, 0, 0, uint64_t{n} * 8}, d.head);
    for (unsigned i = 0; i < n; ++i) wire::store_le64(d.head + wire::kHeaderSize + 8 * i, counts[i]);
    d.head_len = static_cast<uint32_t>(wire::kHeaderSize + 8 * n);
    flush_tx();
    return GDX_OK;
}

void Conn::queue_reply(wire::MsgType type, uint64_t op_id, gdx_status_t status, const uint8_t *payload,
                       uint64_t len, uint64_t src_key) {
    if (ctl_ring_.full()) { // cannot happen while the peer respects the request count it announced
        protocol_error("peer has more requests in flight than it announced in HELLO");
        return;
    }
    became_busy();
    TxDesc *d = ctl_push();
    wire::encode_header({type, status, op_id, 0, 0, len}, d->head);
    d->head_len = wire::kHeaderSize;
    d->payload = payload;
    d->payload_len = len;
    d->src_key = src_key;
    d->counts_peer_request = true;
    flush_tx();
}

// GET replies stream from registered memory that the user may deregister at any time (from any thread):
// with the table pinned, each source range is checked again right before the bytes leave, and the pin is
// held across the send. A reply whose first byte has not gone out becomes an ACCESS_DENIED reply; one caught
// mid-stream cannot be taken back, so the connection is closed (what an RC queue pair does on a remote
// access error).
gdx_status_t Conn::recheck_sources(const RkeyTable::Pin &pin) {
    RkeyTable &table = iface_->tcp_md().table();
    std::string why;
    for (size_t i = 0; i < ctl_ring_.size(); ++i) {
        TxDesc &d = ctl_ring_.at(i);
        if (d.src_key == 0) continue;
        uint8_t *ptr = nullptr;
        uint64_t from = reinterpret_cast<uintptr_t>(d.payload) + (d.sent > d.head_len ? d.sent - d.head_len : 0);
        uint64_t left = d.payload_len - (d.sent > d.head_len ? d.sent - d.head_len : 0);
        gdx_status_t st = table.check(pin, d.src_key, from, left, kAccessRemoteRead, &ptr, &why);
        if (st == GDX_OK && d.sent == 0 && left > 0 &&
            mem::probe_host_range(ptr, left, true, false, "tcp") != GDX_OK) {
            // Registered, but unmapped or protected since (it was probed at registration): a sendmsg from it
            // would fail with EFAULT after the header promised the bytes, closing the connection. Refuse this
            // GET alone while nothing of it is on the wire.
            st = GDX_ERR_INVALID_ADDR;
            why = last_error();
        }
        if (st == GDX_OK) continue;
        if (d.sent > 0) {
            close(GDX_ERR_ACCESS_DENIED,
                  "the registration a GET reply was streaming from was deregistered (" + why + ")");
            return GDX_ERR_ACCESS_DENIED;
        }
        fail(st, refusal_level("tcp", peer_name_, st, why), "tcp", "GET from %s refused: %s (%s before the reply was sent)",
             peer_name_.c_str(), why.c_str(), st == GDX_ERR_INVALID_ADDR ? "made inaccessible" : "deregistered");
        wire::encode_header({wire::MsgType::GetReply, st, wire::load_le64(d.head + 8), 0, 0, 0}, d.head);
        d.payload = nullptr;
        d.payload_len = 0;
        d.src_key = 0;
    }
    return GDX_OK;
}

// Picks queued messages in wire order into one sendmsg, then accounts a partial write message by message: a little
// over the ~80-line rule, kept whole because the pick and the accounting walk the same rings in the same order.
void Conn::flush_tx() {
    if (state_ == State::Closed || state_ == State::Connecting || write_waiting_ || in_flush_tx_) return;
    in_flush_tx_ = true;
    iovec iov[kMaxIov];
    struct Pick {
        bool ctl;
        size_t index;
    } picks[kMaxIov];
    while (state_ != State::Closed) {
        bool has_sources = false;
        for (size_t i = 0; i < ctl_ring_.size() && !has_sources; ++i) has_sources = ctl_ring_.at(i).src_key != 0;
        // Pin the key table from the check through the send, so a concurrent deregistration waits for it.
        std::optional<RkeyTable::Pin> pin;
        if (has_sources) {
            pin.emplace(iface_->tcp_md().table().pin());
            if (recheck_sources(*pin) != GDX_OK) break; // the connection was closed
        }

        // Order on the wire: a partly written message first (framing), then replies (they unblock the peer),
        // then our requests, each ring oldest first.
        size_t npick = 0, niov = 0, want = 0;
        auto add = [&](bool ctl, size_t index) {
            if (niov + 2 > kMaxIov) return false;
            TxDesc &d = ctl ? ctl_ring_.at(index) : req_ring_.at(index);
            size_t off = d.sent;
            if (off < d.head_len) {
                iov[niov++] = {d.head + off, d.head_len - off};
                off = d.head_len;
            }
            size_t poff = off - d.head_len;
            if (poff < d.payload_len) iov[niov++] = {const_cast<uint8_t *>(d.payload) + poff, d.payload_len - poff};
            want += d.total() - d.sent;
            picks[npick++] = {ctl, index};
            return true;
        };
        size_t req_from = 0;
        if (writing_req_) {
            add(false, 0);
            req_from = 1;
        }
        size_t nctl = 0;
        while (nctl < ctl_ring_.size() && add(true, nctl)) ++nctl;
        bool room = nctl == ctl_ring_.size();
        for (size_t i = req_from; room && i < req_ring_.size(); ++i) room = add(false, i);
        if (npick == 0) break;

        msghdr msg{};
        msg.msg_iov = iov;
        msg.msg_iovlen = niov;
        ssize_t n = sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        int err = errno;
        pin.reset();
        if (n < 0) {
            if (err == EINTR) continue;
            if (err == EAGAIN || err == EWOULDBLOCK) {
                wait_writable();
                break;
            }
            in_flush_tx_ = false;
            close(status_of_errno(err), std::string("sendmsg: ") + std::strerror(err));
            return;
        }
        last_activity_ = Clock::now();
        if (ep_ != nullptr) ep_->main_wrote();
        // Account the written bytes in pick order; each fully written message is the front of its ring at that
        // moment (pick order is ring order).
        size_t left = static_cast<size_t>(n);
        for (size_t p = 0; p < npick && left > 0; ++p) {
            bool ctl = picks[p].ctl;
            TxDesc &d = ctl ? ctl_ring_.front() : req_ring_.front();
            size_t rest = d.total() - d.sent;
            if (left < rest) {
                d.sent += left;
                if (!ctl) writing_req_ = true;
                break;
            }
            left -= rest;
            if (!ctl) writing_req_ = false;
            tx_written(d, ctl);
        }
        if (static_cast<size_t>(n) < want) { // the socket buffer is full: the next call would say EAGAIN
            wait_writable();
            break;
        }
    }
    in_flush_tx_ = false;
    update_watch();
}

void Conn::tx_written(TxDesc &d, bool is_ctl) {
    if (d.bcopy != nullptr) iface_->bcopy_put(d.bcopy);
    if (d.comp != nullptr) iface_->complete_later(d.comp, GDX_OK);
    if (d.counts_peer_request && peer_requests_ > 0) --peer_requests_;
    if (is_ctl)
        ctl_ring_.pop_front();
    else
        req_ring_.pop_front();
    if (ep_ != nullptr) ep_->room_freed();
}

void Conn::wait_writable() {
    if (write_waiting_ || state_ == State::Closed) return;
    write_waiting_ = true;
    auto self = shared_from_this();
    sock_.async_wait(asio::ip::tcp::socket::wait_write, [self](const boost::system::error_code &ec) {
        self->write_waiting_ = false;
        if (self->state_ == State::Closed || ec == asio::error::operation_aborted) return;
        if (ec) {
            self->close(GDX_ERR_CONNECTION_RESET, "waiting for the socket to drain: " + ec.message());
            return;
        }
        self->flush_tx();
    });
}

} // namespace gdx::tp::tcp
