// The tcp transport in one process (two interfaces on loopback): capabilities, registration, put/get/AM of
// many sizes and offsets compared byte for byte, flush, back-pressure, many endpoints, wakeup.
#include "core/error.h"
#include "tcp_pair.h"

#include <gtest/gtest.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <random>
#include <thread>

using namespace gdx;
using namespace gdx::test;

TEST(TcpComponent, RegisteredListsDevicesAndStatesCapabilities) {
    tp::Component *c = tp::find_component("tcp");
    ASSERT_NE(c, nullptr);
    std::vector<tp::DeviceDesc> devs;
    ASSERT_EQ(c->query_devices(&devs), GDX_OK);
    auto lo = std::find_if(devs.begin(), devs.end(), [](const tp::DeviceDesc &d) { return d.intra_node; });
    ASSERT_NE(lo, devs.end()) << "no loopback device listed";
    std::unique_ptr<tp::Interface> i;
    ASSERT_EQ(c->open(*lo, Config::defaults(), &i), GDX_OK);
    EXPECT_EQ(i->transport_name(), "tcp");
    const tp::Capabilities &caps = i->caps();
    uint32_t host = tp::type_bit(mem::MemType::HostPageable) | tp::type_bit(mem::MemType::HostPinned) |
                    tp::type_bit(mem::MemType::HostRegistered);
    EXPECT_EQ(caps.direct_types, host) << "tcp reaches host memory only";
    for (uint64_t f : {tp::kCapPut, tp::kCapGet, tp::kCapAmShort, tp::kCapAmBcopy, tp::kCapAmZcopy, tp::kCapFlush,
                       tp::kCapFence, tp::kCapWakeup, tp::kCapErrHandling})
        EXPECT_TRUE(caps.flags & f) << f;
    EXPECT_GE(caps.max_put, size_t{256} << 20);
    EXPECT_GT(caps.max_am_bcopy, caps.max_am_short);
    EXPECT_GT(caps.latency_ns, 0);
    EXPECT_GT(caps.bandwidth_Bps, 0);
    EXPECT_GE(i->wakeup_fd(), 0);
}

TEST(TcpComponent, ConfigErrorsAreClear) {
    std::unique_ptr<tp::Interface> i;
    EXPECT_EQ(tp::tcp::open_iface(config_with({{"GDX_TCP_ADDR", "not-an-ip"}}), &i), GDX_ERR_INVALID_CONFIG);
    EXPECT_NE(last_error().find("GDX_TCP_ADDR=not-an-ip"), std::string::npos) << last_error();
    Config c; // out-of-range values are refused by the config table, before any interface opens
    std::string err;
    EXPECT_EQ(Config::load({{"GDX_TCP_TX_DEPTH", "0"}}, &c, &err), GDX_ERR_INVALID_CONFIG);
    EXPECT_NE(err.find("GDX_TCP_TX_DEPTH=0"), std::string::npos) << err;
    EXPECT_EQ(tp::tcp::open_iface(config_with({{"GDX_TCP_ADDR", "192.0.2.77"}}), &i), GDX_ERR_NO_DEVICE);
    EXPECT_NE(last_error().find("192.0.2.77"), std::string::npos) << last_error();
}

