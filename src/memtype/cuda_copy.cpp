// The CUDA row's copies: asynchronous ones on per-device non-blocking streams (a direction's own streams) with an
// event per copy, synchronous ones built on them, and the small-copy lane for the small-message path (a stream of
// its own, a completion word the GPU writes, and stream memory operations for a few bytes towards the GPU).
#include "memtype/cuda_internal.h"

#if GDX_HAVE_CUDA_H
#include "core/cpu_relax.h"
#include "core/error.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace gdx::mem::cudarow {

namespace {

// Caller holds a DeviceScope for the device: streams belong to its primary context.
// Copies towards the GPU and towards the host get streams of their own: a staging pipeline runs the D2H of one
// fragment beside the H2D of another, and on a shared stream one would wait behind the other (the copy engines
// and PCIe run both directions at once). A copy of unknown direction takes any stream.
gdx_status_t pick_stream(const cuda::DriverApi *api, DeviceState *ds, CopyDir dir, CUstream *out) {
    std::lock_guard<std::mutex> g(ds->mu);
    if (ds->streams.empty()) {
        for (int i = 0; i < kStreamsPerDevice; ++i) {
            CUstream s = nullptr;
            // Non-blocking: never serialized with the application's work on the legacy default stream.
            CUresult r = api->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
            if (r != CUDA_SUCCESS) {
                if (ds->streams.empty()) return driver_error(r, log::Level::Error, "cuStreamCreate(NON_BLOCKING)");
                break; // fewer streams still work
            }
            ds->streams.push_back(s);
        }
    }
    const size_t n = ds->streams.size(), half = n / 2;
    const unsigned k = ds->next_stream[static_cast<int>(dir)]++;
    if (dir == CopyDir::Unknown || half == 0) *out = ds->streams[k % n];
    else *out = dir == CopyDir::ToHost ? ds->streams[k % half] : ds->streams[half + k % (n - half)];
    return GDX_OK;
}

gdx_status_t take_event(const cuda::DriverApi *api, DeviceState *ds, CUevent *out) {
    {
        std::lock_guard<std::mutex> g(ds->mu);
        if (!ds->free_events.empty()) {
            *out = ds->free_events.back();
            ds->free_events.pop_back();
            return GDX_OK;
        }
    }
    CUresult r = api->cuEventCreate(out, CU_EVENT_DISABLE_TIMING); // no timestamps: cheaper record and query
    return r == CUDA_SUCCESS ? GDX_OK : driver_error(r, log::Level::Error, "cuEventCreate(DISABLE_TIMING)");
}

void give_event(DeviceState *ds, CUevent ev) {
    std::lock_guard<std::mutex> g(ds->mu);
    ds->free_events.push_back(ev);
}

} // namespace

gdx_status_t copy_async(void *dst, const void *src, size_t len, int device, CopyDir dir, CopyHandle *h) {
    if (h == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "cuda copy_async: null handle");
    *h = CopyHandle{};
    h->kind = MemKind::Cuda;
    if (len == 0) return GDX_OK;
    if (dst == nullptr || src == nullptr)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "cuda copy of %zu bytes: null pointer", len);
    const cuda::DriverApi *api = cuda::driver();
    if (api == nullptr) return GDX_FAIL(GDX_ERR_NO_DEVICE, kComp, "cuda copy: %s", cuda::why_unavailable().c_str());
    const int dev = device < 0 ? 0 : device;
    DeviceState *ds = device_state(dev);
    if (ds == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "cuda copy: no GPU %d", device);
    cuda::DeviceScope scope(dev);
    if (!scope.ok()) return driver_error(scope.status(), log::Level::Error, "cuda copy: binding the GPU's context");
    CUstream stream = nullptr;
    CUevent ev = nullptr;
    gdx_status_t st = pick_stream(api, ds, dir, &stream);
    if (st == GDX_OK) st = take_event(api, ds, &ev);
    if (st != GDX_OK) return st;
    // Unified addressing: the driver infers the direction from the pointers (host, pinned, device, managed).
    CUresult r =
        api->cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src), len, stream);
    if (r != CUDA_SUCCESS) {
        give_event(ds, ev);
        char what[112];
        std::snprintf(what, sizeof(what), "cuMemcpyAsync(%p <- %p, %zu) on GPU %d", dst, src, len, dev);
        return driver_error(r, log::Level::Error, what);
    }
    r = api->cuEventRecord(ev, stream);
    if (r != CUDA_SUCCESS) {
        // The copy is queued but cannot be tracked: wait for the stream instead, and drop the event.
        api->cuEventDestroy(ev);
        CUresult rs = api->cuStreamSynchronize(stream);
        if (rs != CUDA_SUCCESS) return driver_error(rs, log::Level::Error, "cuStreamSynchronize after a copy");
        GDX_DEBUG(kComp, "cuEventRecord failed (%s): copy completed synchronously", cuda::error_text(r).c_str());
        return GDX_OK;
    }
    h->event = ev;
    h->device = dev;
    return GDX_INPROGRESS;
}

