/* The UCT memory domain of one gdx transport: registration through the transport's gdx MemoryDomain (its
 * registration ladder), remote keys, and memory-type detection.
 *
 * CUDA: Debian's UCX has no CUDA module, so nothing in UCX can tell a device pointer from a host one. When
 * gdx's CUDA backend finds a GPU, gdx_copy (uct_gdx_copy.c) advertises CUDA and CUDA_MANAGED in detect_mem_types,
 * as UCX's cuda_copy does, and this MD only with GDX_UCT_DETECT=all; both answer mem_query/detect_memory_type
 * through gdx's memory-type layer. An MD whose transport can stage (tcp, shm, rc)
 * registers through the staging engine, which takes every kind it detects (what the transport does not reach it
 * stages), so its reg_mem_types lists host, CUDA and CUDA_MANAGED; the others (cuda_ipc, or GDX_UCT_ENGINE=no)
 * list what the transport reaches directly (Capabilities::direct_types). Access stays host only (gdx_copy is
 * UCP's memory-type endpoint). Without a GPU every pointer is host memory and no CUDA capability is advertised. */
#include "uct_gdx_glue.h"

#include <ucs/datastruct/pgtable.h>

#include <ucp/core/ucp_types.h>

#include <ucs/debug/log.h>
#include <ucs/sys/string.h>
#include <ucs/sys/topo/base/topo.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The staging engine's control messages travel on active-message id GDX_UCT_ENGINE_AM_ID of the gdx interface,
 * which the glue never hands to UCP: an id UCP uses would be taken from it. */
_Static_assert(UCP_AM_ID_LAST <= GDX_UCT_ENGINE_AM_ID, "UCP uses the staging engine's active-message id");
_Static_assert(GDX_UCT_ENGINE_AM_ID < UCT_AM_ID_MAX, "the engine's active-message id is not a UCT id");

static const char *uct_gdx_md_name(uct_gdx_md_t *md)
{
    return md->super.component->name;
}

/* "0000:18:00.0" -> UCS system device, UCS_SYS_DEVICE_ID_UNKNOWN when absent or unknown to UCS. */
static ucs_sys_device_t uct_gdx_sys_device(const char *bus_id)
{
    unsigned domain, bus, slot, function;
    ucs_sys_bus_id_t id;
    ucs_sys_device_t dev;

    if ((bus_id[0] == '\0') ||
        (sscanf(bus_id, "%x:%x:%x.%x", &domain, &bus, &slot, &function) != 4)) {
        return UCS_SYS_DEVICE_ID_UNKNOWN;
    }
    id.domain   = (uint16_t)domain;
    id.bus      = (uint8_t)bus;
    id.slot     = (uint8_t)slot;
    id.function = (uint8_t)function;
    if (ucs_topo_find_device_by_bus_id(&id, &dev) != UCS_OK) {
        return UCS_SYS_DEVICE_ID_UNKNOWN;
    }
    return dev;
}

static ucs_memory_type_t uct_gdx_ucs_mem_type(gdx_uct_mem_type_t t)
{
    switch (t) {
    case GDX_UCT_MEM_CUDA:         return UCS_MEMORY_TYPE_CUDA;
    case GDX_UCT_MEM_CUDA_MANAGED: return UCS_MEMORY_TYPE_CUDA_MANAGED;
    case GDX_UCT_MEM_HOST:         break;
    }
    return UCS_MEMORY_TYPE_HOST;
}

static void uct_gdx_md_close(uct_md_h uct_md)
{
    uct_gdx_md_t *md = ucs_derived_of(uct_md, uct_gdx_md_t);

    gdx_uct_md_close(md->bridge);
    ucs_free(md);
}

