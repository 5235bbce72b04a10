// Probe: how long until the host sees an 8-byte D2D copy done, by flag (cuStreamWriteValue32), event, sync.
#include <cuda.h>
#include <chrono>
#include <cstdio>
#include <algorithm>
#include <vector>
#define CK(x) do { CUresult r_ = (x); if (r_) { std::printf("%s -> %d\n", #x, r_); return 1; } } while (0)
using C = std::chrono::steady_clock;
static double med(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }
int main() {
    CK(cuInit(0)); CUdevice d; CK(cuDeviceGet(&d, 0)); CUcontext ctx; CK(cuDevicePrimaryCtxRetain(&ctx, d)); CK(cuCtxSetCurrent(ctx));
    unsigned flags = 0; cuCtxGetFlags(&flags); std::printf("ctx flags %#x\n", flags);
    CUdeviceptr a, b; CK(cuMemAlloc(&a, 1 << 20)); CK(cuMemAlloc(&b, 1 << 20));
    CUstream s; CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    void *h; CK(cuMemHostAlloc(&h, 4096, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
    CUdeviceptr hd; CK(cuMemHostGetDevicePointer(&hd, h, 0));
    volatile unsigned *flag = (volatile unsigned *)h; *flag = 0;
    CUevent ev; CK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    for (size_t sz : {size_t(8), size_t(65536)}) {
        std::vector<double> f, e, y, w;
        for (unsigned i = 1; i <= 2000; ++i) {
            auto t0 = C::now();
            CK(cuMemcpyAsync(b, a, sz, s)); CK(cuStreamWriteValue32(s, hd, i, CU_STREAM_WRITE_VALUE_DEFAULT));
            while (*flag != i) {}
            f.push_back(std::chrono::duration<double, std::micro>(C::now() - t0).count());
            t0 = C::now();
            CK(cuMemcpyAsync(b, a, sz, s)); CK(cuEventRecord(ev, s));
            while (cuEventQuery(ev) == CUDA_ERROR_NOT_READY) {}
            e.push_back(std::chrono::duration<double, std::micro>(C::now() - t0).count());
            t0 = C::now();
            CK(cuMemcpyAsync(b, a, sz, s)); CK(cuStreamSynchronize(s));
            y.push_back(std::chrono::duration<double, std::micro>(C::now() - t0).count());
            t0 = C::now();
            CK(cuStreamWriteValue32(s, hd, i + 100000, CU_STREAM_WRITE_VALUE_DEFAULT));
            while (*flag != i + 100000) {}
            w.push_back(std::chrono::duration<double, std::micro>(C::now() - t0).count());
        }
        std::printf("size %zu: median us: copy+flag %.2f  copy+event %.2f  copy+sync %.2f  flag only %.2f\n", sz, med(f), med(e), med(y), med(w));
    }
    return 0;
}
