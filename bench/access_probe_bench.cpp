// Cost of the registration access probe (memtype/access_probe.h) and of the guarded copy the shm target uses
// for ring puts/gets, next to memcpy. Prints medians over repetitions; judges nothing.
//   build/bench/access_probe_bench
#include "memtype/access_probe.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <sys/mman.h>
#include <vector>

using namespace gdx;
using Clock = std::chrono::steady_clock;

namespace {

template <typename F> double median_us(int reps, F f) {
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) {
        auto a = Clock::now();
        f();
        t.push_back(std::chrono::duration<double, std::micro>(Clock::now() - a).count());
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

} // namespace

int main() {
    std::printf("%12s %14s %14s %14s\n", "range", "first (us)", "read (us)", "write (us)");
    for (size_t n : {size_t(4) << 10, size_t(64) << 10, size_t(256) << 10, size_t(1) << 20, size_t(16) << 20,
                     size_t(256) << 20, size_t(1) << 30}) {
        void *v = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (v == MAP_FAILED) {
            std::perror("mmap");
            return 1;
        }
        // First: a never-touched range (below 1 MiB the write probe faults the pages in, as ibv_reg_mr would).
        double first = median_us(1, [&] { mem::probe_host_range(v, n, true, true, "bench"); });
        std::memset(v, 1, n);
        int reps = n <= (size_t{1} << 20) ? 200 : 9;
        double rd = median_us(reps, [&] { mem::probe_host_range(v, n, true, false, "bench"); });
        double wr = median_us(reps, [&] { mem::probe_host_range(v, n, true, true, "bench"); });
        std::printf("%12zu %14.1f %14.1f %14.1f\n", n, first, rd, wr);
        munmap(v, n);
    }
    std::printf("\n%12s %14s %14s\n", "copy", "memcpy (us)", "guarded (us)");
    std::vector<char> a(1 << 20, 1), b(1 << 20, 2);
    for (size_t n : {size_t(64), size_t(4096), size_t(65536), size_t(1) << 20}) {
        double mc = median_us(2000, [&] {
            std::memcpy(b.data(), a.data(), n);
            asm volatile("" ::"r"(b.data()) : "memory");
        });
        double gc = median_us(2000, [&] { mem::guarded_copy(b.data(), a.data(), n); });
        std::printf("%12zu %14.2f %14.2f\n", n, mc, gc);
    }
    return 0;
}
