// Memory kinds and the memory-backend ops table (libfabric's hmem ops are the model): one row per backend,
// indexed by MemKind. Host and CUDA today; ROCm or Level Zero later is one more row. Layers above (transports,
// staging, the API) never call a GPU runtime directly: they classify with detect(), copy with the row's ops, and
// list devices, export and import IPC handles, enable peer access and queue tracked copies through its slots
// (a test keeps it so: tests/memtype/test_no_driver_above.sh).
#pragma once

#include "gdx/status.h"

#include <cstddef>
#include <cstdint>
#include <memory>
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

// A device of a backend (a GPU), as device lists, gdx_info -d and PCI placement need it.
struct DeviceInfo {
    int ordinal = -1;
    std::string name;
    std::string pci_bus_id; // "0000:18:00.0" (lower case, as the driver writes it)
    size_t total_mem = 0;
    int cc_major = 0, cc_minor = 0;
    bool integrated = false;
    bool dmabuf_supported = false;
    bool gdr_supported = false;
    bool gdr_with_vmm = false;
    bool vmm_supported = false;
    bool posix_fd_handles = false;
    int async_engines = 0;
};

// ---- IPC: device memory shared between processes of one host (libfabric's get_handle/open_handle) ----------

// How an allocation is exported: a legacy IPC memory handle (device memory), a POSIX fd of the physical
// allocation (VMM), or a POSIX fd of its memory pool plus the pointer's export data (stream-ordered pools).
enum class IpcKind : uint8_t { None = 0, Legacy = 1, Vmm = 2, Pool = 3 };
inline constexpr size_t kIpcHandleSize = 64;

// What an exporter hands an importer besides the fd (the transport carries it in its remote key).
struct IpcHandle {
    IpcKind kind = IpcKind::None;
    uint8_t bytes[kIpcHandleSize] = {}; // legacy: the IPC memory handle; pool: the pointer's export data
    uint64_t pool_id = 0;               // pool: the exporter's pool, so an importer imports each pool once
};

// An imported allocation mapped into this process: what ipc_close undoes.
struct IpcMapping {
    IpcKind kind = IpcKind::None;
    uint8_t *ptr = nullptr; // where the exporter's allocation base lies here
    size_t size = 0;
    int device = -1;        // the importing device (its context opened the mapping)
};

// ---- copy queues: tracked copies on a transport's own streams ---------------------------------------------

// Who a queued copy belongs to; handed back untouched when it completes.
struct CopyTag {
    void *owner = nullptr; // forget(owner) clears it in copies still queued
    uint64_t id = 0;
    void *extra = nullptr;
};

struct CopyQueueOptions {
    unsigned streams = 4; // non-blocking streams the copies are spread over, round robin (1..16)
    bool flags = true;    // completion by a host word the device writes after each copy, polled with a plain
                          // load; events where the driver cannot (or with false)
};

// A device's copies on streams of their own, each followed by a completion marker (cuda_ipc's data path). One
// thread at a time. Copies of one stream complete in issue order; a stream that fails completes all its queued
// copies with the driver's error (a failed copy never writes its flag, so streams with work are asked now and
// then: errors surface instead of hanging).
class CopyQueue {
  public:
    using DoneFn = void (*)(void *arg, const CopyTag &tag, gdx_status_t status);
    virtual ~CopyQueue() = default; // waits for queued copies first (they may read or write user memory)
    // dst <- src on the next stream (unified addressing: any of host, pinned, device, mapped peer memory).
    // GDX_OK: queued, `tag` comes back through poll(); otherwise nothing is left queued.
    virtual gdx_status_t copy(void *dst, const void *src, size_t len, const CopyTag &tag) = 0;
    // Calls done() for every copy that completed (it may queue more); returns how many.
    virtual unsigned poll(DoneFn done, void *arg) = 0;
    // Waits until every queued copy finished (poll() then reports them).
    virtual void sync() = 0;
    virtual bool idle() const = 0;
    // Copies of `owner` still queued complete with owner == nullptr.
    virtual void forget(void *owner) = 0;
    virtual const char *signal_name() const = 0; // "flag" or "event"
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
    // Synchronous copy whose host side is pinned for this backend (host_alloc / host_register memory), for copies
    // of a few bytes whose cost is the driver's, not the bus's. The CUDA row keeps one stream per GPU for them and
    // waits for a word the GPU writes after the copy (a plain load, no driver call per poll). `gpu_side` is the
    // type of the GPU side's memory: a copy towards cudaMalloc or device-located VMM memory of at most
    // set_small_write_max() bytes, 4-byte aligned, is written by stream memory operations (the bytes ride in the
    // command; no DMA engine reads host memory for them). The driver refuses those on pool memory (measured).
    gdx_status_t (*copy_pinned)(void *dst, const void *src, size_t len, int device, CopyDir dir, MemType gpu_side);
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

