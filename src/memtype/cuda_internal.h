// Internal to src/memtype: what the files of the CUDA row share. The row is split by concern:
//   cuda_ops.cpp       per-GPU state, the row table itself, and the row of a build without cuda.h
//   cuda_classify.cpp  query and revalidate (what a pointer is)
//   cuda_copy.cpp      copies on per-device non-blocking streams
//   cuda_host.cpp      pinned bounce buffers, host registration, dma-buf export
//   cuda_ipc_ops.cpp   IPC export/import/close, pool imports, peer access
//   cuda_queue.cpp     copy queues (a transport's own streams with completion markers)
//   cuda_buffers.cpp   memory of a chosen type for the tools' test buffers (typed_alloc.h)
// Every function here is a slot of the row (memory_ops.h says what each promises).
#pragma once

#include "memtype/memory_ops.h"

#if GDX_HAVE_CUDA_H
#include "core/clock.h"
#include "core/log.h"
#include "memtype/cuda_driver.h"

#include <mutex>
#include <vector>
#endif

namespace gdx::mem::cudarow {

inline constexpr const char *kComp = "memtype";

bool available();
gdx_status_t query(const void *ptr, MemInfo *out);
gdx_status_t revalidate(const void *ptr, const MemInfo &cached);
gdx_status_t copy(void *dst, const void *src, size_t len, int device);
gdx_status_t copy_pinned(void *dst, const void *src, size_t len, int device, CopyDir dir, MemType gpu_side);
gdx_status_t copy_async(void *dst, const void *src, size_t len, int device, CopyDir dir, CopyHandle *h);
gdx_status_t copy_test(CopyHandle *h);
gdx_status_t host_alloc(size_t len, int device, void **out);
void host_free(void *p);
gdx_status_t host_register(void *p, size_t len, int device);
void host_unregister(void *p);
gdx_status_t dmabuf_fd(const void *ptr, size_t len, int *fd, uint64_t *offset);

const std::string &why_unavailable();
int driver_version();
int device_count();
gdx_status_t devices(std::vector<DeviceInfo> *out);
int current_device();
gdx_status_t buffer_id(const void *ptr, uint64_t *id);
gdx_status_t ipc_export(const MemInfo &info, IpcHandle *h, int *fd, std::string *why);
gdx_status_t ipc_import_pool(int fd, int device, void **pool);
void ipc_release_pool(void *pool, int device);
gdx_status_t ipc_import(const IpcHandle &h, size_t size, int fd, void *pool, int device, IpcMapping *out);
gdx_status_t ipc_close(IpcMapping *m);
gdx_status_t peer_access(int from, int to, std::string *why);
gdx_status_t copy_queue(int device, const CopyQueueOptions &opts, std::unique_ptr<CopyQueue> *out);

// set_dmabuf_pcie_first()'s current value.
bool dmabuf_pcie_first();
// set_small_write_max()'s current value.
size_t small_write_max();

#if GDX_HAVE_CUDA_H

inline constexpr int kStreamsPerDevice = 4;

// A copy whose stream failed never writes its completion word: waiters on a word (copy queues in flag mode, the
// small-copy lane) ask the stream this often instead, so the driver's error ends the wait.
inline constexpr int64_t kStreamCheckNs = 1'000'000;

using clock::now_ns;

inline bool contains(uintptr_t base, size_t size, uintptr_t p) { return size != 0 && p >= base && p - base < size; }

// Per-GPU facts read once, plus the copy streams and a free list of events. Never destroyed: static destructors
// may still copy or classify.
struct DeviceState {
    bool integrated = false;
    bool dmabuf = false;
    std::mutex mu;
    std::vector<CUstream> streams; // created on first copy: the first half copies to host, the second to the GPU
    unsigned next_stream[3] = {0, 0, 0}; // round robin per CopyDir
    std::vector<CUevent> free_events;
    // The small-copy lane (copy_pinned): its own non-blocking stream and a pinned word the GPU writes after each
    // copy, waited for with a plain load. Made on first use; small_mu serializes the lane (one copy at a time).
    std::mutex small_mu;
    bool small_tried = false;
    CUstream small_stream = nullptr;
    volatile uint32_t *small_flag = nullptr;
    CUdeviceptr small_flag_dev = 0;
    uint32_t small_seq = 0;
    uint32_t memops_refused = 0; // bit per MemType the driver refused write operations on: copies from then on
};

// nullptr for an ordinal the driver does not have.
DeviceState *device_state(int ordinal);

// GDX_ERR_NO_MEMORY for CUDA_ERROR_OUT_OF_MEMORY, else GDX_ERR_DRIVER; logged at `level` as "what: <error>".
gdx_status_t driver_error(CUresult r, log::Level level, const char *what);

#endif // GDX_HAVE_CUDA_H

} // namespace gdx::mem::cudarow