static ucs_status_t uct_gdx_md_query(uct_md_h uct_md, uct_gdx_md_attr_t *attr)
{
    uct_gdx_md_t *md = ucs_derived_of(uct_md, uct_gdx_md_t);
    uint64_t direct  = md->attr.reg_host ? UCS_BIT(UCS_MEMORY_TYPE_HOST) : 0;

    UCT_GDX_MD_ATTR_DEFAULTS(attr); /* first: every attribute this MD does not set keeps UCX's default */
    if (md->cuda && md->attr.reg_cuda) {
        direct |= UCS_BIT(UCS_MEMORY_TYPE_CUDA);
    }
    if (md->cuda && md->attr.reg_cuda_managed) {
        direct |= UCS_BIT(UCS_MEMORY_TYPE_CUDA_MANAGED);
    }
    UCT_GDX_MD_CAP(attr).flags            = UCT_MD_FLAG_REG | UCT_MD_FLAG_NEED_MEMH | UCT_MD_FLAG_NEED_RKEY;
    UCT_GDX_MD_CAP(attr).reg_mem_types    = direct;
    UCT_GDX_MD_SET_CACHE_TYPES(attr, direct);
    /* UCP builds its memory-type endpoint (copies between host and CUDA memory in this process) from the
     * transports whose MD "accesses" CUDA memory; ours connect endpoint to endpoint, which that endpoint cannot
     * wire up, so only gdx_copy claims it. Registration (reg_mem_types, NEED_RKEY) is what puts CUDA buffers on
     * our lanes. */
    UCT_GDX_MD_CAP(attr).access_mem_types = direct & UCS_BIT(UCS_MEMORY_TYPE_HOST);
    UCT_GDX_MD_CAP(attr).alloc_mem_types  = 0;
    /* Detection is gdx_copy's (GDX_UCT_DETECT=copy, the default), as it is cuda_copy's in UCX: once one selected
     * MD detects, UCP closes its inline small-message path to every send whose memory type the caller did not
     * give (ucp_proto_is_inline: the memtype cache, which libucm_cuda fills with every inaccessible mapping, is
     * then never empty), so a host-only UCX_TLS of gdx transports pays it only if it asks to (=all). */
    UCT_GDX_MD_CAP(attr).detect_mem_types = md->detects ? (UCS_BIT(UCS_MEMORY_TYPE_CUDA) |
                                                           UCS_BIT(UCS_MEMORY_TYPE_CUDA_MANAGED)) : 0;
    UCT_GDX_MD_CAP(attr).max_alloc        = 0;
    UCT_GDX_MD_CAP(attr).max_reg          = ULONG_MAX;
    attr->rkey_packed_size     = md->attr.rkey_packed_size;
    /* gdx's host registration is a table insert (tcp, shm); verbs would pin pages, which is what UCT's ib MD
     * reports as a per-page cost. An estimate for protocol selection, not a measurement. */
    attr->reg_cost             = ucs_linear_func_make(1e-7, 0);
#if UCT_GDX_PROTO_V1_DEFAULT
    /* UCP's protocol v1 (the default before 1.16) sends host memory by eager zero-copy from
     * reg_cost.c / (1/UCX_BCOPY_BW - 1/bandwidth) bytes on (ucp_ep_config_get_zcopy_auto_thresh): 933 B for
     * gdx_shm. Its am_zcopy copies into the ring as am_bcopy does, so the registration buys nothing, and
     * UCP 1.13 moved 64 KiB at 0.6x of what am_bcopy did (bench/results/cpu-2026-11-26d/). A cost of 16 us puts
     * that threshold above the largest am_zcopy (~150 KiB and up, against 128 KiB), so host memory goes by
     * am_bcopy up to the rendezvous threshold. It changes nothing else there: v1's rendezvous threshold takes no
     * registration cost, and GPU memory (reg_mem_types) has a threshold of 1 whatever the cost. Protocol v2 (1.16
     * on) estimates each protocol from the operations' own performance and keeps 1e-7. */
    if (md->attr.am_zcopy_copies) {
        attr->reg_cost = ucs_linear_func_make(16e-6, 0);
    }
#endif
    memset(&attr->local_cpus, 0xff, sizeof(attr->local_cpus));
    return UCS_OK;
}

