/* The one place where libuct_gdx's glue meets the differences between UCX releases (1.13 to 1.22).
 *
 * UCT has no plugin API: the glue fills in UCX's internal structs (uct_component_t, uct_md_ops_t,
 * uct_iface_internal_ops_t, ...), whose members and callback signatures change between minor releases. The
 * glue sources are written once against the adapters below; which variant each adapter takes is decided by the
 * build from the source tree's own headers (cmake/GdxUcx.cmake, "feature probes"), not from a version number,
 * so a release between the tested ones (1.13.1, 1.16.0, 1.18.1, 1.22.0) gets whatever its headers say:
 *
 *   UCT_GDX_HAVE_MD_ATTR_V2       md query fills uct_md_attr_v2_t (flat fields, cache_mem_types)     1.14+
 *   UCT_GDX_HAVE_MEM_REG_PARAMS   mem_reg takes uct_md_mem_reg_params_t (flags inside)                1.14+
 *   UCT_GDX_HAVE_MKEY_PACK_ADDR   mkey_pack takes (address, length) of the region                      1.16+
 *   UCT_GDX_HAVE_MEM_ATTACH       md ops: mem_attach replaces is_sockaddr_accessible                   1.16+
 *   UCT_GDX_HAVE_RKEY_COMPARE     uct_component_t.rkey_compare                                         1.16+
 *   UCT_GDX_HAVE_IFACE_V2_OPS     internal ops: ep_connect_to_ep_v2, iface_is_reachable_v2,
 *                                 ep_is_connected (UCP calls these, not the public ops)                1.16+
 *   UCT_GDX_HAVE_RKEY_UNPACK_PARAMS  rkey_unpack takes uct_rkey_unpack_params_t                        1.19+
 *   UCT_GDX_HAVE_IFACE_QUERY_V2   internal ops: iface_query_v2                                         1.20+
 *   UCT_GDX_HAVE_MD_BASE_QUERY    uct_md_base_md_query() sets UCX's default for every md attribute     1.18+
 *   UCT_GDX_HAVE_MD_REG_ALIGNMENT uct_md_attr_v2_t.reg_alignment (UCP aligns registrations to it)      1.16+
 *   UCT_GDX_HAVE_MEM_QUERY_V2     mem_query fills uct_md_mem_attr_v2_t                                 1.22+
 *   UCT_GDX_HAVE_MEM_ELEM_PACK    md ops: mem_elem_pack (device-side memory elements)                  1.22+
 *
 * Each adapter is a macro that defines the UCX-facing function with this release's signature around a
 * version-independent implementation in the glue, so no glue source carries #if blocks of its own. */
#ifndef GDX_UCT_GDX_COMPAT_H
#define GDX_UCT_GDX_COMPAT_H

#include <uct/base/uct_iface.h>
#include <uct/base/uct_md.h>
#if UCT_GDX_HAVE_MD_ATTR_V2 || UCT_GDX_HAVE_IFACE_V2_OPS
#include <uct/api/v2/uct_v2.h>
#endif

#ifndef UCT_GDX_HAVE_MD_ATTR_V2
#error "the UCX feature probes (UCT_GDX_HAVE_*) must come from the build (cmake/GdxUcx.cmake)"
#endif

/* ---- memory domain attributes ------------------------------------------------------------------------ */

/* UCT_GDX_MD_CAP(attr).flags etc.: v1 nests the capabilities in .cap, v2 has them at the top. */
#if UCT_GDX_HAVE_MD_ATTR_V2
typedef uct_md_attr_v2_t uct_gdx_md_attr_t;
#define UCT_GDX_MD_CAP(_attr) (*(_attr))
/* UCP (proto v2, the default from 1.16) caches memory handles of the MDs that list a memory type here, and
 * its datatype iterator registers zero-copy buffers only through such MDs (an assertion in datatype_iter.inl):
 * every type the MD registers must be listed. */
#define UCT_GDX_MD_SET_CACHE_TYPES(_attr, _types) ((_attr)->cache_mem_types = (_types))
#else
typedef uct_md_attr_t uct_gdx_md_attr_t;
#define UCT_GDX_MD_CAP(_attr) ((_attr)->cap)
#define UCT_GDX_MD_SET_CACHE_TYPES(_attr, _types) ((void)(_types)) /* UCP 1.13 keeps no such cache */
#endif

