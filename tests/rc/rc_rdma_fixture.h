// Shared fixture of the rdma-labelled rc tests: an RDMA device port (soft-RoCE rxe0 in the test guest), two
// interfaces on it (as two processes would have) and connected endpoint pairs. Outside the guest every test
// skips with "no RDMA device".
#pragma once

#include "rc_test_util.h"
#include "support/text.h"
#include "transport/rc/component.h"
#include "transport/rc/ep.h"
#include "transport/rc/iface.h"

#include <chrono>
#include <cstring>
#include <functional>
#include <sys/mman.h>

namespace gdx::test {

// Page-aligned anonymous memory, unmapped on destruction.
struct Buf {
    explicit Buf(size_t n) : len(n) {
        void *p = mmap(nullptr, n ? n : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        data = p == MAP_FAILED ? nullptr : static_cast<uint8_t *>(p);
    }
    ~Buf() {
        if (data) munmap(data, len ? len : 1);
    }
    Buf(const Buf &) = delete;
    Buf &operator=(const Buf &) = delete;
    uint8_t *data;
    size_t len;
};

inline void fill(uint8_t *p, size_t n, uint32_t seed) {
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; ++i) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        p[i] = static_cast<uint8_t>(x);
    }
}

class RcRdmaTest : public ::testing::Test {
  protected:
    void SetUp() override {
        std::vector<tp::rc::PortDesc> ports;
        ASSERT_EQ(tp::rc::list_ports(&ports), GDX_OK);
        if (ports.empty()) GTEST_SKIP() << "no RDMA device (the rdma set runs in the soft-RoCE guest: tests/rxe/run-tests.sh)";
        port_ = ports[0].device + ":" + std::to_string(ports[0].port);
        device_ = ports[0].device;
    }

    std::unique_ptr<tp::Interface> open(const Config::Overrides &o = {}) {
        Config cfg = config_with(o);
        std::unique_ptr<tp::Interface> i;
        tp::DeviceDesc d{port_, "", false};
        EXPECT_EQ(tp::rc::component()->open(d, cfg, &i), GDX_OK) << last_error();
        return i;
    }

    // Two endpoints, one per interface, connected to each other (the out-of-band exchange is a copy here).
    static void connect(tp::Interface &a, tp::Interface &b, std::unique_ptr<tp::Endpoint> *ea,
                        std::unique_ptr<tp::Endpoint> *eb) {
        ASSERT_EQ(a.ep_create(ea), GDX_OK) << last_error();
        ASSERT_EQ(b.ep_create(eb), GDX_OK) << last_error();
        EXPECT_EQ((*ea)->state(), GDX_INPROGRESS);
        std::vector<uint8_t> aa = (*ea)->address(), ba = (*eb)->address();
        ASSERT_EQ((*ea)->connect(ba), GDX_OK) << last_error();
        ASSERT_EQ((*eb)->connect(aa), GDX_OK) << last_error();
        EXPECT_EQ((*ea)->state(), GDX_OK);
    }

    // Drives both interfaces until `done` holds. A deadline guards against hangs only (it is no performance
    // threshold): reaching it is a failure that names what was awaited.
    static bool progress_until(std::initializer_list<tp::Interface *> ifs, const std::function<bool()> &done,
                               const char *what, double guard_s = 120) {
        auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(guard_s);
        while (!done()) {
            for (tp::Interface *i : ifs) i->progress();
            if (std::chrono::steady_clock::now() > end) {
                ADD_FAILURE() << "hang guard: " << what << " did not happen within " << guard_s << " s";
                return false;
            }
        }
        return true;
    }

    static std::unique_ptr<tp::MemHandle> reg(tp::Interface &i, void *p, size_t n, unsigned access = tp::kAccessAll,
                                              mem::MemInfo info = {}) {
        std::unique_ptr<tp::MemHandle> h;
        EXPECT_EQ(i.md().mem_reg(p, n, info, access, &h), GDX_OK) << last_error();
        return h;
    }

    static std::unique_ptr<tp::RemoteKey> rkey_of(tp::Interface &initiator, const tp::MemHandle &h) {
        std::vector<uint8_t> packed(initiator.md().rkey_packed_size());
        EXPECT_EQ(h.pack_rkey(packed), GDX_OK);
        std::unique_ptr<tp::RemoteKey> k;
        EXPECT_EQ(initiator.md().rkey_unpack(packed, &k), GDX_OK) << last_error();
        return k;
    }

    // One operation to completion; returns its final status (GDX_OK or the error it completed with).
    static gdx_status_t wait_op(std::initializer_list<tp::Interface *> ifs, const std::function<gdx_status_t(tp::Completion *)> &issue) {
        tp::Completion c;
        c.count = 1;
        gdx_status_t st;
        while ((st = issue(&c)) == GDX_ERR_NO_RESOURCE)
            for (tp::Interface *i : ifs) i->progress();
        if (st != GDX_INPROGRESS) return st;
        progress_until(ifs, [&] { return c.count == 0; }, "operation completion");
        return c.status;
    }

    std::string port_, device_;
};

} // namespace gdx::test
