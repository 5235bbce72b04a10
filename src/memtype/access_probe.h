// Is [addr, addr+len) host memory this process may access with the rights a registration asks for? Asked of the
// kernel (a VMA query per mapping, or populate probes on kernels without it), not read from the text of
// /proc/self/maps: a registration of unmapped, PROT_NONE, partly PROT_NONE, read-only-but-writable-asked or
// non-canonical memory fails at gdx_mem_reg with GDX_ERR_INVALID_ADDR and a message naming the cause, instead of
// crashing the process when a peer's put or get reaches it (issue 16). GPU memory is not probed here: the memtype
// layer validated it through the driver.
#pragma once

#include "gdx/status.h"
#include "memtype/memory_ops.h"

#include <cstddef>

namespace gdx::mem {

// `need_read`: the range will be read (the source of a put, a peer's get); `need_write`: written (the
// destination of a get, a peer's put). Probes only host types (is_host_type); others return GDX_OK. On failure
// records the error (gdx_last_error) under `component` and returns GDX_ERR_INVALID_ADDR.
gdx_status_t check_host_access(const void *addr, size_t len, const MemInfo &info, bool need_read, bool need_write,
                               const char *component);

// The probe alone, without the memory type (tests, and callers that know the memory is host memory).
gdx_status_t probe_host_range(const void *addr, size_t len, bool need_read, bool need_write, const char *component);

// Copies len bytes between this process's own addresses through process_vm_readv on itself: the kernel checks
// both ranges and a bad one returns EFAULT instead of raising SIGSEGV. For copies whose source or destination is
// user memory a peer named (target side of shm ring put/get): memory registered and probed at gdx_mem_reg may
// have been unmapped since, and that must fail the request, not the process. Returns 0, or the errno.
int guarded_copy(void *dst, const void *src, size_t len);

} // namespace gdx::mem
