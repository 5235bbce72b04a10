#include "transport/shm/segment.h"

#include "core/error.h"

#include <cerrno>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace gdx::tp::shm {

namespace {
constexpr const char *kComp = "shm";
constexpr int kSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
} // namespace

size_t page_size() {
    static const size_t ps = [] {
        long v = sysconf(_SC_PAGESIZE);
        return v > 0 ? static_cast<size_t>(v) : size_t{4096};
    }();
    return ps;
}

Segment &Segment::operator=(Segment &&o) noexcept {
    if (this != &o) {
        reset();
        base_ = o.base_;
        size_ = o.size_;
        fd_ = o.fd_;
        o.base_ = nullptr;
        o.size_ = 0;
        o.fd_ = -1;
    }
    return *this;
}

void Segment::close_fd() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
}

void Segment::reset() {
    if (base_ != nullptr) munmap(base_, size_);
    close_fd();
    base_ = nullptr;
    size_ = 0;
}

gdx_status_t Segment::create(size_t size, const char *name, Segment *out) {
    if (size == 0) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "shared segment of 0 bytes");
    size = round_up(size, page_size());
    int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return fail_errno(GDX_ERR_IO, errno, kComp, "memfd_create(%s)", name);
    Segment seg;
    seg.fd_ = fd;
    // memfd files start 0777 (access is gated by who holds the fd); 0600 keeps /proc/<pid>/fd re-opens owner-only.
    if (fchmod(fd, 0600) != 0) return fail_errno(GDX_ERR_IO, errno, kComp, "fchmod(memfd %s, 0600)", name);
    if (ftruncate(fd, static_cast<off_t>(size)) != 0)
        return fail_errno(GDX_ERR_NO_MEMORY, errno, kComp, "ftruncate(memfd %s, %zu)", name, size);
    if (fcntl(fd, F_ADD_SEALS, kSeals) != 0) return fail_errno(GDX_ERR_IO, errno, kComp, "F_ADD_SEALS on %s", name);
    void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return fail_errno(GDX_ERR_NO_MEMORY, errno, kComp, "mmap(memfd %s, %zu)", name, size);
    seg.base_ = static_cast<uint8_t *>(p);
    seg.size_ = size;
    *out = static_cast<Segment &&>(seg);
    return GDX_OK;
}

gdx_status_t Segment::attach(int fd, size_t expect_size, const char *what, Segment *out) {
    Segment seg;
    seg.fd_ = fd; // closed by seg on every error path
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0)
        return fail_errno(GDX_ERR_PROTOCOL, errno, kComp, "%s: the fd the peer sent is not a sealable memfd", what);
    if ((seals & kSeals) != kSeals)
        return GDX_FAIL(GDX_ERR_PROTOCOL, kComp, "%s: peer's segment is not size-sealed (seals 0x%x)", what, seals);
    struct stat st{};
    if (fstat(fd, &st) != 0) return fail_errno(GDX_ERR_IO, errno, kComp, "%s: fstat(peer segment)", what);
    if (static_cast<uint64_t>(st.st_size) != expect_size || expect_size == 0 || expect_size % page_size() != 0)
        return GDX_FAIL(GDX_ERR_PROTOCOL, kComp, "%s: peer segment has %lld bytes, the peer announced %zu", what,
                        static_cast<long long>(st.st_size), expect_size);
    if (st.st_uid != geteuid())
        return GDX_FAIL(GDX_ERR_ACCESS_DENIED, kComp, "%s: peer segment belongs to uid %u", what,
                        static_cast<unsigned>(st.st_uid));
    void *p = mmap(nullptr, expect_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return fail_errno(GDX_ERR_NO_MEMORY, errno, kComp, "%s: mmap(peer segment)", what);
    seg.base_ = static_cast<uint8_t *>(p);
    seg.size_ = expect_size;
    seg.close_fd(); // the mapping keeps the memory; the descriptor is no longer needed
    *out = static_cast<Segment &&>(seg);
    return GDX_OK;
}

} // namespace gdx::tp::shm
