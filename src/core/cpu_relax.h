// The hint a busy-wait gives the CPU between two looks at memory another agent writes (PAUSE on x86, YIELD on Arm):
// the next look is not issued early, so no speculative loads of that line are in flight, and thrown away, when the
// other agent's store lands; the sibling hyperthread gets the core meanwhile. One place for every spin of gdx.
#pragma once

namespace gdx {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
}

} // namespace gdx
