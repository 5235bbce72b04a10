/* UCT interface and endpoint of a gdx transport. gdx's endpoint model is connect-to-ep with address blobs, so
 * these interfaces advertise UCT_IFACE_FLAG_CONNECT_TO_EP only; UCP exchanges the endpoint addresses over an
 * auxiliary connect-to-iface transport (README.md, "Wireup"). */
#include "uct_gdx_glue.h"

#include <ucs/debug/log.h>
#include <ucs/sys/string.h>
#include <uct/base/uct_iov.inl>

#include <poll.h>
#include <stddef.h>
#include <string.h>

static uct_iface_ops_t uct_gdx_iface_ops;

static const char *uct_gdx_iface_name(uct_gdx_iface_t *iface)
{
    return iface->super.md->component->name;
}

/* The result of a data-path call: back-pressure and completion states pass silently, errors are logged once
 * per call with gdx's reason. */
static UCS_F_ALWAYS_INLINE ucs_status_t uct_gdx_op_status(uct_gdx_iface_t *iface, gdx_status_t st,
                                                          const char *op)
{
    if (ucs_likely(st == GDX_OK)) {
        return UCS_OK; /* every small message: no call into uct_gdx_status */
    }
    if ((st == GDX_INPROGRESS) || (st == GDX_ERR_NO_RESOURCE)) {
        return uct_gdx_status(st);
    }
    return uct_gdx_fail(st, op, uct_gdx_iface_name(iface));
}

/* A contiguous (iov, iovcnt <= 1) region; UCT_CHECK_IOV_SIZE enforces max_iov = 1 when params checks are on. */
static ucs_status_t uct_gdx_iov_region(uct_gdx_iface_t *iface, const uct_iov_t *iov, size_t iovcnt,
                                       const char *op, void **buf, size_t *len, gdx_uct_memh_t **memh)
{
    *buf  = NULL;
    *len  = 0;
    *memh = NULL;
    if (iovcnt == 0) {
        return UCS_OK;
    }
    if ((iovcnt > 1) || ((iov->count > 1) && (iov->stride != iov->length))) {
        ucs_error("%s: %s with %zu iov entries / strided data is not supported (max_iov is 1)",
                  uct_gdx_iface_name(iface), op, iovcnt);
        return UCS_ERR_UNSUPPORTED;
    }
    *buf  = iov->buffer;
    *len  = uct_iov_get_length(iov);
    *memh = (gdx_uct_memh_t*)iov->memh;
    return UCS_OK;
}

/* ---- endpoint ------------------------------------------------------------------------------------------ */

static UCS_CLASS_INIT_FUNC(uct_gdx_ep_t, const uct_ep_params_t *params)
{
    uct_gdx_iface_t *iface = ucs_derived_of(params->iface, uct_gdx_iface_t);
    gdx_status_t st;

    UCS_CLASS_CALL_SUPER_INIT(uct_base_ep_t, &iface->super);
    self->connected = 0;
    if (params->field_mask & (UCT_EP_PARAM_FIELD_DEV_ADDR | UCT_EP_PARAM_FIELD_IFACE_ADDR)) {
        ucs_error("%s: connect-to-iface is not supported (gdx endpoints connect to endpoints)",
                  uct_gdx_iface_name(iface));
        return UCS_ERR_UNSUPPORTED;
    }
    UCT_GDX_ASYNC_BLOCK(&iface->super);
    st = gdx_uct_ep_create(iface->bridge, &self->super.super, &self->bridge);
    UCT_GDX_ASYNC_UNBLOCK(&iface->super);
    if (st != GDX_OK) {
        return uct_gdx_fail(st, "ep_create", uct_gdx_iface_name(iface));
    }
    return UCS_OK;
}

static UCS_CLASS_CLEANUP_FUNC(uct_gdx_ep_t)
{
    uct_base_iface_t *iface = ucs_derived_of(self->super.super.iface, uct_base_iface_t);

    UCT_GDX_ASYNC_BLOCK(iface);
    gdx_uct_ep_destroy(self->bridge);
    UCT_GDX_ASYNC_UNBLOCK(iface);
}

UCS_CLASS_DEFINE(uct_gdx_ep_t, uct_base_ep_t);
static UCS_CLASS_DEFINE_NEW_FUNC(uct_gdx_ep_t, uct_ep_t, const uct_ep_params_t*);
static UCS_CLASS_DEFINE_DELETE_FUNC(uct_gdx_ep_t, uct_ep_t);

#define UCT_GDX_EP_IFACE(_tl_ep) ucs_derived_of((_tl_ep)->iface, uct_gdx_iface_t)
#define UCT_GDX_EP(_tl_ep)       (ucs_derived_of(_tl_ep, uct_gdx_ep_t)->bridge)

