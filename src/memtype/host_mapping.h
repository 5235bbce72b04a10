// Who created the mapping that holds a host address: the CUDA driver (cuMemHostAlloc) or the application
// (malloc, mmap; then registered with cuMemHostRegister). Since driver 5xx both report identical pointer
// attributes and cuMemHostGetFlags succeeds for both, so the mapping itself is what tells them apart.
#pragma once

#include <string>

namespace gdx::mem {

enum class HostMappingOrigin {
    Driver,      // a shared mapping of /dev/zero (deleted) or /dev/nvidia*: made by the CUDA driver
    Application, // anything else: private anonymous (heap), files, the application's own shared memory
    Unknown,     // /proc/self/maps unreadable or the address not in it; *why says which
};

// Reads /proc/self/maps (one pass, stops at the mapping that holds p). Called on cache misses only.
HostMappingOrigin host_mapping_origin(const void *p, std::string *why);

} // namespace gdx::mem
