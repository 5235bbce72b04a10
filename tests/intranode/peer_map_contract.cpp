// The peer-map contract (peer_map_contract.h), moved from test_shm.cpp's ShmLocal.PeerMapsSharedSegmentsOnly so
// that cuda_ipc is held to the same checks.
#include "peer_map_contract.h"

#include "common.h"
#include "core/error.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <vector>

namespace gdx::test {

namespace {

// Two interfaces (the mapping must work across memory domains, as between processes) and one endpoint each:
// a on the user's interface, b on the owner's.
struct Sides {
    Opened owner, user;
    std::unique_ptr<tp::Endpoint> a, b;
    mem::MemInfo host; // how the staging engine registers its pools: host memory

    template <class F> bool both(F done) {
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (!done() && std::chrono::steady_clock::now() < deadline) {
            owner.iface->progress();
            user.iface->progress();
        }
        return done();
    }
    void key_for(void *p, size_t len, unsigned access, std::unique_ptr<tp::MemHandle> *mh,
                 std::unique_ptr<tp::RemoteKey> *rk) {
        ASSERT_EQ(owner.iface->md().mem_reg(p, len, host, access, mh), GDX_OK) << last_error();
        std::vector<uint8_t> packed(owner.iface->md().rkey_packed_size());
        ASSERT_EQ((*mh)->pack_rkey(packed), GDX_OK);
        ASSERT_EQ(user.iface->md().rkey_unpack(packed, rk), GDX_OK) << last_error();
    }
    gdx_status_t map(const tp::RemoteKey &rk, uint8_t **local) {
        gdx_status_t st = GDX_INPROGRESS;
        both([&] { return (st = a->map_remote(rk, local)) != GDX_INPROGRESS; });
        return st;
    }
    // A put or get through the key, retried on back-pressure (a transport may have to map first), waited for.
    gdx_status_t rma(bool put, uint8_t *buf, size_t len, uint64_t raddr, const tp::RemoteKey &rk) {
        tp::Completion c;
        c.count = 1;
        gdx_status_t st = GDX_ERR_NO_RESOURCE;
        for (int tries = 0; st == GDX_ERR_NO_RESOURCE && tries < 1000000; ++tries) { // issued once it is accepted
            st = put ? a->put(buf, len, nullptr, raddr, rk, &c) : a->get(buf, len, nullptr, raddr, rk, &c);
            if (st == GDX_ERR_NO_RESOURCE) {
                owner.iface->progress();
                user.iface->progress();
            }
        }
        if (st != GDX_INPROGRESS) return st;
        return both([&] { return c.count == 0; }) ? c.status : GDX_ERR_TIMEOUT;
    }
};

void connect(Sides &s, const std::string &transport, const std::string &device, const Config::Overrides &ov) {
    ASSERT_EQ(open_transport(transport, device, ov, &s.owner), GDX_OK) << last_error();
    ASSERT_EQ(open_transport(transport, device, ov, &s.user), GDX_OK) << last_error();
    ASSERT_NE(s.owner.iface->caps().flags & tp::kCapPeerMap, 0u);
    ASSERT_EQ(s.user.iface->ep_create(&s.a), GDX_OK);
    ASSERT_EQ(s.owner.iface->ep_create(&s.b), GDX_OK);
    s.a->connect(s.b->address());
    s.b->connect(s.a->address());
    ASSERT_TRUE(s.both([&] { return s.a->state() == GDX_OK && s.b->state() == GDX_OK; }));
}

// The segment maps, both ways through one set of pages, and put/get through its key reach the same bytes.
void check_mapping(Sides &s, void *seg, size_t len, const tp::RemoteKey &rk, const tp::MemHandle &mh) {
    EXPECT_TRUE(mh.direct(0, len)) << mh.chunks().front().reason; // the transport reaches it (staging needs that)
    uint8_t *local = nullptr;
    ASSERT_EQ(s.map(rk, &local), GDX_OK) << last_error();
    ASSERT_NE(local, nullptr);
    EXPECT_NE(static_cast<void *>(local), seg); // a mapping of our own, not the owner's pointer
    fill_pattern(local, len, 41);
    EXPECT_EQ(check_pattern(static_cast<uint8_t *>(seg), len, 41), -1);
    fill_pattern(static_cast<uint8_t *>(seg), len, 42);
    EXPECT_EQ(check_pattern(local, len, 42), -1);
    uint8_t *again = nullptr;
    EXPECT_EQ(s.a->map_remote(rk, &again), GDX_OK); // answered from the mapping, no second request
    EXPECT_EQ(again, local);
    std::vector<uint8_t> buf(4099);
    fill_pattern(buf.data(), buf.size(), 43);
    const uint64_t at = reinterpret_cast<uintptr_t>(seg) + 17;
    EXPECT_EQ(s.rma(true, buf.data(), buf.size(), at, rk), GDX_OK) << last_error();
    EXPECT_EQ(check_pattern(static_cast<uint8_t *>(seg) + 17, buf.size(), 43), -1);
    std::vector<uint8_t> back(buf.size());
    EXPECT_EQ(s.rma(false, back.data(), back.size(), at, rk), GDX_OK) << last_error();
    EXPECT_EQ(back, buf);
}

} // namespace

void check_peer_map_contract(const std::string &transport, const std::string &device,
                             const Config::Overrides &overrides) {
    Sides s;
    ASSERT_NO_FATAL_FAILURE(connect(s, transport, device, overrides));
    const size_t kLen = 3 * 65536 + 100;
    void *seg = nullptr;
    ASSERT_EQ(s.owner.iface->md().alloc_shared(kLen, &seg), GDX_OK);
    std::unique_ptr<tp::MemHandle> mh;
    std::unique_ptr<tp::RemoteKey> rk;
    ASSERT_NO_FATAL_FAILURE(s.key_for(seg, kLen, tp::kAccessAll, &mh, &rk));
    ASSERT_NO_FATAL_FAILURE(check_mapping(s, seg, kLen, *rk, *mh));

    // Ordinary registered memory is never mapped: refused by the owner (or, where the key cannot even name
    // such memory, by the requester), UNSUPPORTED either way.
    uint8_t *local = nullptr;
    std::vector<uint8_t> plain(65536);
    std::unique_ptr<tp::MemHandle> mh2;
    std::unique_ptr<tp::RemoteKey> rk2;
    ASSERT_NO_FATAL_FAILURE(s.key_for(plain.data(), plain.size(), tp::kAccessAll, &mh2, &rk2));
    EXPECT_EQ(s.map(*rk2, &local), GDX_ERR_UNSUPPORTED);
    // A key without remote write (mapping grants both) is refused before anything is asked.
    std::unique_ptr<tp::MemHandle> mh3;
    std::unique_ptr<tp::RemoteKey> rk3;
    void *seg2 = nullptr;
    ASSERT_EQ(s.owner.iface->md().alloc_shared(4096, &seg2), GDX_OK);
    ASSERT_NO_FATAL_FAILURE(s.key_for(seg2, 4096, tp::kAccessRemoteRead, &mh3, &rk3));
    EXPECT_EQ(s.a->map_remote(*rk3, &local), GDX_ERR_UNSUPPORTED);
    // A key revoked before the request (deregistered) opens nothing.
    std::unique_ptr<tp::MemHandle> mh4;
    std::unique_ptr<tp::RemoteKey> rk4;
    ASSERT_NO_FATAL_FAILURE(s.key_for(seg2, 4096, tp::kAccessAll, &mh4, &rk4));
    mh4.reset();
    EXPECT_EQ(s.map(*rk4, &local), GDX_ERR_ACCESS_DENIED);

    // The owner goes away: later requests fail with the endpoint's error instead of waiting.
    mh.reset();
    s.b.reset();
    EXPECT_TRUE(s.both([&] { return s.a->state() != GDX_OK; }));
    std::unique_ptr<tp::MemHandle> mh5;
    std::unique_ptr<tp::RemoteKey> rk5;
    ASSERT_NO_FATAL_FAILURE(s.key_for(seg2, 4096, tp::kAccessAll, &mh5, &rk5));
    EXPECT_EQ(s.a->map_remote(*rk5, &local), GDX_ERR_CONNECTION_RESET);
    mh5.reset();
    mh3.reset();
    mh2.reset();
    s.owner.iface->md().free_shared(seg);
    s.owner.iface->md().free_shared(seg2);
}

} // namespace gdx::test