    // ---- devices --------------------------------------------------------------------------------------------
    // Why available() is false ("" while it is true).
    const std::string &(*why_unavailable)();
    // The driver's API version (13000 = 13.0); 0 without a driver.
    int (*driver_version)();
    // How many devices the driver shows (0 without a driver, and on the host row).
    int (*device_count)();
    // The devices in ordinal order (empty without a driver). GDX_ERR_UNSUPPORTED on the host row.
    gdx_status_t (*devices)(std::vector<DeviceInfo> *out);
    // The device of the calling thread's current context; -1 when it has none (or there is no driver).
    int (*current_device)();
    // The driver's unique id of the allocation containing `ptr` (what memtype reports as MemInfo::buffer_id).
    gdx_status_t (*buffer_id)(const void *ptr, uint64_t *id);

    // ---- IPC between processes of one host --------------------------------------------------------------------
    // Exports the allocation `info` describes: *h, and for VMM and pools a POSIX fd the caller owns (else -1).
    // GDX_OK with h->kind None and *why when it cannot be exported (managed, imported, non-exportable pool or
    // VMM, host memory): the caller reports the memory as unreachable, not as an error.
    gdx_status_t (*ipc_export)(const MemInfo &info, IpcHandle *h, int *fd, std::string *why);
    // Imports an exporter's pool from its fd (not consumed) and grants `device` read-write access to it.
    gdx_status_t (*ipc_import_pool)(int fd, int device, void **pool);
    void (*ipc_release_pool)(void *pool, int device);
    // Maps the exported allocation (`size` bytes) for `device`: legacy handles need nothing more, VMM the fd
    // (not consumed), pools the imported pool. Tells the memtype layer (note_ipc_import) before returning.
    gdx_status_t (*ipc_import)(const IpcHandle &h, size_t size, int fd, void *pool, int device, IpcMapping *out);
    // Unmaps it (note_ipc_close follows, whatever the driver said); m->ptr is null afterwards.
    gdx_status_t (*ipc_close)(IpcMapping *m);
    // Lets `from`'s copy engines reach `to`'s memory: the query, then the enable, once per pair and process.
    // GDX_ERR_UNREACHABLE with *why when the devices cannot reach each other.
    gdx_status_t (*peer_access)(int from, int to, std::string *why);
    // A copy queue on `device` (its own streams and completion markers).
    gdx_status_t (*copy_queue)(int device, const CopyQueueOptions &opts, std::unique_ptr<CopyQueue> *out);
};

// The table, indexed by MemKind.
const Ops &ops(MemKind k);

// The PCI bus id of device `ordinal` of row `k` ("0000:18:00.0"), "" when there is no such device.
std::string device_bus_id(MemKind k, int ordinal);

// CUDA has no pointer attribute for "opened with cuIpcOpenMemHandle" (or an imported VMM handle): gdx's IPC
// import path tells the memtype layer. Call note_ipc_import right after the mapping exists, note_ipc_close right
// after it is closed/unmapped (and mem::invalidate before it, range_cache.h). Both drop overlapping cache entries.
void note_ipc_import(const void *base, size_t size, int device);
void note_ipc_close(const void *base);

// dma-buf export tries CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE first (then flags 0) unless this is set to
// false: a PCIe-mapped handle suits only some NICs on some platforms (src/memtype/README.md, dma-buf).
void set_dmabuf_pcie_first(bool on);

// copy_pinned's limit for writing GPU memory by stream memory operations (GDX_CUDA_SMALL_WRITE; 0: always a copy).
// Clamped to what one batch of operations carries.
void set_small_write_max(size_t bytes);

} // namespace gdx::mem
