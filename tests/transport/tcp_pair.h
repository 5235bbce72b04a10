// In-process fixture: two tcp interfaces (two "hosts" on loopback) and connected endpoint pairs.
#pragma once

#include "tcp_test_util.h"
#include "transport/tcp/tcp.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace gdx::test {

inline void connect_pair(tp::Interface &a, tp::Interface &b, std::unique_ptr<tp::Endpoint> *ea,
                         std::unique_ptr<tp::Endpoint> *eb) {
    ASSERT_EQ(a.ep_create(ea), GDX_OK);
    ASSERT_EQ(b.ep_create(eb), GDX_OK);
    std::vector<uint8_t> aa = (*ea)->address(), ab = (*eb)->address();
    gdx_status_t s1 = (*ea)->connect(ab), s2 = (*eb)->connect(aa);
    ASSERT_TRUE(s1 == GDX_OK || s1 == GDX_INPROGRESS) << gdx_status_string(s1);
    ASSERT_TRUE(s2 == GDX_OK || s2 == GDX_INPROGRESS) << gdx_status_string(s2);
    ASSERT_TRUE(progress_until({&a, &b}, [&] {
        return (*ea)->state() != GDX_INPROGRESS && (*eb)->state() != GDX_INPROGRESS;
    }));
    ASSERT_EQ((*ea)->state(), GDX_OK);
    ASSERT_EQ((*eb)->state(), GDX_OK);
}

// Host memory registered on one side, its key unpacked on the other.
struct Region {
    std::vector<uint8_t> mem;
    std::unique_ptr<tp::MemHandle> handle;
    std::vector<uint8_t> packed;
    std::unique_ptr<tp::RemoteKey> rkey; // as the peer sees it
    uint64_t addr() const { return reinterpret_cast<uintptr_t>(mem.data()); }
};

inline void make_region(tp::Interface &owner, tp::Interface &peer, size_t len, unsigned access, Region *r) {
    r->mem.assign(len, 0);
    ASSERT_EQ(owner.md().mem_reg(r->mem.data(), len, mem::MemInfo{}, access, &r->handle), GDX_OK);
    r->packed.resize(owner.md().rkey_packed_size());
    ASSERT_EQ(r->handle->pack_rkey(r->packed), GDX_OK);
    ASSERT_EQ(peer.md().rkey_unpack(r->packed, &r->rkey), GDX_OK);
}

struct TcpPairTest : ::testing::Test {
    Config cfg = Config::defaults();
    std::unique_ptr<tp::Interface> a, b;
    std::unique_ptr<tp::Endpoint> ea, eb;

    void open(const Config::Overrides &ov = {}) {
        cfg = config_with(ov);
        ASSERT_EQ(tp::tcp::open_iface(cfg, &a), GDX_OK);
        ASSERT_EQ(tp::tcp::open_iface(cfg, &b), GDX_OK);
    }
    // GDX_CONN_TIMEOUT=1s; *x on a connects to *y on b, which does not connect back; then a (and b too where
    // `progress_peer`) progress for 3.5 s, past three of those timeouts, or until x's connection ends.
    void connect_one_side_past_conn_timeout(std::unique_ptr<tp::Endpoint> *x, std::unique_ptr<tp::Endpoint> *y,
                                            bool progress_peer) {
        ASSERT_NO_FATAL_FAILURE(open({{"GDX_CONN_TIMEOUT", "1s"}}));
        ASSERT_EQ(a->ep_create(x), GDX_OK);
        ASSERT_EQ(b->ep_create(y), GDX_OK);
        ASSERT_EQ((*x)->connect((*y)->address()), GDX_INPROGRESS);
        auto ended = [&] { return (*x)->state() != GDX_INPROGRESS; };
        if (progress_peer)
            progress_until({a.get(), b.get()}, ended, std::chrono::milliseconds(3500));
        else
            progress_until({a.get()}, ended, std::chrono::milliseconds(3500));
    }
    void open_and_connect(const Config::Overrides &ov = {}) {
        ASSERT_NO_FATAL_FAILURE(open(ov));
        ASSERT_NO_FATAL_FAILURE(connect_pair(*a, *b, &ea, &eb));
    }
    bool wait(const std::function<bool()> &cond) { return progress_until({a.get(), b.get()}, cond); }
    void TearDown() override {
        ea.reset();
        eb.reset();
    }
};

} // namespace gdx::test
