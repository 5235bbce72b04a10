// shm active messages written in place (kCapAmInPlace: Endpoint::am_short_hdr, am_short_iov and am_bcopy_pack, what
// the UCX glue calls for am_short, am_short_iov and am_bcopy): two endpoints of one interface in one process. Every
// message is checked byte for byte and in order; back-pressure, pack callbacks returning 0 or fewer bytes than they
// could, bad arguments, the wakeup handshake's failed barrier.
#include "common.h"
#include "support/log_capture.h"
#include "transport/shm/shm_iface.h"

#include <gtest/gtest.h>

#include <cstring>
#include <deque>

namespace gdx::test {
namespace {

constexpr uint8_t kId = 4;
constexpr auto kLimit = std::chrono::milliseconds(10000);

// A connected pair a -> b on one interface, recording what arrives for kId.
class ShmAm : public ::testing::Test {
  protected:
    void open(const Config::Overrides &ov = {}) {
        ASSERT_EQ(open_transport("shm", "memory", ov, &tp), GDX_OK);
        ASSERT_TRUE(tp.iface->caps().flags & tp::kCapAmInPlace);
        ASSERT_EQ(tp.iface->set_am_handler(kId, on_am, this), GDX_OK);
        ASSERT_EQ(tp.iface->ep_create(&a), GDX_OK);
        ASSERT_EQ(tp.iface->ep_create(&b), GDX_OK);
        ASSERT_TRUE(connect_started(a->connect(b->address())));
        ASSERT_TRUE(connect_started(b->connect(a->address())));
        ASSERT_TRUE(progress_until(*tp.iface, [&] { return a->state() == GDX_OK && b->state() == GDX_OK; }, kLimit));
    }
    static void on_am(void *arg, tp::Endpoint *, const void *data, size_t len) {
        auto *self = static_cast<ShmAm *>(arg);
        const auto *p = static_cast<const uint8_t *>(data);
        self->got.emplace_back(p, p + len);
    }
    // What the UCX module hands a probed delivery (IdleProbe::deliver): a table of receivers by id, of which those
    // in `ids` may be called. kId's records its messages as on_am does and counts them apart (they must not come
    // through the handler table); every other id's fails the test.
    tp::AmSink sink(uint32_t ids) {
        for (unsigned id = 0; id < tp::kMaxAmId; ++id)
            receivers[id] = tp::AmSinkHandler{id == kId ? on_sink : on_wrong_id, this, 0};
        return tp::AmSink{receivers, ids};
    }
    static int8_t on_sink(void *arg, void *data, size_t len, unsigned flags) {
        auto *self = static_cast<ShmAm *>(arg);
        EXPECT_EQ(flags, 0u) << "the receiver may not keep the ring's buffer";
        ++self->sunk;
        on_am(arg, nullptr, data, len);
        return 0;
    }
    static int8_t on_wrong_id(void *, void *, size_t, unsigned) {
        ADD_FAILURE() << "the sink's receiver of an id it did not ask for was called";
        return 0;
    }
    // Waits for `n` messages.
    ::testing::AssertionResult receive(size_t n) {
        if (progress_until(*tp.iface, [&] { return got.size() >= n; }, kLimit) && got.size() == n)
            return ::testing::AssertionSuccess();
        return ::testing::AssertionFailure() << "received " << got.size() << " of " << n << " messages";
    }

