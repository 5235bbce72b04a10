// shm endpoint: active messages. Every one is copied into the peer's ring before its call returns; am_short_iov and
// am_bcopy_pack (kCapAmInPlace, what the UCX glue calls) write it there directly, as UCX's own shared-memory
// transports write their FIFO elements, so the small-message path has no buffer in between
// (bench/results/uct-small-2026-11-25).
#include "core/error.h"
#include "transport/ep_checks.h"
#include "transport/shm/shm_iface.h"

#include <cstring>

namespace gdx::tp::shm {

namespace {
constexpr const char *kComp = "shm";
} // namespace

// am_ready() past its common case.
gdx_status_t ShmEp::am_not_ready() {
    gdx_status_t st = ch_.op_status();
    if (st == GDX_INPROGRESS) return GDX_ERR_NO_RESOURCE;
    if (st != GDX_OK) return st;
    if (fence_.holds(fence_waits_on())) return GDX_ERR_NO_RESOURCE; // ordered after everything before the fence
    if (pending_.holds_back()) return GDX_ERR_NO_RESOURCE; // parked requests go first (pending_queue.h)
    return GDX_OK;
}

gdx_status_t ShmEp::am_zcopy(uint8_t id, const void *header, size_t header_len, const void *payload, size_t len,
                             const MemHandle *, Completion *) {
    if (gdx_status_t st = check_am_zcopy(*iface_, id, header, header_len, payload, len); st != GDX_OK) return st;
    if (gdx_status_t st = am_ready(); st != GDX_OK) return st;
    // Copied into the peer's ring at once: the caller's buffers are free again when this returns.
    return ch_.push(kRecAm, id, 0, header, header_len, payload, len) ? GDX_OK : GDX_ERR_NO_RESOURCE;
}

namespace {
// Up to 16 bytes with two overlapping loads and stores of the widest size that fits: UCP's small messages (a tag
// and a few bytes) without a call into the C library's memcpy.
inline void copy_small(uint8_t *d, const uint8_t *s, size_t n) {
    if (n >= 8) {
        uint64_t a, b;
        std::memcpy(&a, s, 8);
        std::memcpy(&b, s + n - 8, 8);
        std::memcpy(d, &a, 8);
        std::memcpy(d + n - 8, &b, 8);
    } else if (n >= 4) {
        uint32_t a, b;
        std::memcpy(&a, s, 4);
        std::memcpy(&b, s + n - 4, 4);
        std::memcpy(d, &a, 4);
        std::memcpy(d + n - 4, &b, 4);
    } else if (n != 0) {
        d[0] = s[0];
        d[n / 2] = s[n / 2];
        d[n - 1] = s[n - 1];
    }
}
} // namespace

template <typename Fill> gdx_status_t ShmEp::am_in_ring(uint8_t id, size_t total, Fill fill) {
    if (gdx_status_t st = am_ready(); st != GDX_OK) return st;
    uint8_t *p = ch_.begin_record(total);
    if (p == nullptr) return GDX_ERR_NO_RESOURCE;
    fill(p);
    ch_.end_record(kRecAm, id, 0, total);
    return GDX_OK;
}

gdx_status_t ShmEp::am_short_iov(uint8_t id, std::span<const AmSeg> segs) {
    size_t total = 0;
    const void *data = segs.data(); // stands for the pieces in check_am_short: null when one has bytes but no data
    for (const AmSeg &s : segs) {
        total += s.len;
        if (s.data == nullptr && s.len != 0) data = nullptr;
    }
    if (gdx_status_t st = check_am_short(*iface_, id, data, total); st != GDX_OK) return st;
    // Each piece straight into the peer's ring: no buffer in between (UCT's header and payload arrive apart).
    return am_in_ring(id, total, [segs](uint8_t *p) {
        for (const AmSeg &s : segs) {
            if (s.len != 0) std::memcpy(p, s.data, s.len);
            p += s.len;
        }
    });
}

// UCT's am_short, the path of every small UCP message: the header word and the payload go straight into the ring,
// with no list of pieces to build and walk (callgrind: ~50 instructions of the ~210 this send took through
// am_short_iov). A payload of up to 16 bytes (UCP's tag and a few bytes) that may go now takes the first branch,
// which calls nothing out of line on its way (waking a sleeping peer aside), so it needs no stack frame: every
// refusal, and every longer payload, goes through am_short_general's full checks.
[[gnu::hot]] gdx_status_t ShmEp::am_short_hdr(uint8_t id, uint64_t header, const void *payload, size_t len) {
    static_assert(sizeof(RecHdr) + sizeof(header) + 16 <= kRecAlign, "a payload of up to 16 bytes fills one cell");
    if (len <= 16 && id < kMaxAmId && (payload != nullptr || len == 0) &&
        sizeof(header) + len <= iface_->caps().max_am_short && fence_.open(fence_waits_on())) [[likely]] {
        if (uint8_t *rec = ch_.begin_cell_record(); rec != nullptr) [[likely]] {
            std::memcpy(rec + sizeof(RecHdr), &header, sizeof(header));
            copy_small(rec + sizeof(RecHdr) + sizeof(header), static_cast<const uint8_t *>(payload), len);
            ch_.end_cell_record(rec, kRecAm, id, 0, sizeof(header) + len);
            return GDX_OK;
        }
    }
    return am_short_general(id, header, payload, len);
}

gdx_status_t ShmEp::am_short_general(uint8_t id, uint64_t header, const void *payload, size_t len) {
    const size_t total = sizeof(header) + len;
    if (gdx_status_t st = check_am_short(*iface_, id, payload != nullptr || len == 0 ? &header : nullptr, total);
        st != GDX_OK)
        return st;
    return am_in_ring(id, total, [&](uint8_t *p) {
        std::memcpy(p, &header, sizeof(header));
        if (len <= 16) copy_small(p + sizeof(header), static_cast<const uint8_t *>(payload), len);
        else std::memcpy(p + sizeof(header), payload, len);
    });
}

gdx_status_t ShmEp::am_bcopy_pack(uint8_t id, AmPackFn pack, void *arg, size_t *len) {
    if (gdx_status_t st = check_am_bcopy(*iface_, id, nullptr, 0); st != GDX_OK) return st; // the id
    if (pack == nullptr || len == nullptr)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "am_bcopy id %u: null pack function or length", id);
    if (gdx_status_t st = am_ready(); st != GDX_OK) return st;
    const size_t max = iface_->caps().max_am_bcopy;
    // With room for the largest message, pack writes straight into the ring; the record then takes only what it
    // wrote. Otherwise this one may still fit: it is packed into the interface's buffer and copied in if it does
    // (a copy more, only while the ring is that full).
    uint8_t *dst = ch_.begin_record(max);
    bool in_ring = dst != nullptr;
    if (!in_ring) {
        if (!ch_.can_push(sizeof(RecHdr))) return GDX_ERR_NO_RESOURCE; // not even an empty message fits: no packing
        if ((dst = iface_->pack_buffer()) == nullptr) return GDX_ERR_NO_MEMORY;
    }
    size_t n = pack(dst, arg);
    if (n > max) {
        gdx_status_t st = GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp,
                                   "am_bcopy id %u: the pack function wrote %zu bytes, more than max_am_bcopy %zu; "
                                   "the endpoint fails (what lay behind that space may be overwritten)", id, n, max);
        ch_.fail(st, "am_bcopy pack overrun");
        return st;
    }
    if (in_ring) ch_.end_record(kRecAm, id, 0, n);
    else if (!ch_.push(kRecAm, id, 0, dst, n, nullptr, 0)) return GDX_ERR_NO_RESOURCE;
    *len = n;
    return GDX_OK;
}

