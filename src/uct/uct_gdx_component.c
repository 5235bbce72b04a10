/* The UCT components of libuct_gdx, one per gdx transport, built at load time from gdx's transport table
 * (gdx::tp::components()), and the UCS configuration tables that make GDX_* settings reachable as UCX_GDX_*; the
 * gdx -> UCS status mapping, and with it the report of endpoints whose peer is gone. */
#include "uct_gdx_glue.h"

#include <ucs/debug/log.h>
#include <ucs/sys/string.h>

#include <ctype.h>
#include <string.h>

static uct_gdx_component_t uct_gdx_components[GDX_UCT_MAX_TLS];
static unsigned uct_gdx_num_components;

ucs_status_t uct_gdx_status(gdx_status_t st)
{
    switch (st) {
    case GDX_OK:                   return UCS_OK;
    case GDX_INPROGRESS:           return UCS_INPROGRESS;
    case GDX_ERR_NO_RESOURCE:      return UCS_ERR_NO_RESOURCE;
    case GDX_ERR_INVALID_PARAM:    return UCS_ERR_INVALID_PARAM;
    case GDX_ERR_NO_MEMORY:        return UCS_ERR_NO_MEMORY;
    case GDX_ERR_UNSUPPORTED:      return UCS_ERR_UNSUPPORTED;
    case GDX_ERR_NOT_FOUND:        return UCS_ERR_NO_ELEM;
    case GDX_ERR_UNREACHABLE:      return UCS_ERR_UNREACHABLE;
    case GDX_ERR_IO:               return UCS_ERR_IO_ERROR;
    case GDX_ERR_TIMEOUT:          return UCS_ERR_TIMED_OUT;
    case GDX_ERR_CONNECTION_RESET: return UCS_ERR_CONNECTION_RESET;
    case GDX_ERR_CANCELED:         return UCS_ERR_CANCELED;
    case GDX_ERR_ACCESS_DENIED:    return UCS_ERR_REJECTED;
    case GDX_ERR_PROTOCOL:         return UCS_ERR_IO_ERROR;
    case GDX_ERR_NO_DEVICE:        return UCS_ERR_NO_DEVICE;
    case GDX_ERR_BUSY:             return UCS_ERR_BUSY;
    case GDX_ERR_INVALID_CONFIG:   return UCS_ERR_INVALID_PARAM;
    case GDX_ERR_DRIVER:           return UCS_ERR_IO_ERROR;
    case GDX_ERR_INVALID_ADDR:     return UCS_ERR_INVALID_ADDR;
    case GDX_ERR_INTERNAL:         return UCS_ERR_IO_ERROR;
    }
    return UCS_ERR_IO_ERROR;
}

ucs_status_t uct_gdx_fail(gdx_status_t st, const char *what, const char *name)
{
    /* gdx logged the details through its own logger; repeat them where UCX users look. */
    ucs_error("%s: %s failed: %s (%s)", name, what, gdx_status_string(st), gdx_uct_last_error());
    return uct_gdx_status(st);
}

ucs_status_t uct_gdx_check_am_alignment(const uct_iface_params_t *params, const char *name)
{
    if (!(params->field_mask & UCT_IFACE_PARAM_FIELD_AM_ALIGNMENT)) {
        if (params->field_mask & UCT_IFACE_PARAM_FIELD_AM_ALIGN_OFFSET) {
            ucs_error("%s: AM alignment offset %zu has no effect without an alignment", name,
                      params->am_align_offset);
            return UCS_ERR_INVALID_PARAM;
        }
        return UCS_OK;
    }
    if ((params->am_alignment == 0) || !ucs_is_pow2(params->am_alignment)) {
        ucs_error("%s: invalid AM alignment %zu: must be a power of 2", name, params->am_alignment);
        return UCS_ERR_INVALID_PARAM;
    }
    return UCS_OK;
}

