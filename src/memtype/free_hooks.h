// CUDA free hooks: gdx sees every free, unmap and IPC close of CUDA memory in the process, so the range cache can
// drop an answer when its memory goes instead of asking the driver on every hit (range_cache.h, Events).
//
// How: binary instrumentation of the driver's exported entry points (cuMemFree_v2, cuMemUnmap, ...) through UCX's
// libucm (ucm_bistro_patch, opened with dlopen), which is what UCX itself does for its memtype cache and rcache
// (UCX_MEM_CUDA_HOOK_MODE=bistro). Patching the entry points, rather than the PLT, also catches a CUDA runtime
// linked statically into the application: it reaches the driver through cuGetProcAddress, and install() checks
// that every entry point cuGetProcAddress hands out for a hooked name is one it patched. Anything it cannot
// verify leaves the hooks off, and the cache validates every hit (README.md: 'The range cache: correctness').
#pragma once

#include <cstdint>
#include <string>

namespace gdx::mem {

struct FreeHookState {
    bool installed = false;
    unsigned patched = 0; // driver entry points patched
    std::string why;      // installed: what was patched with what; otherwise why not
};

// Installs the hooks once per process (thread-safe: later calls return the first outcome). Needs the CUDA driver
// and a GPU, libucm.so.0 (UCX 1.11 or newer), and no UCX that hooks the driver itself (ucx_hooks_cuda).
const FreeHookState &install_free_hooks();

// True (and why) when UCX in this process hooks the CUDA driver itself (libucm_cuda, UCX built with CUDA): then UCX's
// memory-type cache is fed with CUDA allocations, and gdx leaves the driver's entry points to it.
bool ucx_hooks_cuda(std::string *why);

// Hooked calls seen so far (tests: a free through any path must raise it).
uint64_t free_hook_calls();

} // namespace gdx::mem
