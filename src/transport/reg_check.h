// The checks every transport's mem_reg makes before it trusts a range, written once so every memory domain refuses
// the same arguments with the same status and words: check_mem_reg (the arguments, then the access probe) and
// check_reg_access, the access check alone (issue 16): the rights a registration asks for must be rights this
// process has, or a peer's put/get reaching it would fault the process. One place maps access bits to the probe
// (memtype/access_probe.h), so tcp, shm, rc and cuda_ipc agree.
#pragma once

#include "memtype/access_probe.h"
#include "transport/transport.h"

#include <string_view>

namespace gdx::tp {

inline gdx_status_t check_reg_access(const void *addr, size_t len, const mem::MemInfo &info, unsigned access,
                                     const char *component) {
    const bool read = (access & (kAccessLocalRead | kAccessRemoteRead)) != 0;
    const bool write = (access & (kAccessLocalWrite | kAccessRemoteWrite)) != 0;
    return mem::check_host_access(addr, len, info, read, write, component);
}

// mem_reg(addr, len, info, access, out)'s arguments: `out` non-null; `addr` non-null unless len is 0; len 0 only
// where the transport registers empty ranges (`allow_empty`: rc, whose empty handle opens nothing); access a
// non-empty subset of kAccessAll; a range that does not wrap around; then check_reg_access (unmapped memory, or
// rights the process lacks: GDX_ERR_INVALID_ADDR). Everything else: GDX_ERR_INVALID_PARAM. `where` prefixes the
// message where a component has several memory domains (rc: its port); empty otherwise.
gdx_status_t check_mem_reg(const char *component, std::string_view where, const void *addr, size_t len,
                           const mem::MemInfo &info, unsigned access, const void *out, bool allow_empty = false);

} // namespace gdx::tp
