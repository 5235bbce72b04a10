/* The boundary between libuct_gdx's C glue (UCS_CLASS objects, UCX internal structs) and gdx's C++ core
 * (gdx::tp::*). The glue never sees a C++ type and the bridge never sees a UCX internal struct, so each side
 * compiles against only its own headers. Everything here returns a gdx_status_t; failures were already logged
 * through gdx's logger with what failed and why (gdx_uct_last_error() repeats the message for UCX's log).
 *
 * Callbacks the bridge makes into the glue are the gdx_uct_glue_* functions at the end (defined in C). */
#ifndef GDX_UCT_GDX_H
#define GDX_UCT_GDX_H

#include <gdx/status.h>

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GDX_UCT_MAX_TLS      8    /* gdx transports one module can expose */
#define GDX_UCT_EP_ADDR_MAX  120  /* UCT needs a fixed ep address length; gdx's are variable, so we pad */
#define GDX_UCT_NAME_MAX     16   /* UCT_COMPONENT_NAME_MAX / UCT_TL_NAME_MAX / UCT_MD_NAME_MAX */
/* Active-message id of the staging engine's control messages on a gdx interface (bridge_engine.h). Never handed
 * to UCP, which uses ids below UCP_AM_ID_LAST (27 on UCX 1.13-1.18, 29 on 1.22: uct_gdx_md.c checks it). */
#define GDX_UCT_ENGINE_AM_ID 31

typedef struct gdx_uct_md    gdx_uct_md_t;    /* a gdx transport's settings and memory domain */
typedef struct gdx_uct_memh  gdx_uct_memh_t;  /* one registration */
typedef struct gdx_uct_rkey  gdx_uct_rkey_t;  /* a peer's packed key, unpacked on first use */
typedef struct gdx_uct_iface gdx_uct_iface_t; /* a gdx::tp::Interface */
typedef struct gdx_uct_ep    gdx_uct_ep_t;    /* a gdx::tp::Endpoint */

/* ---- process level ---------------------------------------------------------------------------------- */

/* Transports compiled into gdx (gdx::tp::components()), in preference order, at most GDX_UCT_MAX_TLS. */
unsigned gdx_uct_tl_count(void);
const char *gdx_uct_tl_name(unsigned index); /* the UCT name without "gdx_": "tcp", "ipc" (for cuda_ipc) */

/* The GDX_* table as UCX sees it: name without "GDX_", the effective default (GDX_<name> from the environment
 * if set, else gdx's default, so `ucx_info -c` shows what will apply) and the doc. Static strings. */
unsigned gdx_uct_config_count(void);
void gdx_uct_config_entry(unsigned index, const char **name, const char **dflt, const char **doc);

/* This thread's last gdx error message ("" when none). */
const char *gdx_uct_last_error(void);

/* ---- memory types ----------------------------------------------------------------------------------- */

typedef enum { GDX_UCT_MEM_HOST = 0, GDX_UCT_MEM_CUDA = 1, GDX_UCT_MEM_CUDA_MANAGED = 2 } gdx_uct_mem_type_t;

typedef struct {
    gdx_uct_mem_type_t type;
    void *base;           /* allocation base; NULL when unknown (pageable host memory) */
    size_t length;        /* allocation length; 0 when unknown */
    char bus_id[32];      /* PCI bus id of the GPU ("0000:18:00.0"), "" for host memory */
} gdx_uct_mem_info_t;

/* True when the MD's memory-type detector uses a GPU (gdx's CUDA backend found a driver and a GPU, and GDX_CUDA
 * is not 'no'). Without one every pointer is host memory, and the MD advertises no CUDA capability at all. */
int gdx_uct_cuda_available(gdx_uct_md_t *md);
/* True when the MD tells UCP memory types itself (detect_mem_types): a GPU and GDX_UCT_DETECT=all. Otherwise
 * gdx_copy does (gdx_uct_copy_mem_detect), as cuda_copy does for UCX's own transports. */
int gdx_uct_md_detects(gdx_uct_md_t *md);
/* 1 when the running UCX hooks the CUDA driver itself (libucm_cuda), so its memory-type cache knows CUDA memory. */
int gdx_uct_ucx_hooks_cuda(void);

