// The shm ring (transport/shm/ring.h) on its own, producer and consumer on two threads over one buffer, as the two
// processes use it: every record arrives once, in order, with its bytes, across thousands of laps and PAD records;
// a record ended shorter than begun takes only its own span; the consumer sees nothing before publish(); and a
// header or tail a producer must never write is reported as corrupt instead of being followed.
#include "transport/shm/ring.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

namespace gdx::test {
namespace {

using tp::shm::kRecAlign;
using tp::shm::kRecPad;
using tp::shm::RecHdr;
using tp::shm::RingCtl;
using tp::shm::RingReader;
using tp::shm::RingWriter;

// RingCtl and the records, zeroed as a fresh memfd segment is.
struct Segment {
    explicit Segment(size_t ring_size) : bytes(sizeof(RingCtl) + ring_size + kRecAlign), size(ring_size) {
        void *p = bytes.data();
        size_t space = bytes.size();
        base = static_cast<uint8_t *>(std::align(kRecAlign, sizeof(RingCtl) + ring_size, p, space));
        std::memset(base, 0, sizeof(RingCtl) + ring_size);
        new (base) RingCtl{};
    }
    RingCtl *ctl() { return reinterpret_cast<RingCtl *>(base); }
    uint8_t *data() { return base + sizeof(RingCtl); }
    std::vector<uint8_t> bytes;
    uint8_t *base = nullptr;
    size_t size;
};

// A producer and a consumer over one fresh segment.
struct RingPair {
    explicit RingPair(size_t ring_size) : seg(ring_size) {
        w.init(seg.ctl(), seg.data(), ring_size);
        r.init(seg.ctl(), seg.data(), ring_size);
    }
    Segment seg;
    RingWriter w;
    RingReader r;
};

// Ends the record begun at `p` (the caller wrote its body) and makes it visible, as Channel::end_record does.
void publish(RingWriter &w, uint8_t *p, RecHdr h) {
    std::memcpy(p, &h, sizeof(h));
    w.commit(h.len);
    w.publish();
}

// Body of record `seq`: its sequence number, then bytes derived from it.
void fill(uint8_t *body, size_t len, uint64_t seq) {
    std::memcpy(body, &seq, sizeof(seq));
    for (size_t i = sizeof(seq); i < len; ++i) body[i] = static_cast<uint8_t>(seq * 31 + i);
}
bool check(const uint8_t *body, size_t len, uint64_t seq) {
    uint64_t got;
    std::memcpy(&got, body, sizeof(got));
    if (got != seq) return false;
    for (size_t i = sizeof(seq); i < len; ++i)
        if (body[i] != static_cast<uint8_t>(seq * 31 + i)) return false;
    return true;
}

TEST(ShmRing, EveryRecordArrivesOnceInOrderAcrossLaps) {
    constexpr size_t kRing = 64 * 1024;
    constexpr uint64_t kRecords = 200000;
    RingPair ring(kRing);
    auto &[seg, w, r] = ring;

    std::atomic<bool> failed{false};
    std::thread producer([&] {
        std::mt19937_64 rng(7);
        for (uint64_t seq = 0; seq < kRecords && !failed.load();) {
            // Mostly small, some up to an eighth of the ring (the channel's largest record), some ended shorter than
            // begun (a pack callback that wrote less than it could).
            size_t body = sizeof(uint64_t) + rng() % (rng() % 8 == 0 ? kRing / 8 - 16 : 200);
            size_t max_body = (rng() % 4 == 0) ? body + rng() % 512 : body;
            uint8_t *p = w.begin(sizeof(RecHdr) + max_body);
            if (p == nullptr) {
                std::this_thread::yield(); // full: the consumer has not released yet
                continue;
            }
            fill(p + sizeof(RecHdr), body, seq);
            publish(w, p, RecHdr{static_cast<uint32_t>(sizeof(RecHdr) + body), 7, static_cast<uint8_t>(seq), 0});
            ++seq;
        }
    });

    uint64_t next = 0, polls = 0;
    while (next < kRecords && !failed.load()) {
        RecHdr h;
        const uint8_t *rec = nullptr;
        RingReader::Peek pk = r.peek(&h, &rec);
        if (pk == RingReader::Peek::Empty) {
            if (++polls % 64 == 0) r.release();
            continue;
        }
        if (pk == RingReader::Peek::Corrupt || h.type != 7 || h.id != static_cast<uint8_t>(next) ||
            !check(rec + sizeof(RecHdr), h.len - sizeof(RecHdr), next)) {
            ADD_FAILURE() << "record " << next << ": type " << int(h.type) << " id " << int(h.id) << " len " << h.len
                          << (pk == RingReader::Peek::Corrupt ? " (corrupt)" : "");
            failed = true;
            break;
        }
        r.consume(h);
        ++next;
        if (next % 8 == 0) r.release();
    }
    r.release();
    producer.join();
    EXPECT_EQ(next, kRecords);
    EXPECT_TRUE(r.empty());
    EXPECT_TRUE(w.idle());
}

TEST(ShmRing, NothingIsVisibleBeforePublishAndAShortRecordTakesOnlyItsSpan) {
    constexpr size_t kRing = 4096;
    RingPair ring(kRing);
    auto &[seg, w, r] = ring;
    RecHdr h;
    const uint8_t *rec = nullptr;

    uint8_t *p = w.begin(sizeof(RecHdr) + 1000);
    ASSERT_NE(p, nullptr);
    fill(p + sizeof(RecHdr), 40, 1);
    RecHdr first{sizeof(RecHdr) + 40, 3, 0, 0};
    std::memcpy(p, &first, sizeof(first));
    w.commit(first.len);
    EXPECT_EQ(r.peek(&h, &rec), RingReader::Peek::Empty) << "written and committed, not published";
    EXPECT_TRUE(r.empty());
    w.publish();
    ASSERT_EQ(r.peek(&h, &rec), RingReader::Peek::Record);
    EXPECT_EQ(h.len, sizeof(RecHdr) + 40);
    EXPECT_TRUE(check(rec + sizeof(RecHdr), 40, 1));
    r.consume(h);
    EXPECT_EQ(r.peek(&h, &rec), RingReader::Peek::Empty);

    // The 1000 bytes begun were not taken: the next record follows the 48-byte one directly.
    p = w.begin(sizeof(RecHdr) + 8);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p, seg.data() + 64);
}

TEST(ShmRing, AFullRingRefusesUntilTheConsumerReleases) {
    constexpr size_t kRing = 4096;
    RingPair ring(kRing);
    auto &[seg, w, r] = ring;
    unsigned n = 0;
    while (uint8_t *p = w.begin(64)) {
        fill(p + sizeof(RecHdr), 64 - sizeof(RecHdr), n++);
        publish(w, p, RecHdr{64, 1, 0, 0});
    }
    EXPECT_EQ(n, kRing / 64) << "every byte of the ring holds records";
    EXPECT_FALSE(w.can_reserve(64));
    RecHdr h;
    const uint8_t *rec = nullptr;
    for (unsigned i = 0; i < n; ++i) {
        ASSERT_EQ(r.peek(&h, &rec), RingReader::Peek::Record) << i;
        EXPECT_TRUE(check(rec + sizeof(RecHdr), 64 - sizeof(RecHdr), i));
        r.consume(h);
    }
    EXPECT_EQ(r.peek(&h, &rec), RingReader::Peek::Empty);
    EXPECT_FALSE(w.can_reserve(64)) << "consumed but not released: the producer must not overwrite it yet";
    r.release();
    EXPECT_TRUE(w.can_reserve(64));
}

TEST(ShmRing, ImpossibleHeadersAreCorruptNotFollowed) {
    constexpr size_t kRing = 4096;
    struct Case {
        const char *what;
        RecHdr h;
    };
    struct Tail {
        const char *what;
        uint64_t tail;
    };
    const Case cases[] = {
        {"shorter than a header", RecHdr{4, 1, 0, 0}},
        {"longer than what was published", RecHdr{200, 1, 0, 0}},
        {"past the end of the ring", RecHdr{kRing + 64, 1, 0, 0}},
        {"a PAD longer than what was published", RecHdr{kRing * 2, kRecPad, 0, 0}},
    };
    for (const Case &c : cases) { // one 128-byte record published, its header a lie
        Segment seg(kRing);
        RingReader r;
        r.init(seg.ctl(), seg.data(), kRing);
        std::memcpy(seg.data(), &c.h, sizeof(c.h));
        seg.ctl()->tail.store(128);
        RecHdr h;
        const uint8_t *rec = nullptr;
        EXPECT_EQ(r.peek(&h, &rec), RingReader::Peek::Corrupt) << c.what;
    }
    const Tail tails[] = {{"a tail more than a ring ahead", kRing + 64}, {"an unaligned tail", 100}};
    for (const Tail &t : tails) {
        Segment seg(kRing);
        RingReader r;
        r.init(seg.ctl(), seg.data(), kRing);
        const RecHdr ok{64, 1, 0, 0};
        std::memcpy(seg.data(), &ok, sizeof(ok));
        seg.ctl()->tail.store(t.tail);
        RecHdr h;
        const uint8_t *rec = nullptr;
        EXPECT_EQ(r.peek(&h, &rec), RingReader::Peek::Corrupt) << t.what;
    }
}

} // namespace
} // namespace gdx::test
