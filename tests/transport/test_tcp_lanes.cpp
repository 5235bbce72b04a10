// tcp lanes (src/transport/tcp/tcp_lane.h): large puts striped over extra connections driven by helper
// threads. Bytes compared with and without lanes and with mismatched lane counts; the two orderings a fence
// promises across the threads; flush; refused stripes; hostile LANE_HELLOs; cancellation; configuration.
#include "core/error.h"
#include "tcp_pair.h"
#include "transport/tcp/tcp_address.h"
#include "transport/tcp/tcp_internal.h"
#include "transport/wire.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

using namespace gdx;
using namespace gdx::test;
namespace wire = gdx::tp::wire;

namespace {

const tp::tcp::TcpEndpoint &tcp_ep(const std::unique_ptr<tp::Endpoint> &ep) {
    return dynamic_cast<const tp::tcp::TcpEndpoint &>(*ep);
}

// Lanes open on the first large put from either side. This one comes from the side that did not dial the
// main connection (so it asks with LANE_WANT); then waits until both endpoints have all `want` lanes (the
// passive side takes them over in progress()).
bool lanes_ready(TcpPairTest &t, unsigned want) {
    if (want == 0) return true;
    bool a_dials = tcp_ep(t.ea).dials();
    tp::Interface &target = a_dials ? *t.a : *t.b, &initiator = a_dials ? *t.b : *t.a;
    tp::Endpoint &ep = a_dials ? *t.eb : *t.ea;
    Region r;
    make_region(target, initiator, 1u << 20, tp::kAccessRemoteWrite, &r);
    std::vector<uint8_t> src(1u << 20, 3);
    Waiter w;
    if (ep.put(src.data(), src.size(), nullptr, r.addr(), *r.rkey, &w) != GDX_INPROGRESS) return false;
    return t.wait([&] { return w.done() && tcp_ep(t.ea).lanes_up() == want && tcp_ep(t.eb).lanes_up() == want; }) &&
           w.status == GDX_OK && r.mem.back() == 3;
}

// Four lanes, stripes from 64 KiB, every lane up on both sides.
void connect_four_lanes(TcpPairTest &t) {
    ASSERT_NO_FATAL_FAILURE(t.open_and_connect({{"GDX_TCP_STRIPE_MIN", "64K"}, {"GDX_TCP_LANES", "4"}}));
    ASSERT_TRUE(lanes_ready(t, 4));
}

} // namespace

struct TcpLanesTest : TcpPairTest, ::testing::WithParamInterface<const char *> {};

// Sizes around the stripe boundaries, odd lengths and offsets; both directions at once.
TEST_P(TcpLanesTest, StripedPutsLandByteExactInBothDirections) {
    const std::string lanes = GetParam();
    ASSERT_NO_FATAL_FAILURE(open_and_connect({{"GDX_TCP_LANES", lanes}, {"GDX_TCP_STRIPE_MIN", "64K"}}));
    EXPECT_EQ(tcp_ep(ea).lanes_up() + tcp_ep(eb).lanes_up(), 0u) << "lanes open only when a large put wants them";
    unsigned n = static_cast<unsigned>(std::stoul(lanes));
    ASSERT_TRUE(lanes_ready(*this, n));
    const size_t total = 24u << 20;
    Region at_b, at_a;
    ASSERT_NO_FATAL_FAILURE(make_region(*b, *a, total, tp::kAccessRemoteWrite, &at_b));
    ASSERT_NO_FATAL_FAILURE(make_region(*a, *b, total, tp::kAccessRemoteWrite, &at_a));
    std::vector<uint8_t> src_a(total), src_b(total);
    fill_pattern(src_a.data(), total, 11);
    fill_pattern(src_b.data(), total, 12);
    const size_t sizes[] = {1, 65535, 65536, 65537, 200000, 1u << 20, (3u << 20) + 7, 16u << 20};
    size_t off = 0;
    Waiter wa(static_cast<int>(std::size(sizes))), wb(static_cast<int>(std::size(sizes)));
    for (size_t len : sizes) {
        off += 3; // odd offsets on both sides
        ASSERT_LE(off + len, total);
        ASSERT_EQ(ea->put(src_a.data() + off, len, nullptr, at_b.addr() + off, *at_b.rkey, &wa), GDX_INPROGRESS);
        ASSERT_EQ(eb->put(src_b.data() + off, len, nullptr, at_a.addr() + off, *at_a.rkey, &wb), GDX_INPROGRESS);
        off += len;
        if (off + (16u << 20) + 64 > total) off = 0;
    }
    ASSERT_TRUE(wait([&] { return wa.done() && wb.done(); }));
    EXPECT_EQ(wa.status, GDX_OK);
    EXPECT_EQ(wb.status, GDX_OK);
    off = 0;
    for (size_t len : sizes) {
        off += 3;
        EXPECT_EQ(check_pattern(at_b.mem.data() + off, len, 11, off), SIZE_MAX) << "a->b " << len << " bytes";
        EXPECT_EQ(check_pattern(at_a.mem.data() + off, len, 12, off), SIZE_MAX) << "b->a " << len << " bytes";
        off += len;
        if (off + (16u << 20) + 64 > total) off = 0;
    }
    if (n > 0) {
        EXPECT_GT(tcp_ep(ea).stripes_issued(), 0u) << "puts of at least GDX_TCP_STRIPE_MIN go over the lanes";
        EXPECT_GT(tcp_ep(eb).stripes_issued(), 0u);
    } else {
        EXPECT_EQ(tcp_ep(ea).stripes_issued(), 0u);
    }
}

