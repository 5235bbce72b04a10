/* The UCT interface settings of gdx's transports (UCX_GDX_<TL>_*): UCT's generic ones for all, and gdx_tcp's
 * socket buffers, which are applied to the interface once it is open. */
#include "uct_gdx_glue.h"

#include <ucs/sys/string.h>

#include <stdint.h>

ucs_config_field_t uct_gdx_iface_config_table[] = {
    {"", "", NULL, ucs_offsetof(uct_gdx_iface_config_t, super), UCS_CONFIG_TYPE_TABLE(uct_iface_config_table)},
    {NULL}
};

/* gdx_tcp's: UCX's tcp interface settings of the same names (UCX_TCP_SNDBUF / UCX_TCP_RCVBUF there), which
 * UCX's own tests also set to fill send resources quickly. */
ucs_config_field_t uct_gdx_tcp_iface_config_table[] = {
    {"", "", NULL, ucs_offsetof(uct_gdx_iface_config_t, super), UCS_CONFIG_TYPE_TABLE(uct_iface_config_table)},
    {"SNDBUF", "auto", "Socket send buffer size (SO_SNDBUF) of this interface's connections; auto: GDX_TCP_SOCKBUF "
     "(by default the kernel's, autotuned)", ucs_offsetof(uct_gdx_iface_config_t, sndbuf), UCS_CONFIG_TYPE_MEMUNITS},
    {"RCVBUF", "auto", "Socket receive buffer size (SO_RCVBUF) of this interface's connections; auto: "
     "GDX_TCP_SOCKBUF", ucs_offsetof(uct_gdx_iface_config_t, rcvbuf), UCS_CONFIG_TYPE_MEMUNITS},
    {NULL}
};

/* The interface settings of the transport's own table (gdx_tcp: SNDBUF, RCVBUF); "auto" keeps GDX_*'s. */
ucs_status_t uct_gdx_iface_apply_config(uct_gdx_iface_t *iface, uct_md_h md, const uct_iface_config_t *tl_config)
{
    const uct_gdx_component_t *comp    = ucs_container_of(md->component, uct_gdx_component_t, super);
    const uct_gdx_iface_config_t *cfg = ucs_derived_of(tl_config, uct_gdx_iface_config_t);
    gdx_status_t st;

    if (comp->uct_tl.config.table != uct_gdx_tcp_iface_config_table) {
        return UCS_OK; /* the other transports have UCT's generic settings only */
    }
    st = gdx_uct_iface_set_socket_buffers(iface->bridge, (cfg->sndbuf == UCS_MEMUNITS_AUTO) ? SIZE_MAX : cfg->sndbuf,
                                          (cfg->rcvbuf == UCS_MEMUNITS_AUTO) ? SIZE_MAX : cfg->rcvbuf);
    if (st == GDX_OK) {
        return UCS_OK;
    }
    return uct_gdx_fail(st, "iface_open (UCX_GDX_TCP_SNDBUF / UCX_GDX_TCP_RCVBUF)", iface->super.md->component->name);
}

