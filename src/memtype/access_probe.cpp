// Kernel-checked access probes for host registrations (access_probe.h).
//
// Where the kernel has it (Linux 6.11+): PROCMAP_QUERY, an ioctl on /proc/self/maps that returns the VMA covering
// an address and its rights — a cost per mapping, nothing faulted in, no text parsing — on one descriptor the
// process keeps open (maps_fd()). Opening and closing /proc/self/maps for each registration cost more than the
// query (3.5 us against 0.4 on the build machine), and populating page by page below 1 MiB, as this probe did
// before, cost 9.9 us at 256 KiB: every UCP rendezvous registers its buffer on both sides (UCX 1.13 has no
// registration cache), so that was most of a 256 KiB-1 MiB message's fixed cost (UCP tag_bw over gdx_shm at
// 256 KiB 11.7 GB/s before, 23.2 after, on an EPYC build machine: bench/results/cpu-2026-11-28/).
// Elsewhere, and to judge a range the query cannot: madvise(MADV_POPULATE_READ / MADV_POPULATE_WRITE) (Linux
// 5.14+), one system call over the range that faults every page in as a read (or write) would: ENOMEM for a hole
// (unmapped, non-canonical), EFAULT on older kernels and EINVAL on newer ones where the access lacks the right
// (PROT_NONE, read-only when writing) — the check ibv_reg_mr's pinning makes, without touching the bytes (a
// process_vm_writev probe would have to write them, racing the application's stores). Its cost is per page, and it
// faults in pages not yet present (a write probe commits never-touched anonymous memory and breaks COW of private
// file mappings, as ibv_reg_mr does). Without PROCMAP_QUERY a range populate cannot judge (EINVAL: no rights, or a
// VM_IO/VM_PFNMAP driver mapping) is checked for presence with mincore only (logged once at debug).
//
// Measured (bench/access_probe_bench, populated anonymous memory, median): see src/memtype/README.md,
// "Registration access checks". A guarded copy (guarded_copy) costs ~1-3 us more than memcpy per call: 3.2 vs
// 0.03 us at 64 B, 6.2 vs 0.6 us at 64 KiB, 103 vs 23 us at 1 MiB on the 2-core build machine of 2026-11-26.
#include "memtype/access_probe.h"

#include "core/error.h"

#include <cerrno>
#include <cstdint>
#include <atomic>
#include <fcntl.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <algorithm>
#include <cstring>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <vector>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace gdx::mem {

namespace {

// The top of the user address space: 57 bits with 5-level paging (x86-64 LA57; arm64 tops out at 52). Above it
// an address is not canonical (or is the kernel's): refused by name before any system call.
constexpr uintptr_t kUserTop = uintptr_t{1} << 57;

size_t page_size() {
    static const size_t ps = [] {
        long v = sysconf(_SC_PAGESIZE);
        return v > 0 ? static_cast<size_t>(v) : size_t{4096};
    }();
    return ps;
}

int populate(uintptr_t start, size_t len, int advice) {
    for (;;) {
        if (madvise(reinterpret_cast<void *>(start), len, advice) == 0) return 0;
        if (errno != EINTR && errno != EAGAIN) return errno;
    }
}

// Presence only, for mappings madvise cannot populate: mincore answers ENOMEM for any hole in the range.
int present(uintptr_t start, size_t len) {
    const size_t ps = page_size();
    // mincore needs one byte per page: probe in 64 MiB windows to bound the vector.
    std::vector<unsigned char> vec((std::min<size_t>(len, 64u << 20) + ps - 1) / ps);
    for (size_t off = 0; off < len;) {
        size_t n = std::min<size_t>(len - off, vec.size() * ps);
        if (mincore(reinterpret_cast<void *>(start + off), n, vec.data()) != 0) return errno;
        off += n;
    }
    return 0;
}

// PROCMAP_QUERY (Linux 6.11, uapi linux/fs.h; defined here because the build's headers may predate it): the
// kernel answers, for one address, the VMA covering it and its rights — a cost per mapping, not per page.
struct ProcmapQuery {
    uint64_t size, query_flags, query_addr, vma_start, vma_end, vma_flags, vma_page_size, vma_offset, inode;
    uint32_t dev_major, dev_minor, vma_name_size, build_id_size;
    uint64_t vma_name_addr, build_id_addr;
};
static_assert(sizeof(ProcmapQuery) == 104, "PROCMAP_QUERY's uapi layout");
constexpr unsigned long kProcmapQuery = _IOWR('f', 17, ProcmapQuery);
constexpr uint64_t kVmaReadable = 0x01, kVmaWritable = 0x02;

enum class VmaVerdict { Ok, Hole, NoRead, NoWrite, Unsupported };

// The descriptor of /proc/self/maps the VMA queries use, kept open for the process's life (-1: none yet). /proc/self
// resolves at open, so a forked child's inherited copy would describe the parent: pthread_atfork closes it in the
// child, which then opens its own. The file it was opened on (device and inode) tells whether its number still
// names it: an application may close descriptors it does not know, and open something else under the number.
std::atomic<int> g_maps_fd{-1};
std::atomic<uint64_t> g_maps_dev{0}, g_maps_ino{0};
std::atomic<int> g_maps_unsupported{0}; // the errno that showed the kernel cannot answer, once known

// fstat: async-signal-safe, as the child of a fork needs.
bool maps_fd_is_ours(int fd) {
    struct stat st {};
    return fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_dev) == g_maps_dev.load(std::memory_order_relaxed) &&
           static_cast<uint64_t>(st.st_ino) == g_maps_ino.load(std::memory_order_relaxed);
}

