// The CUDA row's copies: asynchronous ones on per-device non-blocking streams (a direction's own streams) with an
// event per copy, synchronous ones built on them, and the short pinned form for the small-message path.
#include "memtype/cuda_internal.h"

#if GDX_HAVE_CUDA_H
#include "core/error.h"

#include <cstdio>

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
#if defined(__x86_64__)
        __builtin_ia32_pause();
#endif
    }
    if (r == CUDA_SUCCESS) {
        give_event(ds, ev);
        return GDX_OK;
    }
    api->cuEventDestroy(ev);
    return driver_error(r, log::Level::Error, "cuda copy (cuEventQuery)");
}

gdx_status_t copy_pinned(void *dst, const void *src, size_t len, int device, CopyDir dir) {
    if (dir == CopyDir::Unknown) return copy(dst, src, len, device);
    const cuda::DriverApi *api = cuda::driver();
    if (api == nullptr) return GDX_FAIL(GDX_ERR_NO_DEVICE, kComp, "cuda copy: %s", cuda::why_unavailable().c_str());
    cuda::DeviceScope scope(device < 0 ? 0 : device);
    if (!scope.ok()) return driver_error(scope.status(), log::Level::Error, "cuda copy: binding the context");
    // With a pinned host side both calls return once the bytes have landed (the driver's documented behaviour for
    // pinned memory), on the context's own (legacy) stream, which the engine's non-blocking streams do not wait on.
    CUresult r = dir == CopyDir::ToHost
                     ? api->cuMemcpyDtoH(dst, reinterpret_cast<CUdeviceptr>(src), len)
                     : api->cuMemcpyHtoD(reinterpret_cast<CUdeviceptr>(dst), src, len);
    if (r != CUDA_SUCCESS)
        return driver_error(r, log::Level::Error, dir == CopyDir::ToHost ? "cuMemcpyDtoH" : "cuMemcpyHtoD");
    return GDX_OK;
}
} // namespace gdx::mem::cudarow

#endif // GDX_HAVE_CUDA_H