static ucs_status_t uct_gdx_ep_get_address(uct_ep_h tl_ep, uct_ep_addr_t *addr)
{
    uct_gdx_iface_t *iface = UCT_GDX_EP_IFACE(tl_ep);
    gdx_status_t st;

    UCT_GDX_ASYNC_BLOCK(&iface->super);
    st = gdx_uct_ep_get_address(UCT_GDX_EP(tl_ep), addr);
    UCT_GDX_ASYNC_UNBLOCK(&iface->super);
    return (st == GDX_OK) ? UCS_OK : uct_gdx_fail(st, "ep_get_address", uct_gdx_iface_name(iface));
}

static ucs_status_t uct_gdx_ep_connect_to_ep(uct_ep_h tl_ep, const uct_device_addr_t *dev_addr,
                                             const uct_ep_addr_t *ep_addr)
{
    uct_gdx_iface_t *iface = UCT_GDX_EP_IFACE(tl_ep);
    uct_gdx_ep_t *ep       = ucs_derived_of(tl_ep, uct_gdx_ep_t);
    gdx_status_t st;

    UCT_GDX_ASYNC_BLOCK(&iface->super);
    st = gdx_uct_ep_connect(ep->bridge, ep_addr);
    UCT_GDX_ASYNC_UNBLOCK(&iface->super);

    /* GDX_INPROGRESS: gdx connects asynchronously; until it is up, operations return UCS_ERR_NO_RESOURCE and
     * UCP queues them as pending, which is UCT's contract for connect_to_ep too. */
    if ((st == GDX_OK) || (st == GDX_INPROGRESS)) {
        memcpy(ep->peer_addr, ep_addr, sizeof(ep->peer_addr));
        ep->connected = 1;
        return UCS_OK;
    }
    return uct_gdx_fail(st, "ep_connect_to_ep", uct_gdx_iface_name(UCT_GDX_EP_IFACE(tl_ep)));
}
UCT_GDX_DEFINE_CONNECT_TO_EP_V2(uct_gdx_ep_connect_to_ep_v2, uct_gdx_ep_connect_to_ep)

/* UCP (1.16+) asks whether this endpoint already leads to the peer endpoint a wire-up message names: gdx
 * endpoint addresses are unique per endpoint (fixed size), so equal bytes mean the same peer endpoint. */
static UCS_F_MAYBE_UNUSED int uct_gdx_ep_is_connected(const uct_ep_h tl_ep, const uct_device_addr_t *dev_addr,
                                                      const uct_iface_addr_t *iface_addr,
                                                      const uct_ep_addr_t *ep_addr)
{
    const uct_gdx_ep_t *ep = ucs_derived_of(tl_ep, uct_gdx_ep_t);

    return ep->connected && (ep_addr != NULL) && (memcmp(ep->peer_addr, ep_addr, sizeof(ep->peer_addr)) == 0);
}
UCT_GDX_DEFINE_EP_IS_CONNECTED(uct_gdx_ep_is_connected_v2, uct_gdx_ep_is_connected)

/* UCP's keepalive of an endpoint in error mode PEER: a broken endpoint is reported through the error handler from
 * progress, as every other (this only brings the look forward); a live one has nothing to say. Whether the peer
 * lives is what the transport sees (a closed connection, a dead process's hang-up, GDX_PEER_TIMEOUT while
 * operations wait) and what the staging engine's silence clock sees. */
static ucs_status_t uct_gdx_ep_check(uct_ep_h tl_ep, unsigned flags, uct_completion_t *comp)
{
    uct_gdx_iface_t *iface = UCT_GDX_EP_IFACE(tl_ep);

    if ((flags != 0) || (comp != NULL)) {
        ucs_error("%s: ep_check with flags 0x%x or a completion is not supported", uct_gdx_iface_name(iface), flags);
        return UCS_ERR_INVALID_PARAM;
    }
    UCT_GDX_ASYNC_BLOCK(&iface->super);
    gdx_uct_ep_check(UCT_GDX_EP(tl_ep));
    UCT_GDX_ASYNC_UNBLOCK(&iface->super);
    return UCS_OK;
}

/* Header and payload go to the bridge as they are, and a transport that writes in place (shm) copies them straight
 * into the peer's ring: no staging buffer, as UCX's own transports (the receiver sees them contiguous). */
static UCT_GDX_HOT ucs_status_t uct_gdx_ep_am_short(uct_ep_h tl_ep, uint8_t id, uint64_t header, const void *payload,
                                                    unsigned length)
{
    uct_gdx_iface_t *iface = UCT_GDX_EP_IFACE(tl_ep);

    UCT_CHECK_AM_ID(id);
    UCT_CHECK_LENGTH(sizeof(header) + length, 0, iface->attr.max_am_short, "am_short");
    return uct_gdx_op_status(iface, gdx_uct_ep_am_short(UCT_GDX_EP(tl_ep), id, header, payload, length), "am_short");
}

