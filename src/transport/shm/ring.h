// Lock-free single-producer single-consumer ring of variable-length records, living in a shared segment.
// The consumer owns the segment (it is its receive ring); the peer process is the one producer.
//
// Layout: RingCtl (three cache lines: tail written by the producer, head written by the consumer, and the
// consumer's "sleeping" flag for wakeups), then `size` bytes of records (size a power of two). Records are
// 64-byte aligned and never wrap: when one does not fit before the end, the producer fills the rest with a PAD
// record. The producer publishes with a release store of tail; the consumer reads tail with acquire, handles
// records and publishes head with release. Counters are 64-bit byte offsets that never wrap in practice.
//
// The consumer trusts nothing it reads: every record header is copied out once and validated (length within
// the published bytes, no crossing of the end) before use, so a buggy or hostile producer can at worst make
// the channel fail with GDX_ERR_PROTOCOL.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace gdx::tp::shm {

static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared-memory atomics must be lock-free");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "shared-memory atomics must be lock-free");

struct alignas(64) RingCtl {
    std::atomic<uint64_t> tail; // producer: bytes published
    char pad0[56];
    std::atomic<uint64_t> head; // consumer: bytes released
    char pad1[56];
    std::atomic<uint32_t> sleeping; // consumer: 1 while it may block in poll(); the producer then signals
    char pad2[60];
};
static_assert(sizeof(RingCtl) == 192);

inline constexpr size_t kRecAlign = 64;

// Every record starts with this. `len` counts the header and the body, not the alignment padding.
struct RecHdr {
    uint32_t len;
    uint8_t type;
    uint8_t id;     // type-specific (the active-message id)
    uint16_t flags; // type-specific
};
static_assert(sizeof(RecHdr) == 8);

inline constexpr uint8_t kRecPad = 0;

inline size_t rec_span(size_t len) { return (len + kRecAlign - 1) & ~(kRecAlign - 1); }

class RingWriter {
  public:
    void init(RingCtl *ctl, uint8_t *data, size_t size) {
        ctl_ = ctl;
        data_ = data;
        size_ = size;
        tail_ = ctl->tail.load(std::memory_order_relaxed);
        head_cache_ = ctl->head.load(std::memory_order_acquire);
    }
    bool ready() const { return ctl_ != nullptr; }
    size_t size() const { return size_; }

    // Contiguous space for a record of `len` bytes (header included), or nullptr when the ring is full. The
    // record becomes visible at the next publish(); reserve() may be called several times before it.
    uint8_t *reserve(size_t len) {
        uint8_t *p = begin(len);
        if (p != nullptr) commit(len);
        return p;
    }
    // A record written in place whose length is known only afterwards (UCT's pack callback): begin() returns
    // contiguous space for up to `max_len` bytes (header included), or nullptr when the ring has not that much
    // free; commit() ends the record at `len` <= max_len bytes. Only the committed span is taken: the rest stays
    // free. (A PAD written by begin() to skip a too-short end of the ring stays, which is harmless.)
    uint8_t *begin(size_t max_len) {
        size_t span = rec_span(max_len);
        size_t pos = tail_ & (size_ - 1);
        size_t room = size_ - pos;
        size_t need = span <= room ? span : room + span; // a PAD fills the end first
        if (!has_room(need)) return nullptr;
        if (span > room) {
            RecHdr pad{static_cast<uint32_t>(room), kRecPad, 0, 0};
            std::memcpy(data_ + pos, &pad, sizeof(pad));
            tail_ += room;
            pos = 0;
        }
        return data_ + pos;
    }
    void commit(size_t len) { tail_ += rec_span(len); }
    // True when a record of `len` bytes would fit now.
    bool can_reserve(size_t len) {
        size_t span = rec_span(len);
        size_t room = size_ - (tail_ & (size_ - 1));
        return has_room(span <= room ? span : room + span);
    }
    void publish() { ctl_->tail.store(tail_, std::memory_order_release); }
    bool idle() { return ctl_->head.load(std::memory_order_acquire) == tail_; }

  private:
    bool has_room(size_t need) {
        if (need > size_) return false;
        if (size_ - (tail_ - head_cache_) >= need) return true;
        head_cache_ = ctl_->head.load(std::memory_order_acquire); // only now touch the consumer's line
        uint64_t used = tail_ - head_cache_;
        return used <= size_ && size_ - used >= need;
    }
    RingCtl *ctl_ = nullptr;
    uint8_t *data_ = nullptr;
    size_t size_ = 0;
    uint64_t tail_ = 0;
    uint64_t head_cache_ = 0;
};

class RingReader {
  public:
    void init(RingCtl *ctl, uint8_t *data, size_t size) {
        ctl_ = ctl;
        data_ = data;
        size_ = size;
        head_ = ctl->head.load(std::memory_order_relaxed);
        tail_cache_ = head_;
    }
    bool ready() const { return ctl_ != nullptr; }

    enum class Peek { Empty, Record, Corrupt };
    // The next record: *hdr is a private copy of its header, *rec points at it in the ring (body follows the
    // header). PAD records are skipped here.
    Peek peek(RecHdr *hdr, const uint8_t **rec) {
        for (;;) {
            if (head_ == tail_cache_) {
                tail_cache_ = ctl_->tail.load(std::memory_order_acquire);
                if (head_ == tail_cache_) return Peek::Empty;
                if (tail_cache_ - head_ > size_ || ((tail_cache_ - head_) & (kRecAlign - 1)) != 0)
                    return Peek::Corrupt;
            }
            size_t pos = head_ & (size_ - 1);
            std::memcpy(hdr, data_ + pos, sizeof(*hdr));
            uint64_t avail = tail_cache_ - head_;
            size_t span = rec_span(hdr->len);
            if (hdr->len < sizeof(RecHdr) || span > avail || span > size_ - pos) return Peek::Corrupt;
            if (hdr->type == kRecPad) {
                head_ += span;
                continue;
            }
            *rec = data_ + pos;
            return Peek::Record;
        }
    }
    void consume(const RecHdr &hdr) { head_ += rec_span(hdr.len); }
    // Hands consumed bytes back to the producer (once per batch: the head line is the producer's cache miss).
    void release() { ctl_->head.store(head_, std::memory_order_release); }
    bool empty() {
        if (head_ != tail_cache_) return false;
        tail_cache_ = ctl_->tail.load(std::memory_order_acquire);
        return head_ == tail_cache_;
    }
    RingCtl *ctl() const { return ctl_; }

  private:
    RingCtl *ctl_ = nullptr;
    uint8_t *data_ = nullptr;
    size_t size_ = 0;
    uint64_t head_ = 0;
    uint64_t tail_cache_ = 0;
};

} // namespace gdx::tp::shm
