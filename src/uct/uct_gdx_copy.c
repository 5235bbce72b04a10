/* gdx_copy: copies between host and CUDA memory inside one process, UCP's "memory type" transport.
 *
 * Why it exists: UCP (1.13) handles a non-host memory type through an endpoint to its own worker on a transport
 * that registers host memory and accesses that memory type with put_short/get_short ("copy across memory
 * types"): it packs and unpacks bcopy data and rendezvous pipeline fragments with it. Upstream that is UCX's
 * cuda_copy; Debian's UCX has no CUDA modules, so without this file a UCP worker refuses to start once a gdx MD
 * reports CUDA memory ("no copy across memory types transport"). It moves no bytes between processes: its
 * interface is reachable from this process only. The copies go through gdx's memtype ops table (bridge_copy.cpp):
 * synchronous, so every operation completes before it returns. Listed only where a CUDA driver and a GPU exist.
 * Its MD is also the one that tells UCP memory types (detect_mem_types, mem_query), as cuda_copy's is upstream. */
#include "uct_gdx_glue.h"

#include <ucs/debug/log.h>
#include <uct/base/uct_iov.inl>
#include <ucs/sys/string.h>

#include <limits.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define UCT_GDX_COPY_NAME "gdx_copy"

typedef struct {
    uint64_t system_id;
    uint32_t pid;
} UCS_S_PACKED uct_gdx_copy_addr_t;

typedef struct {
    uct_base_iface_t    super;
    uct_gdx_copy_addr_t addr;
    int                 event_fd; /* never signalled: every operation completes before it returns */
} uct_gdx_copy_iface_t;

typedef struct {
    uct_base_ep_t super;
} uct_gdx_copy_ep_t;

static uct_iface_ops_t uct_gdx_copy_iface_ops;
static uct_component_t uct_gdx_copy_component;

static ucs_status_t uct_gdx_copy_do(void *dst, const void *src, size_t len, const char *what)
{
    gdx_status_t st = gdx_uct_copy(dst, src, len);

    if (st == GDX_OK) {
        return UCS_OK;
    }
    ucs_error(UCT_GDX_COPY_NAME ": %s of %zu bytes (%p <- %p) failed: %s", what, len, dst, src,
              gdx_uct_last_error());
    return UCS_ERR_IO_ERROR;
}

/* ---- endpoint ------------------------------------------------------------------------------------------ */

static UCS_CLASS_INIT_FUNC(uct_gdx_copy_ep_t, const uct_ep_params_t *params)
{
    uct_gdx_copy_iface_t *iface = ucs_derived_of(params->iface, uct_gdx_copy_iface_t);

    UCS_CLASS_CALL_SUPER_INIT(uct_base_ep_t, &iface->super);
    UCT_EP_PARAMS_CHECK_DEV_IFACE_ADDRS(params);
    return UCS_OK;
}

static UCS_CLASS_CLEANUP_FUNC(uct_gdx_copy_ep_t)
{
}

UCS_CLASS_DEFINE(uct_gdx_copy_ep_t, uct_base_ep_t);
static UCS_CLASS_DEFINE_NEW_FUNC(uct_gdx_copy_ep_t, uct_ep_t, const uct_ep_params_t*);
static UCS_CLASS_DEFINE_DELETE_FUNC(uct_gdx_copy_ep_t, uct_ep_t);

/* remote_addr is an address of this process (the rkey carries nothing): is_reachable admits no other. */
static ucs_status_t uct_gdx_copy_ep_put_short(uct_ep_h tl_ep, const void *buffer, unsigned length,
                                              uint64_t remote_addr, uct_rkey_t rkey)
{
    return uct_gdx_copy_do((void*)(uintptr_t)remote_addr, buffer, length, "put_short");
}

static ucs_status_t uct_gdx_copy_ep_get_short(uct_ep_h tl_ep, void *buffer, unsigned length,
                                              uint64_t remote_addr, uct_rkey_t rkey)
{
    return uct_gdx_copy_do(buffer, (const void*)(uintptr_t)remote_addr, length, "get_short");
}

static ucs_status_t uct_gdx_copy_ep_zcopy(const uct_iov_t *iov, size_t iovcnt, uint64_t remote_addr, int put)
{
    uint8_t *remote = (uint8_t*)(uintptr_t)remote_addr;
    ucs_status_t status;
    size_t i, len;

    for (i = 0; i < iovcnt; ++i) {
        len    = uct_iov_get_length(&iov[i]);
        status = put ? uct_gdx_copy_do(remote, iov[i].buffer, len, "put_zcopy") :
                       uct_gdx_copy_do(iov[i].buffer, remote, len, "get_zcopy");
        if (status != UCS_OK) {
            return status;
        }
        remote += len;
    }
    return UCS_OK; /* done before returning: comp is never called */
}