/* 1 when UCP may hand one memory handle to operations other than the one it registered it for (its memory
 * handle cache, UCX >= 1.14): the MD must then grant every access right at registration (uct_gdx_md.c). */
#define UCT_GDX_UCP_REUSES_MEMH UCT_GDX_HAVE_MD_ATTR_V2

/* UCP selects protocols with its protocol v1 by default before 1.16 (UCX_PROTO_ENABLE=n): thresholds from md and
 * iface attributes rather than from estimate_perf. The module is built against the UCX it runs under. */
#include <uct/api/version.h>
#define UCT_GDX_PROTO_V1_DEFAULT ((UCT_VERNO_MAJOR == 1) && (UCT_VERNO_MINOR < 16))

/* UCX's defaults for the md attributes the glue does not set. UCT zeroes the structure before the query, and UCP
 * aligns an uncached registration to reg_alignment: 0 there made it register (nil)+0 (UCX 1.22, ucp_mem_map with
 * UCP_MEM_MAP_ALLOCATE of CUDA memory: "failed to register address (nil) (cuda) length 0 on md gdx_shm"). */
#if UCT_GDX_HAVE_MD_BASE_QUERY
#define UCT_GDX_MD_ATTR_DEFAULTS(attr) uct_md_base_md_query(attr)
#elif UCT_GDX_HAVE_MD_REG_ALIGNMENT
#define UCT_GDX_MD_ATTR_DEFAULTS(attr) ((attr)->reg_alignment = 1)
#else
#define UCT_GDX_MD_ATTR_DEFAULTS(attr) ((void)(attr))
#endif

/* ---- md ops ---------------------------------------------------------------------------------------------- */

/* mem_reg: _impl(md, address, length, unsigned flags, memh_p). */
#if UCT_GDX_HAVE_MEM_REG_PARAMS
#define UCT_GDX_DEFINE_MEM_REG(_name, _impl) \
    static ucs_status_t _name(uct_md_h md, void *address, size_t length, const uct_md_mem_reg_params_t *params, \
                              uct_mem_h *memh_p) \
    { \
        return _impl(md, address, length, UCT_MD_MEM_REG_FIELD_VALUE(params, flags, FIELD_FLAGS, 0), memh_p); \
    }
#else
#define UCT_GDX_DEFINE_MEM_REG(_name, _impl) \
    static ucs_status_t _name(uct_md_h md, void *address, size_t length, unsigned flags, uct_mem_h *memh_p) \
    { \
        return _impl(md, address, length, flags, memh_p); \
    }
#endif

/* mkey_pack: _impl(md, memh, rkey_buffer); the region's address/length (1.16+) are known to the handle. */
#if UCT_GDX_HAVE_MKEY_PACK_ADDR
#define UCT_GDX_DEFINE_MKEY_PACK(_name, _impl) \
    static ucs_status_t _name(uct_md_h md, uct_mem_h memh, void *address, size_t length, \
                              const uct_md_mkey_pack_params_t *params, void *rkey_buffer) \
    { \
        return _impl(md, memh, rkey_buffer); \
    }
#else
#define UCT_GDX_DEFINE_MKEY_PACK(_name, _impl) \
    static ucs_status_t _name(uct_md_h md, uct_mem_h memh, const uct_md_mkey_pack_params_t *params, \
                              void *rkey_buffer) \
    { \
        return _impl(md, memh, rkey_buffer); \
    }
#endif

/* mem_query: the v1 and v2 attribute structs share the field names and mask bits gdx fills (mem_type, sys_dev,
 * base_address, alloc_length; UCX 1.22 asserts that the bits are equal). */
#if UCT_GDX_HAVE_MEM_QUERY_V2
typedef uct_md_mem_attr_v2_t uct_gdx_mem_attr_t;
#else
typedef uct_md_mem_attr_t uct_gdx_mem_attr_t;
#endif

