// Lock-free single-producer single-consumer ring of variable-length records, living in a shared segment.
// The consumer owns the segment (it is its receive ring); the peer process is the one producer.
//
// Layout: RingCtl (three cache lines: the ring's nonce, head written by the consumer, and the consumer's
// "sleeping" flag for wakeups), then `size` bytes of records (size a power of two). Records are 64-byte aligned
// and never wrap: when one does not fit before the end, the producer fills the rest with a PAD record. Positions
// are absolute 64-bit byte offsets in the ring's stream (they never wrap in practice, so never repeat).
//
// Records publish themselves. A counter of published bytes (a "tail" the consumer polls) costs the receiver two
// dependent cache misses per message: the counter's line, then the record's. Here the consumer polls the record
// itself: a record at absolute position `pos` is there exactly when its header's 64-bit `seq` word equals
// pos ^ nonce. The producer writes the header fields and the body, then release-stores seq (publish()); the
// consumer acquire-loads seq at its head and, when it matches, everything before that store is visible. One miss.
//
// Why nothing is ever zeroed (earlier self-publishing rings zeroed consumed cells to tell a fresh header from a stale
// one, the suspected cause of their lost large-record bandwidth): a header left from an earlier lap carries that
// lap's position, and absolute positions never repeat, so it cannot match. Where a header is now expected but an
// earlier lap left body bytes, those bytes match only if they happen to equal pos ^ nonce, where the nonce is random
// bits the consumer chose for this segment: 63 of them, the top bit being set so that pos ^ nonce is never 0 and a
// freshly zeroed segment matches nowhere. Probability 2^-63 per lap and cell, for data that knows nothing of the
// nonce (a producer that wants to lie can write any header it likes; see below).
//
// The producer's tail stays private; it reads the consumer's head only when it thinks the ring is full. The
// consumer releases head in batches (the producer's cache miss).
//
// The consumer trusts nothing it reads: every record header is copied out once and validated (length at least a
// header, no crossing of the end of the ring) before use, so a buggy or hostile producer can at worst make the
// channel fail with GDX_ERR_PROTOCOL.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace gdx::tp::shm {

static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared-memory atomics must be lock-free");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "shared-memory atomics must be lock-free");
static_assert(std::atomic_ref<uint64_t>::is_always_lock_free, "shared-memory atomics must be lock-free");

struct alignas(64) RingCtl {
    uint64_t nonce; // consumer, before the segment is shared: see ring_nonce(); the producer reads it once
    char pad0[56];
    std::atomic<uint64_t> head; // consumer: bytes released
    char pad1[56];
    std::atomic<uint32_t> sleeping; // consumer: 1 while it may block in poll(); the producer then signals
    char pad2[60];
};
static_assert(sizeof(RingCtl) == 192);

// The nonce a consumer stores in a new RingCtl, from 64 random bits: the top bit is set so that pos ^ nonce is
// never 0 (a zeroed cell) for any position below 2^63.
inline uint64_t ring_nonce(uint64_t random) { return random | (uint64_t{1} << 63); }

inline constexpr size_t kRecAlign = 64;

// Every record starts with this. `len` counts the header and the body, not the alignment padding. `seq` is
// written by the ring (RingWriter::publish), last: the position ^ the nonce (see above).
struct RecHdr {
    uint32_t len;
    uint8_t type;
    uint8_t id;     // type-specific (the active-message id)
    uint16_t flags; // type-specific
    uint64_t seq;
};
static_assert(sizeof(RecHdr) == 16 && offsetof(RecHdr, seq) == 8);
inline constexpr size_t kRecSeqOff = offsetof(RecHdr, seq);

inline constexpr uint8_t kRecPad = 0;

inline size_t rec_span(size_t len) { return (len + kRecAlign - 1) & ~(kRecAlign - 1); }

class RingWriter {
  public:
    void init(RingCtl *ctl, uint8_t *data, size_t size) {
        ctl_ = ctl;
        data_ = data;
        size_ = size;
        nonce_ = ctl->nonce;
        head_cache_ = ctl->head.load(std::memory_order_acquire);
        tail_ = head_cache_;
        npending_ = 0;
    }
    bool ready() const { return ctl_ != nullptr; }
    size_t size() const { return size_; }

