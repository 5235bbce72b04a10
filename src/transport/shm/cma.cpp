#include "transport/shm/cma.h"

#include "core/error.h"

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <sys/uio.h>

namespace gdx::tp::shm {

namespace {

constexpr const char *kComp = "shm";
// One process_vm_* call moves at most this much: the kernel pins the remote pages of a call, and bounded calls
// keep that footprint (and the time a signal waits) small.
constexpr size_t kMaxPerCall = 64u << 20;

gdx_status_t map_errno(int e, pid_t pid, const char *op, uint64_t remote, size_t len) {
    gdx_status_t st = GDX_ERR_IO;
    if (e == EFAULT) st = GDX_ERR_INVALID_ADDR;
    else if (e == ESRCH) st = GDX_ERR_CONNECTION_RESET;
    else if (e == EPERM) st = GDX_ERR_ACCESS_DENIED;
    else if (e == ENOMEM) st = GDX_ERR_NO_MEMORY;
    return fail_errno(st, e, kComp, "%s(pid %d, remote 0x%" PRIx64 ", %zu bytes)", op, static_cast<int>(pid), remote,
                      len);
}

template <bool kWrite> gdx_status_t cma_copy(pid_t pid, void *local, uint64_t remote, size_t len) {
    size_t done = 0;
    while (done < len) {
        size_t n = std::min(len - done, kMaxPerCall);
        iovec l{static_cast<uint8_t *>(local) + done, n};
        iovec r{reinterpret_cast<void *>(remote + done), n};
        ssize_t got = kWrite ? process_vm_writev(pid, &l, 1, &r, 1, 0) : process_vm_readv(pid, &l, 1, &r, 1, 0);
        if (got < 0) {
            if (errno == EINTR) continue;
            return map_errno(errno, pid, kWrite ? "process_vm_writev" : "process_vm_readv", remote + done, n);
        }
        if (got == 0) // a partial transfer that moved nothing: the next page is not accessible
            return map_errno(EFAULT, pid, kWrite ? "process_vm_writev" : "process_vm_readv", remote + done, n);
        done += static_cast<size_t>(got);
    }
    return GDX_OK;
}

} // namespace

int yama_ptrace_scope() {
    FILE *f = std::fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
    if (f == nullptr) return -1;
    int v = -1;
    if (std::fscanf(f, "%d", &v) != 1) v = -1;
    std::fclose(f);
    return v;
}

gdx_status_t cma_probe(pid_t pid, uint64_t addr, uint64_t expect, bool required) {
    uint64_t v = 0;
    iovec l{&v, sizeof(v)};
    iovec r{reinterpret_cast<void *>(addr), sizeof(v)};
    ssize_t got = process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (got == static_cast<ssize_t>(sizeof(v)) && v == expect) return GDX_OK;
    int e = got < 0 ? errno : EFAULT;
    int scope = yama_ptrace_scope();
    char msg[384];
    std::snprintf(msg, sizeof(msg),
                  "cross-memory attach to pid %d refused (%s, Yama ptrace_scope %d): shm put/get above "
                  "GDX_SHM_CMA_THRESH copy through the shared ring instead (two copies, slower)%s",
                  static_cast<int>(pid), got < 0 ? std::strerror(e) : "probe value mismatch", scope,
                  scope >= 1 ? "; ptrace_scope 0 (sysctl kernel.yama.ptrace_scope) allows single-copy" : "");
    gdx_status_t st = e == EPERM ? GDX_ERR_ACCESS_DENIED : GDX_ERR_UNSUPPORTED;
    if (required) return GDX_FAIL(st, kComp, "%s", msg);
    GDX_LOG_ONCE(log::Level::Warn, kComp, "shm:cma-refused", "%s", msg);
    return st;
}

gdx_status_t cma_read(pid_t pid, void *local, uint64_t remote, size_t len) {
    return cma_copy<false>(pid, local, remote, len);
}

gdx_status_t cma_write(pid_t pid, const void *local, uint64_t remote, size_t len) {
    return cma_copy<true>(pid, const_cast<void *>(local), remote, len);
}

} // namespace gdx::tp::shm