/* The md ops members after mkey_pack that gdx never implements. */
#if UCT_GDX_HAVE_MEM_ATTACH
#define UCT_GDX_MD_OPS_NO_ATTACH .mem_attach = (uct_md_mem_attach_func_t)ucs_empty_function_return_unsupported,
#else
#define UCT_GDX_MD_OPS_NO_ATTACH \
    .is_sockaddr_accessible = (uct_md_is_sockaddr_accessible_func_t)ucs_empty_function_return_zero_int,
#endif
#if UCT_GDX_HAVE_MEM_ELEM_PACK
/* Device-side (GPU-initiated) memory elements: gdx has no device API. */
#define UCT_GDX_MD_OPS_NO_ELEM_PACK \
    .mem_elem_pack = (uct_md_mem_elem_pack_func_t)ucs_empty_function_return_unsupported,
#else
#define UCT_GDX_MD_OPS_NO_ELEM_PACK
#endif
#define UCT_GDX_MD_OPS_UNUSED UCT_GDX_MD_OPS_NO_ATTACH UCT_GDX_MD_OPS_NO_ELEM_PACK

/* ---- component ------------------------------------------------------------------------------------------- */

/* rkey_unpack: _impl(component, rkey_buffer, rkey_p, handle_p). */
#if UCT_GDX_HAVE_RKEY_UNPACK_PARAMS
#define UCT_GDX_DEFINE_RKEY_UNPACK(_name, _impl) \
    static ucs_status_t _name(uct_component_t *component, const void *rkey_buffer, \
                              const uct_rkey_unpack_params_t *params, uct_rkey_t *rkey_p, void **handle_p) \
    { \
        return _impl(component, rkey_buffer, rkey_p, handle_p); \
    }
#else
#define UCT_GDX_DEFINE_RKEY_UNPACK(_name, _impl) \
    static ucs_status_t _name(uct_component_t *component, const void *rkey_buffer, uct_rkey_t *rkey_p, \
                              void **handle_p) \
    { \
        return _impl(component, rkey_buffer, rkey_p, handle_p); \
    }
#endif

/* rkey_compare: UCP (1.16+) asks whether two unpacked keys are the same to share its rkey cache entries.
 * uct_base_rkey_compare compares the uct_rkey_t values, which for gdx are distinct objects per unpack: two
 * keys are then "different", which costs UCP a cache entry, never correctness. */
#if UCT_GDX_HAVE_RKEY_COMPARE
#define UCT_GDX_COMPONENT_RKEY_COMPARE(_comp) ((_comp)->rkey_compare = uct_base_rkey_compare)
#define UCT_GDX_COMPONENT_INIT_RKEY_COMPARE .rkey_compare = uct_base_rkey_compare,
#else
#define UCT_GDX_COMPONENT_RKEY_COMPARE(_comp) ((void)(_comp))
#define UCT_GDX_COMPONENT_INIT_RKEY_COMPARE
#endif

/* ---- interface internal ops ---------------------------------------------------------------------------- */

/* Reachability: _impl(iface, const uct_device_addr_t *dev_addr, const uct_iface_addr_t *iface_addr) -> 0/1.
 * From 1.16 UCP asks through iface_is_reachable_v2 with a params struct (and a scope: a loopback check for
 * the memory-type endpoint passes UCT_IFACE_REACHABILITY_SCOPE_DEVICE); the public op stays for UCT users. */
#if UCT_GDX_HAVE_IFACE_V2_OPS
#define UCT_GDX_DEFINE_IS_REACHABLE_V2(_name, _impl) \
    static int _name(const uct_iface_h tl_iface, const uct_iface_is_reachable_params_t *params) \
    { \
        const uct_device_addr_t *dev_addr = (params->field_mask & UCT_IFACE_IS_REACHABLE_FIELD_DEVICE_ADDR) ? \
                                            params->device_addr : NULL; \
        const uct_iface_addr_t *if_addr   = (params->field_mask & UCT_IFACE_IS_REACHABLE_FIELD_IFACE_ADDR) ? \
                                            params->iface_addr : NULL; \
        return _impl(tl_iface, dev_addr, if_addr); \
    }
#else
#define UCT_GDX_DEFINE_IS_REACHABLE_V2(_name, _impl)
#endif