static ucs_status_t uct_gdx_copy_ep_put_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov, size_t iovcnt,
                                              uint64_t remote_addr, uct_rkey_t rkey, uct_completion_t *comp)
{
    return uct_gdx_copy_ep_zcopy(iov, iovcnt, remote_addr, 1);
}

static ucs_status_t uct_gdx_copy_ep_get_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov, size_t iovcnt,
                                              uint64_t remote_addr, uct_rkey_t rkey, uct_completion_t *comp)
{
    return uct_gdx_copy_ep_zcopy(iov, iovcnt, remote_addr, 0);
}

/* ---- interface ----------------------------------------------------------------------------------------- */

static ucs_status_t uct_gdx_copy_iface_query(uct_iface_h tl_iface, uct_iface_attr_t *attr)
{
    uct_gdx_copy_iface_t *iface = ucs_derived_of(tl_iface, uct_gdx_copy_iface_t);

    uct_base_iface_query(&iface->super, attr);
    attr->iface_addr_len         = sizeof(uct_gdx_copy_addr_t);
    attr->device_addr_len        = 0;
    attr->ep_addr_len            = 0;
    /* PENDING and the event flags are what UCP requires of a memory-type endpoint's rma_bw lane, on which its
     * rendezvous pipeline copies fragments between device memory and host bounce buffers (ucp/wireup/select.c,
     * ucp_wireup_add_rma_bw_lanes; the event flags only when the worker wants wakeups). cuda_copy advertises the
     * same. pending_add answers "busy" (send now: nothing here ever waits for a resource), and the event fd never
     * fires because nothing here ever completes later. */
    attr->cap.flags              = UCT_IFACE_FLAG_CONNECT_TO_IFACE | UCT_IFACE_FLAG_PUT_SHORT |
                                   UCT_IFACE_FLAG_PUT_ZCOPY | UCT_IFACE_FLAG_GET_SHORT | UCT_IFACE_FLAG_GET_ZCOPY |
                                   UCT_IFACE_FLAG_PENDING;
    attr->cap.event_flags        = UCT_IFACE_FLAG_EVENT_SEND_COMP | UCT_IFACE_FLAG_EVENT_RECV |
                                   UCT_IFACE_FLAG_EVENT_FD;
    attr->cap.put.max_short      = UINT_MAX;
    attr->cap.put.max_zcopy      = SIZE_MAX;
    attr->cap.put.max_iov        = 1;
    attr->cap.put.opt_zcopy_align = 1;
    attr->cap.put.align_mtu      = 1;
    attr->cap.get.max_short      = UINT_MAX;
    attr->cap.get.max_zcopy      = SIZE_MAX;
    attr->cap.get.max_iov        = 1;
    attr->cap.get.opt_zcopy_align = 1;
    attr->cap.get.align_mtu      = 1;
    /* A synchronous cuMemcpy: about 10 us to start, then the PCIe copy rate (notes/gpu-machine.md). */
    attr->latency                = ucs_linear_func_make(10e-6, 0);
    attr->bandwidth.dedicated    = 0;
    attr->bandwidth.shared       = 20e9;
    attr->overhead               = 1e-6;
    attr->priority               = 0;
    return UCS_OK;
}

static ucs_status_t uct_gdx_copy_iface_get_address(uct_iface_h tl_iface, uct_iface_addr_t *addr)
{
    memcpy(addr, &ucs_derived_of(tl_iface, uct_gdx_copy_iface_t)->addr, sizeof(uct_gdx_copy_addr_t));
    return UCS_OK;
}

static ucs_status_t uct_gdx_copy_iface_event_fd_get(uct_iface_h tl_iface, int *fd_p)
{
    *fd_p = ucs_derived_of(tl_iface, uct_gdx_copy_iface_t)->event_fd;
    return UCS_OK;
}

static ucs_status_t uct_gdx_copy_iface_event_arm(uct_iface_h tl_iface, unsigned events)
{
    return UCS_OK; /* no completion or message can ever arrive later: always safe to sleep */
}

static int uct_gdx_copy_iface_is_reachable(const uct_iface_h tl_iface, const uct_device_addr_t *dev_addr,
                                           const uct_iface_addr_t *iface_addr)
{
    const uct_gdx_copy_iface_t *iface = ucs_derived_of(tl_iface, uct_gdx_copy_iface_t);
    uct_gdx_copy_addr_t peer;

    if (iface_addr == NULL) {
        return 0;
    }
    memcpy(&peer, iface_addr, sizeof(peer));
    return (peer.system_id == iface->addr.system_id) && (peer.pid == iface->addr.pid); /* this process only */
}

