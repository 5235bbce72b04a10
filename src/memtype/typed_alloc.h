// Memory of a chosen type on a chosen GPU, made and released by the memtype layer: the test buffers gdx_ext.h
// hands gdx's tools (gdx_perftest measures every kind), so that src/api calls no GPU runtime itself. Plain host
// memory is the caller's (malloc); these are the kinds a driver makes.
#pragma once

#include "memtype/memory_ops.h"

namespace gdx::mem {

struct TypedAlloc {
    MemType type = MemType::HostPageable;
    int device = 0;
    void *ptr = nullptr;
    size_t len = 0;
    size_t map_len = 0;      // VMM: the mapped (granularity-rounded) length
    uint64_t vmm_handle = 0; // VMM: the physical allocation
};

// `len` bytes of HostPinned, CudaDevice, CudaManaged or CudaVmm memory on GPU `device`, zero-filled and
// synchronized (a first use pays no first touch). VMM memory is exportable by POSIX fd where the GPU supports it,
// and GPUDirect-capable where the GPU allows that with VMM. Errors name the driver call; *a then holds whatever
// must still be released with typed_free.
gdx_status_t typed_alloc(MemType type, int device, size_t len, TypedAlloc *a);
void typed_free(TypedAlloc *a);
// Copies between host memory and [a.ptr + off, +len), complete when they return.
gdx_status_t typed_write(const TypedAlloc &a, size_t off, const void *src, size_t len);
gdx_status_t typed_read(const TypedAlloc &a, size_t off, void *dst, size_t len);

} // namespace gdx::mem