gdx_status_t copy_test(CopyHandle *h) {
    if (h == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "cuda copy_test: null handle");
    if (h->event == nullptr) return GDX_OK;
    const cuda::DriverApi *api = cuda::driver();
    DeviceState *ds = device_state(h->device);
    if (api == nullptr || ds == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "cuda copy_test: bad handle");
    cuda::DeviceScope scope(h->device);
    CUevent ev = static_cast<CUevent>(h->event);
    CUresult r = api->cuEventQuery(ev);
    if (r == CUDA_ERROR_NOT_READY) return GDX_INPROGRESS;
    h->event = nullptr;
    if (r == CUDA_SUCCESS) {
        give_event(ds, ev);
        return GDX_OK;
    }
    api->cuEventDestroy(ev); // an event that reported an error is not reused
    return driver_error(r, log::Level::Error, "asynchronous copy failed (cuEventQuery)");
}

gdx_status_t copy(void *dst, const void *src, size_t len, int device) {
    // cuMemcpy may return before a device-to-device or pageable copy has landed; waiting for our own event
    // makes "synchronous" mean complete.
    CopyHandle h;
    gdx_status_t st = copy_async(dst, src, len, device, CopyDir::Unknown, &h);
    if (st != GDX_INPROGRESS) return st;
    const cuda::DriverApi *api = cuda::driver();
    DeviceState *ds = device_state(h.device);
    cuda::DeviceScope scope(h.device);
    CUevent ev = static_cast<CUevent>(h.event);
    // Polled, not cuEventSynchronize: the synchronous copies are the small-message path's, a few microseconds
    // each, and a blocking wait that yields or sleeps (the context's scheduling policy decides) adds its wake-up
    // to every one of them.
    CUresult r;
    while ((r = api->cuEventQuery(ev)) == CUDA_ERROR_NOT_READY) {
        cpu_relax();
    }
    if (r == CUDA_SUCCESS) {
        give_event(ds, ev);
        return GDX_OK;
    }
    api->cuEventDestroy(ev);
    return driver_error(r, log::Level::Error, "cuda copy (cuEventQuery)");
}