static ucs_status_t uct_gdx_ep_am_short_iov(uct_ep_h tl_ep, uint8_t id, const uct_iov_t *iov, size_t iovcnt)
{
    uct_gdx_iface_t *iface = UCT_GDX_EP_IFACE(tl_ep);
    size_t total           = uct_iov_total_length(iov, iovcnt);
    gdx_uct_seg_t segs[GDX_UCT_MAX_SEGS];
    size_t i, len, off = 0;

    UCT_CHECK_AM_ID(id);
    UCT_CHECK_LENGTH(total, 0, iface->attr.max_am_short, "am_short_iov");
    if ((iovcnt > GDX_UCT_MAX_SEGS) && (total > iface->scratch_size)) {
        ucs_error("%s: am_short_iov of %zu bytes (max %zu)", uct_gdx_iface_name(iface), total, iface->scratch_size);
        return UCS_ERR_INVALID_PARAM;
    }
    for (i = 0; i < iovcnt; ++i) {
        if ((iov[i].count > 1) && (iov[i].stride != iov[i].length)) {
            ucs_error("%s: am_short_iov with strided data is not supported", uct_gdx_iface_name(iface));
            return UCS_ERR_UNSUPPORTED;
        }
        len = uct_iov_get_length(&iov[i]);
        if (iovcnt <= GDX_UCT_MAX_SEGS) {
            segs[i].data   = iov[i].buffer;
            segs[i].length = len;
        } else if (len > 0) { /* more pieces than the bridge takes (UCP sends at most 4): gathered here */
            memcpy(UCS_PTR_BYTE_OFFSET(iface->scratch, off), iov[i].buffer, len);
            off += len;
        }
    }
    if (iovcnt > GDX_UCT_MAX_SEGS) {
        segs[0].data   = iface->scratch;
        segs[0].length = off;
        iovcnt         = 1;
    }
    return uct_gdx_op_status(iface, gdx_uct_ep_am_short_iov(UCT_GDX_EP(tl_ep), id, segs, iovcnt), "am_short_iov");
}

static ssize_t uct_gdx_ep_am_bcopy(uct_ep_h tl_ep, uint8_t id, uct_pack_callback_t pack_cb, void *arg,
                                   unsigned flags)
{
    uct_gdx_iface_t *iface = UCT_GDX_EP_IFACE(tl_ep);
    ucs_status_t status;
    size_t length = 0;

    UCT_CHECK_AM_ID(id);
    /* UCT's pack callback writes straight into the peer's ring where the transport writes in place (shm), as
     * into UCX's own FIFO elements; elsewhere into the bridge's buffer, from which the transport copies. */
    status = uct_gdx_op_status(iface, gdx_uct_ep_am_bcopy_pack(UCT_GDX_EP(tl_ep), id, pack_cb, arg, &length),
                               "am_bcopy");
    if (ucs_unlikely(flags & UCT_SEND_FLAG_PEER_CHECK)) {
        uct_gdx_ep_check(tl_ep, 0, NULL); /* a keepalive probe: a broken endpoint is reported from progress */
    }
    return (status == UCS_OK) ? (ssize_t)length : (ssize_t)status;
}

static ucs_status_t uct_gdx_ep_am_zcopy(uct_ep_h tl_ep, uint8_t id, const void *header, unsigned header_length,
                                        const uct_iov_t *iov, size_t iovcnt, unsigned flags,
                                        uct_completion_t *comp)
{
    uct_gdx_iface_t *iface = UCT_GDX_EP_IFACE(tl_ep);
    gdx_uct_memh_t *memh;
    ucs_status_t status;
    size_t length;
    void *buffer;

    UCT_CHECK_AM_ID(id);
    UCT_CHECK_LENGTH(header_length, 0, iface->attr.max_am_short, "am_zcopy header");
    status = uct_gdx_iov_region(iface, iov, iovcnt, "am_zcopy", &buffer, &length, &memh);
    if (status != UCS_OK) {
        return status;
    }
    UCT_CHECK_LENGTH(header_length + length, 0, iface->attr.max_am_zcopy, "am_zcopy");
    return uct_gdx_op_status(iface, gdx_uct_ep_am_zcopy(UCT_GDX_EP(tl_ep), id, header, header_length, buffer,
                                                        length, memh, comp), "am_zcopy");
}

/* put/get zcopy through the staging engine change engine state that endpoint teardown (which UCP may run from its
 * async thread) changes too, so they hold the async lock like progress does; pass-through ones do not need it. */