INSTANTIATE_TEST_SUITE_P(Lanes, TcpLanesTest, ::testing::Values("0", "1", "3", "4"));

TEST_F(TcpPairTest, LaneCountIsTheSmallerOfTheTwoAndZeroTurnsLanesOff) {
    cfg = config_with({{"GDX_TCP_LANES", "4"}});
    ASSERT_EQ(tp::tcp::open_iface(cfg, &a), GDX_OK);
    ASSERT_EQ(tp::tcp::open_iface(config_with({{"GDX_TCP_LANES", "2"}, {"GDX_TCP_LANE_THREADS", "1"}}), &b), GDX_OK);
    ASSERT_NO_FATAL_FAILURE(connect_pair(*a, *b, &ea, &eb));
    ASSERT_TRUE(lanes_ready(*this, 2));
    Region tgt;
    ASSERT_NO_FATAL_FAILURE(make_region(*b, *a, 8u << 20, tp::kAccessRemoteWrite, &tgt));
    std::vector<uint8_t> src(8u << 20);
    fill_pattern(src.data(), src.size(), 21);
    Waiter w;
    ASSERT_EQ(ea->put(src.data(), src.size(), nullptr, tgt.addr(), *tgt.rkey, &w), GDX_INPROGRESS);
    ASSERT_TRUE(wait([&] { return w.done(); }));
    EXPECT_EQ(w.status, GDX_OK);
    EXPECT_EQ(tcp_ep(ea).stripes_issued(), 2u);
    EXPECT_EQ(check_pattern(tgt.mem.data(), tgt.mem.size(), 21), SIZE_MAX);

    std::unique_ptr<tp::Interface> c;
    ASSERT_EQ(tp::tcp::open_iface(config_with({{"GDX_TCP_LANES", "0"}}), &c), GDX_OK);
    std::unique_ptr<tp::Endpoint> e1, e2;
    ASSERT_NO_FATAL_FAILURE(connect_pair(*a, *c, &e1, &e2));
    EXPECT_EQ(tcp_ep(e1).lane_count(), 0u);
    Region t2;
    ASSERT_NO_FATAL_FAILURE(make_region(*c, *a, 8u << 20, tp::kAccessRemoteWrite, &t2));
    Waiter w2;
    ASSERT_EQ(e1->put(src.data(), src.size(), nullptr, t2.addr(), *t2.rkey, &w2), GDX_INPROGRESS);
    ASSERT_TRUE(progress_until({a.get(), c.get()}, [&] { return w2.done(); }));
    EXPECT_EQ(w2.status, GDX_OK);
    EXPECT_EQ(check_pattern(t2.mem.data(), t2.mem.size(), 21), SIZE_MAX);
    e1.reset();
    e2.reset();
}