namespace {

// One batch of stream memory operations carries fewer than 256 (cuStreamBatchMemOp); one is the completion word.
constexpr size_t kMaxWriteOps = 254;

// The lane's stream and completion word (caller holds ds->small_mu and a DeviceScope). Without stream memory
// operations or pinned mapped memory the lane stays off and copy_pinned uses the driver's synchronous copies.
void setup_small_lane(const cuda::DriverApi *api, DeviceState *ds, int dev) {
    ds->small_tried = true;
    if (api->cuStreamWriteValue32 == nullptr) {
        GDX_DEBUG(kComp, "GPU %d: no stream memory operations: small copies use cuMemcpyDtoH/HtoD", dev);
        return;
    }
    void *word = nullptr;
    CUdeviceptr word_dev = 0;
    const char *call = "cuMemHostAlloc";
    CUresult r = api->cuMemHostAlloc(&word, 64, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
    if (r == CUDA_SUCCESS) {
        call = "cuMemHostGetDevicePointer";
        r = api->cuMemHostGetDevicePointer(&word_dev, word, 0);
    }
    CUstream s = nullptr;
    if (r == CUDA_SUCCESS) {
        call = "cuStreamCreate(NON_BLOCKING)";
        r = api->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
    }
    if (r != CUDA_SUCCESS) {
        GDX_INFO(kComp, "GPU %d: small-copy lane unavailable (%s: %s): small copies use cuMemcpyDtoH/HtoD", dev,
                 call, cuda::error_text(r).c_str());
        if (word != nullptr) api->cuMemFreeHost(word);
        return;
    }
    *static_cast<volatile uint32_t *>(word) = 0;
    ds->small_stream = s;
    ds->small_flag = static_cast<volatile uint32_t *>(word);
    ds->small_flag_dev = word_dev;
}

// Waits for the lane's word to reach `seq`. A failed operation never writes it, so the stream is asked once a
// millisecond: an error ends the wait with the driver's reason instead of a hang.
gdx_status_t wait_small_lane(const cuda::DriverApi *api, DeviceState *ds, uint32_t seq) {
    int64_t next_check = 0;
    for (unsigned spins = 0;; ++spins) {
        if (static_cast<int32_t>(*ds->small_flag - seq) >= 0) return GDX_OK;
        if ((spins & 255) != 255) {
            cpu_relax();
            continue;
        }
        const int64_t now = now_ns();
        if (next_check == 0) next_check = now + kStreamCheckNs;
        if (now < next_check) continue;
        next_check = now + kStreamCheckNs;
        CUresult r = api->cuStreamQuery(ds->small_stream);
        if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY)
            return driver_error(r, log::Level::Error, "small copy (cuStreamQuery of the small-copy stream)");
    }
}

// The bytes towards the GPU as 32-bit writes, then the completion word, in one batch (the default flags order
// each write after the ones before it, so the word lands last).
CUresult write_by_memops(const cuda::DriverApi *api, DeviceState *ds, void *dst, const void *src, size_t len,
                         uint32_t seq) {
    CUstreamBatchMemOpParams ops[kMaxWriteOps + 1];
    const size_t words = len / 4;
    for (size_t i = 0; i < words; ++i) {
        ops[i] = CUstreamBatchMemOpParams{};
        ops[i].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
        ops[i].writeValue.address = reinterpret_cast<CUdeviceptr>(dst) + 4 * i;
        uint32_t v;
        std::memcpy(&v, static_cast<const uint8_t *>(src) + 4 * i, 4);
        ops[i].writeValue.value = v;
        ops[i].writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
    }
    ops[words] = CUstreamBatchMemOpParams{};
    ops[words].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    ops[words].writeValue.address = ds->small_flag_dev;
    ops[words].writeValue.value = seq;
    ops[words].writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
    return api->cuStreamBatchMemOp(ds->small_stream, static_cast<unsigned>(words + 1), ops, 0);
}

} // namespace