#define UCT_GDX_ENGINE_BLOCK(_iface) \
    do { if ((_iface)->attr.engine) UCT_GDX_ASYNC_BLOCK(&(_iface)->super); } while (0)
#define UCT_GDX_ENGINE_UNBLOCK(_iface) \
    do { if ((_iface)->attr.engine) UCT_GDX_ASYNC_UNBLOCK(&(_iface)->super); } while (0)

/* put_zcopy and get_zcopy: one region of the iov, the length check against the direction's limit, the call into
 * the bridge under the engine's lock. */
static ucs_status_t uct_gdx_ep_rma_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov, size_t iovcnt, uint64_t remote_addr,
                                         uct_rkey_t rkey, uct_completion_t *comp, int is_put)
{
    uct_gdx_iface_t *iface = UCT_GDX_EP_IFACE(tl_ep);
    const char *what       = is_put ? "put_zcopy" : "get_zcopy";
    gdx_uct_memh_t *memh;
    ucs_status_t status;
    gdx_status_t st;
    size_t length;
    void *buffer;

    status = uct_gdx_iov_region(iface, iov, iovcnt, what, &buffer, &length, &memh);
    if ((status != UCS_OK) || (length == 0)) {
        return status;
    }
    UCT_CHECK_LENGTH(length, 0, is_put ? iface->attr.max_put : iface->attr.max_get, what);
    UCT_GDX_ENGINE_BLOCK(iface);
    if (is_put) {
        st = gdx_uct_ep_put(UCT_GDX_EP(tl_ep), buffer, length, memh, remote_addr, (gdx_uct_rkey_t*)rkey, comp);
    } else {
        st = gdx_uct_ep_get(UCT_GDX_EP(tl_ep), buffer, length, memh, remote_addr, (gdx_uct_rkey_t*)rkey, comp);
    }
    UCT_GDX_ENGINE_UNBLOCK(iface);
    return uct_gdx_op_status(iface, st, what);
}

static ucs_status_t uct_gdx_ep_put_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov, size_t iovcnt,
                                         uint64_t remote_addr, uct_rkey_t rkey, uct_completion_t *comp)
{
    return uct_gdx_ep_rma_zcopy(tl_ep, iov, iovcnt, remote_addr, rkey, comp, 1);
}

static ucs_status_t uct_gdx_ep_get_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov, size_t iovcnt,
                                         uint64_t remote_addr, uct_rkey_t rkey, uct_completion_t *comp)
{
    return uct_gdx_ep_rma_zcopy(tl_ep, iov, iovcnt, remote_addr, rkey, comp, 0);
}

static ucs_status_t uct_gdx_ep_flush(uct_ep_h tl_ep, unsigned flags, uct_completion_t *comp)
{
    gdx_status_t st = gdx_uct_ep_flush(UCT_GDX_EP(tl_ep), comp);

    /* UCT_FLUSH_FLAG_CANCEL has no gdx counterpart: a full flush is done instead, which a dead peer still
     * ends (gdx fails operations to a peer silent for GDX_PEER_TIMEOUT). UCP cancels when it discards the
     * endpoints of a failed UCP endpoint: that a broken one's flush fails is expected there, not an error. */
    if ((flags & UCT_FLUSH_FLAG_CANCEL) && (st != GDX_OK) && (st != GDX_INPROGRESS) && (st != GDX_ERR_NO_RESOURCE)) {
        ucs_debug("%s: ep_flush(cancel) of a failed endpoint: %s", uct_gdx_iface_name(UCT_GDX_EP_IFACE(tl_ep)),
                  gdx_status_string(st));
        return uct_gdx_status(st);
    }
    return uct_gdx_op_status(UCT_GDX_EP_IFACE(tl_ep), st, "ep_flush");
}

static ucs_status_t uct_gdx_ep_fence(uct_ep_h tl_ep, unsigned flags)
{
    return uct_gdx_op_status(UCT_GDX_EP_IFACE(tl_ep), gdx_uct_ep_fence(UCT_GDX_EP(tl_ep)), "ep_fence");
}

static ucs_status_t uct_gdx_ep_pending_add(uct_ep_h tl_ep, uct_pending_req_t *req, unsigned flags)
{
    gdx_status_t st = gdx_uct_ep_pending_add(UCT_GDX_EP(tl_ep), req);

    if ((st == GDX_OK) || (st == GDX_ERR_BUSY)) {
        return uct_gdx_status(st);
    }
    return uct_gdx_fail(st, "pending_add", uct_gdx_iface_name(UCT_GDX_EP_IFACE(tl_ep)));
}

