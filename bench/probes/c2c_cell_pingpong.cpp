// Diagnosis, not a product path: how the way a sender writes one 64-byte ring cell changes the core-to-core
// latency of a ping-pong, on this CPU, without UCX or gdx around it. Two threads pinned to two CPUs each own a
// receive ring of 64-byte cells laid out as gdx's shm ring (src/transport/shm/ring.h: a 16-byte header whose 8-byte
// seq word publishes the cell, then an 8-byte header word and the payload); each waits for the other's message and
// answers. Variants of the sender's writes and of the receiver's wait:
//   stores   as ShmEp::am_short_hdr: header word, payload, header fields, then the seq word (release)
//   demote   the same, then CLDEMOTE of the cell's line (a hint: a NOP where the CPU lacks it)
//   two16    body in one 16-byte store, then header and seq in one 16-byte store
//   pause    "stores", and the receiver pauses between looks
//   spaced   "stores", and the receiver runs 40 dependent ALU instructions between looks (no pause; the next
//            look's load does not depend on them, so the CPU may still issue it early)
//   pdemote  "demote" and "pause" together
//   lfence   "stores", and the receiver's look is followed by LFENCE (no load issues past it speculatively)
// Prints the median one-way latency (half a round trip) over rounds of ITERS round trips, variants interleaved,
// and what one PAUSE costs. What it showed on the H200 host's Xeon (bench/results/gpu-2026-11-29c/s14run1/probe.txt):
// a receiver that pauses between looks, and CLDEMOTE with it, shorten the one-way time by 5-10 %; through UCX only
// the pause did (GDX_UCT_IDLE_PAUSE), so CLDEMOTE was not kept.
// Build: g++ -O2 -std=c++20 -pthread c2c_cell_pingpong.cpp;  run: ./a.out [CPU_A CPU_B [ITERS [ROUNDS]]]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cpuid.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <pthread.h>
#include <sched.h>
#include <thread>
#include <vector>
#include <immintrin.h>

namespace {
constexpr size_t kCells = 16384; // 1 MiB of cells, gdx's default ring
enum class Variant { Stores, Demote, Two16, Pause, Spaced, PDemote, LFence };
constexpr int kVariants = 7;
const char *name(Variant v) {
    switch (v) {
    case Variant::Stores: return "stores";
    case Variant::Demote: return "demote";
    case Variant::Two16: return "two16";
    case Variant::Pause: return "pause";
    case Variant::Spaced: return "spaced";
    case Variant::PDemote: return "pdemote";
    case Variant::LFence: return "lfence";
    }
    return "?";
}

struct alignas(64) Cell {
    uint32_t len;
    uint8_t type, id;
    uint16_t flags;
    uint64_t seq;
    uint64_t hdr;
    uint8_t payload[40];
};
static_assert(sizeof(Cell) == 64);

struct Ring {
    Cell *cells;
    uint64_t head = 0; // consumer
    uint64_t tail = 0; // producer (the other thread's)
};

inline void demote(const void *p) { asm volatile("cldemote %0" : : "m"(*static_cast<const volatile char *>(p))); }

template <Variant V> inline void send(Ring &r, uint64_t hdr, uint64_t payload) {
    Cell *c = &r.cells[r.tail % kCells];
    const uint64_t seq = r.tail + 1;
    if constexpr (V == Variant::Two16) {
        __m128i body = _mm_set_epi64x(static_cast<long long>(payload), static_cast<long long>(hdr));
        _mm_store_si128(reinterpret_cast<__m128i *>(&c->hdr), body);
        const uint64_t w0 = 32u | (uint64_t{1} << 32);
        std::atomic_signal_fence(std::memory_order_release);
        _mm_store_si128(reinterpret_cast<__m128i *>(c), _mm_set_epi64x(static_cast<long long>(seq), w0));
    } else {
        std::memcpy(&c->hdr, &hdr, 8);
        std::memcpy(c->payload, &payload, 8);
        c->len = 32;
        c->type = 1;
        c->id = 0;
        c->flags = 0;
        std::atomic_ref<uint64_t>(c->seq).store(seq, std::memory_order_release);
        if constexpr (V == Variant::Demote || V == Variant::PDemote) demote(c);
    }
    ++r.tail;
}

template <Variant V> inline uint64_t recv(Ring &r) {
    Cell *c = &r.cells[r.head % kCells];
    const uint64_t want = r.head + 1;
    while (std::atomic_ref<uint64_t>(c->seq).load(std::memory_order_acquire) != want) {
        if constexpr (V == Variant::Pause || V == Variant::PDemote) _mm_pause();
        if constexpr (V == Variant::LFence) _mm_lfence();
        if constexpr (V == Variant::Spaced) {
            uint64_t x = r.head;
            for (int i = 0; i < 40; ++i) asm volatile("add $1, %0" : "+r"(x));
        }
    }
    uint64_t v;
    std::memcpy(&v, c->payload, 8);
    ++r.head;
    return v;
}

void pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    if (pthread_setaffinity_np(pthread_self(), sizeof(s), &s) != 0) {
        std::fprintf(stderr, "cannot pin to CPU %d\n", cpu);
        std::exit(1);
    }
}