/* UCP's newer protocols (UCX_PROTO_ENABLE=y) price a copy through the memory-type transport and require it to be
 * one-sided: no receive overhead (ucp/proto/proto_common.c asserts it). The base estimate reports the interface's
 * overhead there; a copy here has no receiver, as with cuda_copy. */
static ucs_status_t uct_gdx_copy_estimate_perf(uct_iface_h tl_iface, uct_perf_attr_t *perf_attr)
{
    ucs_status_t status = uct_base_iface_estimate_perf(tl_iface, perf_attr);

    if ((status == UCS_OK) && (perf_attr->field_mask & UCT_PERF_ATTR_FIELD_RECV_OVERHEAD)) {
        perf_attr->recv_overhead = 0;
    }
    return status;
}

UCT_GDX_DEFINE_IS_REACHABLE_V2(uct_gdx_copy_iface_is_reachable_v2, uct_gdx_copy_iface_is_reachable)
UCT_GDX_INTERNAL_OPS(uct_gdx_copy_internal_ops, uct_gdx_copy_estimate_perf, uct_gdx_copy_iface_is_reachable_v2,
                     UCT_GDX_NO_CONNECT_TO_EP_V2, uct_base_ep_is_connected);

static UCS_CLASS_INIT_FUNC(uct_gdx_copy_iface_t, uct_md_h md, uct_worker_h worker,
                           const uct_iface_params_t *params, const uct_iface_config_t *tl_config)
{
    ucs_status_t status;

    UCT_CHECK_PARAM(params->field_mask & UCT_IFACE_PARAM_FIELD_OPEN_MODE,
                    "UCT_IFACE_PARAM_FIELD_OPEN_MODE is not defined");
    if (!(params->open_mode & UCT_IFACE_OPEN_MODE_DEVICE)) {
        ucs_error(UCT_GDX_COPY_NAME " supports only UCT_IFACE_OPEN_MODE_DEVICE");
        return UCS_ERR_UNSUPPORTED;
    }
    status = uct_gdx_check_am_alignment(params, UCT_GDX_COPY_NAME);
    if (status != UCS_OK) {
        return status;
    }
    UCS_CLASS_CALL_SUPER_INIT(uct_base_iface_t, &uct_gdx_copy_iface_ops, &uct_gdx_copy_internal_ops, md,
                              worker, params, tl_config UCS_STATS_ARG(NULL) UCS_STATS_ARG(UCT_GDX_COPY_NAME));
    self->addr.system_id = ucs_get_system_id();
    self->addr.pid       = (uint32_t)getpid();
    self->event_fd       = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (self->event_fd < 0) {
        ucs_error(UCT_GDX_COPY_NAME ": eventfd() failed: %m");
        return UCS_ERR_IO_ERROR;
    }
    return UCS_OK;
}

static UCS_CLASS_CLEANUP_FUNC(uct_gdx_copy_iface_t)
{
    close(self->event_fd);
}

UCS_CLASS_DEFINE(uct_gdx_copy_iface_t, uct_base_iface_t);
static UCS_CLASS_DEFINE_NEW_FUNC(uct_gdx_copy_iface_t, uct_iface_t, uct_md_h, uct_worker_h,
                                 const uct_iface_params_t*, const uct_iface_config_t*);
static UCS_CLASS_DEFINE_DELETE_FUNC(uct_gdx_copy_iface_t, uct_iface_t);

static ucs_status_t uct_gdx_copy_query_devices(uct_md_h md, uct_tl_device_resource_t **devices_p,
                                               unsigned *num_p)
{
    uct_tl_device_resource_t *dev;

    *devices_p = NULL;
    *num_p     = 0;
    if (!gdx_uct_copy_available()) {
        return UCS_OK; /* no GPU: no memory type to copy across, no device */
    }
    dev = ucs_calloc(1, sizeof(*dev), "gdx_copy device");
    if (dev == NULL) {
        ucs_error(UCT_GDX_COPY_NAME ": out of memory for a device description");
        return UCS_ERR_NO_MEMORY;
    }
    ucs_strncpy_zero(dev->name, "cuda", sizeof(dev->name));
    dev->type       = UCT_DEVICE_TYPE_ACC;
    dev->sys_device = UCS_SYS_DEVICE_ID_UNKNOWN;
    *devices_p      = dev;
    *num_p          = 1;
    return UCS_OK;
}