typedef struct {
    uct_pending_purge_callback_t cb;
    void                         *arg;
} uct_gdx_purge_ctx_t;

static void uct_gdx_purge_one(void *req, void *arg)
{
    uct_gdx_purge_ctx_t *ctx = arg;

    ctx->cb((uct_pending_req_t*)req, ctx->arg);
}

static void uct_gdx_ep_pending_purge(uct_ep_h tl_ep, uct_pending_purge_callback_t cb, void *arg)
{
    uct_gdx_purge_ctx_t ctx = {cb, arg};

    gdx_uct_ep_pending_purge(UCT_GDX_EP(tl_ep), (cb != NULL) ? uct_gdx_purge_one : NULL, &ctx);
}

/* ---- callbacks from the bridge --------------------------------------------------------------------- */

/* The bridge calls UCP's handlers through a gdx_uct_am_handler_t table, lent from UCT itself where it can: the same
 * fields, the same callback. */
_Static_assert(GDX_UCT_AM_IDS == UCT_AM_ID_MAX, "the bridge's table of active-message receivers is not UCT's size");
_Static_assert(sizeof(gdx_uct_am_handler_t) == sizeof(uct_am_handler_t) &&
               offsetof(gdx_uct_am_handler_t, cb) == offsetof(uct_am_handler_t, cb) &&
               offsetof(gdx_uct_am_handler_t, arg) == offsetof(uct_am_handler_t, arg) &&
               offsetof(gdx_uct_am_handler_t, flags) == offsetof(uct_am_handler_t, flags),
               "uct_am_handler_t's layout changed: gdx_uct_am_handler_t must follow it");
_Static_assert(__builtin_types_compatible_p(uct_am_callback_t, ucs_status_t (*)(void*, void*, size_t, unsigned)),
               "uct_am_callback_t changed: gdx_uct_am_handler_t's cb must follow it");
_Static_assert((sizeof(ucs_status_t) == sizeof(int8_t)) && ((ucs_status_t)-1 < 0),
               "ucs_status_t is no longer a packed signed byte: gdx_uct_am_handler_t's cb must follow it");

#if ENABLE_STATS
/* UCX's statistics count each message a handler gets in uct_iface_invoke_am: with them built in, the bridge's
 * receivers go through it rather than straight to UCP's handlers. */
static ucs_status_t uct_gdx_am_counted(void *arg, void *data, size_t length, unsigned flags)
{
    uct_gdx_am_slot_t *slot = arg;

    return uct_iface_invoke_am(&slot->iface->super, slot->id, data, (unsigned)length, flags);
}
#endif

const gdx_uct_am_handler_t *gdx_uct_glue_am_table(void *glue_iface)
{
    uct_gdx_iface_t *iface = glue_iface;
#if ENABLE_STATS
    unsigned id;

    for (id = 0; id < GDX_UCT_AM_IDS; ++id) {
        iface->am_slots[id].iface    = iface;
        iface->am_slots[id].id       = (uint8_t)id;
        iface->am_counted[id].cb    = uct_gdx_am_counted;
        iface->am_counted[id].arg   = &iface->am_slots[id];
        iface->am_counted[id].flags = 0;
    }
    return iface->am_counted;
#else
    /* UCT's own table: uct_iface_invoke_am adds nothing to the call but an assertion in builds with them, that
     * the handler did not keep the buffer (the bridge logs that answer instead, tp::note_sink_status). */
    return (const gdx_uct_am_handler_t*)iface->super.am;
#endif
}

void gdx_uct_glue_complete(void *comp, gdx_status_t st)
{
    uct_invoke_completion((uct_completion_t*)comp, uct_gdx_status(st));
}

gdx_status_t gdx_uct_glue_dispatch(void *req)
{
    uct_pending_req_t *r = req;
    ucs_status_t status;

    /* UCS_INPROGRESS: the request made progress (sent a fragment) and wants to be called again. */
    do {
        status = r->func(r);
    } while (status == UCS_INPROGRESS);
    return (status == UCS_OK) ? GDX_OK : GDX_ERR_NO_RESOURCE;
}

/* ---- interface --------------------------------------------------------------------------------------- */