/* Classifies the memory at addr (the allocation holding it) through gdx's memory-type detector.
 * GDX_ERR_INVALID_PARAM for a NULL addr or len 0. */
gdx_status_t gdx_uct_mem_detect(gdx_uct_md_t *md, const void *addr, size_t len, gdx_uct_mem_info_t *out);

/* gdx_copy (uct_gdx_copy.c): copies inside this process between host and CUDA memory, any direction, and
 * memory-type detection for UCP, by one detector per process configured by GDX_*. */
int gdx_uct_copy_available(void); /* a CUDA driver and a GPU, and GDX_CUDA is not 'no' */
gdx_status_t gdx_uct_copy(void *dst, const void *src, size_t len);
gdx_status_t gdx_uct_copy_mem_detect(const void *addr, size_t len, gdx_uct_mem_info_t *out);

/* ---- memory domain ---------------------------------------------------------------------------------- */

typedef struct {
    char name[128];
    char sys_bus_id[32];
    int intra_node;
} gdx_uct_device_t;

typedef struct {
    size_t rkey_packed_size;  /* what gdx_uct_mkey_pack writes */
    int reg_host;             /* host memory registers (the transport reaches it, or the engine stages it) */
    int reg_cuda;             /* CUDA device memory registers (reached directly, or staged by the engine) */
    int reg_cuda_managed;
    int engine;               /* put/get zcopy go through the staging engine (any kind it detects, staged where
                                 the transport does not reach it) */
    int am_zcopy_copies;      /* am_zcopy copies host payload as am_bcopy does (a registration bought for nothing) */
} gdx_uct_md_attr_t;

/* Does `tl` have at least one device? (UCT lists an MD only when it has resources.) */
gdx_status_t gdx_uct_tl_devices(unsigned tl, gdx_uct_device_t **devices, unsigned *count); /* free() */

/* values[i] is the UCX_GDX_* value of gdx_uct_config_entry(i), NULL = not given. */
gdx_status_t gdx_uct_md_open(unsigned tl, const char *const *values, gdx_uct_md_t **out);
void gdx_uct_md_close(gdx_uct_md_t *md);
void gdx_uct_md_query(gdx_uct_md_t *md, gdx_uct_md_attr_t *attr);
gdx_status_t gdx_uct_md_devices(gdx_uct_md_t *md, gdx_uct_device_t **devices, unsigned *count); /* free() */

/* access: GDX_UCT_ACCESS_* bits (gdx::tp::Access values). */
enum { GDX_UCT_ACCESS_LOCAL_READ = 1, GDX_UCT_ACCESS_LOCAL_WRITE = 2, GDX_UCT_ACCESS_REMOTE_READ = 4,
       GDX_UCT_ACCESS_REMOTE_WRITE = 8 };
/* gpu_tail_slack: bytes past the end of a GPU allocation the caller may include (engine path: left out). */
gdx_status_t gdx_uct_mem_reg(gdx_uct_md_t *md, void *addr, size_t len, unsigned access, size_t gpu_tail_slack,
                             gdx_uct_memh_t **out);
void gdx_uct_mem_dereg(gdx_uct_memh_t *memh);
gdx_status_t gdx_uct_mkey_pack(gdx_uct_md_t *md, gdx_uct_memh_t *memh, void *buffer);

/* Component-level unpack (UCT has no MD here): validates the header and keeps a copy of the bytes; the gdx
 * RemoteKey is made on first use by the MD of the interface that uses it. */
gdx_status_t gdx_uct_rkey_unpack(unsigned tl, const void *buffer, gdx_uct_rkey_t **out);
void gdx_uct_rkey_release(gdx_uct_rkey_t *rkey);

/* ---- interface -------------------------------------------------------------------------------------- */

typedef struct {
    int connect_to_ep;        /* always 1: gdx endpoints connect to endpoints */
    int engine;               /* put/get zcopy run through the staging engine (bridge_engine.h) */
    int am_short, am_bcopy, am_zcopy, put_zcopy, get_zcopy, wakeup, intra_node;
    size_t max_am_short, max_am_bcopy, max_am_zcopy, max_put, max_get;
    double latency_s, bandwidth_Bps;
} gdx_uct_iface_attr_t;

