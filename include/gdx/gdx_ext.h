/* gdx: the extension header for gdx's own tools and benchmarks (gdx_info, gdx_perftest).
 *
 * NOT A STABLE API. It changes with those tools, without notice and without a version bump; applications use
 * gdx.h. It holds only what a tool legitimately needs and cannot do with gdx.h: test buffers of every memory kind
 * (the tools cannot link libcuda: gdx opens the driver at run time), the text gdx_info prints (build, devices,
 * topology and path decisions, the GDX_* table), how an endpoint's transports reach a registration, and the
 * out-of-band exchange two benchmark processes meet through. Everything a benchmark measures goes through gdx.h
 * (gdx_put, gdx_get, gdx_put_notify): no path here moves data. Forcing a transport is gdx.h's
 * gdx_config_set(config, "GDX_TLS", "tcp").
 *
 * Conventions are gdx.h's: a gdx_status_t with the reason in gdx_last_error(), no exception crosses the boundary.
 * Failures are logged at debug only: the tool says them. Text returned as const char * is valid until the next
 * call of the same function on the same thread. */
#ifndef GDX_GDX_EXT_H
#define GDX_GDX_EXT_H

#include <stddef.h>
#include <stdint.h>

#include "gdx/gdx.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- test buffers --------------------------------------------------------------------------------------------
 * Memory of a kind a benchmark measures, allocated through the CUDA driver gdx opened (none for host memory).
 * Zero-filled. Write and read copy between it and host memory synchronously: the bytes are in place on return,
 * before any of gdx's copy streams can read them. */
typedef enum gdx_ext_mem_kind {
    GDX_EXT_MEM_HOST = 0,         /* page-aligned host memory, touched */
    GDX_EXT_MEM_HOST_PINNED = 1,  /* cuMemHostAlloc(PORTABLE | DEVICEMAP), with GPU `gpu`'s context current */
    GDX_EXT_MEM_CUDA = 2,         /* cuMemAlloc on GPU `gpu` */
    GDX_EXT_MEM_CUDA_MANAGED = 3, /* cuMemAllocManaged(ATTACH_GLOBAL) */
    GDX_EXT_MEM_CUDA_VMM = 4      /* cuMemCreate + cuMemMap (GPUDirect-RDMA capable where the GPU says so) */
} gdx_ext_mem_kind_t;
typedef struct gdx_ext_buffer gdx_ext_buffer_t;

/* GPUs the CUDA driver shows. None (no driver, no GPU, built without CUDA headers): *count 0 and
 * GDX_ERR_NO_DEVICE with the reason in gdx_last_error(). */
gdx_status_t gdx_ext_gpu_count(int *count);
/* GDX_OK when this machine can hold memory of `kind` (GPU `gpu` exists for the GPU kinds), else
 * GDX_ERR_NO_DEVICE naming the kind and why ("memory kind 'cuda:3': GPU 3 does not exist (this machine has 1
 * GPU)"): a tool checks before anything connects. */
gdx_status_t gdx_ext_mem_check(gdx_ext_mem_kind_t kind, int gpu);
/* `gpu` is ignored for GDX_EXT_MEM_HOST. Errors name the kind and why (gdx_ext_mem_check's, "cuda-vmm:0: this
 * CUDA driver lacks the virtual memory management API", "cuda:0: cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY ..."). */
gdx_status_t gdx_ext_buffer_alloc(gdx_ext_mem_kind_t kind, int gpu, size_t len, gdx_ext_buffer_t **buf_p);
void *gdx_ext_buffer_ptr(const gdx_ext_buffer_t *buf);
gdx_status_t gdx_ext_buffer_write(gdx_ext_buffer_t *buf, size_t offset, const void *src, size_t len);
gdx_status_t gdx_ext_buffer_read(const gdx_ext_buffer_t *buf, size_t offset, void *dst, size_t len);
void gdx_ext_buffer_free(gdx_ext_buffer_t *buf);

/* ---- decisions ------------------------------------------------------------------------------------------------
 * The devices of an endpoint's transports, joined like gdx_ep_transports ("lo", "mlx5_0:1", "shm+shm"): every
 * transport before gdx_ep_connect, the chosen ones after. */
const char *gdx_ext_ep_devices(const gdx_ep_t *ep);
/* How each transport of `ep` reaches the registration, chunk by chunk with the transport's reason ("host",
 * "dma-buf", "staged (GDX_GDR=no)"); with several transports each is named ("cuda_ipc: ipc | shm: staged (...)").
 * NULL for NULL arguments or a registration of another context. */