gdx_status_t copy_pinned(void *dst, const void *src, size_t len, int device, CopyDir dir, MemType gpu_side) {
    if (dir == CopyDir::Unknown) return copy(dst, src, len, device);
    if (len == 0) return GDX_OK;
    const cuda::DriverApi *api = cuda::driver();
    if (api == nullptr) return GDX_FAIL(GDX_ERR_NO_DEVICE, kComp, "cuda copy: %s", cuda::why_unavailable().c_str());
    const int dev = device < 0 ? 0 : device;
    DeviceState *ds = device_state(dev);
    if (ds == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "cuda copy: no GPU %d", device);
    cuda::DeviceScope scope(dev);
    if (!scope.ok()) return driver_error(scope.status(), log::Level::Error, "cuda copy: binding the context");
    std::unique_lock<std::mutex> lane(ds->small_mu);
    if (!ds->small_tried) setup_small_lane(api, ds, dev);
    if (ds->small_stream == nullptr) {
        lane.unlock();
        // With a pinned host side both calls return once the bytes have landed (the driver's documented behaviour
        // for pinned memory).
        CUresult r = dir == CopyDir::ToHost ? api->cuMemcpyDtoH(dst, reinterpret_cast<CUdeviceptr>(src), len)
                                            : api->cuMemcpyHtoD(reinterpret_cast<CUdeviceptr>(dst), src, len);
        if (r != CUDA_SUCCESS)
            return driver_error(r, log::Level::Error, dir == CopyDir::ToHost ? "cuMemcpyDtoH" : "cuMemcpyHtoD");
        return GDX_OK;
    }
    const uint32_t seq = ++ds->small_seq;
    // Why memory operations: a copy engine must fetch the bytes from host memory across PCIe before it writes
    // them, and a copy costs its own setup; a write operation carries the value in the command itself
    // (bench/results/gpu-2026-11-24: a completion write alone 3.8 us, copy + completion 9.1 us, one process).
    // Only cudaMalloc and device-located VMM memory are written that way: managed and host-located memory would
    // take a GPU-side fault or a write across the bus, and the driver refuses pool memory (CUDA_ERROR_INVALID_VALUE,
    // H200, driver 580). Should it refuse anything else, the lane learns it and copies from then on.
    const uint32_t type_bit = 1u << static_cast<unsigned>(gpu_side);
    const bool by_memops = dir == CopyDir::ToDevice &&
                           (gpu_side == MemType::CudaDevice || gpu_side == MemType::CudaVmm) &&
                           api->cuStreamBatchMemOp != nullptr && (ds->memops_refused & type_bit) == 0 &&
                           len <= std::min(small_write_max(), 4 * kMaxWriteOps) && len % 4 == 0 &&
                           reinterpret_cast<uintptr_t>(dst) % 4 == 0;
    CUresult r = CUDA_SUCCESS;
    const char *call = "cuStreamBatchMemOp (small write)";
    bool copy = !by_memops;
    if (by_memops) {
        r = write_by_memops(api, ds, dst, src, len, seq);
        if (r == CUDA_ERROR_INVALID_VALUE || r == CUDA_ERROR_NOT_SUPPORTED) {
            ds->memops_refused |= type_bit; // refused at submission: nothing was queued; remembered per type
            GDX_INFO(kComp, "GPU %d: stream memory operations refused on %s memory (%s, at %p): small writes into it "
                     "are copies from now on", dev, type_name(gpu_side), cuda::error_text(r).c_str(), dst);
            copy = true; // any other failure is reported below, not retried as a copy
        }
    }
    if (copy) {
        call = "cuMemcpyAsync (small copy)";
        r = api->cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src), len,
                               ds->small_stream);
        if (r == CUDA_SUCCESS) {
            call = "cuStreamWriteValue32 (small copy's completion)";
            // Default flags: ordered after the copy's writes.
            r = api->cuStreamWriteValue32(ds->small_stream, ds->small_flag_dev, seq, CU_STREAM_WRITE_VALUE_DEFAULT);
        }
    }
    if (r != CUDA_SUCCESS) {
        --ds->small_seq; // nothing will write this number; the next copy reuses it
        CUresult rs = api->cuStreamSynchronize(ds->small_stream); // whatever was queued before the failure
        char what[160];
        std::snprintf(what, sizeof(what), "%s of %zu bytes %s GPU %d%s", call, len,
                      dir == CopyDir::ToHost ? "from" : "to", dev, rs != CUDA_SUCCESS ? " (stream failed)" : "");
        return driver_error(r, log::Level::Error, what);
    }
    return wait_small_lane(api, ds, seq);
}
} // namespace gdx::mem::cudarow

#endif // GDX_HAVE_CUDA_H