// put (striped) ; fence ; AM: the handler must find every stripe in place. Without the FENCE the AM, on the
// main connection, overtakes the stripes still in the lanes.
TEST_F(TcpPairTest, LanesOpenOnlyWhenALargePutWantsThem) {
    open_and_connect({{"GDX_TCP_LANES", "3"}});
    Region tgt;
    ASSERT_NO_FATAL_FAILURE(make_region(*b, *a, 64u << 10, tp::kAccessRemoteWrite, &tgt));
    std::vector<uint8_t> src(64u << 10, 4);
    for (int i = 0; i < 20; ++i) { // small puts, acknowledged: no lane is asked for
        Waiter w;
        ASSERT_EQ(ea->put(src.data(), src.size(), nullptr, tgt.addr(), *tgt.rkey, &w), GDX_INPROGRESS);
        ASSERT_TRUE(wait([&] { return w.done(); }));
    }
    progress_until({a.get(), b.get()}, [] { return false; }, std::chrono::milliseconds(50));
    EXPECT_EQ(tcp_ep(ea).lanes_up() + tcp_ep(eb).lanes_up(), 0u);
    EXPECT_TRUE(lanes_ready(*this, 3)) << "a large put from the side that does not dial opens the lanes";
}

TEST_F(TcpPairTest, FenceOrdersEarlierStripesBeforeALaterActiveMessage) {
    ASSERT_NO_FATAL_FAILURE(connect_four_lanes(*this));
    const size_t len = 16u << 20;
    Region tgt;
    ASSERT_NO_FATAL_FAILURE(make_region(*b, *a, len, tp::kAccessRemoteWrite, &tgt));
    std::vector<uint8_t> src(len);
    struct Seen {
        Region *tgt;
        uint64_t seed = 0;
        int handled = 0, intact = 0;
    } seen{&tgt};
    ASSERT_EQ(b->set_am_handler(3, [](void *arg, tp::Endpoint *, const void *data, size_t) {
        auto *s = static_cast<Seen *>(arg);
        uint64_t seed;
        std::memcpy(&seed, data, sizeof(seed));
        s->handled++;
        if (check_pattern(s->tgt->mem.data(), s->tgt->mem.size(), seed) == SIZE_MAX) s->intact++;
    }, &seen), GDX_OK);
    for (uint64_t round = 1; round <= 12; ++round) {
        fill_pattern(src.data(), len, 100 + round);
        Waiter w;
        ASSERT_EQ(ea->put(src.data(), len, nullptr, tgt.addr(), *tgt.rkey, &w), GDX_INPROGRESS);
        ASSERT_EQ(ea->fence(), GDX_OK);
        uint64_t seed = 100 + round;
        ASSERT_EQ(ea->am_short(3, &seed, sizeof(seed)), GDX_OK);
        ASSERT_TRUE(wait([&] { return w.done() && seen.handled == static_cast<int>(round); }));
        EXPECT_EQ(w.status, GDX_OK);
    }
    EXPECT_EQ(seen.intact, seen.handled) << "an active message after a fence saw stripes from before it missing";
}

// AM ; fence ; put (striped): the stripes must not land before the handler ran. b's progress is held back
// while its lane threads, which need no progress, could land the stripes.
TEST_F(TcpPairTest, FenceOrdersAnEarlierActiveMessageBeforeLaterStripes) {
    ASSERT_NO_FATAL_FAILURE(connect_four_lanes(*this));
    const size_t len = 4u << 20;
    Region tgt;
    ASSERT_NO_FATAL_FAILURE(make_region(*b, *a, len, tp::kAccessRemoteWrite, &tgt));
    std::vector<uint8_t> src(len, 0xab);
    struct Seen {
        Region *tgt;
        int handled = 0, untouched = 0;
    } seen{&tgt};
    ASSERT_EQ(b->set_am_handler(4, [](void *arg, tp::Endpoint *, const void *, size_t) {
        auto *s = static_cast<Seen *>(arg);
        s->handled++;
        bool clean = true;
        for (size_t i = 0; i < s->tgt->mem.size(); i += 4096) clean &= s->tgt->mem[i] == 0;
        if (clean) s->untouched++;
    }, &seen), GDX_OK);
    for (int round = 1; round <= 6; ++round) {
        std::fill(tgt.mem.begin(), tgt.mem.end(), 0);
        ASSERT_EQ(ea->am_short(4, "x", 1), GDX_OK);
        ASSERT_EQ(ea->fence(), GDX_OK);
        Waiter w;
        ASSERT_EQ(ea->put(src.data(), len, nullptr, tgt.addr(), *tgt.rkey, &w), GDX_INPROGRESS);
        progress_until({a.get()}, [] { return false; }, std::chrono::milliseconds(100)); // only a moves
        ASSERT_TRUE(wait([&] { return w.done() && seen.handled == round; }));
        EXPECT_EQ(w.status, GDX_OK);
        EXPECT_EQ(tgt.mem[len - 1], 0xab);
    }
    EXPECT_EQ(seen.untouched, seen.handled) << "stripes issued after a fence landed before the message before it";
}

