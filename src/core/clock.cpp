#include "core/clock.h"

#include <ctime>

namespace gdx::clock {

namespace {
int64_t read_ns(clockid_t id) {
    timespec ts;
    // CLOCK_MONOTONIC with a valid pointer cannot fail: 0 only keeps the arithmetic defined.
    if (clock_gettime(id, &ts) != 0 && clock_gettime(CLOCK_MONOTONIC, &ts) != 0) return 0;
    return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}
} // namespace

int64_t now_ns() { return read_ns(CLOCK_MONOTONIC); }
int64_t coarse_ns() { return read_ns(CLOCK_MONOTONIC_COARSE); }

} // namespace gdx::clock