    Opened tp;
    std::unique_ptr<tp::Endpoint> a, b;
    std::deque<std::vector<uint8_t>> got;
    size_t sunk = 0; // of those, how many came through sink()
    tp::AmSinkHandler receivers[tp::kMaxAmId] = {};
};

// What a pack callback writes: `len` pattern bytes of `seed`; counts its calls.
struct Packer {
    size_t len = 0;
    uint64_t seed = 0;
    size_t ret = SIZE_MAX; // returned instead of len when set (a callback that claims another length)
    unsigned calls = 0;
    static size_t pack(void *dst, void *arg) {
        auto *p = static_cast<Packer *>(arg);
        ++p->calls;
        fill_pattern(static_cast<uint8_t *>(dst), p->len, p->seed);
        return p->ret != SIZE_MAX ? p->ret : p->len;
    }
};

gdx_status_t send_packed(tp::Endpoint &ep, Packer &pk, size_t *len) {
    return ep.am_bcopy_pack(kId, Packer::pack, &pk, len);
}

// Every size from 0 to max_am_bcopy, odd lengths included, through the smallest ring (64 KiB: the largest message
// is 8 KiB - 8, so the ring wraps, pads its end and fills past 7/8 many times), one message at a time.
TEST_F(ShmAm, BcopyPackEverySizeByteExact) {
    open({{"GDX_SHM_RING_SIZE", "64K"}});
    const size_t max = tp.iface->caps().max_am_bcopy;
    ASSERT_EQ(max, 8192u - 16); // an eighth of the ring less the 16-byte record header (transport/shm/ring.h)
    for (size_t len = 0; len <= max; ++len) {
        Packer pk{len, len + 1};
        size_t sent = SIZE_MAX;
        gdx_status_t st;
        while ((st = send_packed(*a, pk, &sent)) == GDX_ERR_NO_RESOURCE) tp.iface->progress();
        ASSERT_EQ(st, GDX_OK) << len;
        ASSERT_EQ(sent, len);
        ASSERT_TRUE(receive(1)) << len;
        ASSERT_EQ(got[0].size(), len);
        ASSERT_EQ(check_pattern(got[0].data(), len, len + 1), -1) << "message of " << len << " bytes altered";
        got.clear();
    }
}

// am_short_iov: every total from 0 to max_am_short, cut into up to four pieces at odd places; a burst mixing it with
// am_bcopy_pack, am_bcopy and am_zcopy arrives complete and in order.
TEST_F(ShmAm, ShortIovPiecesAndMixedOrder) {
    open();
    const size_t max_short = tp.iface->caps().max_am_short;
    std::vector<uint8_t> src(tp.iface->caps().max_am_bcopy);
    for (size_t len = 0; len <= max_short; ++len) {
        fill_pattern(src.data(), len, 1000 + len);
        size_t c1 = len / 3, c2 = len / 2 + (len & 1), c3 = len - (len + 7) / 8;
        tp::AmSeg segs[4] = {{src.data(), c1}, {src.data() + c1, c2 - c1}, {nullptr, 0}, {src.data() + c2, len - c2}};
        if (c3 > c2) { // a fourth cut where there is room for one
            segs[2] = {src.data() + c2, c3 - c2};
            segs[3] = {src.data() + c3, len - c3};
        }
        ASSERT_EQ(a->am_short_iov(kId, segs), GDX_OK) << len;
        ASSERT_TRUE(receive(1)) << len;
        ASSERT_EQ(got[0].size(), len);
        ASSERT_EQ(check_pattern(got[0].data(), len, 1000 + len), -1) << "am_short_iov of " << len << " bytes altered";
        got.clear();
    }
    const unsigned n = 400;
    for (unsigned i = 0; i < n; ++i) {
        size_t len = (i * 977) % (max_short + 1); // odd lengths, all four ways of sending
        fill_pattern(src.data(), len, i);
        Packer pk{len, i};
        size_t sent = 0;
        gdx_status_t st;
        do {
            const tp::AmSeg one[1] = {{src.data(), len}};
            switch (i % 4) {
            case 0: st = a->am_short_iov(kId, one); break;
            case 1: st = send_packed(*a, pk, &sent); break;
            case 2: st = a->am_bcopy(kId, src.data(), len); break;
            default: st = a->am_zcopy(kId, nullptr, 0, src.data(), len, nullptr, nullptr); break;
            }
            if (st == GDX_ERR_NO_RESOURCE) tp.iface->progress();
        } while (st == GDX_ERR_NO_RESOURCE);
        ASSERT_EQ(st, GDX_OK) << i;
    }
    ASSERT_TRUE(receive(n));
    for (unsigned i = 0; i < n; ++i) {
        size_t len = (i * 977) % (max_short + 1);
        ASSERT_EQ(got[i].size(), len) << "message " << i << " out of order or cut";
        ASSERT_EQ(check_pattern(got[i].data(), len, i), -1) << "message " << i << " altered";
    }
}

// am_short_hdr (UCT's am_short: a header word, then the payload): every payload length up to max_am_short - 8
// arrives as one message, the header's 8 bytes first; what it refuses it refuses before writing anything.
TEST_F(ShmAm, ShortHdrEveryLengthByteExactAndRefusals) {
    open();
    const size_t max_payload = tp.iface->caps().max_am_short - sizeof(uint64_t);
    std::vector<uint8_t> src(max_payload + 1);
    for (size_t len = 0; len <= max_payload; ++len) {
        const uint64_t header = 0x1122334455667788ull ^ len;
        fill_pattern(src.data(), len, 2000 + len);
        ASSERT_EQ(a->am_short_hdr(kId, header, len != 0 ? src.data() : nullptr, len), GDX_OK) << len;
        ASSERT_TRUE(receive(1)) << len;
        ASSERT_EQ(got[0].size(), sizeof(header) + len);
        uint64_t h = 0;
        std::memcpy(&h, got[0].data(), sizeof(h));
        EXPECT_EQ(h, header) << len;
        ASSERT_EQ(check_pattern(got[0].data() + sizeof(h), len, 2000 + len), -1) << "payload of " << len << " altered";
        got.clear();
    }
    EXPECT_EQ(a->am_short_hdr(kId, 1, src.data(), max_payload + 1), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(a->am_short_hdr(kId, 1, nullptr, 1), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(a->am_short_hdr(tp::kMaxAmId, 1, src.data(), 1), GDX_ERR_INVALID_PARAM);
    std::unique_ptr<tp::Endpoint> lone;
    ASSERT_EQ(tp.iface->ep_create(&lone), GDX_OK);
    EXPECT_EQ(lone->am_short_hdr(kId, 1, src.data(), 1), GDX_ERR_NO_RESOURCE); // not connected
    lone.reset();
    for (unsigned i = 0; i < 1000; ++i) tp.iface->progress();
    EXPECT_TRUE(got.empty()) << "a refused am_short_hdr was delivered";
}

// The wakeup handshake without a sender fence relies on arm_wakeup's membarrier(): when that barrier fails after a
// successful registration (GDX_FAULT_SHM_MEMBARRIER stands for a seccomp filter added later), arm answers busy every
// time, so a caller keeps progressing instead of sleeping through a message; messages still flow. The same idle pair
// with a working barrier arms (the control: the busy answers come from the failed barrier).
TEST_F(ShmAm, FailedBarrierKeepsArmBusyAndMessagesFlow) {
    open();
    auto *sa = dynamic_cast<tp::shm::ShmEp *>(a.get());
    ASSERT_NE(sa, nullptr);
    if (!sa->channel().fence_free())
        GTEST_SKIP() << "membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) is not available here: sends keep their fence";
    ASSERT_TRUE(progress_until(*tp.iface, [&] { return tp.iface->arm_wakeup() == GDX_OK; }, kLimit));
    a.reset();
    b.reset();
    tp.iface.reset();
    open({{"GDX_FAULT_SHM_MEMBARRIER", "yes"}});
    for (int i = 0; i < 200; ++i) {
        tp.iface->progress();
        ASSERT_EQ(tp.iface->arm_wakeup(), GDX_ERR_BUSY) << "armed for sleep after a failed barrier (call " << i << ")";
    }
    ASSERT_EQ(a->am_short_hdr(kId, 7, nullptr, 0), GDX_OK);
    ASSERT_TRUE(receive(1));
    EXPECT_EQ(tp.iface->arm_wakeup(), GDX_ERR_BUSY);
}

// Without progress the ring fills: am_bcopy_pack then answers GDX_ERR_NO_RESOURCE and sends nothing; messages
// smaller than the largest still fill the ring past the room the largest needs; everything accepted arrives once, in
// order, byte-exact; after the receiver drains the ring, sending works again.
TEST_F(ShmAm, BackPressureWhenTheRingIsFull) {
    open({{"GDX_SHM_RING_SIZE", "64K"}});
    const size_t len = 100, ring = 65536, max_record = ring / 8; // a 100-byte message takes a 128-byte slot
    unsigned sent = 0, refused = 0, calls = 0;
    for (unsigned i = 0; refused < 3 && i < 10000; ++i) {
        Packer pk{len, sent};
        size_t n = 0;
        gdx_status_t st = send_packed(*a, pk, &n);
        calls += pk.calls;
        if (st == GDX_OK) {
            ASSERT_EQ(n, len);
            ASSERT_EQ(refused, 0u) << "a message went after the ring had refused one, with nothing consumed";
            ++sent;
        } else {
            ASSERT_EQ(st, GDX_ERR_NO_RESOURCE);
            ++refused;
        }
    }
    ASSERT_EQ(refused, 3u);
    EXPECT_GT(sent * 128, ring - max_record) << "small messages could not use the ring's last eighth";
    EXPECT_LE(sent * 128, ring);
    EXPECT_GE(calls, sent);
    EXPECT_LE(calls, sent + refused); // a refused message is packed at most once (while the ring looked roomy)
    ASSERT_TRUE(receive(sent));
    for (unsigned i = 0; i < sent; ++i) {
        ASSERT_EQ(got[i].size(), len);
        ASSERT_EQ(check_pattern(got[i].data(), len, i), -1) << "message " << i << " altered";
    }
    got.clear();
    Packer big{tp.iface->caps().max_am_bcopy, 9};
    size_t n = 0;
    ASSERT_EQ(send_packed(*a, big, &n), GDX_OK) << "the largest message does not fit a drained ring";
    ASSERT_TRUE(receive(1));
    EXPECT_EQ(check_pattern(got[0].data(), big.len, 9), -1);
}

// A pack callback that returns 0 sends an empty message; one that writes fewer bytes than it could sends exactly
// those; one that claims more than max_am_bcopy fails the endpoint (what lay behind may be overwritten) instead of
// sending it.
TEST_F(ShmAm, PackReturnsZeroShortAndTooMuch) {
    open();
    const size_t max = tp.iface->caps().max_am_bcopy;
    Packer zero{0, 1}, shortp{max, 2};
    shortp.ret = 3; // wrote max bytes, claims 3: only 3 go
    size_t n = SIZE_MAX;
    ASSERT_EQ(send_packed(*a, zero, &n), GDX_OK);
    EXPECT_EQ(n, 0u);
    ASSERT_EQ(send_packed(*a, shortp, &n), GDX_OK);
    EXPECT_EQ(n, 3u);
    ASSERT_TRUE(receive(2));
    EXPECT_TRUE(got[0].empty());
    ASSERT_EQ(got[1].size(), 3u);
    EXPECT_EQ(check_pattern(got[1].data(), 3, 2), -1);
    Packer over{16, 3};
    over.ret = max + 1;
    EXPECT_EQ(send_packed(*a, over, &n), GDX_ERR_INVALID_PARAM);
    EXPECT_NE(a->state(), GDX_OK);
    EXPECT_NE(send_packed(*a, zero, &n), GDX_OK);
    tp.iface->progress();
    EXPECT_EQ(got.size(), 2u) << "the overrun message was delivered";
}

// Arguments are checked before anything is written; before the connection is up, and behind a fence with an
// operation outstanding, the answer is back-pressure and the pack callback is not called.
TEST_F(ShmAm, RefusalsDoNotPack) {
    Opened t;
    ASSERT_EQ(open_transport("shm", "memory", {}, &t), GDX_OK);
    std::unique_ptr<tp::Endpoint> lone;
    ASSERT_EQ(t.iface->ep_create(&lone), GDX_OK);
    Packer pk{8, 1};
    size_t n = 0;
    EXPECT_EQ(send_packed(*lone, pk, &n), GDX_ERR_NO_RESOURCE); // not connected
    EXPECT_EQ(pk.calls, 0u);
    uint8_t b[300] = {};
    const tp::AmSeg one[1] = {{b, 8}};
    EXPECT_EQ(lone->am_short_iov(kId, one), GDX_ERR_NO_RESOURCE);

    open({{"GDX_SHM_CMA", "no"}}); // puts go through the ring: one stays outstanding until progress
    const tp::AmSeg too_long[2] = {{b, 200}, {b, tp.iface->caps().max_am_short - 199}};
    const tp::AmSeg null_data[1] = {{nullptr, 1}};
    EXPECT_EQ(a->am_short_iov(kId, too_long), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(a->am_short_iov(kId, null_data), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(a->am_short_iov(tp::kMaxAmId, one), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(a->am_bcopy_pack(tp::kMaxAmId, Packer::pack, &pk, &n), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(a->am_bcopy_pack(kId, nullptr, &pk, &n), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(pk.calls, 0u);

    std::vector<uint8_t> dst(4096), src(4096, 7);
    std::unique_ptr<tp::MemHandle> mh;
    std::unique_ptr<tp::RemoteKey> rk;
    ASSERT_EQ(tp.iface->md().mem_reg(dst.data(), dst.size(), mem::MemInfo{}, tp::kAccessRemoteWrite, &mh), GDX_OK);
    std::vector<uint8_t> packed(tp.iface->md().rkey_packed_size());
    ASSERT_EQ(mh->pack_rkey(packed), GDX_OK);
    ASSERT_EQ(tp.iface->md().rkey_unpack(packed, &rk), GDX_OK);
    tp::Completion c;
    c.count = 1;
    ASSERT_EQ(a->put(src.data(), src.size(), nullptr, reinterpret_cast<uintptr_t>(dst.data()), *rk, &c), GDX_INPROGRESS);
    ASSERT_EQ(a->fence(), GDX_OK);
    EXPECT_EQ(send_packed(*a, pk, &n), GDX_ERR_NO_RESOURCE) << "an active message overtook a fence";
    EXPECT_EQ(pk.calls, 0u);
    ASSERT_TRUE(progress_until(*tp.iface, [&] { return c.count == 0; }, kLimit));
    EXPECT_EQ(c.status, GDX_OK);
    ASSERT_EQ(send_packed(*a, pk, &n), GDX_OK);
    ASSERT_TRUE(receive(1));
    EXPECT_EQ(dst, src) << "the put before the fence did not land first";
}

// tp::Interface::quiet, what the UCX module asks before it walks the engine, the interface and its endpoints on
// each progress call: true only where progress() would find nothing. A quiet answer that hid a connection or a
// record would stall UCP, so everything here is driven by a loop that skips progress() whenever quiet() says so, as
// the module's progress does: connecting, a message in the ring and a burst of them must all still get through.
TEST_F(ShmAm, QuietOnlyWhenProgressHasNothingToDo) {
    ASSERT_EQ(open_transport("shm", "memory", {}, &tp), GDX_OK);
    ASSERT_EQ(tp.iface->set_am_handler(kId, on_am, this), GDX_OK);
    ASSERT_EQ(tp.iface->ep_create(&a), GDX_OK);
    ASSERT_EQ(tp.iface->ep_create(&b), GDX_OK);
    ASSERT_TRUE(connect_started(a->connect(b->address())));
    ASSERT_TRUE(connect_started(b->connect(a->address())));
    EXPECT_FALSE(tp.iface->quiet()) << "quiet while two channels are connecting";
    unsigned quiet = 0, busy = 0;
    auto step = [&] {
        if (tp.iface->quiet()) ++quiet;
        else {
            ++busy;
            tp.iface->progress();
        }
    };
    auto until = [&](auto done) {
        auto end = std::chrono::steady_clock::now() + kLimit;
        while (!done()) {
            step();
            if (std::chrono::steady_clock::now() > end) return false;
        }
        return true;
    };
    ASSERT_TRUE(until([&] { return a->state() == GDX_OK && b->state() == GDX_OK; })) << "connect under quiet()";

    // Up and idle: quiet, but for the hub's look at its control sockets on every 32nd call.
    quiet = busy = 0;
    for (int i = 0; i < 320; ++i) step();
    EXPECT_GE(quiet, 280u);
    EXPECT_GE(busy, 9u) << "the control-socket look never came";

    // A message in the ring: not quiet until progress() has delivered it.
    const uint64_t v = 0x1122334455667788ull;
    ASSERT_EQ(a->am_short(kId, &v, sizeof(v)), GDX_OK);
    EXPECT_FALSE(tp.iface->quiet()) << "quiet with a record in the ring";
    ASSERT_TRUE(until([&] { return !got.empty(); })) << "the message never came under quiet()";
    ASSERT_EQ(got.size(), 1u);
    ASSERT_EQ(got[0].size(), sizeof(v));
    EXPECT_EQ(std::memcmp(got[0].data(), &v, sizeof(v)), 0);

    // A burst, in order, byte-exact.
    got.clear();
    constexpr uint64_t kBurst = 5000;
    for (uint64_t i = 0; i < kBurst; ++i) {
        gdx_status_t st;
        while ((st = a->am_short(kId, &i, sizeof(i))) == GDX_ERR_NO_RESOURCE) step();
        ASSERT_EQ(st, GDX_OK) << i;
    }
    ASSERT_TRUE(until([&] { return got.size() >= kBurst; })) << got.size() << " of " << kBurst << " arrived";
    for (uint64_t i = 0; i < kBurst; ++i) {
        uint64_t w;
        ASSERT_EQ(got[i].size(), sizeof(w));
        std::memcpy(&w, got[i].data(), sizeof(w));
        ASSERT_EQ(w, i) << "out of order or altered";
    }
}

// A word announces work when it holds the value it expects, as a ring's next seq word holds the value the next
// record will publish (any other value, an earlier lap's, is quiet); a word without a delivery (here a mailbox's
// sequence number) hands nothing over.
TEST(IdleProbeWords, ChangedAndExpectedWordsAndDelivery) {
    std::atomic<uint64_t> mailbox{7}, ring_word{0x1234};
    unsigned calls = 0;
    auto deliver = [](void *ctx, tp::IdleProbe::Word *w, const tp::AmSink &sink) -> tp::IdleProbe::Delivered {
        ++*static_cast<unsigned *>(ctx);
        w->value += 64; // re-pointed: the next record's value
        return {1, sink.ids != 0};
    };
    const tp::AmSink one_id{nullptr, 1};
    tp::IdleProbe probe;
    ASSERT_TRUE(probe.add_expected(&mailbox, 8, nullptr, nullptr)); // work comes as 8; none it can deliver
    ASSERT_TRUE(probe.add_expected(&ring_word, 0x8000, &calls, deliver));
    EXPECT_TRUE(probe.quiet()) << "mailbox unchanged, ring word not yet the expected value";
    ring_word.store(0x9999); // another lap's leftover or a half-written line: not the record
    EXPECT_TRUE(probe.quiet());
    ring_word.store(0x8000);
    EXPECT_EQ(probe.changed(), 1);
    tp::IdleProbe::Delivered d = probe.deliver(1, one_id);
    EXPECT_EQ(d.n, 1u);
    EXPECT_TRUE(d.valid);
    EXPECT_EQ(calls, 1u);
    EXPECT_TRUE(probe.quiet()) << "re-pointed at 0x8040";
    mailbox.store(8);
    EXPECT_EQ(probe.changed(), 0);
    d = probe.deliver(0, one_id);
    EXPECT_EQ(d.n, 0u) << "a word without a delivery hands nothing over";
    EXPECT_FALSE(d.valid);
    d = probe.deliver(5, one_id);
    EXPECT_EQ(d.n, 0u) << "no such word";
    EXPECT_FALSE(d.valid);
    EXPECT_EQ(calls, 1u);
    for (unsigned k = probe.n; k < tp::IdleProbe::kMaxWords; ++k)
        ASSERT_TRUE(probe.add_expected(&mailbox, 9, nullptr, nullptr));
    EXPECT_FALSE(probe.add_expected(&mailbox, 9, nullptr, nullptr)) << "full";
    EXPECT_EQ(probe.changed(), 0) << "the words added last are quiet (9 has not come)";
}

// tp::IdleProbe, what the UCX module looks at without UCP's async lock between progress calls: filled where
// progress() found nothing, it must turn busy for every record a peer publishes (through the ring's wraps and pads,
// here a 64 KiB ring), be refused while a channel connects, and keep a destroyed endpoint's segment mapped until the
// next progress() (UCP's async thread may destroy one while the module's thread looks).
TEST_F(ShmAm, IdleProbeTurnsBusyForEveryRecordAndOnlyThen) {
    open({{"GDX_SHM_RING_SIZE", "64K"}});
    auto idle = [&] { return progress_until(*tp.iface, [&] { return tp.iface->progress() == 0; }, kLimit); };
    tp::IdleProbe probe;
    std::vector<uint8_t> msg(200);
    constexpr uint64_t kMessages = 3000; // 200-byte records: the 64 KiB ring wraps ~10 times
    for (uint64_t i = 0; i < kMessages; ++i) {
        ASSERT_TRUE(idle());
        ASSERT_TRUE(tp.iface->fill_idle_probe(&probe)) << "message " << i << ": no probe from an idle interface";
        ASSERT_EQ(probe.n, 2u) << "one word per endpoint, the ring's next seq word (no grant comes while idle)";
        ASSERT_TRUE(probe.quiet()) << "message " << i << ": busy with nothing sent";
        fill_pattern(msg.data(), msg.size(), i);
        ASSERT_EQ(a->am_short(kId, msg.data(), msg.size()), GDX_OK) << i;
        ASSERT_FALSE(probe.quiet()) << "message " << i << ": a record the probe did not see";
        got.clear();
        ASSERT_TRUE(receive(1)) << i;
        ASSERT_EQ(got[0].size(), msg.size());
        ASSERT_EQ(check_pattern(got[0].data(), msg.size(), i), -1) << "message " << i << " altered";
    }
}

TEST_F(ShmAm, IdleProbeRefusedWhileConnectingAndSegmentsOutliveIt) {
    open();
    std::unique_ptr<tp::Endpoint> c;
    ASSERT_EQ(tp.iface->ep_create(&c), GDX_OK);
    ASSERT_TRUE(connect_started(c->connect(a->address())));
    tp::IdleProbe probe;
    EXPECT_FALSE(tp.iface->fill_idle_probe(&probe)) << "a probe while a channel connects (no word shows a HELLO)";
    c.reset();
    ASSERT_TRUE(progress_until(*tp.iface, [&] { return tp.iface->progress() == 0; }, kLimit));
    ASSERT_TRUE(tp.iface->fill_idle_probe(&probe));
    const size_t before = mapped_segments();
    b.reset(); // as UCP's async thread may, between two looks of the module's thread
    EXPECT_EQ(mapped_segments(), before - 1) << "the peer's segment goes, this side's own stays for the probe";
    EXPECT_TRUE(probe.quiet()) << "reading the destroyed endpoint's words (still mapped)";
    tp.iface->progress();
    EXPECT_EQ(mapped_segments(), before - 2) << "the retired segment outlived the next progress()";
    // No probe handed out since that progress(): a destroyed endpoint's segments go at once (its own and its
    // mapping of the peer's).
    a.reset();
    EXPECT_EQ(mapped_segments(), before - 4);
}

// The idle look's delivery (IdleProbe::deliver, what the UCX module runs when a probe word announces work): every
// message of a burst, byte-exact and in order, through the 64 KiB ring's wraps and pads, with the probe filled once
// and valid all along (re-pointed at the ring's new head after each delivery: it announces the burst's next message
// at once, and is quiet after the last). shm delivers one record a call (ShmEp::deliver_probed says why).
TEST_F(ShmAm, ProbedDeliveryKeepsTheProbeValidThroughWrapsAndPads) {
    open({{"GDX_SHM_RING_SIZE", "64K"}});
    ASSERT_TRUE(progress_until(*tp.iface, [&] { return tp.iface->progress() == 0; }, kLimit));
    tp::IdleProbe probe;
    ASSERT_TRUE(tp.iface->fill_idle_probe(&probe));
    ASSERT_EQ(probe.n, 2u);
    std::vector<uint8_t> msg(tp.iface->caps().max_am_short);
    uint64_t seed = 0, delivered = 0;
    for (unsigned round = 0; round < 1500; ++round) {
        const unsigned burst = 1 + round % 5;
        std::vector<size_t> lens;
        for (unsigned k = 0; k < burst; ++k) {
            const size_t len = (round * 37 + k * 101) % (msg.size() + 1); // 0..max_am_short: 1 to 4 cells
            fill_pattern(msg.data(), len, ++seed);
            ASSERT_EQ(a->am_short(kId, msg.data(), len), GDX_OK) << round;
            lens.push_back(len);
        }
        unsigned n = 0;
        for (unsigned look = 0; look < burst; ++look) {
            const int i = probe.changed();
            ASSERT_GE(i, 0) << "round " << round << ": the probe missed message " << look << " of a burst";
            const tp::IdleProbe::Delivered d = probe.deliver(static_cast<unsigned>(i), sink(1u << kId));
            n += d.n;
            ASSERT_TRUE(d.valid) << "round " << round << ": active messages alone must leave the probe valid";
        }
        ASSERT_EQ(n, burst) << "round " << round;
        ASSERT_TRUE(probe.quiet()) << "round " << round << ": the re-pointed word is not quiet";
        ASSERT_EQ(got.size(), burst);
        for (unsigned k = 0; k < burst; ++k) {
            ASSERT_EQ(got[k].size(), lens[k]) << "round " << round << " message " << k;
            ASSERT_EQ(check_pattern(got[k].data(), lens[k], seed - burst + 1 + k), -1)
                << "round " << round << " message " << k << " altered";
        }
        delivered += n;
        got.clear();
    }
    EXPECT_EQ(delivered, 4500u);
    EXPECT_EQ(sunk, 4500u) << "probed deliveries go to the sink, not through the handler table";
    EXPECT_EQ(tp.iface->progress(), 0u) << "a full progress found something the probed deliveries left";
}

// It delivers only active messages of the ids asked for (the UCX module leaves the staging engine's to progress()),
// stops at anything else and says the probe no longer covers it; nothing is lost: progress() takes the rest, in order.
TEST_F(ShmAm, ProbedDeliveryLeavesWhatItMayNotDeliverToProgress) {
    open();
    constexpr uint8_t kOtherId = 9;
    std::vector<uint8_t> other_got;
    auto on_other = [](void *arg, tp::Endpoint *, const void *data, size_t len) {
        const auto *p = static_cast<const uint8_t *>(data);
        static_cast<std::vector<uint8_t> *>(arg)->assign(p, p + len);
    };
    ASSERT_EQ(tp.iface->set_am_handler(kOtherId, on_other, &other_got), GDX_OK);
    ASSERT_TRUE(progress_until(*tp.iface, [&] { return tp.iface->progress() == 0; }, kLimit));
    tp::IdleProbe probe;
    ASSERT_TRUE(tp.iface->fill_idle_probe(&probe));
    const uint8_t one[3] = {1, 2, 3}, two[5] = {5, 6, 7, 8, 9}, three[2] = {10, 11};
    ASSERT_EQ(a->am_short(kId, one, sizeof(one)), GDX_OK);
    ASSERT_EQ(a->am_short(kOtherId, two, sizeof(two)), GDX_OK);
    ASSERT_EQ(a->am_short(kId, three, sizeof(three)), GDX_OK);
    const int i = probe.changed();
    ASSERT_GE(i, 0);
    tp::IdleProbe::Delivered d = probe.deliver(static_cast<unsigned>(i), sink(0));
    EXPECT_EQ(d.n, 0u) << "no id asked for";
    EXPECT_FALSE(d.valid);
    EXPECT_TRUE(got.empty());
    d = probe.deliver(static_cast<unsigned>(i), sink(1u << kId));
    EXPECT_EQ(d.n, 1u) << "the first message";
    EXPECT_TRUE(d.valid) << "the re-pointed word covers what follows";
    ASSERT_EQ(probe.changed(), i) << "the re-pointed word announces the next record at once";
    d = probe.deliver(static_cast<unsigned>(i), sink(1u << kId));
    EXPECT_EQ(d.n, 0u) << "the next is of an id not asked for";
    EXPECT_FALSE(d.valid);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0], std::vector<uint8_t>(one, one + sizeof(one)));
    EXPECT_TRUE(other_got.empty());
    ASSERT_TRUE(progress_until(*tp.iface, [&] { return got.size() == 2; }, kLimit));
    EXPECT_EQ(other_got, std::vector<uint8_t>(two, two + sizeof(two)));
    EXPECT_EQ(got[1], std::vector<uint8_t>(three, three + sizeof(three)));
    EXPECT_EQ(sunk, 1u) << "the first through the sink; progress() hands the others to the handler table";
}

// A receiver that answers other than 0 (a UCT handler called without UCT_CB_PARAM_FLAG_DESC may not): the delivery
// logs it once, naming the id and the status, and goes on. The message counts as delivered, the bytes it got are
// right and the probe stays valid; a second refusal logs nothing more.
TEST_F(ShmAm, ProbedDeliveryLogsAReceiversStatusOnceAndGoesOn) {
    open();
    ASSERT_TRUE(progress_until(*tp.iface, [&] { return tp.iface->progress() == 0; }, kLimit));
    tp::IdleProbe probe;
    ASSERT_TRUE(tp.iface->fill_idle_probe(&probe));
    const tp::AmSink refusing = sink(1u << kId);
    receivers[kId].fn = [](void *arg, void *data, size_t len, unsigned flags) -> int8_t {
        on_sink(arg, data, len, flags);
        return -2; // UCS_ERR_NO_MESSAGE's value: any non-zero status
    };
    LogCapture log;
    const uint8_t one[3] = {1, 2, 3}, two[4] = {4, 5, 6, 7};
    ASSERT_EQ(a->am_short(kId, one, sizeof(one)), GDX_OK);
    ASSERT_EQ(a->am_short(kId, two, sizeof(two)), GDX_OK);
    for (int k = 0; k < 2; ++k) {
        const int i = probe.changed();
        ASSERT_GE(i, 0) << "message " << k;
        const tp::IdleProbe::Delivered d = probe.deliver(static_cast<unsigned>(i), refusing);
        EXPECT_EQ(d.n, 1u) << "message " << k;
        EXPECT_TRUE(d.valid) << "message " << k;
    }
    EXPECT_TRUE(probe.quiet());
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0], std::vector<uint8_t>(one, one + sizeof(one)));
    EXPECT_EQ(got[1], std::vector<uint8_t>(two, two + sizeof(two)));
    EXPECT_EQ(log.count("the receiver of active message 4 returned status -2"), 1u) << log.text();
}

} // namespace
} // namespace gdx::test
