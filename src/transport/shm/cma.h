// Cross-memory attach (process_vm_readv/writev): one copy between two processes' address spaces, done by the
// kernel. The kernel allows it only where ptrace would be allowed: same uid and, under Yama ptrace_scope 1,
// only from an ancestor (or a process the target named with PR_SET_PTRACER; gdx never widens that itself).
#pragma once

#include "gdx/status.h"

#include <cstddef>
#include <cstdint>
#include <sys/types.h>

namespace gdx::tp::shm {

// Reads 8 bytes at `addr` in `pid` and compares them with `expect`. GDX_OK when CMA works in this direction;
// otherwise the status, logged once per process (warn: large put/get then take two copies through the ring).
gdx_status_t cma_probe(pid_t pid, uint64_t addr, uint64_t expect, bool required);

// Copies `len` bytes between local `local` and `remote` in process `pid`, looping over partial transfers.
// GDX_ERR_INVALID_ADDR when a range is not mapped (EFAULT), GDX_ERR_CONNECTION_RESET when the process is gone
// (ESRCH), GDX_ERR_ACCESS_DENIED on EPERM, GDX_ERR_IO otherwise; each with a log line.
gdx_status_t cma_read(pid_t pid, void *local, uint64_t remote, size_t len);  // remote -> local
gdx_status_t cma_write(pid_t pid, const void *local, uint64_t remote, size_t len); // local -> remote

// /proc/sys/kernel/yama/ptrace_scope, or -1 when Yama is absent.
int yama_ptrace_scope();

} // namespace gdx::tp::shm