TEST_F(TcpPairTest, FlushWaitsForEveryStripeOfEarlierPuts) {
    ASSERT_NO_FATAL_FAILURE(connect_four_lanes(*this));
    Region tgt;
    ASSERT_NO_FATAL_FAILURE(make_region(*b, *a, 32u << 20, tp::kAccessRemoteWrite, &tgt));
    std::vector<uint8_t> src(32u << 20);
    fill_pattern(src.data(), src.size(), 31);
    Waiter puts(4), fl;
    for (int i = 0; i < 4; ++i)
        ASSERT_EQ(ea->put(src.data() + i * (8u << 20), 8u << 20, nullptr, tgt.addr() + i * (8u << 20), *tgt.rkey,
                          &puts),
                  GDX_INPROGRESS);
    ASSERT_EQ(ea->flush(&fl), GDX_INPROGRESS);
    ASSERT_TRUE(wait([&] { return fl.done(); }));
    EXPECT_EQ(fl.status, GDX_OK);
    EXPECT_TRUE(puts.done()) << "flush completed before the striped puts it follows";
    EXPECT_EQ(check_pattern(tgt.mem.data(), tgt.mem.size(), 31), SIZE_MAX);
    Waiter idle;
    EXPECT_EQ(ea->flush(&idle), GDX_OK) << "nothing outstanding: flush is done at once";
}

// A stripe aimed at a revoked registration is refused by the target's lane thread: the put fails with
// GDX_ERR_ACCESS_DENIED, nothing is written, and the endpoint goes on working.
TEST_F(TcpPairTest, StripeToARevokedKeyIsRefusedAndTheEndpointCarriesOn) {
    ASSERT_NO_FATAL_FAILURE(connect_four_lanes(*this));
    Region good, gone;
    ASSERT_NO_FATAL_FAILURE(make_region(*b, *a, 2u << 20, tp::kAccessRemoteWrite, &good));
    ASSERT_NO_FATAL_FAILURE(make_region(*b, *a, 2u << 20, tp::kAccessRemoteWrite, &gone));
    gone.handle.reset(); // revoked; a still holds its key
    std::vector<uint8_t> src(2u << 20, 0x5a);
    Waiter bad;
    ASSERT_EQ(ea->put(src.data(), src.size(), nullptr, gone.addr(), *gone.rkey, &bad), GDX_INPROGRESS);
    ASSERT_TRUE(wait([&] { return bad.done(); }));
    EXPECT_EQ(bad.status, GDX_ERR_ACCESS_DENIED);
    EXPECT_TRUE(std::all_of(gone.mem.begin(), gone.mem.end(), [](uint8_t v) { return v == 0; }));
    Waiter ok;
    ASSERT_EQ(ea->put(src.data(), src.size(), nullptr, good.addr(), *good.rkey, &ok), GDX_INPROGRESS);
    ASSERT_TRUE(wait([&] { return ok.done(); }));
    EXPECT_EQ(ok.status, GDX_OK);
    EXPECT_EQ(good.mem.back(), 0x5a);
    EXPECT_EQ(ea->state(), GDX_OK);
}

