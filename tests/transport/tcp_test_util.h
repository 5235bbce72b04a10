// Helpers shared by the transport tests and the test peer: configuration, deterministic data patterns, and
// bounded progress loops (a hang is a test failure, never a stuck ctest).
#pragma once

#include "core/config.h"
#include "transport/transport.h"

#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <string>
#include <thread>

namespace gdx::test {

inline Config config_with(const Config::Overrides &ov) {
    Config c = Config::defaults();
    std::string err;
    if (Config::load(ov, &c, &err) != GDX_OK) std::fprintf(stderr, "config: %s\n", err.c_str());
    return c;
}

// Byte p of the stream `seed` (p counted from the stream start): bytes of splitmix64(seed ^ p/8).
inline uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
inline void fill_pattern(uint8_t *dst, size_t len, uint64_t seed, uint64_t stream_off = 0) {
    for (size_t i = 0; i < len;) {
        uint64_t p = stream_off + i, w = mix(seed ^ (p / 8));
        for (size_t b = p % 8; b < 8 && i < len; ++b, ++i) dst[i] = static_cast<uint8_t>(w >> (8 * b));
    }
}
// Index of the first byte that differs from the pattern, or SIZE_MAX when all match.
inline size_t check_pattern(const uint8_t *src, size_t len, uint64_t seed, uint64_t stream_off = 0) {
    uint8_t chunk[4096];
    for (size_t off = 0; off < len; off += sizeof(chunk)) {
        size_t n = std::min(sizeof(chunk), len - off);
        fill_pattern(chunk, n, seed, stream_off + off);
        if (std::memcmp(chunk, src + off, n) != 0)
            for (size_t i = 0; i < n; ++i)
                if (chunk[i] != src[off + i]) return off + i;
    }
    return SIZE_MAX;
}

// Progresses the interfaces until cond() holds; false when `guard` passed first (a hang guard, not a
// performance threshold: it is generous).
inline bool progress_until(std::initializer_list<tp::Interface *> ifaces, const std::function<bool()> &cond,
                           std::chrono::milliseconds guard = std::chrono::seconds(120)) {
    auto end = std::chrono::steady_clock::now() + guard;
    while (!cond()) {
        if (std::chrono::steady_clock::now() > end) return false;
        unsigned n = 0;
        for (tp::Interface *i : ifaces) n += i->progress();
        if (n == 0) std::this_thread::yield();
    }
    return true;
}

// A Completion that counts how many times its callback ran.
struct Waiter : tp::Completion {
    int fired = 0;
    Waiter(int n = 1) {
        count = n;
        cb = [](tp::Completion *c) { static_cast<Waiter *>(c)->fired++; };
    }
    bool done() const { return fired > 0; }
    void reset(int n = 1) {
        count = n;
        status = GDX_OK;
        fired = 0;
    }
};

} // namespace gdx::test