static unsigned uct_gdx_access(unsigned flags)
{
    unsigned access = 0;

    /* UCT: no access flag given means every access. UCP from 1.14 on keeps one memory handle per buffer
     * in its cache and hands it to later operations of other kinds (a buffer registered as a rendezvous
     * source, LOCAL_READ, later serves as the target of a get): the rights of the first registration would
     * refuse them ("remote key does not grant remote read"). There every registration grants every right,
     * as UCX's own tcp, posix and cma MDs do; UCP passes no user-chosen restriction to UCT there anyway (its
     * ucp_mem_map asks for RMA rights by feature, not by the caller). On 1.13 the requested rights are
     * enforced (README.md, "Access rights"). */
    if (!(flags & UCT_MD_MEM_ACCESS_ALL) || UCT_GDX_UCP_REUSES_MEMH) {
        flags |= UCT_MD_MEM_ACCESS_ALL;
    }
    if (flags & UCT_MD_MEM_ACCESS_LOCAL_READ) {
        access |= GDX_UCT_ACCESS_LOCAL_READ;
    }
    if (flags & UCT_MD_MEM_ACCESS_LOCAL_WRITE) {
        access |= GDX_UCT_ACCESS_LOCAL_WRITE;
    }
    if (flags & (UCT_MD_MEM_ACCESS_REMOTE_PUT | UCT_MD_MEM_ACCESS_REMOTE_ATOMIC)) {
        access |= GDX_UCT_ACCESS_REMOTE_WRITE;
    }
    if (flags & (UCT_MD_MEM_ACCESS_REMOTE_GET | UCT_MD_MEM_ACCESS_REMOTE_ATOMIC)) {
        access |= GDX_UCT_ACCESS_REMOTE_READ;
    }
    return access;
}

static ucs_status_t uct_gdx_mem_reg_impl(uct_md_h uct_md, void *address, size_t length, unsigned flags,
                                         uct_mem_h *memh_p)
{
    uct_gdx_md_t *md = ucs_derived_of(uct_md, uct_gdx_md_t);
    gdx_uct_memh_t *memh;
    gdx_status_t st;

    /* UCX's memory-type cache keeps regions in a page table of UCS_PGT_ADDR_ALIGN (16) byte granules, and UCP
     * registers a CUDA allocation it found there with that rounded length: up to 15 bytes past its end (UCX 1.22 with
     * libucm_cuda: a 1 MiB + 8 B cudaMalloc registered as 1 MiB + 16 B). Those bytes are never transferred. */
    st = gdx_uct_mem_reg(md->bridge, address, length, uct_gdx_access(flags), UCS_PGT_ADDR_ALIGN - 1, &memh);
    if (st != GDX_OK) {
        uct_md_log_mem_reg_error(flags, "%s: mem_reg(%p, %zu) failed: %s (%s)", uct_gdx_md_name(md), address,
                                 length, gdx_status_string(st), gdx_uct_last_error());
        return uct_gdx_status(st);
    }
    *memh_p = memh;
    return UCS_OK;
}
UCT_GDX_DEFINE_MEM_REG(uct_gdx_mem_reg, uct_gdx_mem_reg_impl)

static ucs_status_t uct_gdx_mem_dereg(uct_md_h uct_md, const uct_md_mem_dereg_params_t *params)
{
    UCT_MD_MEM_DEREG_CHECK_PARAMS(params, 0);

    gdx_uct_mem_dereg((gdx_uct_memh_t*)params->memh);
    return UCS_OK;
}