Cell *alloc_ring() {
    void *p = nullptr;
    if (posix_memalign(&p, 4096, kCells * sizeof(Cell)) != 0) std::exit(1);
    std::memset(p, 0, kCells * sizeof(Cell));
    return static_cast<Cell *>(p);
}

// One round: `iters` round trips; returns the one-way latency in ns.
template <Variant V> double round_trip(int cpu_a, int cpu_b, long iters) {
    Ring a_rx{alloc_ring()}, b_rx{alloc_ring()}; // a_rx: A receives (B produces); b_rx: B receives
    Ring a_tx = b_rx, b_tx = a_rx;               // producer views share the cells
    std::atomic<int> ready{0};
    std::thread tb([&] {
        pin(cpu_b);
        ready.fetch_add(1);
        while (ready.load() < 2) {
        }
        for (long i = 0; i < iters; ++i) {
            uint64_t v = recv<V>(b_rx);
            send<V>(b_tx, 7, v + 1);
        }
    });
    pin(cpu_a);
    ready.fetch_add(1);
    while (ready.load() < 2) {
    }
    for (long i = 0; i < 1000; ++i) { // warm-up
        send<V>(a_tx, 7, i);
        (void)recv<V>(a_rx);
    }
    auto t0 = std::chrono::steady_clock::now();
    uint64_t check = 0;
    for (long i = 1000; i < iters; ++i) {
        send<V>(a_tx, 7, i);
        check = recv<V>(a_rx);
    }
    auto t1 = std::chrono::steady_clock::now();
    tb.join();
    if (check != static_cast<uint64_t>(iters)) std::fprintf(stderr, "wrong payload %lu\n", (unsigned long)check);
    std::free(a_rx.cells);
    std::free(b_rx.cells);
    return std::chrono::duration<double, std::nano>(t1 - t0).count() / double(iters - 1000) / 2;
}
} // namespace

int main(int argc, char **argv) {
    int a = argc > 2 ? std::atoi(argv[1]) : 0, b = argc > 2 ? std::atoi(argv[2]) : 1;
    long iters = argc > 3 ? std::atol(argv[3]) : 200000;
    int rounds = argc > 4 ? std::atoi(argv[4]) : 10;
    unsigned eax, ebx, ecx, edx;
    bool has_demote = __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 25));
    std::printf("# c2c_cell_pingpong: CPUs %d,%d, %ld round trips a round, %d rounds; CLDEMOTE %s\n", a, b, iters,
                rounds, has_demote ? "supported" : "not supported (a NOP)");
    {
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < 1000000; ++i) _mm_pause();
        auto t1 = std::chrono::steady_clock::now();
        std::printf("# one PAUSE: %.1f ns\n", std::chrono::duration<double, std::nano>(t1 - t0).count() / 1e6);
    }
    std::vector<double> res[kVariants];
    for (int r = 0; r < rounds; ++r) {
        for (int k = 0; k < kVariants; ++k) {
            Variant v = static_cast<Variant>((k + r) % kVariants);
            double ns = v == Variant::Stores   ? round_trip<Variant::Stores>(a, b, iters)
                        : v == Variant::Demote ? round_trip<Variant::Demote>(a, b, iters)
                        : v == Variant::Two16  ? round_trip<Variant::Two16>(a, b, iters)
                        : v == Variant::Pause  ? round_trip<Variant::Pause>(a, b, iters)
                        : v == Variant::Spaced ? round_trip<Variant::Spaced>(a, b, iters)
                        : v == Variant::LFence ? round_trip<Variant::LFence>(a, b, iters)
                                               : round_trip<Variant::PDemote>(a, b, iters);
            res[static_cast<int>(v)].push_back(ns);
            std::printf("raw %-7s %7.1f ns\n", name(v), ns);
        }
    }
    for (int k = 0; k < kVariants; ++k) {
        auto &x = res[k];
        std::sort(x.begin(), x.end());
        std::printf("median %-7s %7.1f ns one-way (min %.1f, max %.1f)\n", name(static_cast<Variant>(k)),
                    x[x.size() / 2], x.front(), x.back());
    }
}
