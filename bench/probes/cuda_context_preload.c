/* Probe (a diagnosis, never a bar): LD_PRELOAD it into a UCX process to give that process what gdx's CUDA
 * transports give it at memory-domain open: a retained primary context on GPU 0, current on the main thread, and
 * a few streams. Used to tell apart, in UCP's host-memory latency, what the transport does per message from what a
 * CUDA context in the process does to UCP's memory-type cache (libucm_cuda records the context's mappings).
 * The driver is opened with dlopen, as gdx does.
 *   cc -O1 -shared -fPIC -o cuda_context_preload.so bench/probes/cuda_context_preload.c -ldl */
#include <dlfcn.h>
#include <stdio.h>

typedef int (*init_fn)(unsigned);
typedef int (*dev_get_fn)(int *, int);
typedef int (*retain_fn)(void **, int);
typedef int (*set_fn)(void *);
typedef int (*stream_fn)(void **, unsigned);

__attribute__((constructor)) static void make_context(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    void *ctx = NULL, *s = NULL;
    int dev = 0, i, r;

    if (h == NULL) {
        fprintf(stderr, "cuda_context_preload: no libcuda.so.1: %s\n", dlerror());
        return;
    }
    init_fn cu_init        = (init_fn)dlsym(h, "cuInit");
    dev_get_fn cu_dev_get  = (dev_get_fn)dlsym(h, "cuDeviceGet");
    retain_fn cu_retain    = (retain_fn)dlsym(h, "cuDevicePrimaryCtxRetain");
    set_fn cu_set          = (set_fn)dlsym(h, "cuCtxSetCurrent");
    stream_fn cu_stream    = (stream_fn)dlsym(h, "cuStreamCreate");
    if (!cu_init || !cu_dev_get || !cu_retain || !cu_set || !cu_stream) {
        fprintf(stderr, "cuda_context_preload: driver entry points missing\n");
        return;
    }
    if ((r = cu_init(0)) != 0 || (r = cu_dev_get(&dev, 0)) != 0 || (r = cu_retain(&ctx, dev)) != 0 ||
        (r = cu_set(ctx)) != 0) {
        fprintf(stderr, "cuda_context_preload: CUDA error %d\n", r);
        return;
    }
    for (i = 0; i < 4; ++i) {
        if ((r = cu_stream(&s, 1)) != 0) {
            fprintf(stderr, "cuda_context_preload: cuStreamCreate: CUDA error %d\n", r);
            return;
        }
    }
}