static ucs_status_t uct_gdx_mkey_pack_impl(uct_md_h uct_md, uct_mem_h memh, void *rkey_buffer)
{
    uct_gdx_md_t *md = ucs_derived_of(uct_md, uct_gdx_md_t);
    gdx_status_t st;

    st = gdx_uct_mkey_pack(md->bridge, (gdx_uct_memh_t*)memh, rkey_buffer);
    return (st == GDX_OK) ? UCS_OK : uct_gdx_fail(st, "mkey_pack", uct_gdx_md_name(md));
}
UCT_GDX_DEFINE_MKEY_PACK(uct_gdx_mkey_pack, uct_gdx_mkey_pack_impl)

ucs_status_t uct_gdx_mem_attr_fill(const char *md_name, gdx_status_t st, const gdx_uct_mem_info_t *info,
                                   const void *address, size_t length, uct_gdx_mem_attr_t *mem_attr)
{
    if (st != GDX_OK) {
        /* UCP asks every detecting MD in turn and moves on; this is not an error of the application's. */
        ucs_debug("%s: mem_query(%p, %zu): %s (%s)", md_name, address, length, gdx_status_string(st),
                  gdx_uct_last_error());
        return uct_gdx_status(st);
    }
    if (mem_attr->field_mask & UCT_MD_MEM_ATTR_FIELD_MEM_TYPE) {
        mem_attr->mem_type = uct_gdx_ucs_mem_type(info->type);
    }
    if (mem_attr->field_mask & UCT_MD_MEM_ATTR_FIELD_SYS_DEV) {
        mem_attr->sys_dev = uct_gdx_sys_device(info->bus_id);
    }
    if (mem_attr->field_mask & UCT_MD_MEM_ATTR_FIELD_BASE_ADDRESS) {
        mem_attr->base_address = (info->base != NULL) ? info->base : (void*)address;
    }
    if (mem_attr->field_mask & UCT_MD_MEM_ATTR_FIELD_ALLOC_LENGTH) {
        mem_attr->alloc_length = (info->length != 0) ? info->length : length;
    }
    return UCS_OK;
}

void uct_gdx_md_check_memtype_cache(const char *md_name)
{
    /* UCP consults a detecting MD only when UCX's memtype cache misses with an error: an enabled but empty cache
     * (nothing feeds it without UCX's CUDA module) answers "host" for every device pointer. With that module
     * (libucm_cuda) the cache knows CUDA memory, and turning it off only costs every send a lookup. */
    if ((ucs_global_opts.enable_memtype_cache != UCS_NO) && !gdx_uct_ucx_hooks_cuda()) {
        ucs_warn("%s: a GPU is present but UCX_MEMTYPE_CACHE is not 'n': UCP will treat CUDA buffers as host "
                 "memory (set UCX_MEMTYPE_CACHE=n, as tools/gdx-run does)", md_name);
    }
}

static ucs_status_t uct_gdx_mem_query(uct_md_h uct_md, const void *address, size_t length,
                                      uct_gdx_mem_attr_t *mem_attr)
{
    uct_gdx_md_t *md = ucs_derived_of(uct_md, uct_gdx_md_t);
    gdx_uct_mem_info_t info;
    gdx_status_t st;

    st = gdx_uct_mem_detect(md->bridge, address, length, &info);
    return uct_gdx_mem_attr_fill(uct_gdx_md_name(md), st, &info, address, length, mem_attr);
}

ucs_status_t uct_gdx_detect_by_query(uct_md_h uct_md, const void *address, size_t length,
                                     ucs_memory_type_t *mem_type_p)
{
    uct_gdx_mem_attr_t attr;
    ucs_status_t status;

    attr.field_mask = UCT_MD_MEM_ATTR_FIELD_MEM_TYPE;
    status          = uct_md->ops->mem_query(uct_md, address, length, &attr);
    if (status == UCS_OK) {
        *mem_type_p = attr.mem_type;
    }
    return status;
}

