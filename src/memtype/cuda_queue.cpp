// The CUDA row's copy queue (memory_ops.h, CopyQueue): copies spread over a few non-blocking streams of one GPU, each
// followed by a completion marker. 'flag': the GPU writes a per-stream sequence number into pinned host memory with
// cuStreamWriteValue32 (default flags: ordered after the copy's writes), polled with a plain load, no driver call
// per poll; 'event': a CUDA event per copy (cuEventQuery), also where the driver lacks stream memory operations.
// A copy whose stream failed never writes its flag, so streams with work are asked (cuStreamQuery) once a
// millisecond and their copies fail with the driver's error instead of hanging. cuStreamWriteValue32 is an optional
// entry of the driver table (cuda_driver.h); absent, the queue uses events.
#include "memtype/cuda_internal.h"

#if GDX_HAVE_CUDA_H
#include "core/error.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <optional>

namespace gdx::mem::cudarow {

namespace {

constexpr size_t kFlagStride = 64; // one cache line per stream's flag

class CudaCopyQueue final : public CopyQueue {
  public:
    static gdx_status_t create(int device, const CopyQueueOptions &o, std::unique_ptr<CopyQueue> *out);
    ~CudaCopyQueue() override;
    gdx_status_t copy(void *dst, const void *src, size_t len, const CopyTag &tag) override;
    unsigned poll(DoneFn done, void *arg) override;
    void sync() override;
    bool idle() const override;
    void forget(void *owner) override;
    const char *signal_name() const override { return use_flags_ ? "flag" : "event"; }

  private:
    struct Marker {
        CopyTag tag;
        uint32_t seq;
        CUevent ev;
    };
    struct Stream {
        CUstream s = nullptr;
        volatile uint32_t *flag = nullptr; // written by the GPU after each copy (cuStreamWriteValue32)
        CUdeviceptr flag_dev = 0;
        uint32_t issued = 0;
        std::deque<Marker> fifo;
        std::vector<CUevent> spare;
        int64_t next_check_ns = 0;
    };
    explicit CudaCopyQueue(int device) : device_(device) {}
    void setup_flags(const cuda::DriverApi *api);
    void finish(Stream &s, gdx_status_t st, DoneFn done, void *arg);
    unsigned poll_stream(const cuda::DriverApi *api, Stream &s, std::optional<cuda::DeviceScope> &scope, DoneFn done,
                         void *arg);