// Forgets the descriptor; closes it only while it is still ours (else its number is the application's now).
void drop_maps_fd() {
    const int fd = g_maps_fd.exchange(-1);
    if (fd >= 0 && maps_fd_is_ours(fd)) close(fd);
}

// Closes the descriptor when the library is unloaded (UCX may dlclose the module; glibc drops the atfork handler
// then too).
struct MapsFdCloser {
    ~MapsFdCloser() { drop_maps_fd(); }
} g_maps_closer;

int maps_fd(int *err) {
    if (int e = g_maps_unsupported.load(std::memory_order_relaxed); e != 0) {
        *err = e;
        return -1;
    }
    int cur = g_maps_fd.load(std::memory_order_acquire);
    if (cur >= 0) [[likely]]
        return cur;
    static const int atfork = pthread_atfork(nullptr, nullptr, drop_maps_fd);
    if (atfork != 0) { // no handler (ENOMEM): a forked child could query its parent; populate instead
        *err = atfork;
        return -1;
    }
    const int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        *err = errno;
        return -1;
    }
    struct stat st {};
    if (fstat(fd, &st) != 0) {
        *err = errno;
        close(fd);
        return -1;
    }
    if (!g_maps_fd.compare_exchange_strong(cur, fd, std::memory_order_acq_rel)) {
        close(fd); // another thread opened one first: use that
        return cur;
    }
    g_maps_dev.store(static_cast<uint64_t>(st.st_dev), std::memory_order_relaxed);
    g_maps_ino.store(static_cast<uint64_t>(st.st_ino), std::memory_order_relaxed);
    return fd;
}

enum class Walk { Done, Stale };

// One walk over [a, a+len) on `fd`; *v is the verdict when Done. Stale: `fd` no longer names our /proc/self/maps
// (the application closed it, or reused its number), which is not a kernel without the query.
Walk walk_vmas(int fd, uintptr_t a, size_t len, bool need_read, bool need_write, VmaVerdict *v, int *err) {
    for (uintptr_t cur = a, end = a + len; cur < end;) {
        ProcmapQuery q{};
        q.size = sizeof(q);
        q.query_addr = cur;
        if (ioctl(fd, kProcmapQuery, &q) != 0) {
            *err = errno;
            *v = VmaVerdict::Unsupported;
            if (*err == ENOENT) *v = VmaVerdict::Hole;
            else if (*err == EBADF || *err == ENOTTY || *err == EINVAL) {
                if (!maps_fd_is_ours(fd)) return Walk::Stale; // EBADF always ends here
                // Our file refuses the query: this kernel has none (or another layout). Remembered.
                g_maps_unsupported.store(*err, std::memory_order_relaxed);
                GDX_DEBUG("memtype", "PROCMAP_QUERY on /proc/self/maps: %s; registrations are probed by populating",
                          std::strerror(*err));
            }
            return Walk::Done;
        }
        // A hole before the next mapping, then the rights. A write-only mapping cannot exist on x86 (PROT_WRITE
        // implies read): readable is the access test.
        if (q.vma_start > cur || q.vma_end <= cur) *v = VmaVerdict::Hole;
        else if ((need_read || need_write) && (q.vma_flags & kVmaReadable) == 0) *v = VmaVerdict::NoRead;
        else if (need_write && (q.vma_flags & kVmaWritable) == 0) *v = VmaVerdict::NoWrite;
        else {
            cur = q.vma_end;
            continue;
        }
        return Walk::Done;
    }
    *v = VmaVerdict::Ok;
    return Walk::Done;
}

// Walks the VMAs covering [a, a+len). Unsupported: the kernel has no PROCMAP_QUERY (ENOTTY/EINVAL, remembered) or
// /proc is not mounted; the caller then populates instead. A descriptor taken from under us is reopened once.
VmaVerdict query_vmas(uintptr_t a, size_t len, bool need_read, bool need_write, int *err) {
    for (int attempt = 0; attempt < 2; ++attempt) {
        const int fd = maps_fd(err);
        if (fd < 0) return VmaVerdict::Unsupported;
        VmaVerdict v = VmaVerdict::Unsupported;
        if (walk_vmas(fd, a, len, need_read, need_write, &v, err) == Walk::Done) return v;
        GDX_LOG_ONCE(log::Level::Debug, "memtype", "maps-fd-stale",
                     "the /proc/self/maps descriptor of the registration probe went away (%s): reopened",
                     std::strerror(*err));
        int expected = fd; // forgotten, not closed: its number is the application's now
        g_maps_fd.compare_exchange_strong(expected, -1);
    }
    return VmaVerdict::Unsupported;
}

} // namespace

