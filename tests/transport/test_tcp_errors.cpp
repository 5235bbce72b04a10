// The tcp transport refusing what it must: bad remote keys (both sides log, the initiator's completion gets
// GDX_ERR_ACCESS_DENIED, target memory untouched), malformed wire messages from a raw socket (connection
// closed with GDX_ERR_PROTOCOL logged, process and interface fine), silent peers and set-up timeouts.
#include "core/error.h"
#include "support/log_capture.h"
#include "tcp_pair.h"
#include "transport/rkey_table.h"
#include "transport/tcp/tcp_address.h"
#include "transport/wire.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fstream>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

using namespace gdx;
using namespace gdx::test;
namespace wire = gdx::tp::wire;

namespace {

std::unique_ptr<tp::RemoteKey> forged(tp::Interface &peer, uint64_t key_id, uint64_t base, uint64_t len, unsigned access) {
    uint8_t k[wire::kPackedRkeySize];
    wire::encode_rkey({wire::TransportId::Tcp, access, key_id, base, len}, k);
    std::unique_ptr<tp::RemoteKey> out;
    EXPECT_EQ(peer.md().rkey_unpack(k, &out), GDX_OK);
    return out;
}


} // namespace

TEST_F(TcpPairTest, BadRemoteKeysAreRefusedLoggedAndLeaveMemoryUntouched) {
    open_and_connect();
    LogCapture log;
    // The registration sits inside a larger buffer whose guard bytes must never change.
    std::vector<uint8_t> big(3 * 4096, 0xab);
    std::unique_ptr<tp::MemHandle> h, ro_h;
    ASSERT_EQ(b->md().mem_reg(big.data() + 4096, 4096, mem::MemInfo{}, tp::kAccessRemoteRead | tp::kAccessRemoteWrite, &h),
              GDX_OK);
    ASSERT_EQ(b->md().mem_reg(big.data() + 4096, 4096, mem::MemInfo{}, tp::kAccessRemoteRead, &ro_h), GDX_OK);
    std::vector<uint8_t> packed(wire::kPackedRkeySize), ro_packed(wire::kPackedRkeySize);
    ASSERT_EQ(h->pack_rkey(packed), GDX_OK);
    ASSERT_EQ(ro_h->pack_rkey(ro_packed), GDX_OK);
    std::unique_ptr<tp::RemoteKey> rk, ro;
    ASSERT_EQ(a->md().rkey_unpack(packed, &rk), GDX_OK);
    ASSERT_EQ(a->md().rkey_unpack(ro_packed, &ro), GDX_OK);
    uint64_t base = reinterpret_cast<uintptr_t>(big.data() + 4096);
    uint64_t key = wire::load_le64(packed.data() + 8), ro_key = wire::load_le64(ro_packed.data() + 8);
    std::vector<uint8_t> src(8192, 0x11), dst(8192, 0);

    auto remote_denied = [&](const char *what, bool is_put, const tp::RemoteKey &k, uint64_t addr, size_t len) {
        Waiter w;
        gdx_status_t st = is_put ? ea->put(src.data(), len, nullptr, addr, k, &w)
                                 : ea->get(dst.data(), len, nullptr, addr, k, &w);
        ASSERT_EQ(st, GDX_INPROGRESS) << what;
        ASSERT_TRUE(wait([&] { return w.done(); })) << what;
        EXPECT_EQ(w.status, GDX_ERR_ACCESS_DENIED) << what;
    };
    uint64_t random_id = 0;
    ASSERT_EQ(tp::secure_random_u64(&random_id), GDX_OK);
    auto guessed = forged(*a, random_id, base, 4096, tp::kAccessRemoteRead | tp::kAccessRemoteWrite);
    remote_denied("random key id", true, *guessed, base, 16);
    auto widened = forged(*a, key, base - 4096, 3 * 4096, tp::kAccessRemoteRead | tp::kAccessRemoteWrite);
    remote_denied("range widened in the packed key", true, *widened, base - 4096, 8192);
    remote_denied("range widened in the packed key (get)", false, *widened, base + 4000, 200);
    auto upgraded = forged(*a, ro_key, base, 4096, tp::kAccessRemoteRead | tp::kAccessRemoteWrite);
    remote_denied("rights upgraded in the packed key", true, *upgraded, base, 16);

    // Refused by the initiator without a round trip when its own key says no.
    Waiter unused;
    EXPECT_EQ(ea->put(src.data(), 16, nullptr, base + 4090, *rk, &unused), GDX_ERR_ACCESS_DENIED);
    EXPECT_EQ(ea->put(src.data(), 16, nullptr, base, *ro, &unused), GDX_ERR_ACCESS_DENIED);
    EXPECT_EQ(ea->get(dst.data(), 16, nullptr, base - 1, *rk, &unused), GDX_ERR_ACCESS_DENIED);

    // Deregistration revokes: the same key, once valid, opens nothing.
    ro_h.reset();
    h.reset();
    remote_denied("revoked key (put)", true, *rk, base, 16);
    remote_denied("revoked key (get)", false, *ro, base, 16);
    EXPECT_EQ(unused.fired, 0);

    for (size_t i = 0; i < big.size(); ++i) ASSERT_EQ(big[i], 0xab) << "target byte " << i << " changed";
    std::string text = log.text();
    EXPECT_NE(text.find("PUT of 16 bytes"), std::string::npos) << text;
    EXPECT_NE(text.find("opens no registration here"), std::string::npos) << text;  // target: unknown key
    EXPECT_NE(text.find("outside registration"), std::string::npos) << text;        // target: range
    EXPECT_NE(text.find("grants remote-read, the request needs remote-write"), std::string::npos) << text;
    EXPECT_NE(text.find("failed at"), std::string::npos) << text;                   // initiator's line
    EXPECT_NE(text.find("remote access denied"), std::string::npos) << text;

    // The connection survived every refusal.
    Region ok;
    ASSERT_NO_FATAL_FAILURE(make_region(*b, *a, 64, tp::kAccessRemoteWrite, &ok));
    Waiter w;
    ASSERT_EQ(ea->put(src.data(), 64, nullptr, ok.addr(), *ok.rkey, &w), GDX_INPROGRESS);
    ASSERT_TRUE(wait([&] { return w.done(); }));
    EXPECT_EQ(w.status, GDX_OK);
    EXPECT_EQ(ok.mem[63], 0x11);
}