/* ---- endpoints whose peer is gone (README.md, "A peer that dies") -------------------------------------- */

/* The status UCT's error handler gets for an endpoint whose peer is gone: what UCX's tcp reports for the same
 * events (ENDPOINT_TIMEOUT for a peer that stopped answering or never connected, CONNECTION_RESET for one that
 * closed or died), else the mapped status. Never a non-error nor CANCELED, which UCT's handler rejects. */
static ucs_status_t uct_gdx_ep_err_status(gdx_status_t st)
{
    ucs_status_t status;

    switch (st) {
    case GDX_ERR_TIMEOUT:          return UCS_ERR_ENDPOINT_TIMEOUT;
    case GDX_ERR_CONNECTION_RESET: return UCS_ERR_CONNECTION_RESET;
    default:
        status = uct_gdx_status(st);
        return (UCS_STATUS_IS_ERR(status) && (status != UCS_ERR_CANCELED)) ? status : UCS_ERR_ENDPOINT_TIMEOUT;
    }
}

/* Reports each endpoint whose peer is gone to UCT's error handler, once (GAPS.md, 16): UCP then fails what
 * waits on that peer, also requests the transport never saw (held for wire-up, a rendezvous waiting for the
 * peer's answer). From progress, after gdx's progress has returned, as UCX's own transports report (tcp from its
 * progress, sm through a progress callback): the handler may purge, flush and destroy endpoints, this one too.
 * One line, at the level UCX's tcp gives the same event: diag for a peer that went away (reset, refused, silent,
 * unreachable), error for anything else (gdx's own line said why when it happened). The handler's answer is not
 * acted on, as tcp's and sm's is not: UCP answers UNSUPPORTED for an endpoint without error handling and has
 * failed its requests by then. */
unsigned uct_gdx_iface_report_failures(uct_gdx_iface_t *iface)
{
    gdx_uct_ep_failure_t f;
    ucs_status_t status;
    unsigned count = 0;
    int gone;

    while (gdx_uct_iface_take_failure(iface->bridge, &f)) {
        status = uct_gdx_ep_err_status(f.status);
        gone   = (f.status == GDX_ERR_CONNECTION_RESET) || (f.status == GDX_ERR_TIMEOUT) ||
                 (f.status == GDX_ERR_UNREACHABLE);
        ucs_log(gone ? UCS_LOG_LEVEL_DIAG : UCS_LOG_LEVEL_ERROR,
                "%s: endpoint %p to peer %08x failed: %s (%s); reporting it to UCP as '%s'",
                iface->super.md->component->name, f.glue_ep, f.peer, gdx_status_string(f.status),
                f.by_staging ? "the staging engine declared the peer dead" : "its transport connection",
                ucs_status_string(status));
        uct_iface_handle_ep_err(&iface->super.super, (uct_ep_h)f.glue_ep, status);
        ++count;
    }
    return count;
}

/* ---- components ------------------------------------------------------------------------------------------- */

static ucs_status_t uct_gdx_query_md_resources(uct_component_t *component, uct_md_resource_desc_t **resources_p,
                                               unsigned *num_resources_p)
{
    uct_gdx_component_t *comp = ucs_derived_of(component, uct_gdx_component_t);
    gdx_uct_device_t *devices = NULL;
    unsigned count            = 0;
    gdx_status_t st;

    /* UCT lists an MD only when it has devices: a transport with none (rc without RDMA) stays silent. */
    st = gdx_uct_tl_devices(comp->tl, &devices, &count);
    free(devices);
    if ((st != GDX_OK) || (count == 0)) {
        ucs_debug("%s: no devices (%s)", comp->name, gdx_status_string(st));
        return uct_md_query_empty_md_resource(resources_p, num_resources_p);
    }
    return uct_md_query_single_md_resource(component, resources_p, num_resources_p);
}

