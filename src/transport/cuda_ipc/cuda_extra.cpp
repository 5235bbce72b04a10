#include "transport/cuda_ipc/cuda_extra.h"

#if GDX_HAVE_CUDA_H
#include "core/log.h"
#include "memtype/cuda_driver.h"

#include <dlfcn.h>
#include <mutex>

namespace gdx::tp::cuda_ipc {

namespace {
using GetProcAddressV2 = CUresult (*)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
}

const ExtraApi *extra_api() {
    static std::once_flag once;
    static ExtraApi *api = nullptr;
    std::call_once(once, [] {
        if (cuda::driver() == nullptr) return;
        // RTLD_NOLOAD: only the library memtype loaded; nothing new is opened (and nothing is linked).
        void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
        if (lib == nullptr) return;
        auto gpa = reinterpret_cast<GetProcAddressV2>(dlsym(lib, "cuGetProcAddress_v2"));
        api = new ExtraApi;
        if (gpa != nullptr) {
            CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SUCCESS;
            void *fn = nullptr;
            if (gpa("cuStreamWriteValue32", &fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &q) == CUDA_SUCCESS &&
                q == CU_GET_PROC_ADDRESS_SUCCESS)
                api->cuStreamWriteValue32 = reinterpret_cast<decltype(api->cuStreamWriteValue32)>(fn);
        }
        GDX_DEBUG("cuda_ipc", "cuStreamWriteValue32 %s", api->cuStreamWriteValue32 ? "available" : "absent");
        dlclose(lib); // drops only the reference NOLOAD took
    });
    return api;
}

} // namespace gdx::tp::cuda_ipc

#endif