    // Contiguous space for a record of `len` bytes (header included), or nullptr when the ring is full. The
    // caller writes the header's len/type/id/flags (seq is the ring's) and the body; the record becomes visible
    // at the next publish(). reserve() may be called several times before it.
    uint8_t *reserve(size_t len) {
        uint8_t *p = begin(len);
        if (p != nullptr) commit(len);
        return p;
    }
    // A record written in place whose length is known only afterwards (UCT's pack callback): begin() returns
    // contiguous space for up to `max_len` bytes (header included), or nullptr when the ring has not that much
    // free; commit() ends the record at `len` <= max_len bytes. Only the committed span is taken: the rest stays
    // free. (A PAD written by begin() to skip a too-short end of the ring stays, and is published with the next
    // record, which is harmless.)
    [[gnu::always_inline]] uint8_t *begin(size_t max_len) {
        size_t span = rec_span(max_len);
        size_t pos = tail_ & (size_ - 1);
        size_t room = size_ - pos;
        size_t need = span <= room ? span : room + span; // a PAD fills the end first
        if (!has_room(need)) return nullptr;
        if (span > room) {
            RecHdr pad{static_cast<uint32_t>(room), kRecPad, 0, 0, 0};
            std::memcpy(data_ + pos, &pad, kRecSeqOff);
            add_pending(room);
            pos = 0;
        }
        return data_ + pos;
    }
    void commit(size_t len) { add_pending(rec_span(len)); }
    // commit(len) then publish(), for the record begun last: with nothing else pending (no PAD before it, no
    // earlier commit) one store of its seq word, the small-message path.
    void commit_publish(size_t len) {
        if (npending_ == 0) [[likely]] {
            publish_at(tail_);
            tail_ += rec_span(len);
            return;
        }
        commit(len);
        publish();
    }
    // A record that fills one cell (header included, len <= kRecAlign), where that takes no PAD, no earlier record
    // waits to be published and the ring has room by what this side already knows: where it goes, or nullptr (the
    // caller then takes begin()). The caller writes the header's len/type/id/flags and the body, then
    // publish_cell(). The small-message path: no branch for what it excludes, nothing to remember in between.
    [[gnu::always_inline]] uint8_t *begin_cell() {
        const size_t pos = tail_ & (size_ - 1);
        if (npending_ != 0 || size_ - pos < kRecAlign || size_ - (tail_ - head_cache_) < kRecAlign) return nullptr;
        return data_ + pos;
    }
    [[gnu::always_inline]] void publish_cell() {
        publish_at(tail_);
        tail_ += kRecAlign;
    }
    // True when a record of `len` bytes would fit now.
    bool can_reserve(size_t len) {
        size_t span = rec_span(len);
        size_t room = size_ - (tail_ & (size_ - 1));
        return has_room(span <= room ? span : room + span);
    }
    // Makes every record committed so far visible, in order: one release store of each one's seq word, after its
    // header fields and body were written. This store is what the consumer polls (and what Channel::signal_peer's
    // Dekker handshake orders against the consumer's sleeping flag).
    void publish() {
        for (unsigned i = 0; i < npending_; ++i) publish_at(pending_[i]);
        npending_ = 0;
    }
    bool idle() { return ctl_->head.load(std::memory_order_acquire) == tail_; }

  private:
    // The release store of the seq word that makes the record at absolute position `pos` visible.
    void publish_at(uint64_t pos) {
        std::atomic_ref<uint64_t> seq(*reinterpret_cast<uint64_t *>(data_ + (pos & (size_ - 1)) + kRecSeqOff));
        seq.store(pos ^ nonce_, std::memory_order_release);
    }
    // Positions are kept here, not read back from the ring: the consumer owns that memory and could change it.
    void add_pending(size_t span) {
        if (npending_ == kMaxPending) publish(); // early, not wrong: every one of them is complete
        pending_[npending_++] = tail_;
        tail_ += span;
    }
    bool has_room(size_t need) {
        if (need > size_) return false;
        if (size_ - (tail_ - head_cache_) >= need) return true;
        head_cache_ = ctl_->head.load(std::memory_order_acquire); // only now touch the consumer's line
        uint64_t used = tail_ - head_cache_;
        return used <= size_ && size_ - used >= need;
    }
    static constexpr unsigned kMaxPending = 32;
    RingCtl *ctl_ = nullptr;
    uint8_t *data_ = nullptr;
    size_t size_ = 0;
    uint64_t nonce_ = 0;
    uint64_t tail_ = 0; // bytes committed (published up to pending_[0] when npending_)
    uint64_t head_cache_ = 0;
    unsigned npending_ = 0;
    uint64_t pending_[kMaxPending];
};

class RingReader {
  public:
    void init(RingCtl *ctl, uint8_t *data, size_t size) {
        ctl_ = ctl;
        data_ = data;
        size_ = size;
        nonce_ = ctl->nonce;
        head_ = ctl->head.load(std::memory_order_relaxed);
    }
    bool ready() const { return ctl_ != nullptr; }

