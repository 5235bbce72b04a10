// Memory kinds and the memory-backend ops table (libfabric's hmem ops are the model): one row per backend,
// indexed by MemKind. Host and CUDA today; ROCm or Level Zero later is one more row. Layers above (transports,
// fallback) never call a GPU runtime directly: they classify with detect() and copy with the row's ops.
#pragma once

#include "gdx/status.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gdx::mem {

// Backend row: which runtime owns the memory.
enum class MemKind : uint8_t { Host = 0, Cuda = 1, kCount };
const char *kind_name(MemKind k); // "host", "cuda" (the keys of per-kind GDX_* values)

// What a buffer is, in detail.
enum class MemType : uint8_t {
    HostPageable,     // plain malloc/mmap memory
    HostPinned,       // cudaMallocHost / cuMemHostAlloc
    HostRegistered,   // cudaHostRegister / cuMemHostRegister
    CudaDevice,       // cudaMalloc / cuMemAlloc
    CudaManaged,      // cudaMallocManaged / cuMemAllocManaged
    CudaVmm,          // cuMemCreate + cuMemMap, device-located
    CudaVmmHost,      // cuMemCreate + cuMemMap, host-located (CU_MEM_LOCATION_TYPE_HOST[_NUMA])
    CudaPool,         // stream-ordered allocator: cudaMallocAsync / cuMemAllocFromPoolAsync
    CudaIpcImported,  // mapping opened with cuIpcOpenMemHandle (or an imported VMM handle)
    Unmapped,         // not a valid address at all (e.g. freed host memory); only reported where knowable
};
const char *type_name(MemType t); // "host-pageable", "cuda-device", ...

inline bool is_host_type(MemType t) {
    return t == MemType::HostPageable || t == MemType::HostPinned || t == MemType::HostRegistered;
}

// 16-byte aligned (64 bytes, one cache line): a cache hit copies it out with 16-byte stores, which an 8-aligned
// MemInfo on the caller's stack could split across a cache line or page (measured: 3.4 ns per hit, 15.7 when
// the copy straddled a page).
struct alignas(16) MemInfo {
    MemType type = MemType::HostPageable;
    MemKind kind = MemKind::Host;   // the ops row to use for copies
    int device = -1;                // CUDA ordinal; -1 for host memory (or host memory without affinity)
    uintptr_t base = 0;             // allocation base (0 when unknown, e.g. pageable host)
    size_t size = 0;                // allocation size (0 when unknown)
    uint64_t buffer_id = 0;         // driver's unique id of the allocation; changes on free + reuse
    bool dmabuf_allowed = false;    // cuMemGetHandleForAddressRange may be attempted (never managed/pool)
    bool integrated = false;        // integrated GPU (Jetson): GPUDirect uses host-allocated memory
    bool host_accessible = true;    // CPU may load/store it directly (host kinds, managed, host-located VMM
                                    // whose mapping grants the CPU read-write access)
    // Added by the memtype issue (compatible: new members at the end).
    uint64_t block_id = 0;          // VMM: id of the physical allocation (CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID);
                                    // revalidates VMM cache entries, whose buffer id may outlive an unmap + remap
    uint32_t handle_types = 0;      // CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES (VMM and pool exports)
    bool legacy_ipc = false;        // IS_LEGACY_CUDA_IPC_CAPABLE (drivers have reported 0 for cudaMalloc: a hint)
};

// A sub-range of a queried range that lies in one allocation (or one stretch of host memory).
struct MemSegment {
    uintptr_t addr = 0;
    size_t length = 0;
    MemInfo info;
};

// An asynchronous copy in flight (stream + event of the owning backend). Poll with Ops::copy_test.
struct CopyHandle {
    void *event = nullptr;
    int device = -1;
    MemKind kind = MemKind::Host;
};

// Which way an asynchronous copy goes, as the caller knows it: the CUDA row gives each direction streams of its own,
// so a pipeline's D2H of one fragment never queues behind its H2D of another. Unknown: any stream.
enum class CopyDir : uint8_t { Unknown, ToHost, ToDevice };

// One backend. Every function returns a status and logs what failed; none throws.
struct Ops {
    const char *name;
    // True when the backend's runtime is present (the CUDA row: a driver and at least one GPU).
    bool (*available)();
    // Uncached classification of the allocation that contains `ptr`. GDX_ERR_NOT_FOUND when the backend does
    // not own `ptr` (then the next row is asked; the host row owns everything else).
    gdx_status_t (*query)(const void *ptr, MemInfo *out);
    // Synchronous copy; either side may be of this kind or host.
    gdx_status_t (*copy)(void *dst, const void *src, size_t len, int device);
    // Synchronous copy whose host side is pinned for this backend (host_alloc / host_register memory): the
    // shortest synchronous form (the CUDA row: one cuMemcpyDtoH/HtoD, no stream, event or poll), for copies of a
    // few bytes whose cost is the driver's, not the bus's.
    gdx_status_t (*copy_pinned)(void *dst, const void *src, size_t len, int device, CopyDir dir);
    // Asynchronous copy on a dedicated non-blocking stream of `device` (round-robin over a few streams), with
    // one event per copy. GDX_OK: finished already (host); GDX_INPROGRESS: poll copy_test.
    gdx_status_t (*copy_async)(void *dst, const void *src, size_t len, int device, CopyDir dir, CopyHandle *h);
    // GDX_OK when done (the handle is released), GDX_INPROGRESS, or an error (handle released).
    gdx_status_t (*copy_test)(CopyHandle *h);
    // Pinned host memory usable by this backend's DMA engines (bounce buffers), and its release.
    gdx_status_t (*host_alloc)(size_t len, int device, void **out);
    void (*host_free)(void *p);
    // Makes host memory someone else allocated (a shared-memory segment: a bounce pool both processes of a host
    // map) usable by this backend's DMA engines, and undoes it. GDX_OK on the host row, which needs nothing.
    gdx_status_t (*host_register)(void *p, size_t len, int device);
    void (*host_unregister)(void *p);
    // dma-buf fd for [ptr, ptr+len) (page-aligned range + offset inside the fd). GDX_ERR_UNSUPPORTED for kinds
    // that never export (managed, pool, host); the caller closes the fd.
    gdx_status_t (*dmabuf_fd)(const void *ptr, size_t len, int *fd, uint64_t *offset);
    // Cheap check of a cached answer (one driver attribute read, no full query): GDX_OK when `ptr` still lies in
    // the allocation `cached` describes, GDX_ERR_NOT_FOUND when that allocation is gone (freed, unmapped,
    // reused by another allocation). Used by the range cache on every hit (range_cache.h).
    gdx_status_t (*revalidate)(const void *ptr, const MemInfo &cached);
};

// The table, indexed by MemKind.
const Ops &ops(MemKind k);

// CUDA has no pointer attribute for "opened with cuIpcOpenMemHandle" (or an imported VMM handle): gdx's IPC
// import path tells the memtype layer. Call note_ipc_import right after the mapping exists, note_ipc_close right
// after it is closed/unmapped (and mem::invalidate before it, range_cache.h). Both drop overlapping cache entries.
void note_ipc_import(const void *base, size_t size, int device);
void note_ipc_close(const void *base);

// dma-buf export tries CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE first (then flags 0) unless this is set to
// false: a PCIe-mapped handle suits only some NICs on some platforms (src/memtype/README.md, dma-buf).
void set_dmabuf_pcie_first(bool on);

} // namespace gdx::mem
