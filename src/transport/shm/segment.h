// Shared-memory segments: anonymous memfd files mapped in two processes. The creator passes the fd to its peer
// over the control socket (SCM_RIGHTS); nothing is ever named in /dev/shm, so a crash on either side leaves
// nothing behind: the memory goes away with the last mapping and the last fd.
//
// The creator seals the size (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) before handing the fd out, and the
// receiver refuses an fd without those seals: a peer that could shrink the file under our mapping would turn
// our next load into SIGBUS. The file mode is 0600 (owner only) as well.
#pragma once

#include "gdx/status.h"

#include <cstddef>
#include <cstdint>

namespace gdx::tp::shm {

class Segment {
  public:
    Segment() = default;
    ~Segment() { reset(); }
    Segment(const Segment &) = delete;
    Segment &operator=(const Segment &) = delete;
    Segment(Segment &&o) noexcept { *this = static_cast<Segment &&>(o); }
    Segment &operator=(Segment &&o) noexcept;

    // A new zero-filled segment of `size` bytes (rounded up to the page size), sealed and mapped read-write.
    // `name` shows in /proc/<pid>/maps as "/memfd:<name>" (tests look for leftovers by it).
    static gdx_status_t create(size_t size, const char *name, Segment *out);
    // Maps the peer's segment `fd` (taken over: closed on every path) after checking that it is a sealed memfd
    // of exactly `expect_size` bytes.
    static gdx_status_t attach(int fd, size_t expect_size, const char *what, Segment *out);

    uint8_t *base() const { return base_; }
    size_t size() const { return size_; }
    int fd() const { return fd_; }
    // Closes the fd but keeps the mapping (once the peer has its copy, the fd only costs a descriptor).
    void close_fd();
    void reset();

  private:
    uint8_t *base_ = nullptr;
    size_t size_ = 0;
    int fd_ = -1;
};

size_t page_size();
inline size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

} // namespace gdx::tp::shm
