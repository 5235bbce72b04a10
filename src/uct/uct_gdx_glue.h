/* C glue of libuct_gdx: the UCT objects (component, MD, interface, endpoint) that UCX's internal headers define
 * and that only C initializers and the UCS_CLASS_* macros fill in comfortably. Each object holds the bridge
 * handle (uct_gdx.h) that does the work in gdx's C++ core. */
#ifndef GDX_UCT_GDX_GLUE_H
#define GDX_UCT_GDX_GLUE_H

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "uct_gdx.h"

#include <ucs/async/async.h>
#include <uct/base/uct_iface.h>
#include <uct/base/uct_md.h>

#include "uct_gdx_compat.h"

/* UCP may drive an interface from two threads: the application's (progress, sends) and the worker's async thread,
 * where wire-up messages that arrive on a CB_ASYNC transport (gdx_aux, ud_verbs) are handled, creating and
 * connecting endpoints. gdx's transports are single-threaded per interface, so, as UCX's own transports do
 * (ud's uct_ud_enter), the glue holds the worker's async lock (recursive) where connection state changes and
 * around progress; the data path (sends, puts) runs without it, from the application's thread only, and so do the
 * idle look and the probed delivery that precede a progress (bridge_idle.cpp says how a destruction waits for it). */
#define UCT_GDX_ASYNC_BLOCK(_base_iface)   UCS_ASYNC_BLOCK((_base_iface)->worker->async)
#define UCT_GDX_ASYNC_UNBLOCK(_base_iface) UCS_ASYNC_UNBLOCK((_base_iface)->worker->async)

/* The functions every small UCP message runs through (sends, the idle look, the probed delivery), here and in the
 * bridge and shm (gnu::hot there): the compiler puts them in .text.hot, which the linker gathers in one place, so
 * that path's code shares a few cache lines and one page instead of lying scattered over the module. */
#define UCT_GDX_HOT __attribute__((hot))

/* One UCT component per gdx transport ("gdx_tcp"): its MD and its single transport carry the same name, and
 * the component's rkey_unpack knows which transport's key it is handed. */
typedef struct uct_gdx_component {
    uct_component_t super;
    unsigned        tl;                       /* bridge transport index */
    char            name[GDX_UCT_NAME_MAX];   /* "gdx_tcp" */
    char            cfg_prefix[32];           /* "GDX_TCP_" for the interface settings */
    uct_tl_t        uct_tl;
} uct_gdx_component_t;

/* UCX_GDX_* values: one string per GDX_* variable, in gdx's table order. */
typedef struct uct_gdx_md_config {
    uct_md_config_t super;
    char            *values[];
} uct_gdx_md_config_t;

typedef struct uct_gdx_md {
    uct_md_t          super;
    gdx_uct_md_t      *bridge;
    gdx_uct_md_attr_t attr;
    int               cuda;    /* gdx's CUDA backend found a GPU: register CUDA memory */
    int               detects; /* ...and GDX_UCT_DETECT=all: tell UCP memory types (otherwise gdx_copy does) */
} uct_gdx_md_t;

typedef struct uct_gdx_iface_config {
    uct_iface_config_t super;
    size_t             sndbuf; /* gdx_tcp only (uct_gdx_tcp_iface_config_table): UCS_MEMUNITS_AUTO or bytes */
    size_t             rcvbuf;
} uct_gdx_iface_config_t;

#if ENABLE_STATS
typedef struct uct_gdx_am_slot {
    struct uct_gdx_iface *iface;
    uint8_t              id;
} uct_gdx_am_slot_t;
#endif

typedef struct uct_gdx_iface {
    uct_base_iface_t     super;
    gdx_uct_iface_t      *bridge;
    gdx_uct_iface_attr_t attr;
    uint64_t             system_id;   /* device address: intra-node transports reach this host only */
    void                 *scratch;    /* am_short_iov of more than GDX_UCT_MAX_SEGS entries, gathered */
    size_t               scratch_size;
#if ENABLE_STATS
    uct_gdx_am_slot_t    am_slots[GDX_UCT_AM_IDS];   /* gdx_uct_glue_am_table's receivers, with UCX's statistics */
    gdx_uct_am_handler_t am_counted[GDX_UCT_AM_IDS];
#endif
} uct_gdx_iface_t;