static ucs_status_t uct_gdx_iface_query(uct_iface_h tl_iface, uct_iface_attr_t *attr)
{
    uct_gdx_iface_t *iface       = ucs_derived_of(tl_iface, uct_gdx_iface_t);
    const gdx_uct_iface_attr_t *a = &iface->attr;

    uct_base_iface_query(&iface->super, attr);
    attr->iface_addr_len  = 0;
    attr->device_addr_len = sizeof(iface->system_id);
    attr->ep_addr_len     = GDX_UCT_EP_ADDR_MAX;
    attr->max_conn_priv   = 0;
    /* ERRHANDLE_PEER_FAILURE: a broken endpoint is reported (uct_gdx_iface_report_failures) and its operations
     * fail; EP_CHECK: what UCP's keepalive needs of a connect-to-ep lane (GAPS.md, 16). */
    attr->cap.flags       = UCT_IFACE_FLAG_CONNECT_TO_EP | UCT_IFACE_FLAG_PENDING | UCT_IFACE_FLAG_CB_SYNC |
                            UCT_IFACE_FLAG_ERRHANDLE_PEER_FAILURE | UCT_IFACE_FLAG_EP_CHECK |
                            (a->am_short ? UCT_IFACE_FLAG_AM_SHORT : 0) |
                            (a->am_bcopy ? UCT_IFACE_FLAG_AM_BCOPY : 0) |
                            (a->am_zcopy ? UCT_IFACE_FLAG_AM_ZCOPY : 0) |
                            (a->put_zcopy ? UCT_IFACE_FLAG_PUT_ZCOPY : 0) |
                            (a->get_zcopy ? UCT_IFACE_FLAG_GET_ZCOPY : 0);
    attr->cap.event_flags = a->wakeup ? (UCT_IFACE_FLAG_EVENT_SEND_COMP | UCT_IFACE_FLAG_EVENT_RECV |
                                         UCT_IFACE_FLAG_EVENT_FD) : 0;

    attr->cap.am.max_short       = a->am_short ? a->max_am_short : 0;
    attr->cap.am.max_bcopy       = a->am_bcopy ? a->max_am_bcopy : 0;
    attr->cap.am.min_zcopy       = 0;
    attr->cap.am.max_zcopy       = a->am_zcopy ? a->max_am_zcopy : 0;
    attr->cap.am.max_hdr         = a->am_zcopy ? a->max_am_short : 0;
    attr->cap.am.max_iov         = 1;
    attr->cap.am.opt_zcopy_align = 1;
    attr->cap.am.align_mtu       = 1;

    attr->cap.put.max_zcopy       = a->put_zcopy ? a->max_put : 0;
    attr->cap.put.min_zcopy       = 0;
    attr->cap.put.max_iov         = 1;
    attr->cap.put.opt_zcopy_align = 1;
    attr->cap.put.align_mtu       = 1;
    attr->cap.get.max_zcopy       = a->get_zcopy ? a->max_get : 0;
    attr->cap.get.min_zcopy       = 0;
    attr->cap.get.max_iov         = 1;
    attr->cap.get.opt_zcopy_align = 1;
    attr->cap.get.align_mtu       = 1;

    /* gdx's estimates; overhead (CPU time per send) is not among them, so a small fixed value stands in. */
    attr->latency             = ucs_linear_func_make(a->latency_s, 0);
    attr->bandwidth.dedicated = a->intra_node ? 0 : a->bandwidth_Bps;
    attr->bandwidth.shared    = a->intra_node ? a->bandwidth_Bps : 0;
    attr->overhead            = 50e-9;
    attr->priority            = 0;
    return UCS_OK;
}

static ucs_status_t uct_gdx_iface_get_device_address(uct_iface_h tl_iface, uct_device_addr_t *addr)
{
    uct_gdx_iface_t *iface = ucs_derived_of(tl_iface, uct_gdx_iface_t);

    memcpy(addr, &iface->system_id, sizeof(iface->system_id));
    return UCS_OK;
}

static int uct_gdx_iface_is_reachable(const uct_iface_h tl_iface, const uct_device_addr_t *dev_addr,
                                      const uct_iface_addr_t *iface_addr)
{
    uct_gdx_iface_t *iface = ucs_derived_of(tl_iface, uct_gdx_iface_t);
    uint64_t peer;

    if (!iface->attr.intra_node) {
        return 1; /* a network transport: whether the peer answers is found out by connecting */
    }
    if (dev_addr == NULL) {
        return 0;
    }
    memcpy(&peer, dev_addr, sizeof(peer));
    return peer == iface->system_id;
}
UCT_GDX_DEFINE_IS_REACHABLE_V2(uct_gdx_iface_is_reachable_v2, uct_gdx_iface_is_reachable)

/* The full progress, under the async lock. Out of line: the idle call before it then needs no stack frame. */
static UCS_F_NOINLINE unsigned uct_gdx_iface_progress_locked(uct_gdx_iface_t *iface)
{
    int failure_due;
    unsigned count;

    UCT_GDX_ASYNC_BLOCK(&iface->super);
    count = gdx_uct_iface_progress(iface->bridge, &failure_due);
    if (failure_due) {
        count += uct_gdx_iface_report_failures(iface);
    }
    UCT_GDX_ASYNC_UNBLOCK(&iface->super);
    return count;
}