static uct_iface_ops_t uct_gdx_copy_iface_ops = {
    .ep_put_short             = uct_gdx_copy_ep_put_short,
    .ep_put_zcopy             = uct_gdx_copy_ep_put_zcopy,
    .ep_get_short             = uct_gdx_copy_ep_get_short,
    .ep_get_zcopy             = uct_gdx_copy_ep_get_zcopy,
    .ep_pending_add           = (uct_ep_pending_add_func_t)ucs_empty_function_return_busy,
    .ep_pending_purge         = (uct_ep_pending_purge_func_t)ucs_empty_function,
    .ep_flush                 = uct_base_ep_flush,  /* every operation completed before it returned */
    .ep_fence                 = uct_base_ep_fence,
    .ep_check                 = (uct_ep_check_func_t)ucs_empty_function_return_unsupported,
    .ep_create                = UCS_CLASS_NEW_FUNC_NAME(uct_gdx_copy_ep_t),
    .ep_destroy               = UCS_CLASS_DELETE_FUNC_NAME(uct_gdx_copy_ep_t),
    .iface_flush              = uct_base_iface_flush,
    .iface_fence              = uct_base_iface_fence,
    .iface_progress_enable    = (uct_iface_progress_enable_func_t)ucs_empty_function,
    .iface_progress_disable   = (uct_iface_progress_disable_func_t)ucs_empty_function,
    .iface_progress           = (uct_iface_progress_func_t)ucs_empty_function_return_zero,
    .iface_close              = UCS_CLASS_DELETE_FUNC_NAME(uct_gdx_copy_iface_t),
    .iface_query              = uct_gdx_copy_iface_query,
    .iface_get_device_address = (uct_iface_get_device_address_func_t)ucs_empty_function_return_success,
    .iface_get_address        = uct_gdx_copy_iface_get_address,
    .iface_event_fd_get       = uct_gdx_copy_iface_event_fd_get,
    .iface_event_arm          = uct_gdx_copy_iface_event_arm,
    .iface_is_reachable       = uct_gdx_copy_iface_is_reachable,
};

/* ---- memory domain: registration is a formality (same process, addresses used as they are) --------------- */

static ucs_status_t uct_gdx_copy_md_query(uct_md_h md, uct_gdx_md_attr_t *attr)
{
    const uint64_t types = UCS_BIT(UCS_MEMORY_TYPE_HOST) | UCS_BIT(UCS_MEMORY_TYPE_CUDA) |
                           UCS_BIT(UCS_MEMORY_TYPE_CUDA_MANAGED);

    UCT_GDX_MD_ATTR_DEFAULTS(attr); /* first: every attribute this MD does not set keeps UCX's default */
    UCT_GDX_MD_CAP(attr).flags            = UCT_MD_FLAG_REG;
    UCT_GDX_MD_CAP(attr).reg_mem_types    = types;
    UCT_GDX_MD_SET_CACHE_TYPES(attr, types);
    /* Host too, as UCX's cuda_copy: UCP 1.22 gives the memory-type endpoint (an address of the transports that access
     * CUDA: this one) a host lane as well, from transports that access host memory and put short to that address.
     * Without host here none qualifies when UCX_TLS names no UCX copy transport (gdx-run's gdx_shm,gdx_ipc,gdx_copy),
     * and ucp_worker_create fails: "no copy across memory types transport: self/memory - not available, gdx_shm/
     * memory - no put short" (UCX 1.22 with CUDA, H200, bench/results/gpu-2026-11-27/run6). Host to host is a
     * memcpy (bridge_copy.cpp). */
    UCT_GDX_MD_CAP(attr).access_mem_types = types;
    UCT_GDX_MD_CAP(attr).alloc_mem_types  = 0;
    /* The memory-type transport tells UCP what a buffer is, as cuda_copy does upstream; the gdx_<tl> MDs do not
     * (GDX_UCT_DETECT, uct_gdx_md.c says why). */
    UCT_GDX_MD_CAP(attr).detect_mem_types = gdx_uct_copy_available() ?
                                            (UCS_BIT(UCS_MEMORY_TYPE_CUDA) | UCS_BIT(UCS_MEMORY_TYPE_CUDA_MANAGED)) :
                                            0;
    UCT_GDX_MD_CAP(attr).max_alloc        = 0;
    UCT_GDX_MD_CAP(attr).max_reg          = ULONG_MAX;
    attr->rkey_packed_size     = 0;
    attr->reg_cost             = ucs_linear_func_make(0, 0);
    memset(&attr->local_cpus, 0xff, sizeof(attr->local_cpus));
    return UCS_OK;
}