gdx_status_t probe_host_range(const void *addr, size_t len, bool need_read, bool need_write, const char *comp) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
    if (len == 0) return GDX_OK;
    if (a >= kUserTop || len > kUserTop - a)
        return fail(GDX_ERR_INVALID_ADDR, log::Level::Error, comp,
                    "mem_reg(%p, %zu): not a user-space address (non-canonical or above the user address space)",
                    addr, len);
    if (!need_read && !need_write) return GDX_OK;
    const size_t ps = page_size();
    const uintptr_t start = a & ~(uintptr_t{ps} - 1);
    const size_t span = ((a + len + ps - 1) & ~(uintptr_t{ps} - 1)) - start;
    // The VMA query where the kernel has it (cost per mapping), else populate (cost per page).
    int qerr = 0;
    VmaVerdict v = query_vmas(start, span, need_read, need_write, &qerr);
    if (v == VmaVerdict::Unsupported) {
        int err = populate(start, span, need_write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ);
        if (err == 0) return GDX_OK;
        switch (err) {
        case ENOMEM: v = VmaVerdict::Hole; break;
        case EFAULT: // kernels before 6.x: the access would fault; which right is missing, a read probe tells
            v = need_write && populate(start, span, MADV_POPULATE_READ) == 0 ? VmaVerdict::NoWrite : VmaVerdict::NoRead;
            break;
        case EINVAL:
            // Newer kernels answer EINVAL both for a mapping without the rights (PROT_NONE, read-only when writing)
            // and for one they cannot populate (VM_IO/VM_PFNMAP driver memory): the VMA's flags tell them apart.
            v = query_vmas(start, span, need_read, need_write, &qerr);
            if (v == VmaVerdict::Unsupported) { // no PROCMAP_QUERY (before 6.11): presence is what can be checked
                if (int e2 = present(start, span); e2 != 0) {
                    v = VmaVerdict::Hole;
                    break;
                }
                GDX_LOG_ONCE(log::Level::Debug, comp, "probe-einval",
                             "mem_reg(%p, %zu): the kernel can neither populate this mapping nor report its rights "
                             "(%s); checked for presence only",
                             addr, len, std::strerror(qerr));
                return GDX_OK;
            }
            break;
        case EHWPOISON:
            return fail(GDX_ERR_INVALID_ADDR, log::Level::Error, comp, "mem_reg(%p, %zu): the range has poisoned pages",
                        addr, len);
        default:
            return fail_errno(GDX_ERR_INVALID_ADDR, err, comp, "mem_reg(%p, %zu): madvise(MADV_POPULATE_%s) refused it",
                              addr, len, need_write ? "WRITE" : "READ");
        }
    }
    switch (v) {
    case VmaVerdict::Ok: return GDX_OK; // a driver mapping with the rights (populate refused VM_IO/VM_PFNMAP)
    case VmaVerdict::Hole:
        return fail(GDX_ERR_INVALID_ADDR, log::Level::Error, comp,
                    "mem_reg(%p, %zu): the range is not (entirely) mapped in this process", addr, len);
    case VmaVerdict::NoRead:
        return fail(GDX_ERR_INVALID_ADDR, log::Level::Error, comp,
                    "mem_reg(%p, %zu): the range is (partly) inaccessible (PROT_NONE)", addr, len);
    case VmaVerdict::NoWrite:
        return fail(GDX_ERR_INVALID_ADDR, log::Level::Error, comp,
                    "mem_reg(%p, %zu): the range is (partly) read-only, but write access was asked for "
                    "(GDX_ACCESS_LOCAL_WRITE or GDX_ACCESS_REMOTE_WRITE)",
                    addr, len);
    case VmaVerdict::Unsupported: break;
    }
    return fail(GDX_ERR_INTERNAL, log::Level::Error, comp, "mem_reg(%p, %zu): access probe: no verdict", addr, len);
}

gdx_status_t check_host_access(const void *addr, size_t len, const MemInfo &info, bool need_read, bool need_write,
                               const char *comp) {
    if (info.type == MemType::Unmapped)
        return fail(GDX_ERR_INVALID_ADDR, log::Level::Error, comp,
                    "mem_reg(%p, %zu): the memory-type layer found no mapping at this address", addr, len);
    if (!is_host_type(info.type)) return GDX_OK; // GPU memory: validated by the driver in the memtype layer
    return probe_host_range(addr, len, need_read, need_write, comp);
}

int guarded_copy(void *dst, const void *src, size_t len) {
    const pid_t self = getpid(); // not cached: a forked child must read its own memory
    auto *d = static_cast<char *>(dst);
    auto *s = static_cast<const char *>(src);
    while (len > 0) {
        iovec local{d, len}, remote{const_cast<char *>(s), len};
        ssize_t n = process_vm_readv(self, &local, 1, &remote, 1, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        if (n == 0) return EFAULT;
        d += n;
        s += n;
        len -= static_cast<size_t>(n);
    }
    return 0;
}

} // namespace gdx::mem
