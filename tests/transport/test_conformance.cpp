// The transport base's promises, checked the same way over every transport that opens here (issue 17): a bad
// active-message id is refused; an active message reaches the handler of its id and no other; a call with bad
// arguments fails with GDX_ERR_INVALID_PARAM and leaves nothing behind (nothing is sent, nothing is written); the
// software-key memory domain registers, revokes at deregistration and refuses keys it did not issue.
//
// shm and tcp open on any machine, so they must pass here; rc (needs an RDMA device) and cuda_ipc (needs a GPU)
// skip with the reason when they do not open.
#include "tcp_test_util.h"

#include "core/error.h"
#include "transport/open_interfaces.h"
#include "transport/soft_key_md.h"
#include "transport/wire.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace gdx::test {
namespace {

struct Received {
    unsigned calls = 0;
    std::vector<uint8_t> last;
};

void on_am(void *arg, tp::Endpoint *, const void *data, size_t len) {
    auto *r = static_cast<Received *>(arg);
    ++r->calls;
    r->last.assign(static_cast<const uint8_t *>(data), static_cast<const uint8_t *>(data) + len);
}

bool must_open(std::string_view transport) { return transport == "shm" || transport == "tcp"; }

class TransportBase : public ::testing::TestWithParam<const char *> {
  protected:
    void SetUp() override {
        tp::Component *c = tp::find_component(GetParam());
        if (c == nullptr) GTEST_SKIP() << GetParam() << " is not compiled into this build";
        for (std::unique_ptr<tp::Interface> *slot : {&a, &b}) {
            tp::OpenOutcome o = tp::open_interface(*c, cfg, tp::OpenRequest{});
            if (o.status != GDX_OK && !must_open(GetParam()))
                GTEST_SKIP() << GetParam() << " does not open on this machine ("
                             << (o.devices == 0 ? "no device" : o.failures) << ")";
            ASSERT_EQ(o.status, GDX_OK) << GetParam() << ": " << o.failures << last_error();
            *slot = std::move(o.iface);
        }
    }
    void TearDown() override {
        ea.reset();
        eb.reset();
    }

    void connect() {
        ASSERT_EQ(a->ep_create(&ea), GDX_OK);
        ASSERT_EQ(b->ep_create(&eb), GDX_OK);
        gdx_status_t s1 = ea->connect(eb->address()), s2 = eb->connect(ea->address());
        ASSERT_TRUE(s1 == GDX_OK || s1 == GDX_INPROGRESS) << gdx_status_string(s1);
        ASSERT_TRUE(s2 == GDX_OK || s2 == GDX_INPROGRESS) << gdx_status_string(s2);
        ASSERT_TRUE(wait([&] { return ea->state() != GDX_INPROGRESS && eb->state() != GDX_INPROGRESS; }));
        ASSERT_EQ(ea->state(), GDX_OK);
        ASSERT_EQ(eb->state(), GDX_OK);
    }
    bool wait(const std::function<bool()> &cond) { return progress_until({a.get(), b.get()}, cond); }
    // Issues an operation (again while it answers back-pressure) and waits for its completion.
    gdx_status_t run(const std::function<gdx_status_t(tp::Completion *)> &issue) {
        tp::Completion c;
        c.count = 1;
        gdx_status_t st;
        if (!wait([&] { return (st = issue(&c)) != GDX_ERR_NO_RESOURCE; })) return GDX_ERR_TIMEOUT;
        if (st != GDX_INPROGRESS) return st;
        if (!wait([&] { return c.count == 0; })) return GDX_ERR_TIMEOUT;
        return c.status;
    }
    // Sends am_short(id, data) until it is taken.
    gdx_status_t send_am(uint8_t id, const std::vector<uint8_t> &data) {
        gdx_status_t st;
        if (!wait([&] { return (st = ea->am_short(id, data.data(), data.size())) != GDX_ERR_NO_RESOURCE; }))
            return GDX_ERR_TIMEOUT;
        return st;
    }