TEST_F(TcpPairTest, LocalArgumentsAreChecked) {
    open_and_connect();
    Region tgt;
    ASSERT_NO_FATAL_FAILURE(make_region(*b, *a, 4096, tp::kAccessAll, &tgt));
    std::vector<uint8_t> buf(4096);
    Waiter w;
    EXPECT_EQ(ea->put(nullptr, 10, nullptr, tgt.addr(), *tgt.rkey, &w), GDX_ERR_INVALID_PARAM);
    mem::MemInfo cuda;
    cuda.type = mem::MemType::CudaDevice;
    std::unique_ptr<tp::MemHandle> gpu, small;
    ASSERT_EQ(a->md().mem_reg(buf.data(), buf.size(), cuda, tp::kAccessAll, &gpu), GDX_OK);
    EXPECT_EQ(ea->put(buf.data(), 10, gpu.get(), tgt.addr(), *tgt.rkey, &w), GDX_ERR_UNSUPPORTED);
    EXPECT_NE(last_error().find("host memory only"), std::string::npos) << last_error();
    ASSERT_EQ(a->md().mem_reg(buf.data(), 100, mem::MemInfo{}, tp::kAccessLocalRead, &small), GDX_OK);
    EXPECT_EQ(ea->put(buf.data() + 50, 100, small.get(), tgt.addr(), *tgt.rkey, &w), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(ea->get(buf.data(), 10, small.get(), tgt.addr(), *tgt.rkey, &w), GDX_ERR_INVALID_PARAM)
        << "registered without local-write";
    EXPECT_EQ(w.fired, 0);
}

namespace {

int raw_connect(const tp::tcp::TcpAddress &to) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_GE(fd, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(to.port);
    std::memcpy(&sa.sin_addr, to.ip.data(), 4);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr *>(&sa), sizeof(sa)), 0) << strerror(errno);
    return fd;
}

