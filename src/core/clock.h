// Clocks, once for gdx: the precise one for deadlines, and the coarse one for what runs on every progress call and
// only needs milliseconds (pacing the looks at what no shared-memory word shows; peer-silence clocks).
#pragma once

#include <cstdint>

namespace gdx::clock {

// CLOCK_MONOTONIC in ns: connection and peer deadlines.
int64_t now_ns();
// CLOCK_MONOTONIC_COARSE in ns: the kernel's last tick (1-4 ms resolution), read without the TSC (~7 ns against
// ~37 for now_ns() on a KVM guest). Never compared with now_ns() values. A kernel without it (older than 2.6.32)
// gets the precise one.
int64_t coarse_ns();

} // namespace gdx::clock