    enum class Peek { Empty, Record, Corrupt };
    // The next record: *hdr is a private copy of its header, *rec points at it in the ring (body follows the
    // header). PAD records are skipped here.
    Peek peek(RecHdr *hdr, const uint8_t **rec) {
        for (;;) {
            size_t pos = head_ & (size_ - 1);
            if (!published_at(pos)) return Peek::Empty;
            std::memcpy(hdr, data_ + pos, kRecSeqOff); // after the acquire: the fields are the published ones
            hdr->seq = head_ ^ nonce_;
            size_t span = rec_span(hdr->len);
            if (hdr->len < sizeof(RecHdr) || span > size_ - pos) return Peek::Corrupt;
            if (hdr->type == kRecPad) {
                head_ += span;
                continue;
            }
            // The cell after this record, where the next look goes, was last touched a lap ago (16384 small
            // records in a 1 MiB ring) and has left this core's caches. Fetched now, it is there by the time this
            // record's handler has run; a load that misses there instead would hold up what follows it (loads
            // retire in order, and the reply UCP sends after the handler leaves the store buffer only once
            // retired). Measured with one record per probed delivery (ShmEp::deliver_probed): UCT am_lat 8 B
            // 0.270 -> 0.252 us on an H200 host, at the edge of the spread (bench/results/gpu-2026-11-27d/).
            __builtin_prefetch(data_ + ((pos + span) & (size_ - 1)) + kRecSeqOff);
            *rec = data_ + pos;
            return Peek::Record;
        }
    }
    // peek() of a record whose seq word the caller has seen published (an idle probe's acquire load of head_word(),
    // after which this thread's loads read what was written before it): no second load of that word, no loop. False
    // for a PAD or a header that fails validation, which peek() then handles.
    [[gnu::always_inline]] bool peek_announced(RecHdr *hdr, const uint8_t **rec) {
        const size_t pos = head_ & (size_ - 1);
        std::memcpy(hdr, data_ + pos, kRecSeqOff);
        const size_t span = rec_span(hdr->len);
        if (hdr->len < sizeof(RecHdr) || span > size_ - pos || hdr->type == kRecPad) [[unlikely]]
            return false;
        __builtin_prefetch(data_ + ((pos + span) & (size_ - 1)) + kRecSeqOff); // as peek() does, for the same reason
        *rec = data_ + pos;
        return true;
    }
    // Where the ring's head goes past `hdr`'s record, and the seq word (with the value it will hold) of the record
    // after it: the idle probe's word once that record is consumed (head_word() then).
    struct Next {
        uint64_t head;
        const std::atomic<uint64_t> *word;
        uint64_t expected;
    };
    [[gnu::always_inline]] Next next(const RecHdr &hdr) const {
        const uint64_t head = head_ + rec_span(hdr.len);
        return Next{head, reinterpret_cast<const std::atomic<uint64_t> *>(data_ + (head & (size_ - 1)) + kRecSeqOff),
                    head ^ nonce_};
    }
    // consume() and release() of that record, at once.
    [[gnu::always_inline]] void consume_and_release(const Next &n) {
        head_ = n.head;
        ctl_->head.store(head_, std::memory_order_release);
    }
    void consume(const RecHdr &hdr) { head_ += rec_span(hdr.len); }
    // Hands consumed bytes back to the producer (once per batch: the head line is the producer's cache miss).
    void release() { ctl_->head.store(head_, std::memory_order_release); }
    // No record (or PAD) published at the head. Hub::arm() calls it after its fence (Dekker with the producer).
    bool empty() { return !published_at(head_ & (size_ - 1)); }
    // The seq word the next record will publish, and in *expected the value it will hold then (an idle probe's
    // word, IdleProbe::add_expected). Nothing is loaded: the value is known, whatever an earlier lap left there.
    const std::atomic<uint64_t> *head_word(uint64_t *expected) const {
        static_assert(sizeof(std::atomic<uint64_t>) == sizeof(uint64_t) &&
                      alignof(std::atomic<uint64_t>) == alignof(uint64_t));
        *expected = head_ ^ nonce_;
        return reinterpret_cast<const std::atomic<uint64_t> *>(data_ + (head_ & (size_ - 1)) + kRecSeqOff);
    }
    RingCtl *ctl() const { return ctl_; }

  private:
    bool published_at(size_t pos) const {
        std::atomic_ref<uint64_t> seq(*reinterpret_cast<uint64_t *>(data_ + pos + kRecSeqOff));
        return seq.load(std::memory_order_acquire) == (head_ ^ nonce_);
    }
    RingCtl *ctl_ = nullptr;
    uint8_t *data_ = nullptr;
    size_t size_ = 0;
    uint64_t nonce_ = 0;
    uint64_t head_ = 0;
};

} // namespace gdx::tp::shm