    int device_;
    std::vector<Stream> streams_;
    unsigned rr_ = 0;
    bool use_flags_ = false;
    void *flags_host_ = nullptr;
};

gdx_status_t CudaCopyQueue::create(int device, const CopyQueueOptions &o, std::unique_ptr<CopyQueue> *out) {
    const cuda::DriverApi *api = cuda::driver();
    if (api == nullptr) return GDX_FAIL(GDX_ERR_NO_DEVICE, kComp, "copy queue: %s", cuda::why_unavailable().c_str());
    if (out == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "copy queue: null output");
    std::unique_ptr<CudaCopyQueue> q(new CudaCopyQueue(device));
    cuda::DeviceScope scope(device);
    if (!scope.ok())
        return GDX_FAIL(GDX_ERR_DRIVER, kComp, "binding GPU %d: %s", device, cuda::error_text(scope.status()).c_str());
    q->streams_.resize(std::clamp<size_t>(o.streams, 1, 16));
    for (Stream &s : q->streams_) {
        CUresult r = api->cuStreamCreate(&s.s, CU_STREAM_NON_BLOCKING);
        if (r != CUDA_SUCCESS)
            return GDX_FAIL(GDX_ERR_DRIVER, kComp, "cuStreamCreate on GPU %d: %s", device, cuda::error_text(r).c_str());
    }
    if (o.flags && api->cuStreamWriteValue32 != nullptr) q->setup_flags(api);
    *out = std::move(q);
    return GDX_OK;
}

// Pinned host words the GPU writes, one cache line per stream; without them the queue uses events.
void CudaCopyQueue::setup_flags(const cuda::DriverApi *api) {
    const size_t n = streams_.size();
    CUresult r = api->cuMemHostAlloc(&flags_host_, kFlagStride * n, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
    const char *call = "cuMemHostAlloc";
    CUdeviceptr dev = 0;
    if (r == CUDA_SUCCESS) {
        call = "cuMemHostGetDevicePointer";
        r = api->cuMemHostGetDevicePointer(&dev, flags_host_, 0);
    }
    if (r != CUDA_SUCCESS) {
        GDX_INFO(kComp, "completion flags unavailable (%s: %s): using events", call, cuda::error_text(r).c_str());
        return; // flags_host_ (if allocated) is freed by the destructor
    }
    std::memset(flags_host_, 0, kFlagStride * n);
    for (size_t i = 0; i < n; ++i) {
        streams_[i].flag =
            reinterpret_cast<volatile uint32_t *>(static_cast<uint8_t *>(flags_host_) + i * kFlagStride);
        streams_[i].flag_dev = dev + i * kFlagStride;
    }
    use_flags_ = true;
}

CudaCopyQueue::~CudaCopyQueue() {
    const cuda::DriverApi *api = cuda::driver();
    sync();
    cuda::DeviceScope scope(device_);
    auto check = [&](CUresult r, const char *call) {
        if (r != CUDA_SUCCESS) GDX_WARN(kComp, "%s on GPU %d: %s", call, device_, cuda::error_text(r).c_str());
    };
    for (Stream &s : streams_) {
        for (Marker &m : s.fifo)
            if (m.ev) check(api->cuEventDestroy(m.ev), "cuEventDestroy");
        for (CUevent e : s.spare) check(api->cuEventDestroy(e), "cuEventDestroy");
        if (s.s) check(api->cuStreamDestroy(s.s), "cuStreamDestroy");
    }
    if (flags_host_) check(api->cuMemFreeHost(flags_host_), "cuMemFreeHost (completion flags)");
}

gdx_status_t CudaCopyQueue::copy(void *dst, const void *src, size_t len, const CopyTag &tag) {
    const cuda::DriverApi *api = cuda::driver();
    cuda::DeviceScope scope(device_);
    Stream &s = streams_[rr_++ % streams_.size()];
    CUresult r = api->cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src), len, s.s);
    if (r != CUDA_SUCCESS)
        return GDX_FAIL(GDX_ERR_DRIVER, kComp, "cuMemcpyAsync(%p <- %p, %zu bytes) on GPU %d: %s", dst, src, len,
                        device_, cuda::error_text(r).c_str());
    Marker m{tag, 0, nullptr};
    const char *call = "cuStreamWriteValue32";
    if (use_flags_) {
        m.seq = ++s.issued;
        // Default flags: the write is ordered after the copy's memory traffic.
        r = api->cuStreamWriteValue32(s.s, s.flag_dev, m.seq, CU_STREAM_WRITE_VALUE_DEFAULT);
    } else {
        if (!s.spare.empty()) {
            m.ev = s.spare.back();
            s.spare.pop_back();
        } else {
            call = "cuEventCreate";
            r = api->cuEventCreate(&m.ev, CU_EVENT_DISABLE_TIMING);
        }
        if (r == CUDA_SUCCESS) {
            call = "cuEventRecord";
            r = api->cuEventRecord(m.ev, s.s);
        }
    }
    if (r != CUDA_SUCCESS) {
        // The copy is queued but cannot be tracked: wait for it here so the caller may reuse its buffer.
        if (CUresult rs = api->cuStreamSynchronize(s.s); rs != CUDA_SUCCESS)
            GDX_WARN(kComp, "cuStreamSynchronize on GPU %d after an untracked copy: %s", device_,
                     cuda::error_text(rs).c_str());
        if (m.ev) s.spare.push_back(m.ev);
        if (use_flags_) --s.issued;
        return GDX_FAIL(GDX_ERR_DRIVER, kComp, "completion marker (%s) after a copy on GPU %d: %s", call, device_,
                        cuda::error_text(r).c_str());
    }
    s.fifo.push_back(m);
    return GDX_OK;
}

void CudaCopyQueue::finish(Stream &s, gdx_status_t st, DoneFn done, void *arg) {
    while (!s.fifo.empty()) {
        Marker m = s.fifo.front();
        s.fifo.pop_front();
        if (m.ev) s.spare.push_back(m.ev);
        done(arg, m.tag, st);
    }
}

unsigned CudaCopyQueue::poll_stream(const cuda::DriverApi *api, Stream &s, std::optional<cuda::DeviceScope> &scope,
                                    DoneFn done, void *arg) {
    unsigned n = 0;
    if (!s.fifo.empty() && !use_flags_ && !scope) scope.emplace(device_);
    while (!s.fifo.empty()) {
        Marker m = s.fifo.front();
        bool complete;
        if (use_flags_) {
            complete = static_cast<int32_t>(*s.flag - m.seq) >= 0;
        } else {
            CUresult r = api->cuEventQuery(m.ev);
            if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY) {
                finish(s, GDX_FAIL(GDX_ERR_DRIVER, kComp, "copy on GPU %d failed (cuEventQuery): %s", device_,
                                   cuda::error_text(r).c_str()),
                       done, arg);
                return n;
            }
            complete = r == CUDA_SUCCESS;
        }
        if (!complete) break;
        s.fifo.pop_front();
        if (m.ev) s.spare.push_back(m.ev);
        done(arg, m.tag, GDX_OK); // may queue new copies (pushed at the back)
        ++n;
    }
    if (s.fifo.empty() || !use_flags_) return n;
    // A failed copy never writes its flag: ask the stream now and then, so errors surface instead of hanging.
    int64_t now = now_ns();
    if (now < s.next_check_ns) return n;
    s.next_check_ns = now + kStreamCheckNs;
    if (!scope) scope.emplace(device_);
    CUresult r = api->cuStreamQuery(s.s);
    if (r == CUDA_SUCCESS) {
        n += static_cast<unsigned>(s.fifo.size());
        finish(s, GDX_OK, done, arg); // all work done (flag writes included)
    } else if (r != CUDA_ERROR_NOT_READY) {
        finish(s,
               GDX_FAIL(GDX_ERR_DRIVER, kComp, "copy stream of GPU %d failed (cuStreamQuery): %s", device_,
                        cuda::error_text(r).c_str()),
               done, arg);
    }
    return n;
}