static ucs_status_t uct_gdx_copy_mem_reg_impl(uct_md_h md, void *address, size_t length, unsigned flags,
                                              uct_mem_h *memh_p)
{
    static char handle; /* one non-NULL handle for all: nothing is pinned or mapped */

    *memh_p = &handle;
    return UCS_OK;
}
UCT_GDX_DEFINE_MEM_REG(uct_gdx_copy_mem_reg, uct_gdx_copy_mem_reg_impl)

/* Nothing to release (one static handle), but the parameters are checked as every UCX MD checks them: no memh is
 * INVALID_PARAM, and DEREG_FLAG_INVALIDATE (not advertised: no UCT_MD_FLAG_INVALIDATE) is UNSUPPORTED. UCX's gtest
 * test_md.dereg_bad_arg. */
static ucs_status_t uct_gdx_copy_mem_dereg(uct_md_h md, const uct_md_mem_dereg_params_t *params)
{
    UCT_MD_MEM_DEREG_CHECK_PARAMS(params, 0);
    return UCS_OK;
}

static ucs_status_t uct_gdx_copy_mem_query(uct_md_h md, const void *address, size_t length,
                                           uct_gdx_mem_attr_t *mem_attr)
{
    gdx_uct_mem_info_t info;
    gdx_status_t st = gdx_uct_copy_mem_detect(address, length, &info);

    return uct_gdx_mem_attr_fill(UCT_GDX_COPY_NAME, st, &info, address, length, mem_attr);
}

static ucs_status_t uct_gdx_copy_md_open(uct_component_t *component, const char *md_name,
                                         const uct_md_config_t *config, uct_md_h *md_p)
{
    static uct_md_ops_t ops = {
        .close                  = (uct_md_close_func_t)ucs_empty_function,
        .query                  = uct_gdx_copy_md_query,
        .mem_alloc              = (uct_md_mem_alloc_func_t)ucs_empty_function_return_unsupported,
        .mem_free               = (uct_md_mem_free_func_t)ucs_empty_function_return_unsupported,
        .mem_advise             = (uct_md_mem_advise_func_t)ucs_empty_function_return_unsupported,
        .mem_reg                = uct_gdx_copy_mem_reg,
        .mem_dereg              = uct_gdx_copy_mem_dereg,
        .mem_query              = uct_gdx_copy_mem_query,
        .mkey_pack              = (uct_md_mkey_pack_func_t)ucs_empty_function_return_success,
        .detect_memory_type     = uct_gdx_detect_by_query,
        UCT_GDX_MD_OPS_UNUSED
    };
    static uct_md_t md = {.ops = &ops, .component = &uct_gdx_copy_component};

    if (gdx_uct_copy_available()) {
        uct_gdx_md_check_memtype_cache(UCT_GDX_COPY_NAME);
    }
    *md_p = &md;
    return UCS_OK;
}

static uct_component_t uct_gdx_copy_component = {
    .query_md_resources = uct_md_query_single_md_resource,
    .md_open            = uct_gdx_copy_md_open,
    .cm_open            = (uct_component_cm_open_func_t)ucs_empty_function_return_unsupported,
    .rkey_unpack        = uct_md_stub_rkey_unpack,
    .rkey_ptr           = (uct_component_rkey_ptr_func_t)ucs_empty_function_return_unsupported,
    .rkey_release       = (uct_component_rkey_release_func_t)ucs_empty_function_return_success,
    UCT_GDX_COMPONENT_INIT_RKEY_COMPARE
    .name               = UCT_GDX_COPY_NAME,
    .md_config          = UCT_MD_DEFAULT_CONFIG_INITIALIZER,
    .cm_config          = UCS_CONFIG_EMPTY_GLOBAL_LIST_ENTRY,
    .tl_list            = UCT_COMPONENT_TL_LIST_INITIALIZER(&uct_gdx_copy_component),
    .flags              = 0,
    .md_vfs_init        = (uct_component_md_vfs_init_func_t)ucs_empty_function
};

static ucs_config_field_t uct_gdx_copy_iface_config_table[] = {
    {"", "", NULL, 0, UCS_CONFIG_TYPE_TABLE(uct_iface_config_table)},
    {NULL}
};

UCT_TL_DEFINE_ENTRY(&uct_gdx_copy_component, gdx_copy, uct_gdx_copy_query_devices, uct_gdx_copy_iface_t,
                    "GDX_COPY_", uct_gdx_copy_iface_config_table, uct_iface_config_t);

/* Called by uct_gdx_register_all() (after the version guard), next to gdx_aux. */
void uct_gdx_copy_register(void)
{
    uct_component_register(&uct_gdx_copy_component);
    uct_tl_register(&uct_gdx_copy_component, &UCT_TL_NAME(gdx_copy));
}