static UCT_GDX_HOT unsigned uct_gdx_iface_progress(uct_iface_h tl_iface)
{
    uct_gdx_iface_t *iface = ucs_derived_of(tl_iface, uct_gdx_iface_t);
    int count              = gdx_uct_iface_progress_unlocked(iface->bridge);

    if (ucs_likely(count >= 0)) {
        return (unsigned)count; /* idle, or what a probe word announced: without the lock (bridge_idle.cpp) */
    }
    return uct_gdx_iface_progress_locked(iface);
}

static ucs_status_t uct_gdx_iface_flush(uct_iface_h tl_iface, unsigned flags, uct_completion_t *comp)
{
    uct_gdx_iface_t *iface = ucs_derived_of(tl_iface, uct_gdx_iface_t);
    gdx_status_t st;

    UCT_GDX_ASYNC_BLOCK(&iface->super); /* walks the interface's endpoints, which the async thread may add to */
    st = gdx_uct_iface_flush(iface->bridge, comp);
    UCT_GDX_ASYNC_UNBLOCK(&iface->super);
    return uct_gdx_op_status(iface, st, "iface_flush");
}

static ucs_status_t uct_gdx_iface_fence(uct_iface_h tl_iface, unsigned flags)
{
    uct_gdx_iface_t *iface = ucs_derived_of(tl_iface, uct_gdx_iface_t);

    return uct_gdx_op_status(iface, gdx_uct_iface_fence(iface->bridge), "iface_fence");
}

static ucs_status_t uct_gdx_iface_event_fd_get(uct_iface_h tl_iface, int *fd_p)
{
    uct_gdx_iface_t *iface = ucs_derived_of(tl_iface, uct_gdx_iface_t);
    int fd                 = gdx_uct_iface_wakeup_fd(iface->bridge);

    if (fd < 0) {
        ucs_debug("%s: no wakeup file descriptor (the transport lacks kCapWakeup)", uct_gdx_iface_name(iface));
        return UCS_ERR_UNSUPPORTED;
    }
    *fd_p = fd;
    return UCS_OK;
}

static ucs_status_t uct_gdx_iface_event_arm(uct_iface_h tl_iface, unsigned events)
{
    uct_gdx_iface_t *iface = ucs_derived_of(tl_iface, uct_gdx_iface_t);
    struct pollfd pfd      = {.fd = gdx_uct_iface_wakeup_fd(iface->bridge), .events = POLLIN};
    gdx_status_t st;

    UCT_GDX_ASYNC_BLOCK(&iface->super);
    st = gdx_uct_iface_arm(iface->bridge);
    UCT_GDX_ASYNC_UNBLOCK(&iface->super);

    if (st == GDX_OK) {
        /* Armed. A wakeup fd readable now (transport.h: progress() has work) means UCP must progress again
         * rather than sleep. Looked at after arm_wakeup(), which may consume stale signals (shm's eventfd): a
         * look before it saw those and answered busy forever, and nothing else reads them. */
        return ((pfd.fd >= 0) && (poll(&pfd, 1, 0) > 0)) ? UCS_ERR_BUSY : UCS_OK;
    }
    if (st == GDX_ERR_BUSY) {
        return UCS_ERR_BUSY; /* events are pending: progress before sleeping */
    }
    return uct_gdx_fail(st, "event_arm", uct_gdx_iface_name(iface));
}

UCT_GDX_INTERNAL_OPS(uct_gdx_iface_internal_ops, uct_gdx_iface_estimate_perf, uct_gdx_iface_is_reachable_v2,
                     uct_gdx_ep_connect_to_ep_v2, uct_gdx_ep_is_connected_v2);