/* Connect-to-ep: _impl(ep, dev_addr, ep_addr); v2 adds a params struct gdx does not need (address lengths are
 * fixed). ep_is_connected: _impl(ep, dev_addr, iface_addr, ep_addr) -> 0/1, UCP's check whether an existing
 * endpoint already leads to a peer it learns about during wire-up. */
#if UCT_GDX_HAVE_IFACE_V2_OPS
#define UCT_GDX_DEFINE_CONNECT_TO_EP_V2(_name, _impl) \
    static ucs_status_t _name(uct_ep_h tl_ep, const uct_device_addr_t *dev_addr, const uct_ep_addr_t *ep_addr, \
                              const uct_ep_connect_to_ep_params_t *params) \
    { \
        return _impl(tl_ep, dev_addr, ep_addr); \
    }
#define UCT_GDX_DEFINE_EP_IS_CONNECTED(_name, _impl) \
    static int _name(const uct_ep_h tl_ep, const uct_ep_is_connected_params_t *params) \
    { \
        return _impl(tl_ep, \
                     (params->field_mask & UCT_EP_IS_CONNECTED_FIELD_DEVICE_ADDR) ? params->device_addr : NULL, \
                     (params->field_mask & UCT_EP_IS_CONNECTED_FIELD_IFACE_ADDR) ? params->iface_addr : NULL, \
                     (params->field_mask & UCT_EP_IS_CONNECTED_FIELD_EP_ADDR) ? params->ep_addr : NULL); \
    }
#else
#define UCT_GDX_DEFINE_CONNECT_TO_EP_V2(_name, _impl)
#define UCT_GDX_DEFINE_EP_IS_CONNECTED(_name, _impl)
#endif

#if UCT_GDX_HAVE_IFACE_QUERY_V2
#define UCT_GDX_INTERNAL_OPS_QUERY_V2 .iface_query_v2 = uct_iface_base_query_v2,
#else
#define UCT_GDX_INTERNAL_OPS_QUERY_V2
#endif

/* The internal ops of one gdx interface class. The names are those the UCT_GDX_DEFINE_* adapters above
 * defined; on 1.13 they are not referenced (UCP calls the public ops there). */
#if UCT_GDX_HAVE_IFACE_V2_OPS
#define UCT_GDX_INTERNAL_OPS(_var, _estimate_perf, _is_reachable_v2, _connect_to_ep_v2, _ep_is_connected) \
    static uct_iface_internal_ops_t _var = { \
        UCT_GDX_INTERNAL_OPS_QUERY_V2 \
        .iface_estimate_perf   = _estimate_perf, \
        .iface_vfs_refresh     = (uct_iface_vfs_refresh_func_t)ucs_empty_function, \
        .ep_query              = (uct_ep_query_func_t)ucs_empty_function_return_unsupported, \
        .ep_invalidate         = (uct_ep_invalidate_func_t)ucs_empty_function_return_unsupported, \
        .ep_connect_to_ep_v2   = _connect_to_ep_v2, \
        .iface_is_reachable_v2 = _is_reachable_v2, \
        .ep_is_connected       = _ep_is_connected, \
    }
#else
#define UCT_GDX_INTERNAL_OPS(_var, _estimate_perf, _is_reachable_v2, _connect_to_ep_v2, _ep_is_connected) \
    static uct_iface_internal_ops_t _var = { \
        .iface_estimate_perf = _estimate_perf, \
        .iface_vfs_refresh   = (uct_iface_vfs_refresh_func_t)ucs_empty_function, \
        .ep_query            = (uct_ep_query_func_t)ucs_empty_function_return_unsupported, \
        .ep_invalidate       = (uct_ep_invalidate_func_t)ucs_empty_function_return_unsupported, \
    }
#endif

/* For connect-to-iface transports (gdx_aux, gdx_copy): no connect-to-ep. */
#if UCT_GDX_HAVE_IFACE_V2_OPS
#define UCT_GDX_NO_CONNECT_TO_EP_V2 ((uct_ep_connect_to_ep_v2_func_t)ucs_empty_function_return_unsupported)
#else
#define UCT_GDX_NO_CONNECT_TO_EP_V2 NULL
#endif

#endif /* GDX_UCT_GDX_COMPAT_H */
