/* gdx: GPUDirect-aware communication transport. Public C API.
 *
 * Every function returns a gdx_status_t (or is void); on failure gdx_last_error() returns this thread's last
 * error message, which names what failed and why. No C++ exception crosses this boundary. */
#ifndef GDX_GDX_H
#define GDX_GDX_H

#include <stddef.h>
#include <stdint.h>

#include "gdx/status.h"

#define GDX_VERSION_MAJOR 0
#define GDX_VERSION_MINOR 1

#ifdef __cplusplus
extern "C" {
#endif

/* Version of the library actually loaded (may differ from the GDX_VERSION_* the caller was built with). */
void gdx_version(unsigned *major, unsigned *minor);
const char *gdx_version_string(void);

/* This thread's last error message ("" when none). Valid until the next gdx call on this thread. */
const char *gdx_last_error(void);

/* ---- configuration ------------------------------------------------------------------------------------
 * Values set here override the environment's GDX_* variables. gdx_config_set validates at once: an unknown
 * name or an invalid value returns GDX_ERR_INVALID_CONFIG with a message naming the variable, the value and
 * what is accepted. */
typedef struct gdx_config gdx_config_t;
gdx_status_t gdx_config_create(gdx_config_t **config_p);
gdx_status_t gdx_config_set(gdx_config_t *config, const char *name, const char *value);
void gdx_config_destroy(gdx_config_t *config);

/* ---- context ------------------------------------------------------------------------------------------
 * A context parses the configuration once (defaults, environment, then `config`, which may be NULL), applies
 * logging, and ties memory detection, transports and staging together. */
typedef struct gdx_context gdx_context_t;
gdx_status_t gdx_context_create(const gdx_config_t *config, gdx_context_t **context_p);
void gdx_context_destroy(gdx_context_t *context);

/* Value of a configuration variable as the context parsed it (the text form), or NULL when unknown. */
const char *gdx_context_config_get(const gdx_context_t *context, const char *name);


/* ---- endpoints, registered memory, one-sided operations ------------------------------------------------
 * The context opens every transport GDX_TLS allows that has a usable device here (at the first endpoint or
 * registration). An endpoint reaches one peer: each side calls gdx_ep_create, sends gdx_ep_address's blob to
 * the other out of band (MPI, a socket, a file), and calls gdx_ep_connect with the peer's blob. gdx then picks
 * the path and logs why at info level: the intra-node transports (cuda_ipc, shm) for a peer on this host, rc
 * when both sides have an RDMA device, else tcp. Each put/get takes the transport that reaches both buffers
 * directly (GPUDirect RDMA, CUDA IPC, host memory) or, where none does, stages the bytes fragment by fragment
 * through pinned host buffers. gdx_request_path says which path a request took.
 *
 * Nothing moves unless gdx_progress is called, ON BOTH SIDES: the peer's progress copies staged fragments out
 * and grants bounce buffers. Objects are used from one thread at a time per context. Destroy requests, keys,
 * registrations and endpoints before their context.
 *
 *   gdx_ep_create(ctx, &ep); gdx_ep_address(ep, buf, &len);   ... exchange ...   gdx_ep_connect(ep, peer, n);
 *   while (gdx_ep_state(ep) == GDX_INPROGRESS) gdx_progress(ctx);
 *   gdx_mem_reg(ctx, gpu_buf, size, GDX_ACCESS_ALL, &mem); gdx_mem_pack(mem, key, &klen); ... exchange ...
 *   gdx_rkey_unpack(ep, peer_key, peer_klen, &rkey);
 *   gdx_put(ep, mem, 0, rkey, 0, size, &req); gdx_request_wait(ctx, req, 10000);
 *   gdx_request_path(req, &path); puts(path.text); gdx_request_free(req); */
typedef struct gdx_ep gdx_ep_t;
typedef struct gdx_mem gdx_mem_t;
typedef struct gdx_rkey gdx_rkey_t;
typedef struct gdx_request gdx_request_t;

#define GDX_ACCESS_LOCAL_READ 1u   /* source of a put */
#define GDX_ACCESS_LOCAL_WRITE 2u  /* destination of a get */
#define GDX_ACCESS_REMOTE_READ 4u  /* a peer may get from it */
#define GDX_ACCESS_REMOTE_WRITE 8u /* a peer may put into it */
#define GDX_ACCESS_ALL 15u

gdx_status_t gdx_ep_create(gdx_context_t *context, gdx_ep_t **ep_p);
/* The blob the peer passes to gdx_ep_connect. *len: in, the room at buf; out, the blob's size. With buf NULL
 * (or too little room: GDX_ERR_INVALID_PARAM) only the size is returned. */
gdx_status_t gdx_ep_address(const gdx_ep_t *ep, void *buf, size_t *len);
/* Validates the peer's blob, picks the transport(s) and starts connecting (both sides must call it). */
gdx_status_t gdx_ep_connect(gdx_ep_t *ep, const void *peer_address, size_t len);
/* GDX_OK once connected, GDX_INPROGRESS while connecting (call gdx_progress), or the error that broke it: also
 * GDX_ERR_TIMEOUT when the peer stayed silent for GDX_PEER_TIMEOUT while this side waited on it (as initiator or
 * as target of its staged transfers), GDX_ERR_CONNECTION_RESET when it destroyed its endpoint or gave this side
 * up, GDX_ERR_UNSUPPORTED when it runs an incompatible staging protocol. Such an endpoint is done: destroy it
 * (that also returns what was lent to the peer). */
gdx_status_t gdx_ep_state(const gdx_ep_t *ep);
/* The transports the endpoint uses after gdx_ep_connect ("tcp", "cuda_ipc+shm"); "" before. */
const char *gdx_ep_transports(const gdx_ep_t *ep);
/* GDX_ERR_BUSY (nothing destroyed; retry after gdx_progress) while this process's requests, or copy-outs and
 * stage-outs it performs for the peer's staged transfers, still use it; for a peer that stopped, that ends within
 * GDX_PEER_TIMEOUT. A peer's staged transfer this side has not yet been told about (its data still on the way)
 * does not make it busy: destroying tells the peer, whose request then fails with GDX_ERR_CONNECTION_RESET;
 * nothing is written after. */
gdx_status_t gdx_ep_destroy(gdx_ep_t *ep);

/* Registers [addr, addr+len): host, pinned, CUDA device, managed or VMM memory (detected). Memory no transport
 * can reach directly is still accepted: it will be staged. Host memory must be mapped with the rights `access`
 * asks for (read for *_READ, write for *_WRITE), checked by the kernel at registration: unmapped, PROT_NONE,
 * partly inaccessible, read-only with write rights, or non-canonical ranges return GDX_ERR_INVALID_ADDR with the
 * cause. Memory unmapped after registration fails the requests that touch it, not the process. */
gdx_status_t gdx_mem_reg(gdx_context_t *context, void *addr, size_t len, unsigned access, gdx_mem_t **mem_p);
/* The key blob the peer passes to gdx_rkey_unpack; *len as for gdx_ep_address. */
gdx_status_t gdx_mem_pack(const gdx_mem_t *mem, void *buf, size_t *len);
/* GDX_ERR_BUSY (nothing released; retry after gdx_progress) while a request of this process, or a copy-out of a
 * peer's staged fragment into it, uses it. A peer's staged put whose data has not arrived yet does not: it is
 * refused when it arrives (the peer's request fails with GDX_ERR_ACCESS_DENIED) and nothing is written after. */
gdx_status_t gdx_mem_dereg(gdx_mem_t *mem);

/* The peer's key blob, validated field by field, for use with `ep` (after gdx_ep_connect). */
gdx_status_t gdx_rkey_unpack(gdx_ep_t *ep, const void *packed, size_t len, gdx_rkey_t **rkey_p);
void gdx_rkey_destroy(gdx_rkey_t *rkey);

/* Writes [offset, +len) of `mem` to [remote_offset, +len) of the peer's registration (`rkey`); gdx_get reads
 * the other way. On GDX_OK *req_p is a request to test, wait for and free; a put completes when every byte is
 * in the peer's buffer, a get when every byte is here. Keep `mem` and `rkey` until it completes. Errors mean
 * nothing was started: a range outside either registration or rights it lacks (GDX_ERR_INVALID_PARAM,
 * GDX_ERR_ACCESS_DENIED), an endpoint not connected (GDX_ERR_BUSY). */
gdx_status_t gdx_put(gdx_ep_t *ep, gdx_mem_t *mem, size_t offset, gdx_rkey_t *rkey, size_t remote_offset,
                     size_t len, gdx_request_t **req_p);
gdx_status_t gdx_get(gdx_ep_t *ep, gdx_mem_t *mem, size_t offset, gdx_rkey_t *rkey, size_t remote_offset,
                     size_t len, gdx_request_t **req_p);

/* ---- put with notification ------------------------------------------------------------------------------
 * gdx_put_notify is a gdx_put that, once every byte is in the peer's buffer, also delivers `value` to the peer
 * (libfabric's fi_writedata, verbs' WRITE_WITH_IMM, NVSHMEM's put_signal): the peer learns that the data is there
 * without a message of its own. Arguments, errors and the request are gdx_put's; the request completes as
 * gdx_put's does. len 0 sends the value alone.
 *
 * Delivery: the peer's gdx_ep_notify_poll returns the value only after every byte of its put is in the peer's
 * buffer, strictly: a put that fails delivers no value (one exception: when the connection breaks after the peer
 * had every byte and queued the value, but before this side heard so, the value arrives and this side's request
 * still fails). A small staged put (up to GDX_STAGING_THRESH) carries the value in its one message, so the
 * notification costs no extra trip; any other put sends the value right after its request completed.
 *
 * Order: values of puts that took the same transport of an endpoint (gdx_request_path's transport) arrive in the
 * order the puts were issued, even when a later put completes first (its value waits for the earlier ones).
 * Across the transports of one endpoint ("cuda_ipc+shm": GPU memory on one, host memory on the other) there is
 * no order between the two streams; gdx_ep_notify_poll returns what arrived, oldest arrival first.
 *
 * gdx_ep_notify_poll takes up to `max` values that arrived on `ep` (oldest first) and returns how many it wrote
 * to `values`; gdx_progress is what delivers them. Values wait in this process until taken or until the
 * endpoint is destroyed: 16 bytes each, NOT bounded (a peer that keeps putting with notification to a process
 * that never polls grows the queue; a warning is logged once per peer past 2^20 values): poll from the loop that
 * calls gdx_progress. Returns 0 for a NULL endpoint. */
gdx_status_t gdx_put_notify(gdx_ep_t *ep, gdx_mem_t *mem, size_t offset, gdx_rkey_t *rkey, size_t remote_offset,
                            size_t len, uint64_t value, gdx_request_t **req_p);
size_t gdx_ep_notify_poll(gdx_ep_t *ep, uint64_t *values, size_t max);

/* Drives every transport and staging copy of the context; returns how many events it processed. */
unsigned gdx_progress(gdx_context_t *context);
/* GDX_INPROGRESS, GDX_OK, or the request's error (copy failure, peer gone, refused by the peer). An error
 * also becomes this thread's gdx_last_error() text. */
gdx_status_t gdx_request_test(const gdx_request_t *req);
/* Why the request failed: the operation, how far it got, the status and its cause ("put of 1048576 bytes (0
 * direct, 524288 staged so far) failed: timeout: the peer was silent for GDX_PEER_TIMEOUT ..."). Never empty for
 * a failed request; "" while it is in progress or after success. Valid until the request is freed. */
const char *gdx_request_error(const gdx_request_t *req);
/* Progresses until the request completes or timeout_ms passes (GDX_ERR_TIMEOUT; the request stays valid). */
gdx_status_t gdx_request_wait(gdx_context_t *context, gdx_request_t *req, int timeout_ms);

/* The path a request's bytes took. */
typedef struct gdx_path_info {
    char transport[16];     /* "tcp", "shm", ... */
    uint64_t bytes_direct;  /* moved by the transport straight between the two buffers */
    uint64_t bytes_staged;  /* copied through pinned bounce buffers (small-message path included) */
    uint32_t frags_direct, frags_staged;
    uint32_t frag_size;     /* the fragment size used */
    uint32_t depth;         /* staged fragments allowed in flight */
    uint32_t small;         /* 1: the single-copy small-message path */
    double staged_share;    /* bytes_staged / all bytes, 0..1 */
    char text[192];         /* "tcp: direct[host->host] 50.0% + staged[frag 512K depth 4 local+remote; ...] 50.0%" */
} gdx_path_info_t;
gdx_status_t gdx_request_path(const gdx_request_t *req, gdx_path_info_t *info);
/* Frees a request; one still in progress is released when it completes. */
void gdx_request_free(gdx_request_t *req);

#ifdef __cplusplus
}
#endif

#endif /* GDX_GDX_H */
