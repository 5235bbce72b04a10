/* What a gdx interface tells UCP's protocol selection an operation costs (uct_iface_estimate_perf, UCX 1.13+; UCP
 * prices its protocols with it from proto v2 on). UCT's base estimate charges every operation the interface's
 * latency, bandwidth and 50 ns; between two processes of one host that misleads UCP for host memory twice, and
 * these are the only operations priced otherwise (CUDA and other memory keeps the base estimate: there the
 * engine's zero-copy is the fast path).
 *
 * - An active message's zero-copy form copies the payload into the peer's ring as the buffered form does, plus a
 *   completion, and through UCP ran at half bcopy's rate (tag_bw 64 KiB on the H200 host: 5.9-6.9 GB/s eager
 *   zero-copy, 12.9-14.2 eager bcopy; bench/results/gpu-2026-11-26b/). Its bandwidth is stated below what UCP
 *   assumes for a memcpy (UCX_BCOPY_BW, 7 GB/s by default), so UCP keeps bcopy, which packs in place.
 * - A zero-copy get or put is a staging-engine request carried by cross-memory attach: a rendezvous (RTS, the get,
 *   ATS) that beat copy-in copy-out only from about 256 KiB there (eager 11.7-12.8 GB/s, rendezvous 12.3-14.4 at
 *   256 KiB; 8.8-9.1 against 12.4-13.1 at 128 KiB). UCP models a pipelined rendezvous as the largest of its costs
 *   and an eager copy at its memcpy estimate, so it switches where the request's fixed cost equals that copy: the
 *   request is priced at what UCP thinks copying 256 KiB takes (37 us), and UCP takes rendezvous from there. */
#include "uct_gdx_glue.h"

#define UCT_GDX_HOST_RNDV_FROM      (256.0 * 1024)  /* bytes */
#define UCT_GDX_UCP_MEMCPY_BW       7000e6          /* B/s: UCP's default bcopy estimate (ucp_context.c) */
#define UCT_GDX_HOST_AM_ZCOPY_BW    3000e6          /* B/s: below a copy-in, copy-out bcopy in UCP's model */

static int uct_gdx_perf_is_host(const uct_perf_attr_t *perf_attr, uint64_t field, ucs_memory_type_t type)
{
    return (perf_attr->field_mask & field) && (type == UCS_MEMORY_TYPE_HOST);
}

ucs_status_t uct_gdx_iface_estimate_perf(uct_iface_h tl_iface, uct_perf_attr_t *perf_attr)
{
    uct_gdx_iface_t *iface = ucs_derived_of(tl_iface, uct_gdx_iface_t);
    ucs_status_t status    = uct_base_iface_estimate_perf(tl_iface, perf_attr);
    int local_host, remote_host;

    if ((status != UCS_OK) || !iface->attr.intra_node || !iface->attr.engine ||
        !(perf_attr->field_mask & UCT_PERF_ATTR_FIELD_OPERATION)) {
        return status;
    }
    local_host  = uct_gdx_perf_is_host(perf_attr, UCT_PERF_ATTR_FIELD_LOCAL_MEMORY_TYPE,
                                       perf_attr->local_memory_type);
    remote_host = uct_gdx_perf_is_host(perf_attr, UCT_PERF_ATTR_FIELD_REMOTE_MEMORY_TYPE,
                                       perf_attr->remote_memory_type);
    switch (perf_attr->operation) {
    case UCT_EP_OP_AM_ZCOPY:
        if (local_host && (perf_attr->field_mask & UCT_PERF_ATTR_FIELD_BANDWIDTH)) {
            perf_attr->bandwidth.shared    = UCT_GDX_HOST_AM_ZCOPY_BW;
            perf_attr->bandwidth.dedicated = 0;
        }
        break;
    case UCT_EP_OP_GET_ZCOPY:
    case UCT_EP_OP_PUT_ZCOPY:
        if (local_host && remote_host && (perf_attr->field_mask & UCT_PERF_ATTR_FIELD_SEND_PRE_OVERHEAD)) {
            perf_attr->send_pre_overhead = UCT_GDX_HOST_RNDV_FROM / UCT_GDX_UCP_MEMCPY_BW;
        }
        break;
    default:
        break;
    }
    return UCS_OK;
}