TEST_F(TcpPairTest, RegistrationReachesHostMemoryOnlyAndKeysAreRandom) {
    open();
    std::vector<uint8_t> buf(8192);
    std::unique_ptr<tp::MemHandle> h1, h2, gpu;
    ASSERT_EQ(a->md().mem_reg(buf.data(), buf.size(), mem::MemInfo{}, tp::kAccessAll, &h1), GDX_OK);
    ASSERT_EQ(h1->chunks().size(), 1u);
    EXPECT_EQ(h1->chunks()[0].reach, tp::Reach::Host);
    EXPECT_TRUE(h1->direct(0, buf.size()));
    mem::MemInfo cuda;
    cuda.type = mem::MemType::CudaDevice;
    cuda.kind = mem::MemKind::Cuda;
    ASSERT_EQ(a->md().mem_reg(buf.data(), buf.size(), cuda, tp::kAccessAll, &gpu), GDX_OK);
    EXPECT_EQ(gpu->chunks()[0].reach, tp::Reach::None);
    EXPECT_NE(gpu->chunks()[0].reason.find("host memory only"), std::string::npos) << gpu->chunks()[0].reason;
    EXPECT_FALSE(gpu->direct(0, 1));
    // Two registrations of the same range get unrelated keys.
    ASSERT_EQ(a->md().mem_reg(buf.data(), buf.size(), mem::MemInfo{}, tp::kAccessAll, &h2), GDX_OK);
    std::vector<uint8_t> k1(a->md().rkey_packed_size()), k2(k1.size()), kg(k1.size());
    ASSERT_EQ(h1->pack_rkey(k1), GDX_OK);
    ASSERT_EQ(h2->pack_rkey(k2), GDX_OK);
    ASSERT_EQ(gpu->pack_rkey(kg), GDX_OK);
    EXPECT_NE(std::vector<uint8_t>(k1.begin() + 8, k1.begin() + 16), std::vector<uint8_t>(k2.begin() + 8, k2.begin() + 16));
    std::unique_ptr<tp::RemoteKey> rk;
    ASSERT_EQ(b->md().rkey_unpack(kg, &rk), GDX_OK);
    EXPECT_EQ(rk->access(), 0u) << "a key for unreachable memory opens nothing";
    // Bad arguments.
    std::unique_ptr<tp::MemHandle> h;
    EXPECT_EQ(a->md().mem_reg(nullptr, 10, mem::MemInfo{}, tp::kAccessAll, &h), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(a->md().mem_reg(buf.data(), 0, mem::MemInfo{}, tp::kAccessAll, &h), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(a->md().mem_reg(buf.data(), 10, mem::MemInfo{}, 0x100, &h), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(b->md().rkey_unpack(std::span<const uint8_t>(k1.data(), 5), &rk), GDX_ERR_INVALID_PARAM);
}

TEST_F(TcpPairTest, PutGetEverySizeAndOffsetByteForByte) {
    open_and_connect();
    const size_t kSpan = 20u << 20;
    Region tgt;
    ASSERT_NO_FATAL_FAILURE(make_region(*b, *a, kSpan, tp::kAccessRemoteRead | tp::kAccessRemoteWrite, &tgt));
    std::vector<uint8_t> src(kSpan), back(kSpan);
    std::mt19937_64 rng(12345);
    const size_t sizes[] = {0, 1, 2, 7, 63, 4095, 4096, 4097, 8191, 65537, 131071, (1u << 20) + 3, (16u << 20) + 5};
    uint64_t seed = 1;
    for (size_t len : sizes) {
        size_t off = len >= kSpan ? 0 : rng() % (kSpan - len + 1);
        if (len == 4097) off = 4096 - 1; // straddles page boundaries on both ends
        size_t soff = rng() % 4096;
        ASSERT_LE(soff + len, kSpan);
        fill_pattern(src.data() + soff, len, ++seed);
        Waiter w;
        gdx_status_t st = ea->put(src.data() + soff, len, nullptr, tgt.addr() + off, *tgt.rkey, &w);
        ASSERT_EQ(st, GDX_INPROGRESS) << len;
        ASSERT_TRUE(wait([&] { return w.done(); })) << len;
        ASSERT_EQ(w.status, GDX_OK) << len;
        ASSERT_EQ(check_pattern(tgt.mem.data() + off, len, seed), SIZE_MAX) << "put of " << len << " at " << off;
        std::memset(back.data(), 0xee, len + 1);
        Waiter g;
        ASSERT_EQ(ea->get(back.data(), len, nullptr, tgt.addr() + off, *tgt.rkey, &g), GDX_INPROGRESS);
        ASSERT_TRUE(wait([&] { return g.done(); }));
        ASSERT_EQ(g.status, GDX_OK) << len;
        ASSERT_EQ(check_pattern(back.data(), len, seed), SIZE_MAX) << "get of " << len << " at " << off;
        EXPECT_EQ(back[len], 0xee) << "get wrote past its end";
    }
}

TEST_F(TcpPairTest, ActiveMessagesShortBcopyZcopyReachHandlerIntact) {
    open_and_connect();
    struct Seen {
        std::vector<std::vector<uint8_t>> msgs;
        tp::Endpoint *ep = nullptr;
    } seen;
    auto handler = [](void *arg, tp::Endpoint *ep, const void *data, size_t len) {
        auto *s = static_cast<Seen *>(arg);
        s->ep = ep;
        s->msgs.emplace_back(static_cast<const uint8_t *>(data), static_cast<const uint8_t *>(data) + len);
    };
    ASSERT_EQ(b->set_am_handler(5, handler, &seen), GDX_OK);
    std::vector<uint8_t> data(1u << 20);
    fill_pattern(data.data(), data.size(), 99);
    const tp::Capabilities &caps = a->caps();
    ASSERT_EQ(ea->am_short(5, data.data(), caps.max_am_short), GDX_OK);
    ASSERT_EQ(ea->am_short(5, nullptr, 0), GDX_OK);
    ASSERT_EQ(ea->am_bcopy(5, data.data() + 1, caps.max_am_bcopy), GDX_OK);
    Waiter w;
    const size_t zlen = caps.max_am_zcopy - caps.max_am_short;
    ASSERT_EQ(ea->am_zcopy(5, data.data(), caps.max_am_short, data.data() + 3, zlen, nullptr, &w), GDX_INPROGRESS);
    ASSERT_TRUE(wait([&] { return seen.msgs.size() == 4 && w.done(); }));
    EXPECT_EQ(seen.ep, eb.get());
    EXPECT_EQ(seen.msgs[0], std::vector<uint8_t>(data.begin(), data.begin() + caps.max_am_short));
    EXPECT_TRUE(seen.msgs[1].empty());
    EXPECT_EQ(seen.msgs[2], std::vector<uint8_t>(data.begin() + 1, data.begin() + 1 + caps.max_am_bcopy));
    std::vector<uint8_t> z(data.begin(), data.begin() + caps.max_am_short);
    z.insert(z.end(), data.begin() + 3, data.begin() + 3 + zlen);
    EXPECT_EQ(seen.msgs[3], z) << "am_zcopy: header and payload arrive contiguous";
    // Refused locally with a reason.
    EXPECT_EQ(ea->am_short(5, data.data(), caps.max_am_short + 1), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(ea->am_bcopy(tp::kMaxAmId, data.data(), 1), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(a->set_am_handler(tp::kMaxAmId, handler, nullptr), GDX_ERR_INVALID_PARAM);
    // A reply from inside a handler works (the handler may send).
    struct Echo {
        int got = 0;
    } echo;
    ASSERT_EQ(b->set_am_handler(6, [](void *, tp::Endpoint *ep, const void *d, size_t n) { ep->am_short(7, d, n); },
                                nullptr),
              GDX_OK);
    ASSERT_EQ(a->set_am_handler(7, [](void *arg, tp::Endpoint *, const void *, size_t) { static_cast<Echo *>(arg)->got++; },
                                &echo),
              GDX_OK);
    ASSERT_EQ(ea->am_short(6, "ping", 4), GDX_OK);
    ASSERT_TRUE(wait([&] { return echo.got == 1; }));
}

TEST_F(TcpPairTest, FlushCompletesAfterEarlierPutsAreInTargetMemory) {
    open_and_connect();
    Region tgt;
    ASSERT_NO_FATAL_FAILURE(make_region(*b, *a, 4u << 20, tp::kAccessRemoteWrite, &tgt));
    std::vector<uint8_t> src(4u << 20);
    fill_pattern(src.data(), src.size(), 5);
    Waiter puts(8), fl;
    for (int i = 0; i < 8; ++i)
        ASSERT_EQ(ea->put(src.data() + i * (512u << 10), 512u << 10, nullptr, tgt.addr() + i * (512u << 10), *tgt.rkey,
                          &puts),
                  GDX_INPROGRESS);
    ASSERT_EQ(ea->fence(), GDX_OK);
    ASSERT_EQ(ea->flush(&fl), GDX_INPROGRESS);
    ASSERT_TRUE(wait([&] { return fl.done(); }));
    EXPECT_EQ(fl.status, GDX_OK);
    EXPECT_TRUE(puts.done()) << "flush completed before the puts it follows";
    EXPECT_EQ(check_pattern(tgt.mem.data(), tgt.mem.size(), 5), SIZE_MAX);
    Waiter idle;
    EXPECT_EQ(ea->flush(&idle), GDX_OK) << "nothing outstanding: flush is done at once";
}

TEST_F(TcpPairTest, BackPressureIsExplicitAndPendingRequestsRun) {
    open_and_connect({{"GDX_TCP_TX_DEPTH", "4"}});
    Region tgt;
    ASSERT_NO_FATAL_FAILURE(make_region(*b, *a, 1u << 20, tp::kAccessRemoteWrite, &tgt));
    std::vector<uint8_t> src(1u << 20, 7);
    // Nothing is progressed: the fifth operation finds the endpoint full.
    Waiter w(4);
    for (int i = 0; i < 4; ++i)
        ASSERT_EQ(ea->put(src.data(), 1024, nullptr, tgt.addr(), *tgt.rkey, &w), GDX_INPROGRESS);
    EXPECT_EQ(ea->put(src.data(), 1024, nullptr, tgt.addr(), *tgt.rkey, &w), GDX_ERR_NO_RESOURCE);
    struct Req : tp::PendingRequest {
        tp::Endpoint *ep;
        Region *tgt;
        uint8_t *src;
        Waiter done;
        int calls = 0;
    } req;
    req.ep = ea.get();
    req.tgt = &tgt;
    req.src = src.data();
    req.func = [](tp::PendingRequest *self) {
        auto *r = static_cast<Req *>(self);
        r->calls++;
        gdx_status_t st = r->ep->put(r->src, 4096, nullptr, r->tgt->addr() + 8192, *r->tgt->rkey, &r->done);
        return st == GDX_INPROGRESS ? GDX_OK : st;
    };
    ASSERT_EQ(ea->pending_add(&req), GDX_OK);
    ASSERT_TRUE(wait([&] { return w.done() && req.done.done(); }));
    EXPECT_EQ(req.done.status, GDX_OK);
    EXPECT_EQ(tgt.mem[8192], 7);
    // With room available, pending_add says so instead of queueing.
    struct Noop : tp::PendingRequest {
    } noop;
    noop.func = [](tp::PendingRequest *) { return GDX_OK; };
    EXPECT_EQ(ea->pending_add(&noop), GDX_ERR_BUSY);
    EXPECT_EQ(ea->pending_add(nullptr), GDX_ERR_INVALID_PARAM);
}

// A flush while a request is parked must not complete before it (transport/pending_queue.h).
TEST_F(TcpPairTest, FlushWaitsForParkedRequests) {
    open_and_connect({{"GDX_TCP_TX_DEPTH", "1"}});
    Region tgt;
    ASSERT_NO_FATAL_FAILURE(make_region(*b, *a, 1u << 16, tp::kAccessRemoteWrite, &tgt));
    std::vector<uint8_t> src(4096, 9);
    Waiter w(1);
    ASSERT_EQ(ea->put(src.data(), 1024, nullptr, tgt.addr(), *tgt.rkey, &w), GDX_INPROGRESS);
    ASSERT_EQ(ea->put(src.data(), 1024, nullptr, tgt.addr() + 4096, *tgt.rkey, &w), GDX_ERR_NO_RESOURCE);
    struct Req : tp::PendingRequest {
        tp::Endpoint *ep;
        Region *tgt;
        uint8_t *src;
        Waiter done{1};
    } req;
    req.ep = ea.get();
    req.tgt = &tgt;
    req.src = src.data();
    req.func = [](tp::PendingRequest *self) {
        auto *r = static_cast<Req *>(self);
        gdx_status_t st = r->ep->put(r->src, 2048, nullptr, r->tgt->addr() + 8192, *r->tgt->rkey, &r->done);
        return st == GDX_INPROGRESS ? GDX_OK : st;
    };
    ASSERT_EQ(ea->pending_add(&req), GDX_OK);
    Waiter early(1);
    EXPECT_EQ(ea->flush(&early), GDX_ERR_NO_RESOURCE) << "a flush may not overtake a parked request";
    ASSERT_TRUE(wait([&] { return w.done() && req.done.done(); }));
    EXPECT_EQ(tgt.mem[8192 + 2047], 9);
}

TEST_F(TcpPairTest, SixtyFourEndpointsInOneProcess) {
    open();
    constexpr int kEps = 64;
    std::vector<std::unique_ptr<tp::Endpoint>> as(kEps), bs(kEps);
    for (int i = 0; i < kEps; ++i) {
        ASSERT_EQ(a->ep_create(&as[i]), GDX_OK);
        ASSERT_EQ(b->ep_create(&bs[i]), GDX_OK);
    }
    auto started = [](gdx_status_t st) { return st == GDX_OK || st == GDX_INPROGRESS; };
    for (int i = 0; i < kEps; ++i) { // half the endpoints of b call connect() only after the HELLOs arrived
        ASSERT_TRUE(started(as[i]->connect(bs[i]->address())));
        if (i % 2) {
            ASSERT_TRUE(started(bs[i]->connect(as[i]->address())));
        }
    }
    progress_until({a.get(), b.get()}, [] { return false; }, std::chrono::milliseconds(200));
    for (int i = 0; i < kEps; i += 2) ASSERT_TRUE(started(bs[i]->connect(as[i]->address())));
    ASSERT_TRUE(wait([&] {
        for (int i = 0; i < kEps; ++i)
            if (as[i]->state() != GDX_OK || bs[i]->state() != GDX_OK) return false;
        return true;
    }));
    const size_t kSlice = 64 * 1024 + 17;
    Region tgt;
    ASSERT_NO_FATAL_FAILURE(make_region(*b, *a, kSlice * kEps, tp::kAccessRemoteRead | tp::kAccessRemoteWrite, &tgt));
    std::vector<uint8_t> src(kSlice * kEps), back(kSlice * kEps);
    fill_pattern(src.data(), src.size(), 64);
    Waiter puts(kEps), gets(kEps);
    for (int i = 0; i < kEps; ++i)
        ASSERT_EQ(as[i]->put(src.data() + i * kSlice, kSlice, nullptr, tgt.addr() + i * kSlice, *tgt.rkey, &puts),
                  GDX_INPROGRESS);
    ASSERT_TRUE(wait([&] { return puts.done(); }));
    ASSERT_EQ(puts.status, GDX_OK);
    for (int i = 0; i < kEps; ++i) // read each slice back through a different endpoint
        ASSERT_EQ(as[(i + 1) % kEps]->get(back.data() + i * kSlice, kSlice, nullptr, tgt.addr() + i * kSlice,
                                          *tgt.rkey, &gets),
                  GDX_INPROGRESS);
    ASSERT_TRUE(wait([&] { return gets.done(); }));
    ASSERT_EQ(gets.status, GDX_OK);
    EXPECT_EQ(check_pattern(tgt.mem.data(), tgt.mem.size(), 64), SIZE_MAX);
    EXPECT_EQ(check_pattern(back.data(), back.size(), 64), SIZE_MAX);
}

TEST_F(TcpPairTest, EndpointsOfOneInterfaceConnectToEachOther) {
    open();
    std::unique_ptr<tp::Endpoint> x, y;
    ASSERT_NO_FATAL_FAILURE(connect_pair(*a, *a, &x, &y));
    Region tgt;
    ASSERT_NO_FATAL_FAILURE(make_region(*a, *a, 4096, tp::kAccessRemoteWrite, &tgt));
    Waiter w;
    ASSERT_EQ(x->put("hello", 5, nullptr, tgt.addr(), *tgt.rkey, &w), GDX_INPROGRESS);
    ASSERT_TRUE(wait([&] { return w.done(); }));
    EXPECT_EQ(std::memcmp(tgt.mem.data(), "hello", 5), 0);
    std::unique_ptr<tp::Endpoint> z;
    ASSERT_EQ(a->ep_create(&z), GDX_OK);
    EXPECT_EQ(z->connect(z->address()), GDX_ERR_INVALID_PARAM) << "an endpoint cannot connect to itself";
    EXPECT_EQ(z->connect(std::vector<uint8_t>(7, 1)), GDX_ERR_INVALID_ADDR);
}

TEST_F(TcpPairTest, WakeupFdSleepsUntilAMessageArrives) {
    open_and_connect();
    int got = 0;
    ASSERT_EQ(b->set_am_handler(1, [](void *arg, tp::Endpoint *, const void *, size_t) { ++*static_cast<int *>(arg); },
                                &got),
              GDX_OK);
    // Drain set-up traffic until b may sleep.
    ASSERT_TRUE(wait([&] { return b->arm_wakeup() == GDX_OK; }));
    std::atomic<bool> sent{false};
    std::thread sender([&] { // a is driven by its own thread: one thread per interface is allowed
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        EXPECT_EQ(ea->am_short(1, "x", 1), GDX_OK);
        sent = true;
        progress_until({a.get()}, [&] { return a->arm_wakeup() == GDX_OK; }, std::chrono::seconds(30));
    });
    pollfd p{b->wakeup_fd(), POLLIN, 0};
    int n = 0;
    for (int i = 0; i < 100 && got == 0; ++i) { // bounded: 100 wakeups of at most 10 s
        n = ::poll(&p, 1, 10000);
        ASSERT_GE(n, 0);
        b->progress();
        while (got == 0 && b->arm_wakeup() == GDX_ERR_BUSY) b->progress();
    }
    sender.join();
    EXPECT_TRUE(sent);
    EXPECT_EQ(got, 1);
}

TEST_F(TcpPairTest, DestroyingAnEndpointCancelsItsOperations) {
    open_and_connect();
    Region tgt;
    ASSERT_NO_FATAL_FAILURE(make_region(*b, *a, 1u << 20, tp::kAccessRemoteRead, &tgt));
    std::vector<uint8_t> dst(1u << 20);
    Waiter g;
    ASSERT_EQ(ea->get(dst.data(), dst.size(), nullptr, tgt.addr(), *tgt.rkey, &g), GDX_INPROGRESS);
    ea.reset(); // completes synchronously: g may be freed right after
    EXPECT_TRUE(g.done());
    EXPECT_EQ(g.status, GDX_ERR_CANCELED);
    // The peer sees the connection end; nothing outstanding there, so it is ordinary.
    ASSERT_TRUE(wait([&] { return eb->state() != GDX_OK; }));
    EXPECT_EQ(eb->state(), GDX_ERR_CONNECTION_RESET);
}

// A small GDX_TCP_SOCKBUF must be in place before the handshake, on the connecting socket and on the listener
// (accepted sockets inherit it): the window scale is agreed there, and a buffer shrunk afterwards leaves windows
// that round to zero, so every refill waits on the kernel's persist timer (UCX's gtest pending_op took 47 s
// instead of 0.1 s that way). The scale each established connection of this process advertised says which.
TEST_F(TcpPairTest, SmallSocketBuffersAreSetBeforeTheHandshake) {
    ASSERT_NO_FATAL_FAILURE(open({{"GDX_TCP_SOCKBUF", "8K"}}));
    ASSERT_NO_FATAL_FAILURE(connect_pair(*a, *b, &ea, &eb));
    unsigned established = 0;
    for (int fd = 0; fd < 1024; ++fd) {
        tcp_info ti{};
        socklen_t len = sizeof(ti);
        if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 || ti.tcpi_state != TCP_ESTABLISHED) continue;
        ++established;
        int rcvbuf = 0;
        socklen_t rlen = sizeof(rcvbuf);
        ASSERT_EQ(getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, &rlen), 0) << std::strerror(errno);
        EXPECT_LE(rcvbuf, 2 * 8192 + 4096) << "fd " << fd << ": the kernel doubles what was set";
        EXPECT_EQ(ti.tcpi_rcv_wscale, 0) << "fd " << fd << ": window scale " << int(ti.tcpi_rcv_wscale)
                                         << " was agreed for the kernel's default buffer, not the 8K one";
    }
    EXPECT_GE(established, 2u) << "both ends of the connection";
}