    Config cfg = Config::defaults();
    std::unique_ptr<tp::Interface> a, b;
    std::unique_ptr<tp::Endpoint> ea, eb;
};

TEST_P(TransportBase, AmIdOutOfRangeIsRefused) {
    Received r;
    EXPECT_EQ(a->set_am_handler(static_cast<uint8_t>(tp::kMaxAmId), on_am, &r), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(a->set_am_handler(255, on_am, &r), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(a->set_am_handler(static_cast<uint8_t>(tp::kMaxAmId - 1), on_am, &r), GDX_OK);
    EXPECT_EQ(a->set_am_handler(static_cast<uint8_t>(tp::kMaxAmId - 1), nullptr, nullptr), GDX_OK); // unregisters
}

TEST_P(TransportBase, AmReachesTheHandlerOfItsIdOnly) {
    ASSERT_NO_FATAL_FAILURE(connect());
    Received one, five, replaced;
    ASSERT_EQ(b->set_am_handler(1, on_am, &one), GDX_OK);
    ASSERT_EQ(b->set_am_handler(5, on_am, &replaced), GDX_OK);
    ASSERT_EQ(b->set_am_handler(5, on_am, &five), GDX_OK); // the later registration wins
    const std::vector<uint8_t> msg{1, 2, 3, 4, 5, 6, 7};
    ASSERT_EQ(send_am(5, msg), GDX_OK);
    ASSERT_TRUE(wait([&] { return five.calls == 1; }));
    EXPECT_EQ(five.last, msg);
    // An id without a handler is dropped; the endpoint goes on, and messages keep their order.
    ASSERT_EQ(send_am(7, {9, 9}), GDX_OK);
    ASSERT_EQ(send_am(1, {42}), GDX_OK);
    ASSERT_TRUE(wait([&] { return one.calls == 1; }));
    EXPECT_EQ(one.last, std::vector<uint8_t>{42});
    EXPECT_EQ(five.calls, 1u);
    EXPECT_EQ(replaced.calls, 0u);
    // am_bcopy is dispatched the same way.
    gdx_status_t st;
    const std::vector<uint8_t> big(std::min<size_t>(a->caps().max_am_bcopy, 300), 0x5c);
    ASSERT_TRUE(wait([&] { return (st = ea->am_bcopy(1, big.data(), big.size())) != GDX_ERR_NO_RESOURCE; }));
    ASSERT_EQ(st, GDX_OK);
    ASSERT_TRUE(wait([&] { return one.calls == 2; }));
    EXPECT_EQ(one.last, big);
    EXPECT_EQ(ea->state(), GDX_OK);
}

// UCT's connect-to-ep contract, which UCX's own gtest checks (uct_p2p_am_alignment sends right after both sides
// connected, with no progress call in between): once both endpoints called connect(), the first active message of
// either side is taken, whichever side the handshake made the initiator.
TEST_P(TransportBase, FirstSendAfterBothConnectedIsTaken) {
    ASSERT_EQ(a->ep_create(&ea), GDX_OK);
    ASSERT_EQ(b->ep_create(&eb), GDX_OK);
    Received ra, rb;
    ASSERT_EQ(a->set_am_handler(2, on_am, &ra), GDX_OK);
    ASSERT_EQ(b->set_am_handler(2, on_am, &rb), GDX_OK);
    gdx_status_t s1 = ea->connect(eb->address()), s2 = eb->connect(ea->address());
    ASSERT_TRUE(s1 == GDX_OK || s1 == GDX_INPROGRESS) << gdx_status_string(s1);
    ASSERT_TRUE(s2 == GDX_OK || s2 == GDX_INPROGRESS) << gdx_status_string(s2);
    const std::vector<uint8_t> to_b{1, 2, 3}, to_a{4, 5};
    EXPECT_EQ(ea->am_short(2, to_b.data(), to_b.size()), GDX_OK) << GetParam() << ": first send of the side that connected first";
    EXPECT_EQ(eb->am_short(2, to_a.data(), to_a.size()), GDX_OK) << GetParam() << ": first send of the side that connected second";
    ASSERT_TRUE(wait([&] { return ra.calls == 1 && rb.calls == 1; }));
    EXPECT_EQ(rb.last, to_b);
    EXPECT_EQ(ra.last, to_a);
}

TEST_P(TransportBase, BadAmArgumentsAreRefusedAndSendNothing) {
    ASSERT_NO_FATAL_FAILURE(connect());
    Received r;
    for (uint8_t id = 0; id < tp::kMaxAmId; ++id)
        ASSERT_EQ(b->set_am_handler(id, on_am, &r), GDX_OK);
    const tp::Capabilities &caps = a->caps();
    uint8_t byte = 1;
    constexpr auto kBadId = static_cast<uint8_t>(tp::kMaxAmId);
    EXPECT_EQ(ea->am_short(kBadId, &byte, 1), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(ea->am_short(0, nullptr, 4), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(ea->am_bcopy(kBadId, &byte, 1), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(ea->am_bcopy(0, nullptr, 4), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(ea->am_zcopy(kBadId, &byte, 1, nullptr, 0, nullptr, nullptr), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(ea->am_zcopy(0, nullptr, 4, nullptr, 0, nullptr, nullptr), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(ea->am_zcopy(0, &byte, 1, nullptr, 4, nullptr, nullptr), GDX_ERR_INVALID_PARAM);
    // Over the limits the interface states (only where a buffer that large is reasonable to hold).
    constexpr size_t kMaxBuffer = size_t{64} << 20;
    if (caps.max_am_short < kMaxBuffer) {
        std::vector<uint8_t> over(caps.max_am_short + 1);
        EXPECT_EQ(ea->am_short(0, over.data(), over.size()), GDX_ERR_INVALID_PARAM);
        EXPECT_EQ(ea->am_zcopy(0, over.data(), over.size(), nullptr, 0, nullptr, nullptr), GDX_ERR_INVALID_PARAM);
    }
    if (caps.max_am_bcopy < kMaxBuffer) {
        std::vector<uint8_t> over(caps.max_am_bcopy + 1);
        EXPECT_EQ(ea->am_bcopy(0, over.data(), over.size()), GDX_ERR_INVALID_PARAM);
    }
    // Nothing was sent: the next good message is the first to arrive, and the endpoint is still up.
    ASSERT_EQ(send_am(3, {7, 7, 7}), GDX_OK);
    ASSERT_TRUE(wait([&] { return r.calls >= 1; }));
    EXPECT_EQ(r.calls, 1u);
    EXPECT_EQ(r.last, (std::vector<uint8_t>{7, 7, 7}));
    EXPECT_EQ(ea->state(), GDX_OK);
    EXPECT_EQ(eb->state(), GDX_OK);
}

// kCapAmInPlace says what am_short_iov and am_bcopy_pack do (the UCX glue chooses its path by it): with it, the
// pieces and the packed bytes arrive as one message each; without it both answer GDX_ERR_UNSUPPORTED, run no pack
// function and send nothing.
size_t pack_abc(void *dst, void *arg) {
    ++*static_cast<unsigned *>(arg);
    std::memcpy(dst, "abc", 3);
    return 3;
}

TEST_P(TransportBase, InPlaceActiveMessagesFollowTheirCapability) {
    ASSERT_NO_FATAL_FAILURE(connect());
    Received r;
    ASSERT_EQ(b->set_am_handler(2, on_am, &r), GDX_OK);
    const uint8_t hdr[8] = {1, 2, 3, 4, 5, 6, 7, 8}, payload[3] = {9, 10, 11};
    const tp::AmSeg segs[2] = {{hdr, sizeof(hdr)}, {payload, sizeof(payload)}};
    unsigned packs = 0;
    size_t len = 0;
    gdx_status_t st;
    if ((a->caps().flags & tp::kCapAmInPlace) == 0) {
        EXPECT_EQ(ea->am_short_iov(2, segs), GDX_ERR_UNSUPPORTED);
        EXPECT_EQ(ea->am_bcopy_pack(2, pack_abc, &packs, &len), GDX_ERR_UNSUPPORTED);
        EXPECT_EQ(packs, 0u);
        ASSERT_EQ(send_am(2, {7}), GDX_OK); // nothing went before it
        ASSERT_TRUE(wait([&] { return r.calls >= 1; }));
        EXPECT_EQ(r.last, std::vector<uint8_t>{7});
        return;
    }
    ASSERT_TRUE(wait([&] { return (st = ea->am_short_iov(2, segs)) != GDX_ERR_NO_RESOURCE; }));
    ASSERT_EQ(st, GDX_OK);
    ASSERT_TRUE(wait([&] { return r.calls == 1; }));
    EXPECT_EQ(r.last, (std::vector<uint8_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
    ASSERT_TRUE(wait([&] { return (st = ea->am_bcopy_pack(2, pack_abc, &packs, &len)) != GDX_ERR_NO_RESOURCE; }));
    ASSERT_EQ(st, GDX_OK);
    EXPECT_EQ(len, 3u);
    ASSERT_TRUE(wait([&] { return r.calls == 2; }));
    EXPECT_EQ(r.last, (std::vector<uint8_t>{'a', 'b', 'c'}));
}

TEST_P(TransportBase, BadMemRegArgumentsAreRefusedAndWriteNothing) {
    std::vector<uint8_t> buf(4096);
    const mem::MemInfo host;
    tp::MemoryDomain &md = a->md();
    std::unique_ptr<tp::MemHandle> good;
    ASSERT_EQ(md.mem_reg(buf.data(), buf.size(), host, tp::kAccessAll, &good), GDX_OK);
    tp::MemHandle *const before = good.get();
    const auto wrap = reinterpret_cast<void *>(UINTPTR_MAX - 15);
    EXPECT_EQ(md.mem_reg(buf.data(), buf.size(), host, tp::kAccessAll, nullptr), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(md.mem_reg(nullptr, buf.size(), host, tp::kAccessAll, &good), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(md.mem_reg(buf.data(), buf.size(), host, 0, &good), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(md.mem_reg(buf.data(), buf.size(), host, 0x100, &good), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(md.mem_reg(wrap, 4096, host, tp::kAccessAll, &good), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(good.get(), before); // the output was not touched by any refusal
}

// ---- the software-key memory domain (tcp, shm) ----------------------------------------------------------

class SoftKeyDomain : public TransportBase {
  protected:
    void SetUp() override {
        ASSERT_NO_FATAL_FAILURE(TransportBase::SetUp());
        if (IsSkipped()) return;
        if (dynamic_cast<tp::SoftKeyMd *>(&a->md()) == nullptr)
            GTEST_SKIP() << GetParam() << "'s keys are enforced by its hardware or driver, not a software table";
        ASSERT_NO_FATAL_FAILURE(connect());
    }
    // `buf` registered on b for remote rights `access`; the key as a unpacks it.
    void expose(std::vector<uint8_t> &buf, unsigned access, std::unique_ptr<tp::MemHandle> *mh,
                std::vector<uint8_t> *packed, std::unique_ptr<tp::RemoteKey> *rk) {
        ASSERT_EQ(b->md().mem_reg(buf.data(), buf.size(), mem::MemInfo{}, access, mh), GDX_OK) << last_error();
        packed->resize(b->md().rkey_packed_size());
        ASSERT_EQ((*mh)->pack_rkey(*packed), GDX_OK);
        ASSERT_EQ(a->md().rkey_unpack(*packed, rk), GDX_OK) << last_error();
    }
    gdx_status_t put(const std::vector<uint8_t> &src, const std::vector<uint8_t> &dst, const tp::RemoteKey &rk) {
        return run([&](tp::Completion *c) {
            return ea->put(src.data(), src.size(), nullptr, reinterpret_cast<uintptr_t>(dst.data()), rk, c);
        });
    }
};

TEST_P(SoftKeyDomain, RegistersAndRevokesAtDeregistration) {
    std::vector<uint8_t> dst(8192, 0), src(8192);
    fill_pattern(src.data(), src.size(), 11);
    std::unique_ptr<tp::MemHandle> mh;
    std::vector<uint8_t> packed;
    std::unique_ptr<tp::RemoteKey> rk;
    ASSERT_NO_FATAL_FAILURE(expose(dst, tp::kAccessRemoteWrite, &mh, &packed, &rk));
    EXPECT_TRUE(mh->direct(0, dst.size()));
    ASSERT_EQ(put(src, dst, *rk), GDX_OK);
    EXPECT_EQ(check_pattern(dst.data(), dst.size(), 11), SIZE_MAX);
    // Deregistered: the key opens nothing, and the memory is not written.
    mh.reset();
    std::fill(dst.begin(), dst.end(), 0);
    EXPECT_EQ(put(src, dst, *rk), GDX_ERR_ACCESS_DENIED);
    EXPECT_EQ(std::count(dst.begin(), dst.end(), 0), static_cast<long>(dst.size()));
    EXPECT_EQ(ea->state(), GDX_OK); // a refusal, not a broken endpoint
}

TEST_P(SoftKeyDomain, RefusesKeysItDidNotIssue) {
    std::vector<uint8_t> dst(4096, 0), src(4096, 0xab);
    std::unique_ptr<tp::MemHandle> mh;
    std::vector<uint8_t> packed;
    std::unique_ptr<tp::RemoteKey> rk;
    ASSERT_NO_FATAL_FAILURE(expose(dst, tp::kAccessRemoteWrite, &mh, &packed, &rk));
    // A well-formed key with an id the target never issued: only the target can know.
    tp::wire::PackedRkey k;
    std::string why;
    const auto transport = static_cast<tp::SoftKeyMd &>(b->md()).transport();
    ASSERT_EQ(tp::wire::decode_rkey(packed, transport, &k, &why), GDX_OK) << why;
    k.key_id ^= 0x5a5a5a5aull;
    std::vector<uint8_t> forged(packed.size());
    tp::wire::encode_rkey(k, forged.data());
    std::unique_ptr<tp::RemoteKey> unknown;
    ASSERT_EQ(a->md().rkey_unpack(forged, &unknown), GDX_OK); // the initiator cannot tell
    EXPECT_EQ(put(src, dst, *unknown), GDX_ERR_ACCESS_DENIED);
    EXPECT_EQ(std::count(dst.begin(), dst.end(), 0), static_cast<long>(dst.size()));
    // Bytes that are no key of this transport do not unpack.
    std::unique_ptr<tp::RemoteKey> none;
    EXPECT_EQ(a->md().rkey_unpack(std::vector<uint8_t>(packed.size(), 0xff), &none), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(a->md().rkey_unpack(std::vector<uint8_t>(3), &none), GDX_ERR_INVALID_PARAM);
    k.transport = transport == tp::wire::TransportId::Tcp ? tp::wire::TransportId::Shm : tp::wire::TransportId::Tcp;
    tp::wire::encode_rkey(k, forged.data());
    EXPECT_EQ(a->md().rkey_unpack(forged, &none), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(none, nullptr);
    // The endpoint still works with the real key.
    ASSERT_EQ(put(src, dst, *rk), GDX_OK);
    EXPECT_EQ(std::count(dst.begin(), dst.end(), 0xab), static_cast<long>(dst.size()));
}

TEST_P(SoftKeyDomain, GpuMemoryGetsNoKey) {
    std::vector<uint8_t> buf(4096);
    mem::MemInfo dev;
    dev.type = mem::MemType::CudaDevice;
    dev.kind = mem::MemKind::Cuda;
    std::unique_ptr<tp::MemHandle> mh;
    ASSERT_EQ(b->md().mem_reg(buf.data(), buf.size(), dev, tp::kAccessAll, &mh), GDX_OK);
    EXPECT_EQ(mh->chunks().at(0).reach, tp::Reach::None);
    EXPECT_FALSE(mh->chunks().at(0).reason.empty());
    EXPECT_EQ(static_cast<tp::SoftKeyMemHandle &>(*mh).key_id(), 0u); // opens nothing
}

// A request that re-issues one operation when its endpoint dispatches it (UCT's pending request).
struct Reissue : tp::PendingRequest {
    std::function<gdx_status_t()> issue;
    gdx_status_t last = GDX_ERR_NO_RESOURCE;
    static gdx_status_t run(tp::PendingRequest *self) {
        auto *me = static_cast<Reissue *>(self);
        me->last = me->issue();
        return me->last == GDX_ERR_NO_RESOURCE ? GDX_ERR_NO_RESOURCE : GDX_OK;
    }
};

// An operation behind a fence either goes (the transport orders it itself) or answers NO_RESOURCE; then
// pending_add must park it (GDX_OK), never answer BUSY ("resources now, retry yourself"): a caller that retries on
// BUSY spins while nothing lets the operations before the fence complete. UCP's fenced rendezvous ATP did exactly
// that inside its RTR handler (gdx_ipc and gdx_shm on UCX 1.16). Parked requests run once the fence opens, in order.
TEST_P(SoftKeyDomain, BehindAFenceBackPressureAndPendingAddAgree) {
    constexpr size_t kHalf = 2048; // below every transport's direct-copy threshold: the first put stays outstanding
    std::vector<uint8_t> dst(2 * kHalf, 0), src(2 * kHalf), msg{7, 7, 7};
    fill_pattern(src.data(), src.size(), 23);
    std::unique_ptr<tp::MemHandle> mh;
    std::vector<uint8_t> packed;
    std::unique_ptr<tp::RemoteKey> rk;
    ASSERT_NO_FATAL_FAILURE(expose(dst, tp::kAccessRemoteWrite, &mh, &packed, &rk));
    Received got;
    ASSERT_EQ(b->set_am_handler(3, on_am, &got), GDX_OK);
    tp::Completion c1, c2;
    c1.count = c2.count = 1;
    const uintptr_t base = reinterpret_cast<uintptr_t>(dst.data());
    gdx_status_t st1;
    ASSERT_TRUE(wait([&] { return (st1 = ea->put(src.data(), kHalf, nullptr, base, *rk, &c1)) != GDX_ERR_NO_RESOURCE; }));
    ASSERT_TRUE(st1 == GDX_OK || st1 == GDX_INPROGRESS) << gdx_status_string(st1);
    ASSERT_EQ(ea->fence(), GDX_OK);
    Reissue put2, am;
    put2.issue = [&] { return ea->put(src.data() + kHalf, kHalf, nullptr, base + kHalf, *rk, &c2); };
    am.issue = [&] { return ea->am_short(3, msg.data(), msg.size()); };
    unsigned parked = 0;
    for (Reissue *r : {&put2, &am}) {
        r->func = Reissue::run;
        r->last = r->issue();
        if (r->last != GDX_ERR_NO_RESOURCE) continue;
        ASSERT_EQ(ea->pending_add(r), GDX_OK) << GetParam() << ": an operation answered NO_RESOURCE behind a fence, "
                                                 "and pending_add said resources are free";
        ++parked;
    }
    if (std::string_view(GetParam()) == "shm") { // completes out of order, so it holds what follows a fence
        EXPECT_EQ(parked, 2u) << "shm let an operation pass its fence while the put before it was outstanding";
    }
    // Progress lets the first put complete; the parked ones then run, in order, and everything lands.
    ASSERT_TRUE(wait([&] { return put2.last != GDX_ERR_NO_RESOURCE && am.last != GDX_ERR_NO_RESOURCE; }));
    ASSERT_TRUE(put2.last == GDX_OK || put2.last == GDX_INPROGRESS) << gdx_status_string(put2.last);
    ASSERT_EQ(am.last, GDX_OK);
    ASSERT_TRUE(wait([&] {
        return (st1 == GDX_OK || c1.count == 0) && (put2.last == GDX_OK || c2.count == 0) && got.calls == 1;
    }));
    EXPECT_EQ(c1.status, GDX_OK);
    EXPECT_EQ(c2.status, GDX_OK);
    EXPECT_EQ(got.last, msg);
    EXPECT_EQ(check_pattern(dst.data(), dst.size(), 23), SIZE_MAX);
}

// While a request is parked, a new operation must answer NO_RESOURCE even where the endpoint has room again (the
// peer drained its ring), so its caller parks it behind: UCT's order. Before this rule a shm endpoint took new UCP
// eager fragments ahead of parked ones and MPI messages landed in the wrong receive buffers (pending_queue.h).
TEST_P(SoftKeyDomain, NewOperationsWaitBehindParkedRequests) {
    Received got;
    std::vector<std::vector<uint8_t>> order;
    ASSERT_EQ(b->set_am_handler(3, [](void *arg, tp::Endpoint *, const void *data, size_t len) {
        auto *v = static_cast<std::vector<std::vector<uint8_t>> *>(arg);
        v->emplace_back(static_cast<const uint8_t *>(data), static_cast<const uint8_t *>(data) + len);
    }, &order), GDX_OK);
    // Fill the endpoint without progress on either side until it answers back-pressure.
    std::vector<uint8_t> msg(64, 1);
    unsigned sent = 0;
    gdx_status_t st = GDX_OK;
    for (; sent < 1u << 20 && (st = ea->am_short(3, msg.data(), msg.size())) == GDX_OK; ++sent) {}
    if (st != GDX_ERR_NO_RESOURCE) GTEST_SKIP() << GetParam() << ": no back-pressure after " << sent << " messages";
    std::vector<uint8_t> parked_msg(64, 2), later_msg(64, 3);
    Reissue parked;
    parked.func = Reissue::run;
    parked.issue = [&] { return ea->am_short(3, parked_msg.data(), parked_msg.size()); };
    ASSERT_EQ(ea->pending_add(&parked), GDX_OK);
    // The receiver alone drains: room comes back without the sender's progress dispatching the parked request.
    for (int i = 0; i < 1000; ++i) b->progress();
    EXPECT_EQ(ea->am_short(3, later_msg.data(), later_msg.size()), GDX_ERR_NO_RESOURCE)
        << GetParam() << ": a new operation went ahead of a parked request";
    // Progress runs the parked request; after it the new one goes, and everything arrives in issue order.
    ASSERT_TRUE(wait([&] { return parked.last == GDX_OK; }));
    ASSERT_TRUE(wait([&] { return ea->am_short(3, later_msg.data(), later_msg.size()) != GDX_ERR_NO_RESOURCE; }));
    ASSERT_TRUE(wait([&] { return order.size() == sent + 2; }));
    EXPECT_EQ(order[sent], parked_msg);
    EXPECT_EQ(order[sent + 1], later_msg);
}

const char *const kTransports[] = {"shm", "tcp", "rc", "cuda_ipc"};
std::string param_name(const ::testing::TestParamInfo<const char *> &i) { return i.param; }

INSTANTIATE_TEST_SUITE_P(Each, TransportBase, ::testing::ValuesIn(kTransports), param_name);
INSTANTIATE_TEST_SUITE_P(Each, SoftKeyDomain, ::testing::ValuesIn(kTransports), param_name);

} // namespace
} // namespace gdx::test