typedef struct uct_gdx_ep {
    uct_base_ep_t super;
    gdx_uct_ep_t  *bridge;
    int           connected;                       /* connect_to_ep was called: peer_addr is valid */
    uint8_t       peer_addr[GDX_UCT_EP_ADDR_MAX];  /* for ep_is_connected (UCX 1.16+) */
} uct_gdx_ep_t;

/* gdx status -> UCS status. */
ucs_status_t uct_gdx_status(gdx_status_t st);

/* Logs a failed bridge call at error level with gdx's reason, returns the mapped status. */
ucs_status_t uct_gdx_fail(gdx_status_t st, const char *what, const char *name);

/* Validates the active-message alignment parameters of an iface_open as UCX's own transports do (through
 * uct_iface_param_am_alignment and their receive mpools): an alignment that is not a power of two (0 included),
 * or an offset without an alignment, is UCS_ERR_INVALID_PARAM, logged at error level. gdx delivers every message
 * in place, never as a descriptor (UCT_CB_PARAM_FLAG_DESC unset), so a valid alignment needs nothing further: it
 * applies to descriptors only. (uct_gdx_component.c) */
ucs_status_t uct_gdx_check_am_alignment(const uct_iface_params_t *params, const char *name);

/* Reports each endpoint of the interface whose peer is gone to UCT's error handler, once; from its progress, after
 * gdx's progress returned. How many it reported. (uct_gdx_component.c, next to the status mapping) */
unsigned uct_gdx_iface_report_failures(uct_gdx_iface_t *iface);
/* UCP's cost model for this interface (uct_gdx_perf.c). */
ucs_status_t uct_gdx_iface_estimate_perf(uct_iface_h tl_iface, uct_perf_attr_t *perf_attr);

/* Defined in uct_gdx_md.c, used by the component. */
ucs_status_t uct_gdx_md_open(uct_component_t *component, const char *md_name, const uct_md_config_t *config,
                             uct_md_h *md_p);
ucs_status_t uct_gdx_query_devices(uct_md_h md, uct_tl_device_resource_t **devices_p, unsigned *num_p);
/* mem_query's answer from a bridge detection (st, *info) of address..length; logs a failed one at debug (UCP asks
 * each detecting MD in turn). Shared by the transports' MDs and gdx_copy's. */
ucs_status_t uct_gdx_mem_attr_fill(const char *md_name, gdx_status_t st, const gdx_uct_mem_info_t *info,
                                   const void *address, size_t length, uct_gdx_mem_attr_t *mem_attr);
/* detect_memory_type through the MD's own mem_query. */
ucs_status_t uct_gdx_detect_by_query(uct_md_h uct_md, const void *address, size_t length,
                                     ucs_memory_type_t *mem_type_p);
/* Warns when a detecting MD opens where UCP would not ask it (UCX's memtype cache on, without libucm_cuda). */
void uct_gdx_md_check_memtype_cache(const char *md_name);

/* Defined in uct_gdx_aux.c: the auxiliary wire-up transport (see there for why). */
void uct_gdx_aux_register(void);
void uct_gdx_copy_register(void);

/* Defined in uct_gdx_iface.c. */
ucs_status_t uct_gdx_iface_open(uct_md_h md, uct_worker_h worker, const uct_iface_params_t *params,
                                const uct_iface_config_t *config, uct_iface_h *iface_p);
extern ucs_config_field_t uct_gdx_iface_config_table[];
extern ucs_config_field_t uct_gdx_tcp_iface_config_table[];
/* Applies the transport's own interface settings (gdx_tcp: SNDBUF, RCVBUF) to an opened interface. */
ucs_status_t uct_gdx_iface_apply_config(uct_gdx_iface_t *iface, uct_md_h md, const uct_iface_config_t *tl_config);

#endif /* GDX_UCT_GDX_GLUE_H */
