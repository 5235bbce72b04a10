// The access check every transport's mem_reg makes before trusting a host range (issue 16): the rights a
// registration asks for must be rights this process has, or a peer's put/get reaching it would fault the process.
// One place maps access bits to the probe (memtype/access_probe.h), so tcp, shm, rc and cuda_ipc agree.
#pragma once

#include "memtype/access_probe.h"
#include "transport/transport.h"

namespace gdx::tp {

inline gdx_status_t check_reg_access(const void *addr, size_t len, const mem::MemInfo &info, unsigned access,
                                     const char *component) {
    const bool read = (access & (kAccessLocalRead | kAccessRemoteRead)) != 0;
    const bool write = (access & (kAccessLocalWrite | kAccessRemoteWrite)) != 0;
    return mem::check_host_access(addr, len, info, read, write, component);
}

} // namespace gdx::tp
