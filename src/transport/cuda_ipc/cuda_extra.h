// Driver entry points cuda_ipc needs beyond memtype's DriverApi table, resolved the same way (cuGetProcAddress at
// the ABI of our cuda.h) from the libcuda.so.1 memtype already opened. Absent ones stay null; callers fall back.
#pragma once

#if GDX_HAVE_CUDA_H
#include <cuda.h>

namespace gdx::tp::cuda_ipc {

struct ExtraApi {
    decltype(&::cuStreamWriteValue32) cuStreamWriteValue32 = nullptr;
};

// Null when there is no driver (memtype's cuda::driver() is null).
const ExtraApi *extra_api();

} // namespace gdx::tp::cuda_ipc

#endif