static uct_md_ops_t uct_gdx_md_ops = {
    .close                  = uct_gdx_md_close,
    .query                  = uct_gdx_md_query,
    .mem_alloc              = (uct_md_mem_alloc_func_t)ucs_empty_function_return_unsupported,
    .mem_free               = (uct_md_mem_free_func_t)ucs_empty_function_return_unsupported,
    .mem_advise             = (uct_md_mem_advise_func_t)ucs_empty_function_return_unsupported,
    .mem_reg                = uct_gdx_mem_reg,
    .mem_dereg              = uct_gdx_mem_dereg,
    .mem_query              = uct_gdx_mem_query,
    .mkey_pack              = uct_gdx_mkey_pack,
    .detect_memory_type     = uct_gdx_detect_by_query,
    UCT_GDX_MD_OPS_UNUSED
};

ucs_status_t uct_gdx_md_open(uct_component_t *component, const char *md_name, const uct_md_config_t *config,
                             uct_md_h *md_p)
{
    const uct_gdx_md_config_t *cfg = ucs_derived_of(config, uct_gdx_md_config_t);
    uct_gdx_component_t *comp      = ucs_derived_of(component, uct_gdx_component_t);
    uct_gdx_md_t *md;
    gdx_status_t st;

    if (strcmp(md_name, comp->name) != 0) {
        ucs_error("%s: no memory domain named '%s'", comp->name, md_name);
        return UCS_ERR_NO_DEVICE;
    }
    md = ucs_calloc(1, sizeof(*md), "gdx md");
    if (md == NULL) {
        ucs_error("%s: out of memory for the memory domain", comp->name);
        return UCS_ERR_NO_MEMORY;
    }
    st = gdx_uct_md_open(comp->tl, (const char *const*)cfg->values, &md->bridge);
    if (st != GDX_OK) {
        ucs_free(md);
        return uct_gdx_fail(st, "md_open", comp->name);
    }
    gdx_uct_md_query(md->bridge, &md->attr);
    md->cuda            = gdx_uct_cuda_available(md->bridge);
    md->detects         = gdx_uct_md_detects(md->bridge);
    md->super.ops       = &uct_gdx_md_ops;
    md->super.component = component;
    if (md->detects) {
        uct_gdx_md_check_memtype_cache(comp->name);
    }
    *md_p = &md->super;
    return UCS_OK;
}

ucs_status_t uct_gdx_query_devices(uct_md_h uct_md, uct_tl_device_resource_t **devices_p, unsigned *num_p)
{
    uct_gdx_md_t *md = ucs_derived_of(uct_md, uct_gdx_md_t);
    gdx_uct_device_t *devs = NULL;
    uct_tl_device_resource_t *out;
    unsigned count = 0, i;
    gdx_status_t st;

    st = gdx_uct_md_devices(md->bridge, &devs, &count);
    if (st != GDX_OK) {
        return uct_gdx_fail(st, "query_devices", uct_gdx_md_name(md));
    }
    out = ucs_calloc((count > 0) ? count : 1, sizeof(*out), "gdx devices");
    if (out == NULL) {
        free(devs);
        ucs_error("%s: out of memory for %u device descriptions", uct_gdx_md_name(md), count);
        return UCS_ERR_NO_MEMORY;
    }
    for (i = 0; i < count; ++i) {
        if (strlen(devs[i].name) >= sizeof(out[i].name)) {
            ucs_warn("%s: device name '%s' truncated to %zu characters", uct_gdx_md_name(md), devs[i].name,
                     sizeof(out[i].name) - 1);
        }
        ucs_strncpy_zero(out[i].name, devs[i].name, sizeof(out[i].name));
        out[i].type       = devs[i].intra_node ? UCT_DEVICE_TYPE_SHM : UCT_DEVICE_TYPE_NET;
        out[i].sys_device = uct_gdx_sys_device(devs[i].sys_bus_id);
    }
    free(devs);
    *devices_p = out;
    *num_p     = count;
    return UCS_OK;
}
