// membarrier(2), once for gdx: the asymmetric fences that let a hot path skip its half of a Dekker handshake
// because the rare side makes every thread that runs execute a full barrier instead.
//
//   Global: every running thread of every process registered for it (shm's wakeup: a receiver about to sleep
//           against its senders in other processes; transport/shm/hub.cpp).
//   Private: every running thread of this process (the UCX module's lock-free delivery against an endpoint's
//           destruction on another thread; src/uct/bridge_idle.cpp).
#pragma once

#include "gdx/status.h"

#include <string>

namespace gdx::sys {

enum class Barrier { Private, Global };

// Registers this process for `b`'s expedited barrier. Once per process and kind: a fork()ed child is not
// registered (the kernel clears it with the new mm), so the pid is part of the answer. GDX_OK, or
// GDX_ERR_UNSUPPORTED with *why saying what refused it (no CONFIG_MEMBARRIER, an old kernel, a seccomp filter).
gdx_status_t membarrier_register(Barrier b, std::string *why);

// The barrier itself, after a successful registration: 0, or the errno of the refusal (a seccomp filter added
// since, say). Microseconds: it interrupts the CPUs running the threads concerned.
int membarrier_issue(Barrier b);

} // namespace gdx::sys