static UCS_CLASS_INIT_FUNC(uct_gdx_iface_t, uct_md_h md, uct_worker_h worker, const uct_iface_params_t *params,
                           const uct_iface_config_t *tl_config)
{
    uct_gdx_md_t *gmd = ucs_derived_of(md, uct_gdx_md_t);
    const char *name  = md->component->name;
    ucs_status_t status;
    gdx_status_t st;

    UCT_CHECK_PARAM(params->field_mask & UCT_IFACE_PARAM_FIELD_OPEN_MODE,
                    "UCT_IFACE_PARAM_FIELD_OPEN_MODE is not defined");
    if (!(params->open_mode & UCT_IFACE_OPEN_MODE_DEVICE)) {
        ucs_error("%s supports only UCT_IFACE_OPEN_MODE_DEVICE (open mode 0x%" PRIx64 ")", name,
                  (uint64_t)params->open_mode);
        return UCS_ERR_UNSUPPORTED;
    }
    status = uct_gdx_check_am_alignment(params, name);
    if (status != UCS_OK) {
        return status;
    }
    UCS_CLASS_CALL_SUPER_INIT(uct_base_iface_t, &uct_gdx_iface_ops, &uct_gdx_iface_internal_ops, md, worker,
                              params, tl_config UCS_STATS_ARG(NULL) UCS_STATS_ARG(name));

    self->system_id = ucs_get_system_id();
    st = gdx_uct_iface_open(gmd->bridge, params->mode.device.dev_name, self, &self->bridge);
    if (st != GDX_OK) {
        return uct_gdx_fail(st, "iface_open", name);
    }
    status = uct_gdx_iface_apply_config(self, md, tl_config);
    if (status != UCS_OK) {
        gdx_uct_iface_close(self->bridge);
        return status;
    }
    gdx_uct_iface_attr(self->bridge, &self->attr);
    self->scratch_size = self->attr.max_am_short;
    self->scratch      = ucs_malloc(ucs_max(self->scratch_size, sizeof(uint64_t)), "gdx am_short_iov gather");
    if (self->scratch == NULL) {
        gdx_uct_iface_close(self->bridge);
        ucs_error("%s: out of memory for a %zu-byte send buffer", name, self->scratch_size);
        return UCS_ERR_NO_MEMORY;
    }
    ucs_debug("%s/%s: interface open (am_short %zu, am_bcopy %zu, put %zu, get %zu)", name,
              params->mode.device.dev_name, self->attr.max_am_short, self->attr.max_am_bcopy, self->attr.max_put,
              self->attr.max_get);
    return UCS_OK;
}

static UCS_CLASS_CLEANUP_FUNC(uct_gdx_iface_t)
{
    uct_base_iface_progress_disable(&self->super.super, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    gdx_uct_iface_close(self->bridge);
    ucs_free(self->scratch);
}

UCS_CLASS_DEFINE(uct_gdx_iface_t, uct_base_iface_t);
static UCS_CLASS_DEFINE_NEW_FUNC(uct_gdx_iface_t, uct_iface_t, uct_md_h, uct_worker_h, const uct_iface_params_t*,
                                 const uct_iface_config_t*);
static UCS_CLASS_DEFINE_DELETE_FUNC(uct_gdx_iface_t, uct_iface_t);

ucs_status_t uct_gdx_iface_open(uct_md_h md, uct_worker_h worker, const uct_iface_params_t *params,
                                const uct_iface_config_t *config, uct_iface_h *iface_p)
{
    return UCS_CLASS_NEW_FUNC_NAME(uct_gdx_iface_t)(md, worker, params, config, iface_p);
}

static uct_iface_ops_t uct_gdx_iface_ops = {
    .ep_put_zcopy             = uct_gdx_ep_put_zcopy,
    .ep_get_zcopy             = uct_gdx_ep_get_zcopy,
    .ep_am_short              = uct_gdx_ep_am_short,
    .ep_am_short_iov          = uct_gdx_ep_am_short_iov,
    .ep_am_bcopy              = uct_gdx_ep_am_bcopy,
    .ep_am_zcopy              = uct_gdx_ep_am_zcopy,
    .ep_pending_add           = uct_gdx_ep_pending_add,
    .ep_pending_purge         = uct_gdx_ep_pending_purge,
    .ep_flush                 = uct_gdx_ep_flush,
    .ep_fence                 = uct_gdx_ep_fence,
    .ep_check                 = uct_gdx_ep_check,
    .ep_create                = UCS_CLASS_NEW_FUNC_NAME(uct_gdx_ep_t),
    .ep_destroy               = UCS_CLASS_DELETE_FUNC_NAME(uct_gdx_ep_t),
    .ep_get_address           = uct_gdx_ep_get_address,
    .ep_connect_to_ep         = uct_gdx_ep_connect_to_ep,
    .iface_flush              = uct_gdx_iface_flush,
    .iface_fence              = uct_gdx_iface_fence,
    .iface_progress_enable    = uct_base_iface_progress_enable,
    .iface_progress_disable   = uct_base_iface_progress_disable,
    .iface_progress           = uct_gdx_iface_progress,
    .iface_event_fd_get       = uct_gdx_iface_event_fd_get,
    .iface_event_arm          = uct_gdx_iface_event_arm,
    .iface_close              = UCS_CLASS_DELETE_FUNC_NAME(uct_gdx_iface_t),
    .iface_query              = uct_gdx_iface_query,
    .iface_get_device_address = uct_gdx_iface_get_device_address,
    .iface_get_address        = (uct_iface_get_address_func_t)ucs_empty_function_return_success,
    .iface_is_reachable       = uct_gdx_iface_is_reachable,
};