// What Channel::poll hands records to for deliver_probed()'s general case: active messages of the ids the sink
// asks for go to it; it stops at anything else, which is left in the ring for progress().
struct ShmEp::ProbedDelivery {
    ShmEp &ep;
    const AmSink &sink;
    bool stopped = false;
    // The sink takes this record (an active message of one of its ids, no granted copy in flight): it is handed
    // straight to the receiver the sink's table names for its id (UCP's handler, through the UCX module).
    [[gnu::always_inline]] bool take(const RecHdr &h, const uint8_t *rec) const {
        if (h.type != kRecAm || h.id >= kMaxAmId || ((sink.ids >> h.id) & 1) == 0 || ep.grant_outstanding())
            [[unlikely]]
            return false;
        call_receiver(sink.table[h.id], h.id, const_cast<uint8_t *>(rec) + sizeof(RecHdr), h.len - sizeof(RecHdr));
        return true;
    }
    bool on_record(const RecHdr &h, const uint8_t *rec) {
        if (take(h, rec)) [[likely]]
            return true;
        stopped = true;
        return false;
    }
};

[[gnu::hot]] IdleProbe::Delivered ShmEp::deliver_probed(void *ctx, IdleProbe::Word *w, const AmSink &sink) {
    ShmEp &ep = *static_cast<ShmEp *>(ctx);
    ProbedDelivery d{ep, sink};
    // One record, not a batch: the look for a second is instructions between UCP's handler and the reply it lets
    // UCP send, and a record already behind this one is announced by the re-pointed word at the next idle look,
    // one call later (a burst so costs an idle look more per record than a batch would). The word said the record
    // at the head is published: the common case (an active message for the sink) takes it without poll()'s second
    // look at its seq word and its loop; anything else (a PAD first, another record) goes through poll().
    // Still covered by the probe, re-pointed at the ring's new head, when every record went and no other waits.
    // The rest of what add_probe_words() required still holds: only the handlers ran, and whatever they gave this
    // endpoint to do they did through calls that invalidate the probe themselves (IdleProbe::deliver's contract).
    bool up = false;
    if (ep.ch_.take_announced([&d](const RecHdr &h, const uint8_t *rec) { return d.take(h, rec); }, &w->addr,
                              &w->value, &up)) [[likely]]
        return {1, up};
    const unsigned n = ep.ch_.poll(d, 1);
    return {n, !d.stopped && ep.ch_.rx_head_word(&w->addr, &w->value)};
}

} // namespace gdx::tp::shm