/* glue_iface is handed back in gdx_uct_glue_am_table. */
gdx_status_t gdx_uct_iface_open(gdx_uct_md_t *md, const char *dev_name, void *glue_iface,
                                gdx_uct_iface_t **out);
void gdx_uct_iface_close(gdx_uct_iface_t *iface);
void gdx_uct_iface_attr(gdx_uct_iface_t *iface, gdx_uct_iface_attr_t *attr);
unsigned gdx_uct_iface_progress(gdx_uct_iface_t *iface, int *failure_due); /* *failure_due: look for broken
                                                                               * endpoints now (take_failure) */
/* Called WITHOUT the async lock, before taking it: when it did what progress had to do, how many messages it handed
 * to UCP (0: nothing to do, seen in shared-memory words; else what a changed word announced, delivered without the
 * lock where GDX_UCT_LOCKFREE allows); -1 when gdx_uct_iface_progress must run, under the lock (bridge_idle.cpp).
 * The count is the return value, not an out-parameter: this is every idle call of UCP's progress loop. */
int gdx_uct_iface_progress_unlocked(gdx_uct_iface_t *iface);
int gdx_uct_iface_wakeup_fd(gdx_uct_iface_t *iface);         /* -1 when the transport has none */
/* GDX_OK or GDX_ERR_BUSY (also while a broken endpoint waits to be reported: progress must run first). */
gdx_status_t gdx_uct_iface_arm(gdx_uct_iface_t *iface);
/* Socket buffer sizes for the interface's connections from now on; SIZE_MAX leaves one as GDX_* set it.
 * GDX_ERR_UNSUPPORTED on a transport without sockets. */
gdx_status_t gdx_uct_iface_set_socket_buffers(gdx_uct_iface_t *iface, size_t sndbuf, size_t rcvbuf);

/* A connected endpoint whose peer is gone (GAPS.md, 16): its transport connection broke or never came up,
 * or the staging engine declared the peer dead (silent for GDX_PEER_TIMEOUT, or it said BYE). */
typedef struct {
    void         *glue_ep;    /* what gdx_uct_ep_create was given */
    gdx_status_t status;      /* gdx's reason */
    uint32_t     peer;        /* hash of the peer's endpoint address, as the engine's log lines name it */
    int          by_staging;  /* 1: the engine's verdict (the transport connection itself is up) */
} gdx_uct_ep_failure_t;
/* One broken endpoint not reported yet, marked reported (each is handed out once): 1, or 0 when there is none or
 * no look is due (every 128th progress, or after arm found one). Called outside gdx's progress, one at a time: what
 * the caller does with it may destroy endpoints (this one included), so each call looks at the list afresh. */
int gdx_uct_iface_take_failure(gdx_uct_iface_t *iface, gdx_uct_ep_failure_t *out);
/* Flush or fence every endpoint of the interface. comp may be NULL (then: GDX_OK or GDX_INPROGRESS, poll). */
gdx_status_t gdx_uct_iface_flush(gdx_uct_iface_t *iface, void *comp);
gdx_status_t gdx_uct_iface_fence(gdx_uct_iface_t *iface);

/* ---- endpoint --------------------------------------------------------------------------------------- */

/* UCT ep_check: a broken endpoint is reported by the next gdx_uct_iface_take_failure (no waiting for the 16th). */
void gdx_uct_ep_check(gdx_uct_ep_t *ep);

/* glue_ep is handed back in gdx_uct_iface_take_failure. */
gdx_status_t gdx_uct_ep_create(gdx_uct_iface_t *iface, void *glue_ep, gdx_uct_ep_t **out);
void gdx_uct_ep_destroy(gdx_uct_ep_t *ep);
/* Writes exactly GDX_UCT_EP_ADDR_MAX bytes. */
gdx_status_t gdx_uct_ep_get_address(gdx_uct_ep_t *ep, void *buffer);
gdx_status_t gdx_uct_ep_connect(gdx_uct_ep_t *ep, const void *address);

/* Operation results follow transport.h: GDX_OK (done), GDX_INPROGRESS (comp completes later),
 * GDX_ERR_NO_RESOURCE (nothing queued). `comp` is the glue's uct_completion_t*, or NULL. */