// LANE_HELLOs that name no endpoint, or a lane already taken, are refused; the connected pair is unaffected.
TEST_F(TcpPairTest, LaneHellosFromStrangersAreRefused) {
    open_and_connect({{"GDX_TCP_LANES", "4"}});
    ASSERT_TRUE(lanes_ready(*this, 4));
    tp::tcp::TcpAddress addr;
    std::string why;
    ASSERT_EQ(tp::tcp::decode_address(eb->address(), &addr, &why), GDX_OK) << why;
    tp::tcp::TcpAddress peer;
    ASSERT_EQ(tp::tcp::decode_address(ea->address(), &peer, &why), GDX_OK) << why;
    struct Case {
        uint64_t src_iface, src_ep, dst_ep;
        uint16_t lane;
    } cases[] = {
        {peer.iface_id, peer.ep_id, 0x1234, 0},          // no such endpoint
        {peer.iface_id, peer.ep_id, addr.ep_id, 2},      // lane 2 is connected already
        {peer.iface_id, peer.ep_id, addr.ep_id, 9},      // not agreed
        {peer.iface_id ^ 1, peer.ep_id, addr.ep_id, 0},  // not the endpoint b is connected to
    };
    for (const Case &c : cases) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        ASSERT_GE(fd, 0);
        sockaddr_in sa{};
        sa.sin_family = AF_INET;
        sa.sin_port = htons(addr.port);
        std::memcpy(&sa.sin_addr, addr.ip.data(), 4);
        ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr *>(&sa), sizeof(sa)), 0);
        uint8_t hello[wire::kHeaderSize + wire::kHelloBodySize];
        wire::encode_header({wire::MsgType::LaneHello, GDX_OK, c.src_iface, c.src_ep, c.dst_ep, wire::kHelloBodySize},
                            hello);
        wire::encode_hello_body({64, c.lane}, hello + wire::kHeaderSize);
        ASSERT_EQ(send(fd, hello, sizeof(hello), MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(hello)));
        uint8_t byte;
        bool closed = wait([&] {
            ssize_t n = recv(fd, &byte, 1, MSG_DONTWAIT);
            return n == 0 || (n < 0 && errno != EAGAIN);
        });
        EXPECT_TRUE(closed) << "lane " << c.lane << " to endpoint " << c.dst_ep << " was not refused";
        ::close(fd);
    }
    EXPECT_EQ(ea->state(), GDX_OK);
    EXPECT_EQ(eb->state(), GDX_OK);
    Region tgt;
    ASSERT_NO_FATAL_FAILURE(make_region(*b, *a, 4u << 20, tp::kAccessRemoteWrite, &tgt));
    std::vector<uint8_t> src(4u << 20, 9);
    Waiter w;
    ASSERT_EQ(ea->put(src.data(), src.size(), nullptr, tgt.addr(), *tgt.rkey, &w), GDX_INPROGRESS);
    ASSERT_TRUE(wait([&] { return w.done(); }));
    EXPECT_EQ(w.status, GDX_OK);
    EXPECT_EQ(tgt.mem.back(), 9);
}

// Destroying an endpoint with stripes in flight completes them (CANCELED, or OK for those already
// acknowledged) before the destructor returns; the peer's endpoint learns its connection ended.
TEST_F(TcpPairTest, DestroyingAnEndpointCancelsItsStripesInFlight) {
    ASSERT_NO_FATAL_FAILURE(connect_four_lanes(*this));
    Region tgt;
    ASSERT_NO_FATAL_FAILURE(make_region(*b, *a, 64u << 20, tp::kAccessRemoteWrite, &tgt));
    std::vector<uint8_t> src(64u << 20, 1);
    Waiter w(4);
    for (int i = 0; i < 4; ++i)
        ASSERT_EQ(ea->put(src.data() + i * (16u << 20), 16u << 20, nullptr, tgt.addr() + i * (16u << 20), *tgt.rkey,
                          &w),
                  GDX_INPROGRESS);
    ea.reset();
    EXPECT_TRUE(w.done()) << "the destructor returned with operations outstanding";
    EXPECT_TRUE(w.status == GDX_ERR_CANCELED || w.status == GDX_OK) << gdx_status_string(w.status);
    ASSERT_TRUE(progress_until({b.get()}, [&] { return eb->state() != GDX_OK; }));
}

TEST(TcpComponent, LaneSettingsAreChecked) {
    // Out-of-range lane settings are refused where they enter (Config::load, the config table's ranges), naming
    // the variable and the range; the interface never sees them.
    Config c;
    std::string err;
    EXPECT_EQ(Config::load({{"GDX_TCP_LANES", "33"}}, &c, &err), GDX_ERR_INVALID_CONFIG);
    EXPECT_NE(err.find("GDX_TCP_LANES=33"), std::string::npos) << err;
    EXPECT_EQ(Config::load({{"GDX_TCP_LANES", "many"}}, &c, &err), GDX_ERR_INVALID_CONFIG);
    EXPECT_NE(err.find("auto or 0..32"), std::string::npos) << err;
    std::unique_ptr<tp::Interface> i;
    EXPECT_EQ(tp::tcp::open_iface(config_with({{"GDX_TCP_LANES", "auto"}}), &i), GDX_OK);
    EXPECT_EQ(Config::load({{"GDX_TCP_LANE_THREADS", "0"}}, &c, &err), GDX_ERR_INVALID_CONFIG);
    EXPECT_NE(err.find("GDX_TCP_LANE_THREADS"), std::string::npos) << err;
    EXPECT_EQ(Config::load({{"GDX_TCP_STRIPE_MIN", "1K"}}, &c, &err), GDX_ERR_INVALID_CONFIG);
    EXPECT_NE(err.find("GDX_TCP_STRIPE_MIN"), std::string::npos) << err;
}