const char *gdx_ext_mem_reach(const gdx_mem_t *mem, const gdx_ep_t *ep);
/* gdx_info's sections, as it prints them: the version and build configuration; the GPUs (CUDA driver), the
 * memory-type cache and the RDMA devices (libibverbs), "none found" being an answer; the topology and the path
 * gdx takes for each (GPU, RDMA device) pair, with the reason (from GDX_TOPO_FILE when set). Never NULL. */
const char *gdx_ext_build_text(void);
const char *gdx_ext_devices_text(const gdx_context_t *context);
const char *gdx_ext_topology_text(const gdx_context_t *context);

/* ---- configuration table (gdx_info -c, -m) -------------------------------------------------------------------- */
typedef struct gdx_ext_config_var {
    const char *name;          /* "GDX_STAGING_DEPTH" */
    const char *type;          /* "unsigned", "size", "try|yes|no", "enum", "list", ... */
    const char *default_value;
    const char *values;        /* an enum's or list's accepted values ("error,warn,..."); "" for other types */
    const char *accepted;      /* what a value may be, in words, ranges included */
    const char *doc;
} gdx_ext_config_var_t;
/* The variables in the table's order; the strings live as long as the library. */
size_t gdx_ext_config_count(void);
gdx_status_t gdx_ext_config_var(size_t index, gdx_ext_config_var_t *var);
/* Where the context's value of `name` came from: "default", "environment" or "api"; NULL when unknown. */
const char *gdx_ext_config_source(const gdx_context_t *context, const char *name);
/* Sizes as GDX_* values write them: "4K", "1M" (k/K, M, G, T binary; "inf" parses as UINT64_MAX). Parsing
 * fails with GDX_ERR_INVALID_PARAM and why ("unknown size unit 'q'"); the text never fails. */
gdx_status_t gdx_ext_size_parse(const char *text, uint64_t *bytes);
const char *gdx_ext_size_text(uint64_t bytes);

/* ---- out-of-band exchange -------------------------------------------------------------------------------------
 * How the processes of a benchmark meet and swap endpoint addresses and keys: gdx's bootstrap, a star over TCP
 * around rank 0 (like ib_write_bw), or Open MPI's environment (OMPI_COMM_WORLD_RANK/SIZE) saying who is who.
 * Every step is bounded by timeout_ms and fails with what was being waited for. Blocking: a process that must
 * keep progressing gdx meanwhile runs it on a helper thread (one thread at a time per object). */
typedef struct gdx_ext_oob gdx_ext_oob_t;
/* Rank 0 of `size`: binds host:port at once (port 0: a free one, see gdx_ext_oob_port); the others are
 * accepted during the first allgather. */
gdx_status_t gdx_ext_oob_listen(const char *host, uint16_t port, int size, uint64_t timeout_ms,
                                gdx_ext_oob_t **oob_p);
/* A rank > 0 joins rank 0 at host:port, retrying while it does not listen yet (rank -1: rank 0 assigns one;
 * size 0: whatever rank 0 says). */
gdx_status_t gdx_ext_oob_join(const char *host, uint16_t port, int rank, int size, uint64_t timeout_ms,
                              gdx_ext_oob_t **oob_p);
/* Under mpirun: rank 0 listens on host:port, the others join it. GDX_ERR_NOT_FOUND when the variables are unset. */
gdx_status_t gdx_ext_oob_from_env(const char *host, uint16_t port, uint64_t timeout_ms, gdx_ext_oob_t **oob_p);
int gdx_ext_oob_rank(const gdx_ext_oob_t *oob);
int gdx_ext_oob_size(const gdx_ext_oob_t *oob);
uint16_t gdx_ext_oob_port(const gdx_ext_oob_t *oob); /* where rank 0 listens */
/* Every rank passes at most 1 MiB; then gdx_ext_oob_part(oob, r, ...) is what rank r passed, valid until the
 * next allgather. */
gdx_status_t gdx_ext_oob_allgather(gdx_ext_oob_t *oob, const void *mine, size_t len);
gdx_status_t gdx_ext_oob_part(const gdx_ext_oob_t *oob, int rank, const void **data, size_t *len);
void gdx_ext_oob_destroy(gdx_ext_oob_t *oob);

#ifdef __cplusplus
}
#endif

#endif /* GDX_GDX_EXT_H */
