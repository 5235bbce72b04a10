// Allocators for every memory kind the memtype tests cover (through the CUDA driver gdx opened: no libcudart),
// VMM address-space helpers, and the launcher of the IPC peer process.
#pragma once

#include "memtype/memory_ops.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace gdx::mem::test {

enum class AllocKind {
    HostMalloc,
    HostPinned,      // cuMemHostAlloc
    HostRegistered,  // posix_memalign + cuMemHostRegister
    CudaDevice,      // cuMemAlloc
    CudaManaged,     // cuMemAllocManaged
    CudaVmm,         // cuMemCreate (device) + cuMemAddressReserve + cuMemMap
    CudaVmmHost,     // cuMemCreate (host-located)
    CudaPool,        // cuMemAllocAsync (the device's default pool)
    CudaIpcImported, // cuMemAlloc here, opened with cuIpcOpenMemHandle by memtype_ipc_peer
};
inline constexpr AllocKind kAllKinds[] = {AllocKind::HostMalloc,  AllocKind::HostPinned,  AllocKind::HostRegistered,
                                          AllocKind::CudaDevice,  AllocKind::CudaManaged, AllocKind::CudaVmm,
                                          AllocKind::CudaVmmHost, AllocKind::CudaPool,    AllocKind::CudaIpcImported};

const char *alloc_kind_name(AllocKind k); // "host_malloc", ... (usable as a gtest parameter name)
inline void PrintTo(AllocKind k, std::ostream *os) { *os << alloc_kind_name(k); }
MemType expected_type(AllocKind k);
bool needs_cuda(AllocKind k);

// "" when GPU tests can run here, else why not, starting "no CUDA driver: " (the GTEST_SKIP text).
std::string gpu_skip_reason();

// One cuMemAddressReserve'd range in granularity-sized chunks, with mappings placed by chunk index: adjacent
// allocations in one VA range, and unmap + remap of the same addresses.
class VmmSpace {
  public:
    VmmSpace() = default;
    ~VmmSpace();
    VmmSpace(const VmmSpace &) = delete;
    VmmSpace &operator=(const VmmSpace &) = delete;

    bool reserve(int device, size_t chunks, std::string *why);
    // The chunk size (the larger of the device- and host-located minimum granularities), before reserve().
    static size_t granularity_for(int device, std::string *why);
    // A fresh physical allocation of `n` chunks mapped at chunk `first`, device- or host-located.
    bool map(size_t first, size_t n, bool host_located, std::string *why);
    bool unmap(size_t first, std::string *why); // the mapping that starts at chunk `first`
    // Host-located mappings are also granted CPU read-write access where the driver allows: did it?
    bool cpu_access(size_t first) const;

    uintptr_t base() const { return base_; }
    size_t granularity() const { return gran_; }
    uintptr_t chunk(size_t i) const { return base_ + i * gran_; }

  private:
    struct Mapping {
        size_t first, n;
        unsigned long long handle;
        bool cpu;
    };
    int device_ = 0;
    uintptr_t base_ = 0;
    size_t gran_ = 0, chunks_ = 0;
    std::vector<Mapping> maps_;
};

class TestBuffer {
  public:
    TestBuffer() = default;
    ~TestBuffer() { release(); }
    TestBuffer(const TestBuffer &) = delete;
    TestBuffer &operator=(const TestBuffer &) = delete;

    // `size` bytes of `kind` on GPU `device` (rounded up where the allocator requires). False and *why when this
    // machine cannot (the test then skips with *why); on a driver error too (the test then fails with it).
    bool allocate(AllocKind kind, size_t size, int device, std::string *why);
    void release();

    void *ptr() const { return ptr_; }
    uintptr_t addr() const { return reinterpret_cast<uintptr_t>(ptr_); }
    size_t size() const { return size_; }
    int device() const { return device_; }
    AllocKind kind() const { return kind_; }
    bool cpu_access() const; // may the CPU load/store it (host kinds, managed, host-located VMM if granted)

  private:
    AllocKind kind_ = AllocKind::HostMalloc;
    void *ptr_ = nullptr;
    size_t size_ = 0;
    int device_ = 0;
    std::unique_ptr<VmmSpace> vmm_; // VMM kinds: one mapping in its own reservation
    void *stream_ = nullptr;        // pool: the stream it was allocated on
};

// Runs memtype_ipc_peer (exec'd, never forked: CUDA fails in a forked child), handing it an IPC handle of
// `exported` (device memory filled with 0x5A) through its stdin. Returns the peer's exit status (0 = all its
// checks passed; -1 = could not run it) and its output in *output. `via_ops`: the handle comes from the ops
// table's ipc_export and the peer maps and closes it with ipc_import/ipc_close (the cuda_ipc transport's path),
// instead of calling the driver itself.
int run_ipc_peer(const TestBuffer &exported, std::string *output, bool via_ops = false);

} // namespace gdx::mem::test