static ucs_status_t uct_gdx_rkey_unpack_impl(uct_component_t *component, const void *rkey_buffer,
                                             uct_rkey_t *rkey_p, void **handle_p)
{
    uct_gdx_component_t *comp = ucs_derived_of(component, uct_gdx_component_t);
    gdx_uct_rkey_t *rkey;
    gdx_status_t st;

    /* UCP 1.13 releases the key of a failed unpack too (ucp_ep_rkey_unpack_internal's err_destroy walks an md_map
     * that still holds the failed MD): the outputs are set first, to a key that release ignores, never left as
     * whatever UCP's pool held (uct.fail.gdx_*.badkey crashed there about one run in two). */
    *rkey_p   = (uct_rkey_t)NULL;
    *handle_p = NULL;
    st = gdx_uct_rkey_unpack(comp->tl, rkey_buffer, &rkey);
    if (st != GDX_OK) {
        return uct_gdx_fail(st, "rkey_unpack", comp->name);
    }
    *rkey_p   = (uct_rkey_t)rkey;
    *handle_p = NULL;
    return UCS_OK;
}
UCT_GDX_DEFINE_RKEY_UNPACK(uct_gdx_rkey_unpack, uct_gdx_rkey_unpack_impl)

static ucs_status_t uct_gdx_rkey_release(uct_component_t *component, uct_rkey_t rkey, void *handle)
{
    if ((rkey != (uct_rkey_t)NULL) && (rkey != UCT_INVALID_RKEY)) { /* NULL: a failed unpack (above) */
        gdx_uct_rkey_release((gdx_uct_rkey_t*)rkey);
    }
    return UCS_OK;
}

/* {"", "", NULL, 0, TABLE(uct_md_config_table)}, one string per GDX_* variable, {NULL}. Built once at load
 * time from gdx's table and kept for the life of the process (UCX holds pointers into it). */
static ucs_config_field_t *uct_gdx_md_config_table_build(size_t *config_size)
{
    static const ucs_config_parser_t table_parser  = UCS_CONFIG_TYPE_TABLE(uct_md_config_table);
    static const ucs_config_parser_t string_parser = UCS_CONFIG_TYPE_STRING;
    unsigned n                                     = gdx_uct_config_count();
    ucs_config_field_t *table;
    unsigned i;

    table = ucs_calloc(n + 2, sizeof(*table), "gdx md config table");
    if (table == NULL) {
        return NULL;
    }
    table[0].name      = "";
    table[0].dfl_value = "";
    table[0].doc       = NULL;
    table[0].offset    = ucs_offsetof(uct_gdx_md_config_t, super);
    table[0].parser    = table_parser;
    for (i = 0; i < n; ++i) {
        gdx_uct_config_entry(i, &table[i + 1].name, &table[i + 1].dfl_value, &table[i + 1].doc);
        table[i + 1].offset = sizeof(uct_gdx_md_config_t) + (i * sizeof(char*));
        table[i + 1].parser = string_parser;
    }
    /* table[n + 1] stays zeroed: the terminator */
    *config_size = sizeof(uct_gdx_md_config_t) + (n * sizeof(char*));
    return table;
}

