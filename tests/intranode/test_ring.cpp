// The shm ring (transport/shm/ring.h) on its own, producer and consumer on two threads over one buffer, as the two
// processes use it: every record arrives once, in order, with its bytes, across thousands of laps and PAD records;
// a record ended shorter than begun takes only its own span; the consumer sees nothing before publish(). Records
// publish themselves (their header's seq word is position ^ nonce), so: a header left from an earlier lap, or one
// whose seq is anything but the expected value, is no record (the ring is empty there); a published header a
// producer must never write is reported as corrupt instead of being followed. Also the intra-node address's
// version check (the ring format is what the version names).
#include "transport/shm/channel.h"
#include "transport/shm/ring.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

namespace gdx::test {
namespace {

using tp::shm::kRecAlign;
using tp::shm::kRecPad;
using tp::shm::kRecSeqOff;
using tp::shm::RecHdr;
using tp::shm::RingCtl;
using tp::shm::RingReader;
using tp::shm::RingWriter;

// RingCtl and the records, zeroed as a fresh memfd segment is, with a random nonce as Channel gives it.
struct Segment {
    explicit Segment(size_t ring_size, uint64_t seed = 1)
        : bytes(sizeof(RingCtl) + ring_size + kRecAlign), size(ring_size) {
        void *p = bytes.data();
        size_t space = bytes.size();
        base = static_cast<uint8_t *>(std::align(kRecAlign, sizeof(RingCtl) + ring_size, p, space));
        std::memset(base, 0, sizeof(RingCtl) + ring_size);
        new (base) RingCtl{};
        ctl()->nonce = tp::shm::ring_nonce(std::mt19937_64(seed)());
    }
    RingCtl *ctl() { return reinterpret_cast<RingCtl *>(base); }
    uint8_t *data() { return base + sizeof(RingCtl); }
    uint64_t expected(uint64_t pos) { return pos ^ ctl()->nonce; }
    // Writes a header at absolute position `pos` as a (hostile or stale) producer would, seq included.
    void put_header(uint64_t pos, RecHdr h) { std::memcpy(data() + (pos & (size - 1)), &h, sizeof(h)); }
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

// Ends the record begun at `p` (the caller wrote its body): its header fields, as Channel::end_record writes them.
void end(RingWriter &w, uint8_t *p, RecHdr h) {
    std::memcpy(p, &h, kRecSeqOff);
    w.commit(h.len);
}
// ... and makes it visible.
void publish(RingWriter &w, uint8_t *p, RecHdr h) {
    end(w, p, h);
    w.publish();
}

// Body of record `seq`: its sequence number, then bytes derived from it.
void fill(uint8_t *body, size_t len, uint64_t seq) {
    std::memcpy(body, &seq, sizeof(seq));
    for (size_t i = sizeof(seq); i < len; ++i)
        body[i] = static_cast<uint8_t>(seq * 31 + i);
}
bool check(const uint8_t *body, size_t len, uint64_t seq) {
    uint64_t got;
    std::memcpy(&got, body, sizeof(got));
    if (got != seq) return false;
    for (size_t i = sizeof(seq); i < len; ++i)
        if (body[i] != static_cast<uint8_t>(seq * 31 + i)) return false;
    return true;
}

// Consumes one record of `len` bytes whose body fill(.., n) wrote.
void take(RingReader &r, size_t len, uint64_t n) {
    RecHdr h;
    const uint8_t *rec = nullptr;
    ASSERT_EQ(r.peek(&h, &rec), RingReader::Peek::Record) << "record " << n;
    ASSERT_EQ(h.len, len);
    EXPECT_TRUE(check(rec + sizeof(RecHdr), len - sizeof(RecHdr), n));
    r.consume(h);
}

TEST(ShmRing, EveryRecordArrivesOnceInOrderAcrossLaps) {
    constexpr size_t kRing = 64 * 1024;
    constexpr uint64_t kRecords = 200000;
    RingPair ring(kRing);
    auto &[seg, w, r] = ring;

    std::atomic<bool> failed{false}, done{false};
    std::thread producer([&] {
        std::mt19937_64 rng(7);
        unsigned unpublished = 0;
        for (uint64_t seq = 0; seq < kRecords && !failed.load();) {
            // Mostly small, some up to an eighth of the ring (the channel's largest record), some ended shorter than
            // begun (a pack callback that wrote less than it could); published one by one or in batches of up to
            // 40 (more than the writer keeps pending: it publishes early then).
            size_t body = sizeof(uint64_t) + rng() % (rng() % 8 == 0 ? kRing / 8 - 32 : 200);
            size_t max_body = (rng() % 4 == 0) ? body + rng() % 512 : body;
            uint8_t *p = w.begin(sizeof(RecHdr) + max_body);
            if (p == nullptr) {
                w.publish(); // full: what is committed must become visible, or the consumer never frees anything
                unpublished = 0;
                std::this_thread::yield(); // the consumer has not released yet
                continue;
            }
            fill(p + sizeof(RecHdr), body, seq);
            end(w, p, RecHdr{static_cast<uint32_t>(sizeof(RecHdr) + body), 7, static_cast<uint8_t>(seq), 0, 0});
            if (++unpublished >= 1 + seq % 41) {
                w.publish();
                unpublished = 0;
            }
            ++seq;
        }
        w.publish();
        done.store(true, std::memory_order_release);
    });

    uint64_t next = 0, polls = 0;
    while (next < kRecords && !failed.load()) {
        RecHdr h;
        const uint8_t *rec = nullptr;
        RingReader::Peek pk = r.peek(&h, &rec);
        if (pk == RingReader::Peek::Empty) {
            if (++polls % 64 == 0) r.release();
            // Once the producer has published its last record, every one it wrote must be there.
            if (done.load(std::memory_order_acquire) && r.peek(&h, &rec) == RingReader::Peek::Empty) {
                ADD_FAILURE() << "the producer is done, but record " << next << " never arrived";
                break;
            }
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

    EXPECT_TRUE(r.empty()) << "a fresh (zeroed) ring";
    EXPECT_EQ(r.peek(&h, &rec), RingReader::Peek::Empty);
    uint8_t *p = w.begin(sizeof(RecHdr) + 1000);
    ASSERT_NE(p, nullptr);
    fill(p + sizeof(RecHdr), 40, 1);
    end(w, p, RecHdr{sizeof(RecHdr) + 40, 3, 0, 0, 0});
    // Two more committed behind it, also unpublished.
    for (uint64_t n = 2; n <= 3; ++n) {
        p = w.begin(sizeof(RecHdr) + 100);
        ASSERT_NE(p, nullptr);
        fill(p + sizeof(RecHdr), 100, n);
        end(w, p, RecHdr{sizeof(RecHdr) + 100, 3, 0, 0, 0});
    }
    EXPECT_EQ(r.peek(&h, &rec), RingReader::Peek::Empty) << "written and committed, not published";
    EXPECT_TRUE(r.empty());
    w.publish();
    EXPECT_FALSE(r.empty());
    take(r, sizeof(RecHdr) + 40, 1);
    take(r, sizeof(RecHdr) + 100, 2);
    take(r, sizeof(RecHdr) + 100, 3);
    EXPECT_EQ(r.peek(&h, &rec), RingReader::Peek::Empty);
    EXPECT_TRUE(r.empty());

    // The 1000 bytes begun were not taken: the records follow the 56-byte one directly (64 + 2 * 128 bytes).
    p = w.begin(sizeof(RecHdr) + 8);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p, seg.data() + 64 + 2 * 128);
}

// One-cell records (the small-message path: RingWriter::begin_cell / publish_cell), each published alone, read by
// another thread across laps, whole and in order; begin() takes over where begin_cell() declines.
TEST(ShmRing, EveryOneCellRecordArrivesWholeAcrossLaps) {
    constexpr size_t kRing = 64 * 1024;
    constexpr uint64_t kRecords = 100000; // ~100 laps
    Segment seg(kRing);
    RingWriter w;
    RingReader r;
    w.init(seg.ctl(), seg.data(), kRing);
    r.init(seg.ctl(), seg.data(), kRing);

    std::atomic<bool> stop{false};
    std::thread producer([&] {
        for (uint64_t seq = 0; seq < kRecords && !stop.load(std::memory_order_relaxed);) {
            const size_t body = sizeof(uint64_t) + seq % (kRecAlign - sizeof(RecHdr) - sizeof(uint64_t) + 1);
            uint8_t *p = w.begin_cell();
            if (p == nullptr) { // the ring's head is not released yet (or the cell path declines): wait
                if (!w.can_reserve(kRecAlign)) std::this_thread::yield();
                else if ((p = w.begin(kRecAlign)) != nullptr) {
                    fill(p + sizeof(RecHdr), body, seq);
                    publish(w, p, RecHdr{static_cast<uint32_t>(sizeof(RecHdr) + body), 5, 0, 0, 0});
                    ++seq;
                }
                continue;
            }
            fill(p + sizeof(RecHdr), body, seq);
            RecHdr h{static_cast<uint32_t>(sizeof(RecHdr) + body), 5, 0, 0, 0};
            std::memcpy(p, &h, kRecSeqOff);
            w.publish_cell();
            ++seq;
        }
    });
    uint64_t next = 0;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (next < kRecords && std::chrono::steady_clock::now() < deadline) {
        RecHdr h;
        const uint8_t *rec = nullptr;
        const RingReader::Peek pk = r.peek(&h, &rec);
        if (pk == RingReader::Peek::Empty) continue;
        const size_t body = sizeof(uint64_t) + next % (kRecAlign - sizeof(RecHdr) - sizeof(uint64_t) + 1);
        if (pk != RingReader::Peek::Record || h.type != 5 || h.len != sizeof(RecHdr) + body ||
            !check(rec + sizeof(RecHdr), body, next)) {
            ADD_FAILURE() << "record " << next << ": type " << int(h.type) << " len " << h.len;
            break;
        }
        r.consume(h);
        r.release();
        ++next;
    }
    stop.store(true);
    producer.join();
    EXPECT_EQ(next, kRecords);
}

TEST(ShmRing, AFullRingRefusesUntilTheConsumerReleases) {
    constexpr size_t kRing = 4096;
    RingPair ring(kRing);
    auto &[seg, w, r] = ring;
    unsigned n = 0;
    while (uint8_t *p = w.begin(64)) {
        fill(p + sizeof(RecHdr), 64 - sizeof(RecHdr), n++);
        publish(w, p, RecHdr{64, 1, 0, 0, 0});
    }
    EXPECT_EQ(n, kRing / 64) << "every byte of the ring holds records";
    EXPECT_FALSE(w.can_reserve(64));
    for (unsigned i = 0; i < n; ++i)
        take(r, 64, i);
    RecHdr h;
    const uint8_t *rec = nullptr;
    EXPECT_EQ(r.peek(&h, &rec), RingReader::Peek::Empty);
    EXPECT_FALSE(w.can_reserve(64)) << "consumed but not released: the producer must not overwrite it yet";
    r.release();
    EXPECT_TRUE(w.can_reserve(64));
}

TEST(ShmRing, AHeaderFromAnEarlierLapIsNoRecord) {
    // Lap 0 leaves a published record at every cell; once consumed, the same cells are where lap 1's records go.
    // Their headers carry lap 0's positions, so the consumer at lap 1 must see an empty ring, not old records.
    constexpr size_t kRing = 4096;
    RingPair ring(kRing);
    auto &[seg, w, r] = ring;
    for (unsigned i = 0; i < kRing / 64; ++i) {
        uint8_t *p = w.begin(64);
        ASSERT_NE(p, nullptr);
        fill(p + sizeof(RecHdr), 64 - sizeof(RecHdr), i);
        publish(w, p, RecHdr{64, 1, 0, 0, 0});
    }
    for (unsigned i = 0; i < kRing / 64; ++i)
        take(r, 64, i);
    r.release();
    RecHdr h;
    const uint8_t *rec = nullptr;
    EXPECT_EQ(r.peek(&h, &rec), RingReader::Peek::Empty) << "cell 0 holds lap 0's header";
    EXPECT_TRUE(r.empty());
    // One record in lap 1 (at absolute 4096, cell 0), consumed: cell 64 still holds lap 0's header.
    uint8_t *p = w.begin(64);
    ASSERT_EQ(p, seg.data());
    fill(p + sizeof(RecHdr), 64 - sizeof(RecHdr), 1000);
    end(w, p, RecHdr{64, 1, 0, 0, 0});
    EXPECT_EQ(r.peek(&h, &rec), RingReader::Peek::Empty) << "lap 1's record, not yet published, over lap 0's";
    w.publish();
    take(r, 64, 1000);
    EXPECT_EQ(r.peek(&h, &rec), RingReader::Peek::Empty) << "cell 64 holds lap 0's header";
    EXPECT_TRUE(r.empty());
    // A header of any other lap at the head's cell is still nothing.
    for (uint64_t lap : {0, 2, 3, 100}) {
        seg.put_header(64, RecHdr{64, 1, 0, 0, seg.expected(64 + lap * kRing)});
        EXPECT_EQ(r.peek(&h, &rec), RingReader::Peek::Empty) << "lap " << lap;
    }
    seg.put_header(64 + kRing, RecHdr{64, 1, 0, 0, seg.expected(64 + kRing)}); // the head's own position
    EXPECT_EQ(r.peek(&h, &rec), RingReader::Peek::Record) << "the test's own header is well formed";
}

TEST(ShmRing, AHeaderWithAnyOtherSeqIsNoRecord) {
    constexpr size_t kRing = 4096;
    Segment seg(kRing, 42);
    RingReader r;
    r.init(seg.ctl(), seg.data(), kRing);
    std::mt19937_64 rng(3);
    // Zero (a fresh segment), all ones, the seq of another position or lap, position 0 without the nonce's top bit,
    // garbage.
    const uint64_t wrong[] = {
        0,     ~uint64_t{0}, seg.expected(64), seg.expected(kRing), seg.ctl()->nonce & ~(uint64_t{1} << 63), rng(),
        rng(), rng()};
    RecHdr h;
    const uint8_t *rec = nullptr;
    for (uint64_t s : wrong) {
        ASSERT_NE(s, seg.expected(0));
        seg.put_header(0, RecHdr{64, 1, 0, 0, s});
        EXPECT_EQ(r.peek(&h, &rec), RingReader::Peek::Empty) << std::hex << s;
        EXPECT_TRUE(r.empty()) << std::hex << s;
    }
    seg.put_header(0, RecHdr{64, 1, 0, 0, seg.expected(0)});
    EXPECT_EQ(r.peek(&h, &rec), RingReader::Peek::Record);
}

TEST(ShmRing, PublishedImpossibleHeadersAreCorruptNotFollowed) {
    constexpr size_t kRing = 4096;
    struct Case {
        const char *what;
        uint64_t pos; // where the consumer's head is
        RecHdr h;
    };
    const Case cases[] = {
        {"shorter than a header", 0, RecHdr{4, 1, 0, 0, 0}},
        {"zero length", 0, RecHdr{0, 1, 0, 0, 0}},
        {"a zero-length PAD", 0, RecHdr{0, kRecPad, 0, 0, 0}},
        {"past the end of the ring", 0, RecHdr{kRing + 64, 1, 0, 0, 0}},
        {"past the end of the ring from the last cell", kRing - 64, RecHdr{128, 1, 0, 0, 0}},
        {"a PAD past the end of the ring", kRing - 128, RecHdr{kRing * 2, kRecPad, 0, 0, 0}},
        {"a huge length", 64, RecHdr{0xffffffffu, 1, 0, 0, 0}},
    };
    for (const Case &c : cases) {
        Segment seg(kRing);
        seg.ctl()->head.store(c.pos); // a consumer that has consumed up to here
        RingReader r;
        r.init(seg.ctl(), seg.data(), kRing);
        RecHdr bad = c.h;
        bad.seq = seg.expected(c.pos);
        seg.put_header(c.pos, bad);
        RecHdr h;
        const uint8_t *rec = nullptr;
        EXPECT_EQ(r.peek(&h, &rec), RingReader::Peek::Corrupt) << c.what;
    }
}

TEST(ShmRing, AddressOfAnotherVersionIsRefusedNamingBoth) {
    tp::shm::EpAddress a;
    a.host_id = 0x1122334455667788ull;
    a.uid = 1000;
    a.pid = 4242;
    a.iface_nonce = 0xdeadbeefcafef00dull;
    a.ep_id = 17;
    uint8_t raw[tp::shm::kEpAddressSize];
    tp::shm::encode_ep_address(a, raw);
    tp::shm::EpAddress d;
    std::string why;
    ASSERT_EQ(tp::shm::decode_ep_address(raw, &d, &why), GDX_OK) << why;
    EXPECT_EQ(d.host_id, a.host_id);
    EXPECT_EQ(d.uid, a.uid);
    EXPECT_EQ(d.pid, a.pid);
    EXPECT_EQ(d.iface_nonce, a.iface_nonce);
    EXPECT_EQ(d.ep_id, a.ep_id);
    EXPECT_EQ(raw[4], 2) << "the ring of self-publishing records is version 2";

    raw[4] = 1; // a gdx from before: its peer would read the ring wrongly
    EXPECT_EQ(tp::shm::decode_ep_address(raw, &d, &why), GDX_ERR_INVALID_PARAM);
    EXPECT_NE(why.find("version 1"), std::string::npos) << why;
    EXPECT_NE(why.find("speaks 2"), std::string::npos) << why;
    EXPECT_NE(why.find("same gdx"), std::string::npos) << why;

    raw[4] = 2;
    raw[0] ^= 0xff;
    EXPECT_EQ(tp::shm::decode_ep_address(raw, &d, &why), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(why.find("version"), std::string::npos) << "bad magic is not a version mismatch: " << why;
}

} // namespace
} // namespace gdx::test