void send_all(int fd, const void *p, size_t n) { ASSERT_EQ(::send(fd, p, n, MSG_NOSIGNAL), static_cast<ssize_t>(n)); }

// True once the interface closed the raw socket (recv sees EOF or a reset), progressing it meanwhile.
bool closed_by_peer(tp::Interface &iface, int fd) {
    return progress_until({&iface}, [&] {
        char c[256];
        ssize_t n = ::recv(fd, c, sizeof(c), MSG_DONTWAIT);
        return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
    }, std::chrono::seconds(60));
}

std::vector<uint8_t> hello(wire::MsgType t, uint64_t iface_id, uint64_t src_ep, uint64_t dst_ep) {
    std::vector<uint8_t> b(wire::kHeaderSize + wire::kHelloBodySize);
    wire::encode_header({t, GDX_OK, iface_id, src_ep, dst_ep, wire::kHelloBodySize}, b.data());
    wire::encode_hello_body({16}, b.data() + wire::kHeaderSize);
    return b;
}

} // namespace

TEST_F(TcpPairTest, MalformedWireMessagesCloseTheConnectionWithProtocolError) {
    open();
    LogCapture log;
    std::unique_ptr<tp::Endpoint> victim;
    ASSERT_EQ(b->ep_create(&victim), GDX_OK);
    tp::tcp::TcpAddress where;
    std::string why;
    ASSERT_EQ(tp::tcp::decode_address(victim->address(), &where, &why), GDX_OK);

    struct Case {
        const char *name;
        std::vector<uint8_t> bytes;
        bool close_after;
        const char *logged;
    };
    std::vector<uint8_t> garbage(64);
    for (size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<uint8_t>(i * 37 + 11);
    auto h = hello(wire::MsgType::Hello, 5, 6, where.ep_id);
    std::vector<uint8_t> oversized(wire::kHeaderSize);
    wire::encode_header({wire::MsgType::Am, GDX_OK, 0, 1, 0, uint64_t{1} << 40}, oversized.data());
    std::vector<uint8_t> truncated(h.begin(), h.begin() + 20);
    std::vector<Case> cases = {
        {"garbage", garbage, false, "bad magic"},
        {"truncated header then close", truncated, true, "truncated message"},
        {"oversized header", oversized, false, "exceeds the limit"},
        {"HELLO for an unknown endpoint", hello(wire::MsgType::Hello, 5, 6, 0x1234), false, "does not exist here"},
        {"PUT before HELLO", std::vector<uint8_t>(h.begin(), h.begin() + 40), false, "unexpected"},
    };
    // "PUT before HELLO": a PUT header where HELLO must come.
    wire::encode_header({wire::MsgType::Put, GDX_OK, 1, 2, 0, 0}, cases.back().bytes.data());
    cases.back().logged = "before the connection was established";
    for (const Case &c : cases) {
        int fd = raw_connect(where);
        ASSERT_NO_FATAL_FAILURE(send_all(fd, c.bytes.data(), c.bytes.size()));
        if (c.close_after) shutdown(fd, SHUT_WR);
        EXPECT_TRUE(closed_by_peer(*b, fd)) << c.name;
        ::close(fd);
        std::string text = log.text();
        EXPECT_NE(text.find(c.logged), std::string::npos) << c.name << "\n" << text;
    }
    EXPECT_NE(log.text().find("protocol error"), std::string::npos);

    // A raw socket that passes HELLO (it knows the ids) and then misbehaves: the endpoint fails with
    // GDX_ERR_PROTOCOL, nothing else does.
    tp::tcp::TcpAddress fake = where;
    fake.iface_id = 1; // smallest ids: the victim waits to be dialled
    fake.ep_id = 1;
    std::vector<uint8_t> fake_blob(tp::tcp::kAddressSize);
    tp::tcp::encode_address(fake, fake_blob.data());
    ASSERT_EQ(victim->connect(fake_blob), GDX_INPROGRESS);
    int fd = raw_connect(where);
    auto good_hello = hello(wire::MsgType::Hello, 1, 1, where.ep_id);
    ASSERT_NO_FATAL_FAILURE(send_all(fd, good_hello.data(), good_hello.size()));
    ASSERT_TRUE(progress_until({b.get()}, [&] { return victim->state() == GDX_OK; }, std::chrono::seconds(60)));
    std::vector<uint8_t> ack(wire::kHeaderSize + wire::kHelloBodySize);
    ASSERT_TRUE(progress_until({b.get()}, [&] { return ::recv(fd, ack.data(), ack.size(), MSG_DONTWAIT | MSG_PEEK) == 48; },
                               std::chrono::seconds(60)));
    std::vector<uint8_t> bad_reply(wire::kHeaderSize);
    wire::encode_header({wire::MsgType::PutAck, GDX_OK, 0x99, 0, 0, 0}, bad_reply.data()); // answers nothing
    ASSERT_NO_FATAL_FAILURE(send_all(fd, bad_reply.data(), bad_reply.size()));
    EXPECT_TRUE(closed_by_peer(*b, fd));
    ::close(fd);
    EXPECT_EQ(victim->state(), GDX_ERR_PROTOCOL);
    EXPECT_NE(log.text().find("not an outstanding request"), std::string::npos) << log.text();

    // The interfaces still work.
    ASSERT_NO_FATAL_FAILURE(connect_pair(*a, *b, &ea, &eb));
    EXPECT_EQ(eb->am_short(0, "ok", 2), GDX_OK);
}

TEST_F(TcpPairTest, SilentPeerFailsOutstandingOperationsWithinSilenceTimeout) {
    open_and_connect({{"GDX_PEER_SILENCE_TIMEOUT", "1s"}});
    Region tgt;
    ASSERT_NO_FATAL_FAILURE(make_region(*b, *a, 4096, tp::kAccessRemoteRead, &tgt));
    std::vector<uint8_t> dst(4096);
    Waiter g;
    ASSERT_EQ(ea->get(dst.data(), 16, nullptr, tgt.addr(), *tgt.rkey, &g), GDX_INPROGRESS);
    // b never progresses: its kernel acknowledges the request, but no reply ever comes (no RST either).
    ASSERT_TRUE(progress_until({a.get()}, [&] { return g.done(); }, std::chrono::seconds(60)));
    EXPECT_EQ(g.status, GDX_ERR_TIMEOUT);
    EXPECT_EQ(ea->state(), GDX_ERR_TIMEOUT);
    Waiter later;
    EXPECT_EQ(ea->get(dst.data(), 16, nullptr, tgt.addr(), *tgt.rkey, &later), GDX_ERR_TIMEOUT);
}

// By default a peer that does not progress is busy, not dead: the get waits through several GDX_PEER_TIMEOUTs
// (the peer's kernel answers) and completes with the right bytes once the peer progresses.
TEST_F(TcpPairTest, BusyPeerIsNotDeclaredDeadAndAnswersWhenItProgresses) {
    open_and_connect({{"GDX_PEER_TIMEOUT", "1s"}});
    Region tgt;
    ASSERT_NO_FATAL_FAILURE(make_region(*b, *a, 4096, tp::kAccessRemoteRead, &tgt));
    std::memset(tgt.mem.data(), 0x3c, 16);
    std::vector<uint8_t> dst(4096, 0);
    Waiter g;
    ASSERT_EQ(ea->get(dst.data(), 16, nullptr, tgt.addr(), *tgt.rkey, &g), GDX_INPROGRESS);
    progress_until({a.get()}, [&] { return g.done(); }, std::chrono::milliseconds(3500));
    EXPECT_FALSE(g.done()) << "the get ended while its peer was only busy: " << gdx_status_string(g.status);
    EXPECT_EQ(ea->state(), GDX_OK);
    ASSERT_TRUE(progress_until({a.get(), b.get()}, [&] { return g.done(); }));
    EXPECT_EQ(g.status, GDX_OK) << gdx_status_string(g.status);
    EXPECT_EQ(std::vector<uint8_t>(dst.begin(), dst.begin() + 16), std::vector<uint8_t>(16, 0x3c));
}

// A peer that does not progress (a rank not yet in MPI) delays the connection, for several GDX_CONN_TIMEOUTs, and
// does not fail it: its kernel accepted the TCP connection, so it is busy, not gone.
TEST_F(TcpPairTest, ConnectionToABusyPeerWaitsThroughTheConnTimeout) {
    std::unique_ptr<tp::Endpoint> x, y;
    ASSERT_NO_FATAL_FAILURE(connect_one_side_past_conn_timeout(&x, &y, false));
    EXPECT_EQ(x->state(), GDX_INPROGRESS) << "a connection to a busy peer ended: " << gdx_status_string(x->state());
    gdx_status_t st = y->connect(x->address());
    ASSERT_TRUE(st == GDX_OK || st == GDX_INPROGRESS) << gdx_status_string(st);
    ASSERT_TRUE(wait([&] { return x->state() != GDX_INPROGRESS && y->state() != GDX_INPROGRESS; }));
    EXPECT_EQ(x->state(), GDX_OK) << gdx_status_string(x->state());
    EXPECT_EQ(y->state(), GDX_OK) << gdx_status_string(y->state());
}

TEST_F(TcpPairTest, ConnectionSetUpEndsWhenThePeerIsGoneNotWhileItIsAlive) {
    // The peer progresses, but its endpoint never calls connect(). Where we dial, it closes the connection nobody
    // claimed after its GDX_CONN_TIMEOUT and ours fails with the reset; where we wait for it to dial, it is alive
    // (its listener answers our probe), so we wait, and fail once its interface is gone.
    std::unique_ptr<tp::Endpoint> x, y;
    ASSERT_NO_FATAL_FAILURE(connect_one_side_past_conn_timeout(&x, &y, true));
    if (x->state() != GDX_INPROGRESS) { // we dialled
        EXPECT_EQ(x->state(), GDX_ERR_CONNECTION_RESET) << gdx_status_string(x->state());
    } else { // we wait for it to dial: alive, so waited for
        y.reset();
        b.reset();
        ASSERT_TRUE(progress_until({a.get()}, [&] { return x->state() != GDX_INPROGRESS; }));
        EXPECT_EQ(x->state(), GDX_ERR_UNREACHABLE) << gdx_status_string(x->state());
        x.reset();
        ASSERT_NO_FATAL_FAILURE(open({{"GDX_CONN_TIMEOUT", "1s"}})); // the rest of the test needs both
        ASSERT_EQ(b->ep_create(&y), GDX_OK);
    }
    // Nobody listens at the address: refused at once.
    tp::tcp::TcpAddress gone;
    std::string why;
    ASSERT_EQ(tp::tcp::decode_address(y->address(), &gone, &why), GDX_OK);
    b.reset(); // closes the listener (y is cut loose first)
    y.reset();
    gone.iface_id = gone.ep_id = ~0ull; // largest ids: our side dials
    std::vector<uint8_t> blob(tp::tcp::kAddressSize);
    tp::tcp::encode_address(gone, blob.data());
    std::unique_ptr<tp::Endpoint> z;
    ASSERT_EQ(a->ep_create(&z), GDX_OK);
    ASSERT_NE(z->connect(blob), GDX_OK);
    ASSERT_TRUE(progress_until({a.get()}, [&] { return z->state() != GDX_INPROGRESS; }));
    EXPECT_EQ(z->state(), GDX_ERR_UNREACHABLE);
}
