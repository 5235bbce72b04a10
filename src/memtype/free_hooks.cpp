#include "memtype/free_hooks.h"

#include "core/log.h"
#include "memtype/range_cache.h"

#if GDX_HAVE_CUDA_H
#include "memtype/cuda_driver.h"

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>
#endif

#include <dlfcn.h>
#include <string>
#include <unistd.h>

namespace gdx::mem {

// UCX built with CUDA has libucm_cuda patch these same entry points (cuMemFree_v2, ...) for UCX's own memory-type
// cache and registration caches, later than gdx's memory domains open (at UCP's first buffer lookup). Two patches of
// one entry point do not stack: libucm's relocator cannot move the jump the first one wrote, so the second fails; if
// gdx's came first, UCX's memory-type cache fails to start and UCP asks every detecting memory domain about every
// buffer it sends (+0.15 us per small message on the H200 host, bench/results/gpu-2026-11-26b/). So where UCX will
// hook the driver itself, gdx leaves it to UCX and validates its cache hits instead.
bool ucx_hooks_cuda(std::string *why) {
    if (void *h = dlopen("libucm_cuda.so.0", RTLD_LAZY | RTLD_NOLOAD)) {
        dlclose(h); // RTLD_NOLOAD took a reference: give it back
        *why = "UCX's libucm_cuda.so.0 (loaded) hooks the CUDA driver itself for UCX's memory-type cache; gdx's "
               "patch would make UCX's fail";
        return true;
    }
    // Not loaded yet: libucm loads its modules when the first event handler is set, maybe after this. It looks for
    // them in ucx/ beside itself (UCX's module directory).
    void *ucm = dlopen("libucm.so.0", RTLD_LAZY | RTLD_NOLOAD);
    if (ucm == nullptr) return false;
    void *sym = dlsym(ucm, "ucm_set_event_handler");
    Dl_info info{};
    const bool named = sym != nullptr && dladdr(sym, &info) != 0 && info.dli_fname != nullptr;
    dlclose(ucm);
    if (!named) return false;
    std::string dir = info.dli_fname;
    dir.resize(dir.find_last_of('/') + 1); // "" when the path has no '/'
    const std::string module = dir + "ucx/libucm_cuda.so.0";
    if (access(module.c_str(), R_OK) != 0) return false;
    *why = "UCX's " + module + " will hook the CUDA driver itself for UCX's memory-type cache; gdx's patch would "
           "make UCX's fail";
    return true;
}

#if !GDX_HAVE_CUDA_H

const FreeHookState &install_free_hooks() {
    static const FreeHookState s{false, 0, "gdx was built without cuda.h"};
    return s;
}
uint64_t free_hook_calls() { return 0; }

#else

namespace {

constexpr const char *kComp = "memtype";
constexpr size_t kAll = SIZE_MAX; // the call frees memory we cannot enumerate: drop every cached answer

std::atomic<uint64_t> g_calls{0};

// The range a hooked call frees is dropped before the call (no lookup answers from the dying entry) and after it
// (a lookup racing with the free may have re-inserted it: RangeCache rejects inserts across an invalidate, but one
// that read the driver before the free and inserted before our first invalidate is caught only here).
inline void drop(uintptr_t base, size_t len) { invalidate(reinterpret_cast<const void *>(base), len); }

// X(symbol, parameters, arguments, first byte freed, bytes freed). Every exported name of an entry point that frees
// memory, in each ABI that passes its arguments alike (_v2 and _ptsz variants included).
#define GDX_FREE_HOOKS(X)                                                                                     \
    X(cuMemFree_v2, (CUdeviceptr p), (p), p, 1)                                                               \
    X(cuMemFreeHost, (void *p), (p), reinterpret_cast<uintptr_t>(p), 1)                                       \
    X(cuMemHostUnregister, (void *p), (p), reinterpret_cast<uintptr_t>(p), 1)                                 \
    X(cuMemFreeAsync, (CUdeviceptr p, CUstream s), (p, s), p, 1)                                              \
    X(cuMemFreeAsync_ptsz, (CUdeviceptr p, CUstream s), (p, s), p, 1)                                         \
    X(cuMemUnmap, (CUdeviceptr p, size_t n), (p, n), p, n)                                                    \
    X(cuIpcCloseMemHandle, (CUdeviceptr p), (p), p, 1)                                                        \
    X(cuMemPoolDestroy, (CUmemoryPool h), (h), 0, kAll)                                                       \
    X(cuCtxDestroy, (CUcontext c), (c), 0, kAll)                                                              \
    X(cuCtxDestroy_v2, (CUcontext c), (c), 0, kAll)                                                           \
    X(cuDevicePrimaryCtxRelease, (CUdevice d), (d), 0, kAll)                                                  \
    X(cuDevicePrimaryCtxRelease_v2, (CUdevice d), (d), 0, kAll)                                               \
    X(cuDevicePrimaryCtxReset, (CUdevice d), (d), 0, kAll)                                                    \
    X(cuDevicePrimaryCtxReset_v2, (CUdevice d), (d), 0, kAll)                                                 \
    X(cuModuleUnload, (CUmodule m), (m), 0, kAll)                                                             \
    X(cuLibraryUnload, (CUlibrary l), (l), 0, kAll)                                                           \
    X(cuGraphDestroy, (CUgraph g), (g), 0, kAll)                                                              \
    X(cuGraphExecDestroy, (CUgraphExec g), (g), 0, kAll)

#define GDX_HOOK_DEFINE(sym, params, args, base, len)                                                         \
    using sym##_fn = CUresult(*) params;                                                                      \
    sym##_fn g_orig_##sym = nullptr;                                                                          \
    CUresult gdx_hook_##sym params {                                                                          \
        drop(base, len);                                                                                      \
        CUresult r = g_orig_##sym args;                                                                       \
        drop(base, len);                                                                                      \
        g_calls.fetch_add(1, std::memory_order_relaxed);                                                      \
        return r;                                                                                             \
    }
GDX_FREE_HOOKS(GDX_HOOK_DEFINE)
#undef GDX_HOOK_DEFINE

struct Target {
    const char *symbol;
    void *hook;
    void **orig;
    void *addr = nullptr; // the exported entry point (nullptr: this driver does not have it)
};

std::vector<Target> targets() {
    std::vector<Target> t;
#define GDX_HOOK_TARGET(sym, params, args, base, len)                                                         \
    t.push_back(Target{#sym, reinterpret_cast<void *>(&gdx_hook_##sym), reinterpret_cast<void **>(&g_orig_##sym)});
    GDX_FREE_HOOKS(GDX_HOOK_TARGET)
#undef GDX_HOOK_TARGET
    return t;
}

// ucm_bistro_patch(func, hook, symbol, &orig, &restore_point), ucm_bistro_restore(restore_point) and
// ucm_bistro_allocate_code(size): UCX 1.11 and later (ucm/bistro/bistro.h). ucs_status_t is an int-sized enum,
// UCS_OK = 0.
using BistroPatch = int (*)(void *, void *, const char *, void **, void **);
using BistroRestore = int (*)(void *);
using BistroAllocate = void *(*)(size_t);

// Why a jump island: libucm patches a function with a 5-byte near jump when the hook lies within 2 GiB of it,
// else with a 12-byte absolute one, and moves the instructions it overwrites into the trampoline that calls the
// original. libcuda 580's cuMemFree_v2 starts push %rbp; mov %rsp,%rbp; push %r12; sub $8,%rsp: the first three
// (6 bytes) relocate, the imm8 sub does not (UCX 1.13 and 1.16 alike, seen on the H100). gdx's hooks live in
// whatever binary links gdx, often far from libcuda; libucm's code allocator maps its pool among the shared
// libraries. So each hook gets an island there, one absolute indirect jump to it (jmp *0(%rip); .quad hook),
// and libucm patches the driver with a near jump to the island.
void *island(BistroAllocate allocate, void *hook) {
    static constexpr uint8_t kJmpRipIndirect[] = {0xff, 0x25, 0x00, 0x00, 0x00, 0x00}; // jmp *0(%rip)
    auto *code = static_cast<uint8_t *>(allocate(sizeof(kJmpRipIndirect) + sizeof(void *)));
    if (code == nullptr) return nullptr;
    std::memcpy(code, kJmpRipIndirect, sizeof(kJmpRipIndirect));
    std::memcpy(code + sizeof(kJmpRipIndirect), &hook, sizeof(void *));
    return code;
}

// The name a caller passes to cuGetProcAddress for an exported symbol: without the ABI suffix (_v2, _ptsz), which
// the driver picks from the version and flags asked for.
std::string api_name(const char *symbol) {
    std::string n = symbol;
    for (const char *suffix : {"_v2", "_ptsz"}) {
        const size_t k = std::strlen(suffix);
        if (n.size() > k && n.compare(n.size() - k, k, suffix) == 0) n.resize(n.size() - k);
    }
    return n;
}

// Every entry point cuGetProcAddress hands out for a hooked name, at the ABI versions runtimes ask for, must be
// one we patch: otherwise calls through it would free memory unseen.
bool covered(const cuda::DriverApi &api, const std::vector<Target> &ts, std::string *why) {
    const int versions[] = {11030, 12000, CUDA_VERSION, api.driver_version};
    std::vector<std::string> names;
    for (const Target &t : ts)
        if (std::string n = api_name(t.symbol); std::find(names.begin(), names.end(), n) == names.end())
            names.push_back(std::move(n));
    for (const std::string &n : names) {
        const char *name = n.c_str();
        for (int v : versions) {
            for (bool per_thread : {false, true}) {
                void *fn = cuda::entry_point(api, name, v, per_thread);
                if (fn == nullptr) continue;
                bool ours = false;
                for (const Target &t : ts) ours |= t.addr == fn;
                if (!ours) {
                    char buf[256];
                    std::snprintf(buf, sizeof(buf),
                                  "cuGetProcAddress(\"%s\", %d%s) hands out %p, not one of the exported entry points "
                                  "gdx would patch: frees through it would go unseen",
                                  name, v, per_thread ? ", per-thread stream" : "", fn);
                    *why = buf;
                    return false;
                }
            }
        }
    }
    return true;
}

// A free through the driver's own entry points (the ones cuGetProcAddress handed to gdx) reaches the hooks: one
// cuMemFree(0), a no-op for the driver, runs the patched entry, the jump island, the hook and the trampoline with
// the relocated prologue, and allocates nothing. In whatever context the thread has, or none: the hook runs before
// the driver looks for one (it then answers CUDA_ERROR_INVALID_CONTEXT), and a process that never uses a GPU must
// not get a context, and the GPU memory it holds, from this test.
bool self_test(const cuda::DriverApi &api, std::string *why) {
    uint64_t before = g_calls.load(std::memory_order_relaxed);
    CUresult r = api.cuMemFree(0);
    if (g_calls.load(std::memory_order_relaxed) == before) {
        *why = "self-test: cuMemFree(0) through the driver's entry point did not reach the hook (it returned " +
               cuda::error_text(r) + ")";
        return false;
    }
    return true;
}

FreeHookState install() {
    FreeHookState s;
    const cuda::DriverApi *api = cuda::driver();
    if (api == nullptr) {
        s.why = cuda::why_unavailable();
        return s;
    }
    if (ucx_hooks_cuda(&s.why)) return s;
    // RTLD_NODELETE: the patched code jumps into trampolines libucm allocated; it must never be unloaded.
    // RTLD_LAZY: libucm leaves two functions to libucs (ucs_load_modules, ucs_sys_is_dynamic_lib: module loading
    // and mmap hooks), which the bistro code never calls. Binding them lazily lets a process without UCX load
    // libucm alone, without libucs's global set-up (signal handlers, module loading); inside UCX it is loaded.
    void *ucm = dlopen("libucm.so.0", RTLD_LAZY | RTLD_LOCAL | RTLD_NODELETE);
    if (ucm == nullptr) {
        const char *e = dlerror();
        s.why = std::string("UCX's libucm.so.0 is needed to patch the driver (dlopen: ") + (e ? e : "?") + ")";
        return s;
    }
    auto patch = reinterpret_cast<BistroPatch>(dlsym(ucm, "ucm_bistro_patch"));
    auto restore = reinterpret_cast<BistroRestore>(dlsym(ucm, "ucm_bistro_restore"));
    auto allocate = reinterpret_cast<BistroAllocate>(dlsym(ucm, "ucm_bistro_allocate_code"));
    if (patch == nullptr || restore == nullptr || allocate == nullptr) {
        s.why = "libucm.so.0 lacks ucm_bistro_patch/_restore/_allocate_code (UCX older than 1.11?)";
        return s;
    }
    std::vector<Target> ts = targets();
    for (Target &t : ts)
        t.addr = dlsym(api->lib, t.symbol);
    if (!covered(*api, ts, &s.why)) return s;
    std::vector<void *> restore_points;
    auto undo = [&] {
        for (void *rp : restore_points)
            restore(rp);
    };
    for (Target &t : ts) {
        if (t.addr == nullptr) continue; // this driver has no such entry point: nobody can call it
        // An entry point that starts with endbr64 (CET's landing mark for indirect branches, otherwise a no-op)
        // is patched right after it: callers still land on the mark, and libucm's relocator (UCX 1.13 does not
        // know the instruction) copies only the ordinary prologue behind it into the trampoline.
        static constexpr uint8_t kEndbr64[] = {0xf3, 0x0f, 0x1e, 0xfa};
        auto *code = static_cast<uint8_t *>(t.addr);
        void *at = std::memcmp(code, kEndbr64, sizeof(kEndbr64)) == 0 ? code + sizeof(kEndbr64) : code;
        void *jump = island(allocate, t.hook);
        if (jump == nullptr) {
            undo();
            s.why = "libucm has no executable memory left for a jump island";
            return s;
        }
        void *rp = nullptr;
        int st = patch(at, jump, t.symbol, t.orig, &rp);
        if (st != 0 || *t.orig == nullptr) {
            undo();
            char bytes[3 * 16 + 1] = {};
            for (int i = 0; i < 16; ++i)
                std::snprintf(bytes + 3 * i, 4, " %02x", code[i]);
            s.why = std::string("libucm could not patch ") + t.symbol + " (status " + std::to_string(st) +
                    "; it begins" + bytes + ", which libucm's relocator does not handle)";
            return s;
        }
        restore_points.push_back(rp);
        ++s.patched;
    }
    if (!self_test(*api, &s.why)) {
        undo();
        s.patched = 0;
        return s;
    }
    Dl_info info{};
    const char *from = dladdr(reinterpret_cast<void *>(patch), &info) != 0 && info.dli_fname ? info.dli_fname : "libucm";
    s.installed = true;
    s.why = std::to_string(s.patched) + " driver entry points patched through " + from;
    return s;
}

} // namespace

const FreeHookState &install_free_hooks() {
    static FreeHookState state;
    static std::once_flag once;
    std::call_once(once, [] {
        state = install();
        if (state.installed)
            GDX_INFO(kComp, "CUDA free hooks on: %s; cache hits need no driver call (pool memory excepted)",
                     state.why.c_str());
        else
            GDX_INFO(kComp, "CUDA free hooks off (%s): every cache hit is validated by one driver query",
                     state.why.c_str());
    });
    return state;
}

uint64_t free_hook_calls() { return g_calls.load(std::memory_order_relaxed); }

#endif // GDX_HAVE_CUDA_H

} // namespace gdx::mem
