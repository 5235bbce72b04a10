// The CUDA driver API, opened at run time: dlopen("libcuda.so.1"), then every entry point through
// cuGetProcAddress at the ABI of the cuda.h gdx was built with. Nothing links libcuda, so every gdx binary
// runs on a machine without a GPU. Only the memtype layer (and tests and benchmarks that make GPU memory of
// their own) include this header; every other layer goes through the memory ops table (memory_ops.h), and
// tests/memtype/test_no_driver_above.sh fails the build's tests when src/transport, src/fallback, src/api,
// src/topo or src/uct include it or call a cu* entry point.
#pragma once

#if GDX_HAVE_CUDA_H
#include "memtype/memory_ops.h"

#include <cuda.h>

#include <string>
#include <vector>

namespace gdx::cuda {

// X(name, required): required entry points must resolve or the driver counts as absent.
#define GDX_CUDA_DRIVER_FUNCS(X)                                                                            \
    X(cuInit, true) X(cuDriverGetVersion, true) X(cuGetErrorName, true) X(cuGetErrorString, true)         \
    X(cuDeviceGetCount, true) X(cuDeviceGet, true) X(cuDeviceGetName, true) X(cuDeviceGetAttribute, true) \
    X(cuDeviceGetPCIBusId, true) X(cuDeviceTotalMem, true) X(cuDeviceGetUuid, false)                        \
    X(cuDevicePrimaryCtxRetain, true) X(cuDevicePrimaryCtxRelease, true) X(cuCtxGetCurrent, true)          \
    X(cuCtxSetCurrent, true) X(cuCtxPushCurrent, true) X(cuCtxPopCurrent, true) X(cuCtxGetDevice, true)    \
    X(cuCtxSynchronize, true) X(cuPointerGetAttribute, true) X(cuPointerGetAttributes, true)               \
    X(cuMemGetAddressRange, true) X(cuMemAlloc, true) X(cuMemFree, true) X(cuMemAllocHost, true)           \
    X(cuMemFreeHost, true) X(cuMemHostAlloc, true) X(cuMemHostRegister, true) X(cuMemHostUnregister, true)   \
    X(cuMemHostGetDevicePointer, true) X(cuMemAllocManaged, true) X(cuMemcpy, true) X(cuMemcpyAsync, true) \
    X(cuMemcpyHtoD, true) X(cuMemcpyDtoH, true) X(cuMemsetD8, true) X(cuMemsetD8Async, true)                \
    X(cuStreamCreate, true) X(cuStreamDestroy, true) X(cuStreamSynchronize, true) X(cuStreamQuery, true)   \
    X(cuEventCreate, true) X(cuEventDestroy, true) X(cuEventRecord, true) X(cuEventQuery, true)            \
    X(cuEventSynchronize, true) X(cuDeviceCanAccessPeer, true) X(cuCtxEnablePeerAccess, true)              \
    X(cuIpcGetMemHandle, true) X(cuIpcOpenMemHandle, true) X(cuIpcCloseMemHandle, true)                    \
    X(cuMemRetainAllocationHandle, false) X(cuMemRelease, false) X(cuMemCreate, false)                      \
    X(cuMemMap, false) X(cuMemUnmap, false) X(cuMemAddressReserve, false) X(cuMemAddressFree, false)       \
    X(cuMemSetAccess, false) X(cuMemGetAllocationGranularity, false)                                        \
    X(cuMemGetAllocationPropertiesFromHandle, false) X(cuMemExportToShareableHandle, false)                 \
    X(cuMemImportFromShareableHandle, false) X(cuMemGetHandleForAddressRange, false)                        \
    X(cuMemAllocAsync, false) X(cuMemFreeAsync, false) X(cuMemPoolCreate, false) X(cuMemPoolDestroy, false) \
    X(cuMemAllocFromPoolAsync, false) X(cuMemPoolExportToShareableHandle, false)                            \
    X(cuMemPoolImportFromShareableHandle, false) X(cuMemPoolExportPointer, false)                           \
    X(cuMemPoolImportPointer, false) X(cuMemPoolSetAccess, false) X(cuMemHostGetFlags, false)               \
    X(cuMemGetAccess, false) X(cuStreamWriteValue32, false) X(cuStreamBatchMemOp, false)

struct DriverApi {
#define GDX_CUDA_DECLARE(name, required) decltype(&::name) name = nullptr;
    GDX_CUDA_DRIVER_FUNCS(GDX_CUDA_DECLARE)
#undef GDX_CUDA_DECLARE
    int driver_version = 0; // e.g. 13000
    int device_count = 0;
    void *lib = nullptr;           // the dlopen handle of libcuda.so.1 (RTLD_NODELETE)
    void *get_proc_v2 = nullptr;   // cuGetProcAddress_v2, or nullptr
    void *get_proc_v1 = nullptr;   // cuGetProcAddress (the pre-12.5 ABI)
};

// What cuGetProcAddress hands out for `name` at ABI `version` (the CUDA runtime asks the same way), with the
// per-thread default stream flag or without. nullptr when the driver has no such entry point.
void *entry_point(const DriverApi &api, const char *name, int version, bool per_thread_stream);

// The driver, loaded and initialized once (thread-safe). nullptr when there is no usable driver or no GPU;
// why_unavailable() then says why, and that was logged once at info.
const DriverApi *driver();
const std::string &why_unavailable();

// "CUDA_ERROR_INVALID_VALUE (invalid argument)".
std::string error_text(CUresult r);

using DeviceInfo = mem::DeviceInfo; // memory_ops.h: what the ops table hands the layers above

std::vector<DeviceInfo> list_devices();

// Makes device `ordinal`'s primary context current on this thread (retained once per device for the life of
// the process). Returns CUDA_SUCCESS or the driver's error.
CUresult bind_device(int ordinal);

// bind_device() for one scope: makes `ordinal`'s primary context current and, on exit, restores whatever the
// thread had current before (possibly nothing). gdx calls the driver from application threads; leaving a
// context bound there would change what the application's next runtime call uses.
class DeviceScope {
  public:
    explicit DeviceScope(int ordinal);
    ~DeviceScope();
    DeviceScope(const DeviceScope &) = delete;
    DeviceScope &operator=(const DeviceScope &) = delete;
    bool ok() const { return status_ == CUDA_SUCCESS; }
    CUresult status() const { return status_; }

  private:
    CUcontext prev_ = nullptr;
    bool restore_ = false;
    CUresult status_ = CUDA_ERROR_NO_DEVICE;
};

} // namespace gdx::cuda

#endif // GDX_HAVE_CUDA_H