static void uct_gdx_component_init(uct_gdx_component_t *comp, unsigned tl, const char *tl_name,
                                   ucs_config_field_t *md_table, size_t md_config_size)
{
    size_t i;

    memset(comp, 0, sizeof(*comp));
    comp->tl = tl;
    ucs_snprintf_zero(comp->name, sizeof(comp->name), "gdx_%s", tl_name);
    ucs_snprintf_zero(comp->cfg_prefix, sizeof(comp->cfg_prefix), "GDX_%s_", tl_name);
    for (i = 0; comp->cfg_prefix[i] != '\0'; ++i) {
        comp->cfg_prefix[i] = (char)toupper((unsigned char)comp->cfg_prefix[i]);
    }

    /* uct_component_t.name is a const array: it is written once here, before UCX can see the object. */
    ucs_strncpy_zero((char*)comp->super.name, comp->name, sizeof(comp->super.name));
    comp->super.query_md_resources = uct_gdx_query_md_resources;
    comp->super.md_open            = uct_gdx_md_open;
    comp->super.cm_open            = (uct_component_cm_open_func_t)ucs_empty_function_return_unsupported;
    comp->super.rkey_unpack        = uct_gdx_rkey_unpack;
    comp->super.rkey_ptr           = (uct_component_rkey_ptr_func_t)ucs_empty_function_return_unsupported;
    comp->super.rkey_release       = uct_gdx_rkey_release;
    UCT_GDX_COMPONENT_RKEY_COMPARE(&comp->super);
    comp->super.md_config.name     = "gdx memory domain (GDX_* settings)";
    comp->super.md_config.prefix   = "GDX_";
    comp->super.md_config.table    = md_table;
    comp->super.md_config.size     = md_config_size;
    comp->super.cm_config.name     = "";
    comp->super.cm_config.prefix   = "";
    comp->super.cm_config.table    = NULL;
    comp->super.cm_config.size     = 0;
    comp->super.flags              = 0;
    comp->super.md_vfs_init        = (uct_component_md_vfs_init_func_t)ucs_empty_function;
    ucs_list_head_init(&comp->super.tl_list);

    ucs_strncpy_zero(comp->uct_tl.name, comp->name, sizeof(comp->uct_tl.name));
    comp->uct_tl.query_devices  = uct_gdx_query_devices;
    comp->uct_tl.iface_open     = uct_gdx_iface_open;
    comp->uct_tl.config.name    = comp->name;
    comp->uct_tl.config.prefix  = comp->cfg_prefix;
    comp->uct_tl.config.table   = (strcmp(tl_name, "tcp") == 0) ? uct_gdx_tcp_iface_config_table :
                                                                  uct_gdx_iface_config_table;
    comp->uct_tl.config.size    = sizeof(uct_gdx_iface_config_t);
}

/* Called once at load time (uct_gdx_init.c), after the version guard passed. */
void uct_gdx_register_all(void)
{
    size_t md_config_size = 0;
    ucs_config_field_t *md_table;
    const char *tl_name;
    unsigned tl, n;

    n = gdx_uct_tl_count();
    if (n == 0) {
        ucs_diag("libuct_gdx: gdx was built without transports; nothing to register");
        return;
    }
    md_table = uct_gdx_md_config_table_build(&md_config_size);
    if (md_table == NULL) {
        ucs_error("libuct_gdx: out of memory building the UCX_GDX_* configuration table; not registering");
        return;
    }

    for (tl = 0; tl < n; ++tl) {
        tl_name = gdx_uct_tl_name(tl);
        if ((tl_name == NULL) || (strlen("gdx_") + strlen(tl_name) >= UCT_TL_NAME_MAX)) {
            ucs_error("libuct_gdx: gdx transport '%s' has no name or one too long for UCT (%d characters with "
                      "'gdx_'); skipping it", tl_name ? tl_name : "(null)", UCT_TL_NAME_MAX - 1);
            continue;
        }
        uct_gdx_component_t *comp = &uct_gdx_components[uct_gdx_num_components++];
        uct_gdx_component_init(comp, tl, tl_name, md_table, md_config_size);
        if (uct_gdx_num_components == 1) {
            /* Lists the component and puts UCX_GDX_* into UCX's global config list (ucx_info -c). */
            uct_component_register(&comp->super);
        } else {
            /* The others read the same table; listing it again would print every UCX_GDX_* once per
             * transport. */
            ucs_list_add_tail(&uct_components_list, &comp->super.list);
        }
        uct_tl_register(&comp->super, &comp->uct_tl); /* lists UCX_GDX_<TL>_* too */
        ucs_debug("libuct_gdx: registered component, md and transport %s", comp->name);
    }
    uct_gdx_aux_register();
    uct_gdx_copy_register();
}