unsigned CudaCopyQueue::poll(DoneFn done, void *arg) {
    const cuda::DriverApi *api = cuda::driver();
    unsigned n = 0;
    std::optional<cuda::DeviceScope> scope; // bound only when a driver call is needed (events, stream checks)
    for (Stream &s : streams_) n += poll_stream(api, s, scope, done, arg);
    return n;
}

void CudaCopyQueue::sync() {
    const cuda::DriverApi *api = cuda::driver();
    cuda::DeviceScope scope(device_);
    for (Stream &s : streams_)
        if (s.s)
            if (CUresult r = api->cuStreamSynchronize(s.s); r != CUDA_SUCCESS)
                GDX_WARN(kComp, "cuStreamSynchronize on GPU %d: %s (its copies complete with the error)", device_,
                         cuda::error_text(r).c_str());
}

bool CudaCopyQueue::idle() const {
    for (const Stream &s : streams_)
        if (!s.fifo.empty()) return false;
    return true;
}

void CudaCopyQueue::forget(void *owner) {
    for (Stream &s : streams_)
        for (Marker &m : s.fifo)
            if (m.tag.owner == owner) m.tag.owner = nullptr;
}

} // namespace

gdx_status_t copy_queue(int device, const CopyQueueOptions &opts, std::unique_ptr<CopyQueue> *out) {
    return CudaCopyQueue::create(device, opts, out);
}

} // namespace gdx::mem::cudarow

#endif // GDX_HAVE_CUDA_H