/* One piece of an am_short: UCT's 8-byte header, the payload, the entries of am_short_iov. */
typedef struct {
    const void *data; /* may be NULL when length is 0 */
    size_t     length;
} gdx_uct_seg_t;
#define GDX_UCT_MAX_SEGS 8 /* pieces per am_short (UCP 1.13 sends at most 4) */
typedef size_t (*gdx_uct_pack_cb_t)(void *dest, void *arg); /* uct_pack_callback_t */

/* am_short of `count` <= GDX_UCT_MAX_SEGS pieces, in order. Where the transport writes in place (shm), each
 * piece goes straight into the peer's ring; otherwise they are gathered into a per-interface buffer first. */
gdx_status_t gdx_uct_ep_am_short_iov(gdx_uct_ep_t *ep, uint8_t id, const gdx_uct_seg_t *segs, size_t count);
/* UCT's am_short: the 8-byte header, then `length` payload bytes (as am_short_iov of those two pieces). */
gdx_status_t gdx_uct_ep_am_short(gdx_uct_ep_t *ep, uint8_t id, uint64_t header, const void *payload, size_t length);
/* am_bcopy whose bytes `pack` writes: straight into the peer's ring where the transport writes in place, else
 * into a per-interface buffer first. *len = what pack returned (on GDX_OK). */
gdx_status_t gdx_uct_ep_am_bcopy_pack(gdx_uct_ep_t *ep, uint8_t id, gdx_uct_pack_cb_t pack, void *arg, size_t *len);
gdx_status_t gdx_uct_ep_am_zcopy(gdx_uct_ep_t *ep, uint8_t id, const void *header, size_t header_len,
                                 const void *payload, size_t len, gdx_uct_memh_t *memh, void *comp);
gdx_status_t gdx_uct_ep_put(gdx_uct_ep_t *ep, const void *buf, size_t len, gdx_uct_memh_t *memh,
                            uint64_t remote_addr, gdx_uct_rkey_t *rkey, void *comp);
gdx_status_t gdx_uct_ep_get(gdx_uct_ep_t *ep, void *buf, size_t len, gdx_uct_memh_t *memh,
                            uint64_t remote_addr, gdx_uct_rkey_t *rkey, void *comp);
gdx_status_t gdx_uct_ep_flush(gdx_uct_ep_t *ep, void *comp);
gdx_status_t gdx_uct_ep_fence(gdx_uct_ep_t *ep);
/* req is the glue's uct_pending_req_t*. GDX_ERR_BUSY: resources are available now, send yourself. */
gdx_status_t gdx_uct_ep_pending_add(gdx_uct_ep_t *ep, void *req);
/* Hands every request still parked on ep to cb (UCT pending_purge). */
void gdx_uct_ep_pending_purge(gdx_uct_ep_t *ep, void (*cb)(void *req, void *arg), void *arg);

/* ---- implemented by the C glue, called by the bridge ------------------------------------------------ */

/* One active-message id's receiver: UCT's uct_am_handler_t, field for field (uct_gdx_iface.c checks the layout; the
 * callback returns ucs_status_t, a packed signed byte). */
typedef struct gdx_uct_am_handler {
    int8_t (*cb)(void *arg, void *data, size_t length, unsigned flags);
    void *arg;
    uint32_t flags;
} gdx_uct_am_handler_t;
/* Where the active messages that arrive on the interface opened with glue_iface go: a table of GDX_UCT_AM_IDS
 * receivers indexed by id, read at each message (UCP may replace a handler at any time). UCT's own handler table
 * where UCX counts nothing per message; with UCX's statistics built in, one whose receivers count as UCT's own
 * delivery does (uct_iface_invoke_am). The bridge calls a receiver with flags 0: data is valid during the call
 * only. */
#define GDX_UCT_AM_IDS 32
const gdx_uct_am_handler_t *gdx_uct_glue_am_table(void *glue_iface);
/* A UCT completion (uct_completion_t*) finished with status. */
void gdx_uct_glue_complete(void *comp, gdx_status_t status);
/* Dispatches a parked UCT request (uct_pending_req_t*): GDX_OK (done) or GDX_ERR_NO_RESOURCE (keep it). */
gdx_status_t gdx_uct_glue_dispatch(void *req);

#ifdef __cplusplus
}
#endif

#endif /* GDX_UCT_GDX_H */
