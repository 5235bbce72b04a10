// Two staging engines over the in-process loop transport, connected, with helpers for patterned buffers. Used
// by the CPU tests of the engine (and the GPU tests that need no second process).
#pragma once

#include "core/error.h"
#include "fallback/engine.h"
#include "support/loop_transport.h"
#include "memtype/memtype.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <vector>

namespace gdx::test {

// The pattern helpers live in their own (inline) namespace: tests/intranode/common.cpp defines another
// gdx::test::fill_pattern with this signature and another pattern, and test_fallback links both. Without an
// inlining compiler (a Debug build) the linker kept one definition for both, so fill_pattern wrote intranode's
// pattern and first_mismatch checked this one: every byte check failed. Distinct symbols, same calls.
inline namespace loop_patterns {

// Byte i of pattern `seed`: distinct per seed and per position (a shifted or misplaced fragment shows).
inline uint8_t pattern_byte(uint64_t seed, uint64_t i) {
    uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ (seed * 0xBF58476D1CE4E5B9ull);
    x ^= x >> 29;
    return static_cast<uint8_t>(x ^ (x >> 17));
}
inline void fill_pattern(uint8_t *p, size_t n, uint64_t seed, uint64_t first = 0) {
    for (size_t i = 0; i < n; ++i) p[i] = pattern_byte(seed, first + i);
}
// Index of the first byte of [p, p+n) that differs from pattern `seed` at `first`, or -1.
inline long long first_mismatch(const uint8_t *p, size_t n, uint64_t seed, uint64_t first = 0) {
    for (size_t i = 0; i < n; ++i)
        if (p[i] != pattern_byte(seed, first + i)) return static_cast<long long>(i);
    return -1;
}

} // namespace loop_patterns

struct HostBuf {
    std::vector<uint8_t> mem;
    fb::Region *reg = nullptr;
    std::unique_ptr<fb::RemoteRegion> remote; // the key as the other engine sees it
};

struct EngineSide {
    std::unique_ptr<tp::Interface> iface;
    std::unique_ptr<fb::Engine> engine;
    std::unique_ptr<tp::Endpoint> ep;
};

class LoopPairTest : public ::testing::Test {
  protected:
    std::shared_ptr<LoopFabric> fabric = make_loop_fabric();
    LoopOptions opt_a, opt_b;
    fb::Params params_a = small_params(), params_b = small_params();
    std::unique_ptr<mem::Detector> detector;
    EngineSide a, b;
    // Test buffers (not the engines' bounce pools): `refuse` policies apply to these only.
    std::vector<std::pair<uintptr_t, size_t>> user_ranges;
    bool user_mem(uintptr_t addr) const {
        for (auto [base, len] : user_ranges)
            if (addr >= base && addr - base < len) return true;
        return false;
    }

    // Fragments of 4 KiB keep messages of many fragments small (the smallest GDX_FRAG_SIZE allowed).
    static fb::Params small_params() {
        fb::Params p;
        p.frag_host = 4096;
        p.frag_cuda = 4096;
        p.small_thresh = 0;
        return p;
    }

    void SetUp() override {
        mem::DetectorOptions o;
        o.use_cuda = false; // host memory only: the CPU set must not depend on a driver being present
        detector = std::make_unique<mem::Detector>(o);
    }
    void TearDown() override {
        EXPECT_EQ(loop_violations(*fabric), 0u) << "the engine broke a transport rule";
    }

    void open_side(EngineSide *s, const LoopOptions &o, const fb::Params &p) {
        ASSERT_EQ(open_loop_iface(fabric, o, &s->iface), GDX_OK);
        ASSERT_EQ(fb::Engine::create(*s->iface, p, *detector, &s->engine), GDX_OK) << last_error();
        ASSERT_EQ(s->iface->ep_create(&s->ep), GDX_OK);
    }
    static void connect(EngineSide &x, EngineSide &y) {
        ASSERT_EQ(x.ep->connect(y.ep->address()), GDX_OK);
        ASSERT_EQ(y.ep->connect(x.ep->address()), GDX_OK);
    }
    void start() {
        ASSERT_NO_FATAL_FAILURE(open_side(&a, opt_a, params_a));
        ASSERT_NO_FATAL_FAILURE(open_side(&b, opt_b, params_b));
        ASSERT_NO_FATAL_FAILURE(connect(a, b));
    }

    // Progresses every engine until pred() holds; false after `max_rounds` rounds (a hang fails, never blocks).
    bool run_until(const std::function<bool()> &pred, std::vector<fb::Engine *> more = {},
                   long max_rounds = 2000000) {
        for (long i = 0; i < max_rounds; ++i) {
            if (pred()) return true;
            a.engine->progress();
            b.engine->progress();
            for (fb::Engine *e : more) e->progress();
        }
        return pred();
    }
    bool wait(fb::Request &r) {
        return run_until([&] { return r.status != GDX_INPROGRESS; });
    }

    // A patterned host buffer registered on `owner`, its key unpacked by `peer`.
    void make_buf(EngineSide &owner, EngineSide &peer, size_t n, uint64_t seed, HostBuf *out,
                  unsigned access = tp::kAccessAll) {
        out->mem.resize(n);
        fill_pattern(out->mem.data(), n, seed);
        user_ranges.emplace_back(reinterpret_cast<uintptr_t>(out->mem.data()), n);
        ASSERT_EQ(owner.engine->mem_reg(out->mem.data(), n, access, &out->reg), GDX_OK) << last_error();
        std::vector<uint8_t> key;
        ASSERT_EQ(owner.engine->pack_key(*out->reg, &key), GDX_OK);
        ASSERT_EQ(peer.engine->unpack_key(key, &out->remote), GDX_OK) << last_error();
    }
};

} // namespace gdx::test
