/* gdx_aux: the auxiliary wire-up transport UCP needs next to gdx's connect-to-ep transports.
 *
 * Why it exists: UCP (1.13) exchanges the endpoint addresses of connect-to-ep lanes in wire-up messages sent
 * over an "auxiliary" transport that must connect to an *interface* (UCT_IFACE_FLAG_CONNECT_TO_IFACE) and
 * deliver callbacks without the peer calling progress (UCT_IFACE_FLAG_CB_ASYNC). Among Debian's UCX transports
 * only ud_verbs/ud_mlx5 qualify, so on a host without RDMA a UCP endpoint over gdx cannot be created
 * ("no auxiliary transport"). gdx's transport.h has no connect-to-interface notion to build one from, so this
 * file provides the smallest one: unix datagram sockets in the abstract namespace, active messages only
 * (am_bcopy), same host only. It carries wire-up messages, never data: name it in UCX_TLS as gdx_aux:aux.
 * On RDMA hosts ud_verbs:aux serves instead (tools/gdx-run --aux). README.md, "Wire-up", has the
 * transport.h change that would make this file unnecessary. */
#include "uct_gdx_glue.h"

#include <ucs/async/async.h>
#include <ucs/debug/log.h>
#include <ucs/sys/string.h>

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define UCT_GDX_AUX_NAME      "gdx_aux"
#define UCT_GDX_AUX_MAX_BCOPY (32u * 1024)   /* a wire-up message of a few transports is < 4 KiB */
/* progress() reads the socket itself on every this-many-th call only (a power of two); see its comment. */
#define UCT_GDX_AUX_DRAIN_EVERY 1024u

typedef struct {
    uint32_t pid;
    uint32_t id;
} UCS_S_PACKED uct_gdx_aux_addr_t;

typedef struct {
    uct_base_iface_t   super;
    int                fd;
    uct_gdx_aux_addr_t addr;
    uint64_t           system_id;
    ucs_queue_head_t   pending;   /* requests waiting for socket buffer space, all endpoints */
    ucs_queue_head_t   deferred;  /* messages read by the async handler for handlers that are not async-safe */
    int                work;      /* pending or deferred may be non-empty: written under the async lock, read
                                   * without it by progress() (__atomic) */
    unsigned           calls;     /* progress() calls (the owner's thread only) */
    /* UCP's adaptive progress (EVENT_ASYNC_CB): UCP stops calling progress() once no endpoint uses this interface
     * (after wire-up) and arms it instead; the async handler then reports the next message through the callback
     * UCP gave at open. Both fields under the async lock. */
    uct_async_event_cb_t event_cb;
    void               *event_arg;
    int                armed;
    uint8_t            tx[UCT_GDX_AUX_MAX_BCOPY + 1];
    uint8_t            rx[UCT_GDX_AUX_MAX_BCOPY + 1];
} uct_gdx_aux_iface_t;

typedef struct {
    uct_base_ep_t        super;
    struct sockaddr_un   peer;
    socklen_t            peer_len;
    pid_t                pid;       /* the peer process (this host) */
    uct_keepalive_info_t keepalive; /* its start time, for ep_check */
} uct_gdx_aux_ep_t;

typedef struct {
    ucs_queue_elem_t queue;
    uct_gdx_aux_ep_t *ep;
} uct_gdx_aux_pending_priv_t;

typedef struct {
    ucs_queue_elem_t queue;
    uint8_t          id;
    size_t           length;
    uint8_t          data[];
} uct_gdx_aux_deferred_t;

static uct_iface_ops_t uct_gdx_aux_iface_ops;
static uct_component_t uct_gdx_aux_component;
static uint32_t uct_gdx_aux_next_id;

static socklen_t uct_gdx_aux_sockaddr(const uct_gdx_aux_addr_t *addr, struct sockaddr_un *sa)
{
    int n;

    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    /* sun_path[0] = '\0': the abstract namespace, nothing on the file system to clean up */
    n = snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1, "gdx-aux-%u-%u", addr->pid, addr->id);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

/* ---- receive ------------------------------------------------------------------------------------------- */

static unsigned uct_gdx_aux_drain(uct_gdx_aux_iface_t *iface, int async)
{
    uct_gdx_aux_deferred_t *msg;
    unsigned count = 0;
    ssize_t n;

    for (;;) {
        n = recv(iface->fd, iface->rx, sizeof(iface->rx), MSG_DONTWAIT);
        if (n < 0) {
            if ((errno != EAGAIN) && (errno != EWOULDBLOCK) && (errno != EINTR)) {
                ucs_error(UCT_GDX_AUX_NAME ": recv on fd %d failed: %m", iface->fd);
            }
            return count;
        }
        if ((n < 1) || (iface->rx[0] >= UCT_AM_ID_MAX)) {
            ucs_error(UCT_GDX_AUX_NAME ": dropped a malformed datagram of %zd bytes", n);
            continue;
        }
        ++count;
        if (!async || (iface->super.am[iface->rx[0]].flags & UCT_CB_FLAG_ASYNC)) {
            uct_iface_invoke_am(&iface->super, iface->rx[0], iface->rx + 1, (unsigned)(n - 1), 0);
            continue;
        }
        /* Read from the async thread for a handler that must run in progress(): keep a copy until then. */
        msg = ucs_malloc(sizeof(*msg) + (size_t)n - 1, "gdx_aux deferred");
        if (msg == NULL) {
            ucs_error(UCT_GDX_AUX_NAME ": out of memory deferring a %zd-byte message; dropped", n);
            continue;
        }
        msg->id     = iface->rx[0];
        msg->length = (size_t)n - 1;
        memcpy(msg->data, iface->rx + 1, msg->length);
        ucs_queue_push(&iface->deferred, &msg->queue);
        __atomic_store_n(&iface->work, 1, __ATOMIC_RELEASE);
    }
}

static void uct_gdx_aux_async_cb(int id, ucs_event_set_types_t events, void *arg)
{
    uct_gdx_aux_iface_t *iface = arg;

    /* Runs with the worker's async context blocked (as event_arm does). A message to an armed interface is the
     * event UCP armed it for: UCP then progresses it once (deferred messages) and activates it if needed. */
    if ((uct_gdx_aux_drain(iface, 1) > 0) && iface->armed) {
        iface->armed = 0;
        iface->event_cb(iface->event_arg, 0);
    }
}

static ucs_status_t uct_gdx_aux_iface_event_arm(uct_iface_h tl_iface, unsigned events)
{
    uct_gdx_aux_iface_t *iface = ucs_derived_of(tl_iface, uct_gdx_aux_iface_t);
    ucs_status_t status;

    UCT_GDX_ASYNC_BLOCK(&iface->super);
    if (__atomic_load_n(&iface->work, __ATOMIC_ACQUIRE)) {
        status = UCS_ERR_BUSY; /* deferred messages or pending requests: progress first */
    } else {
        iface->armed = (iface->event_cb != NULL);
        status       = UCS_OK;
    }
    UCT_GDX_ASYNC_UNBLOCK(&iface->super);
    return status;
}

static unsigned uct_gdx_aux_iface_progress(uct_iface_h tl_iface)
{
    uct_gdx_aux_iface_t *iface = ucs_derived_of(tl_iface, uct_gdx_aux_iface_t);
    uct_gdx_aux_pending_priv_t *priv;
    uct_gdx_aux_deferred_t *msg;
    unsigned count = 0;

    /* The worker's async context reads the socket (CB_ASYNC: uct_gdx_aux_async_cb, or UCP's check of missed
     * events when it was blocked), so progress() only has work when that handed messages over or requests wait
     * for buffer space. UCP calls this in every worker progress while an endpoint uses this interface (wire-up;
     * afterwards its adaptive progress arms the interface instead: event_arm): a recv() here on each call cost
     * ~400 ns, 45% of a gdx_shm tag_lat receiver's time (bench/results/uct-small-2026-11-25).
     * Every UCT_GDX_AUX_DRAIN_EVERY-th call still reads the socket, for an async context that is only ever
     * polled by its owner. */
    if (!__atomic_load_n(&iface->work, __ATOMIC_ACQUIRE) && ((++iface->calls & (UCT_GDX_AUX_DRAIN_EVERY - 1)) != 0)) {
        return 0;
    }

    /* The async handler (uct_gdx_aux_async_cb) runs with the worker's async context blocked and uses the same
     * receive buffer and deferred queue: blocking it here makes the two exclusive. Without it both threads could
     * recv into iface->rx at once, and a wire-up message could be lost, garbled or handled twice. */
    UCT_GDX_ASYNC_BLOCK(&iface->super);
    while (!ucs_queue_is_empty(&iface->deferred)) {
        msg = ucs_queue_pull_elem_non_empty(&iface->deferred, uct_gdx_aux_deferred_t, queue);
        uct_iface_invoke_am(&iface->super, msg->id, msg->data, (unsigned)msg->length, 0);
        ucs_free(msg);
        ++count;
    }
    count += uct_gdx_aux_drain(iface, 0);
    uct_pending_queue_dispatch(priv, &iface->pending, 1);
    __atomic_store_n(&iface->work, !ucs_queue_is_empty(&iface->pending) || !ucs_queue_is_empty(&iface->deferred),
                     __ATOMIC_RELEASE);
    UCT_GDX_ASYNC_UNBLOCK(&iface->super);
    return count;
}

/* ---- endpoint ------------------------------------------------------------------------------------------ */

static UCS_CLASS_INIT_FUNC(uct_gdx_aux_ep_t, const uct_ep_params_t *params)
{
    uct_gdx_aux_iface_t *iface = ucs_derived_of(params->iface, uct_gdx_aux_iface_t);

    UCS_CLASS_CALL_SUPER_INIT(uct_base_ep_t, &iface->super);
    UCT_EP_PARAMS_CHECK_DEV_IFACE_ADDRS(params);
    self->peer_len = uct_gdx_aux_sockaddr((const uct_gdx_aux_addr_t*)params->iface_addr, &self->peer);
    /* The peer's liveness, as UCX's shared-memory transports judge it (ep_check): the process that bound the
     * socket still runs, the same one (its start time). Unlike there, a start time that cannot be read (the peer
     * is gone already, or lives in another pid namespace) does not fail the endpoint: ep_check then says nothing,
     * and a send to a peer that is gone fails by itself (its socket is gone). */
    self->pid = (pid_t)((const uct_gdx_aux_addr_t*)params->iface_addr)->pid;
    if (uct_ep_keepalive_init(&self->keepalive, self->pid) != UCS_OK) {
        self->keepalive.start_time = 0;
    }
    return UCS_OK;
}

static UCS_CLASS_CLEANUP_FUNC(uct_gdx_aux_ep_t)
{
}

UCS_CLASS_DEFINE(uct_gdx_aux_ep_t, uct_base_ep_t);

/* UCP (1.16+) asks whether an endpoint already leads to the interface a wire-up message names. */
static UCS_F_MAYBE_UNUSED int uct_gdx_aux_ep_is_connected(const uct_ep_h tl_ep,
                                                          const uct_device_addr_t *dev_addr,
                                                          const uct_iface_addr_t *iface_addr,
                                                          const uct_ep_addr_t *ep_addr)
{
    const uct_gdx_aux_ep_t *ep = ucs_derived_of(tl_ep, uct_gdx_aux_ep_t);
    struct sockaddr_un peer;
    socklen_t len;

    if (iface_addr == NULL) {
        return 0;
    }
    len = uct_gdx_aux_sockaddr((const uct_gdx_aux_addr_t*)iface_addr, &peer);
    return (len == ep->peer_len) && (memcmp(&peer, &ep->peer, len) == 0);
}
UCT_GDX_DEFINE_EP_IS_CONNECTED(uct_gdx_aux_ep_is_connected_v2, uct_gdx_aux_ep_is_connected)
static UCS_CLASS_DEFINE_NEW_FUNC(uct_gdx_aux_ep_t, uct_ep_t, const uct_ep_params_t*);
static UCS_CLASS_DEFINE_DELETE_FUNC(uct_gdx_aux_ep_t, uct_ep_t);

static ucs_status_t uct_gdx_aux_ep_check(uct_ep_h tl_ep, unsigned flags, uct_completion_t *comp);

/* Wire-up messages are sent from the application's thread (a new endpoint's request) and from the async thread
 * (the reply to a request handled there): the shared tx buffer and the pending queue are used under the worker's
 * async lock (a control path: the cost does not matter). */
static ssize_t uct_gdx_aux_ep_am_bcopy(uct_ep_h tl_ep, uint8_t id, uct_pack_callback_t pack_cb, void *arg,
                                       unsigned flags)
{
    uct_gdx_aux_iface_t *iface = ucs_derived_of(tl_ep->iface, uct_gdx_aux_iface_t);
    uct_gdx_aux_ep_t *ep       = ucs_derived_of(tl_ep, uct_gdx_aux_ep_t);
    ssize_t ret;
    size_t length;
    ssize_t n;

    UCT_CHECK_AM_ID(id);
    UCT_GDX_ASYNC_BLOCK(&iface->super);
    if (!ucs_queue_is_empty(&iface->pending)) {
        ret = UCS_ERR_NO_RESOURCE; /* keep the order of requests already waiting */
        goto out;
    }
    iface->tx[0] = id;
    length       = pack_cb(iface->tx + 1, arg);
    if (length > UCT_GDX_AUX_MAX_BCOPY) {
        ucs_error(UCT_GDX_AUX_NAME ": am_bcopy of %zu bytes exceeds the maximum %u", length, UCT_GDX_AUX_MAX_BCOPY);
        ret = UCS_ERR_INVALID_PARAM;
        goto out;
    }
    n = sendto(iface->fd, iface->tx, length + 1, MSG_DONTWAIT, (struct sockaddr*)&ep->peer, ep->peer_len);
    if (n == (ssize_t)(length + 1)) {
        ret = (ssize_t)length;
    } else if ((n < 0) && ((errno == EAGAIN) || (errno == EWOULDBLOCK) || (errno == ENOBUFS) || (errno == EINTR))) {
        ret = UCS_ERR_NO_RESOURCE;
    } else {
        /* A keepalive probe (UCT_SEND_FLAG_PEER_CHECK) to a peer that exited is expected to fail: diag then. */
        ucs_log((flags & UCT_SEND_FLAG_PEER_CHECK) ? UCS_LOG_LEVEL_DIAG : UCS_LOG_LEVEL_ERROR,
                UCT_GDX_AUX_NAME ": sendto %s (%zu bytes) failed: %s", ep->peer.sun_path + 1, length + 1,
                (n < 0) ? strerror(errno) : "short write");
        ret = (n < 0) && ((errno == ECONNREFUSED) || (errno == ENOENT)) ? UCS_ERR_UNREACHABLE : UCS_ERR_IO_ERROR;
    }
out:
    UCT_GDX_ASYNC_UNBLOCK(&iface->super);
    /* UCP's keepalive over this transport (error mode PEER) sends with PEER_CHECK: the peer's death must then
     * reach the error handler, not only this send's status (as UCX's shared-memory transports check it). */
    if (flags & UCT_SEND_FLAG_PEER_CHECK) {
        uct_gdx_aux_ep_check(tl_ep, 0, NULL);
    }
    return ret;
}

static ucs_status_t uct_gdx_aux_ep_pending_add(uct_ep_h tl_ep, uct_pending_req_t *req, unsigned flags)
{
    uct_gdx_aux_iface_t *iface = ucs_derived_of(tl_ep->iface, uct_gdx_aux_iface_t);
    uct_gdx_aux_pending_priv_t *priv = (uct_gdx_aux_pending_priv_t*)&req->priv;

    UCS_STATIC_ASSERT(sizeof(*priv) <= UCT_PENDING_REQ_PRIV_LEN);
    priv->ep = ucs_derived_of(tl_ep, uct_gdx_aux_ep_t);
    UCT_GDX_ASYNC_BLOCK(&iface->super);
    ucs_queue_push(&iface->pending, &priv->queue);
    __atomic_store_n(&iface->work, 1, __ATOMIC_RELEASE); /* progress() dispatches it when the socket has room */
    UCT_GDX_ASYNC_UNBLOCK(&iface->super);
    return UCS_OK;
}

static void uct_gdx_aux_ep_pending_purge(uct_ep_h tl_ep, uct_pending_purge_callback_t cb, void *arg)
{
    uct_gdx_aux_iface_t *iface = ucs_derived_of(tl_ep->iface, uct_gdx_aux_iface_t);
    uct_gdx_aux_ep_t *ep       = ucs_derived_of(tl_ep, uct_gdx_aux_ep_t);
    uct_gdx_aux_pending_priv_t *priv;

    UCT_GDX_ASYNC_BLOCK(&iface->super);
    uct_pending_queue_purge(priv, &iface->pending, priv->ep == ep, cb, arg);
    UCT_GDX_ASYNC_UNBLOCK(&iface->super);
}

/* UCP's keepalive of an endpoint in error mode PEER (while its wire-up runs over this transport, or on this lane):
 * a peer that exited is reported through the error handler from progress (UCT's keepalive helper schedules it). A
 * stopped peer still runs, as for UCX's own shared-memory transports. */
static ucs_status_t uct_gdx_aux_ep_check(uct_ep_h tl_ep, unsigned flags, uct_completion_t *comp)
{
    uct_gdx_aux_ep_t *ep = ucs_derived_of(tl_ep, uct_gdx_aux_ep_t);

    if ((flags != 0) || (comp != NULL)) {
        ucs_error(UCT_GDX_AUX_NAME ": ep_check with flags 0x%x or a completion is not supported", flags);
        return UCS_ERR_INVALID_PARAM;
    }
    if (ep->keepalive.start_time != 0) {
        uct_ep_keepalive_check(tl_ep, &ep->keepalive, ep->pid, flags, comp);
    }
    return UCS_OK;
}

/* ---- interface ----------------------------------------------------------------------------------------- */

static ucs_status_t uct_gdx_aux_iface_query(uct_iface_h tl_iface, uct_iface_attr_t *attr)
{
    uct_gdx_aux_iface_t *iface = ucs_derived_of(tl_iface, uct_gdx_aux_iface_t);

    uct_base_iface_query(&iface->super, attr);
    attr->iface_addr_len      = sizeof(uct_gdx_aux_addr_t);
    attr->device_addr_len     = sizeof(uint64_t);
    attr->ep_addr_len         = 0;
    /* ERRHANDLE_PEER_FAILURE and EP_CHECK: UCP requires both of an auxiliary transport for endpoints in error mode
     * PEER (GAPS.md, 16): a send to a peer that exited fails (its socket is gone), ep_check reports it. */
    attr->cap.flags           = UCT_IFACE_FLAG_CONNECT_TO_IFACE | UCT_IFACE_FLAG_AM_BCOPY |
                                UCT_IFACE_FLAG_PENDING | UCT_IFACE_FLAG_CB_SYNC | UCT_IFACE_FLAG_CB_ASYNC |
                                UCT_IFACE_FLAG_ERRHANDLE_PEER_FAILURE | UCT_IFACE_FLAG_EP_CHECK;
    /* Events only through the async callback UCP gives at open (no fd of its own to poll): with them UCP's
     * adaptive progress leaves this interface out of every worker progress once wire-up is over. */
    attr->cap.event_flags     = (iface->event_cb != NULL) ? (UCT_IFACE_FLAG_EVENT_SEND_COMP | UCT_IFACE_FLAG_EVENT_RECV |
                                                             UCT_IFACE_FLAG_EVENT_ASYNC_CB) : 0;
    attr->cap.am.max_bcopy    = UCT_GDX_AUX_MAX_BCOPY;
    attr->cap.am.max_iov      = 1;
    attr->cap.am.opt_zcopy_align = 1;
    attr->cap.am.align_mtu    = 1;
    /* Slow on purpose: never preferred for data when someone forgets ":aux". */
    attr->latency             = ucs_linear_func_make(50e-6, 0);
    attr->bandwidth.dedicated = 0;
    attr->bandwidth.shared    = 100e6;
    attr->overhead            = 10e-6;
    attr->priority            = 0;
    return UCS_OK;
}

static ucs_status_t uct_gdx_aux_iface_get_address(uct_iface_h tl_iface, uct_iface_addr_t *addr)
{
    memcpy(addr, &ucs_derived_of(tl_iface, uct_gdx_aux_iface_t)->addr, sizeof(uct_gdx_aux_addr_t));
    return UCS_OK;
}

static ucs_status_t uct_gdx_aux_iface_get_device_address(uct_iface_h tl_iface, uct_device_addr_t *addr)
{
    memcpy(addr, &ucs_derived_of(tl_iface, uct_gdx_aux_iface_t)->system_id, sizeof(uint64_t));
    return UCS_OK;
}

static int uct_gdx_aux_iface_is_reachable(const uct_iface_h tl_iface, const uct_device_addr_t *dev_addr,
                                          const uct_iface_addr_t *iface_addr)
{
    uint64_t peer;

    if ((dev_addr == NULL) || (iface_addr == NULL)) {
        return 0;
    }
    memcpy(&peer, dev_addr, sizeof(peer));
    return peer == ucs_derived_of(tl_iface, uct_gdx_aux_iface_t)->system_id; /* unix sockets: this host only */
}

UCT_GDX_DEFINE_IS_REACHABLE_V2(uct_gdx_aux_iface_is_reachable_v2, uct_gdx_aux_iface_is_reachable)
UCT_GDX_INTERNAL_OPS(uct_gdx_aux_internal_ops, uct_base_iface_estimate_perf, uct_gdx_aux_iface_is_reachable_v2,
                     UCT_GDX_NO_CONNECT_TO_EP_V2, uct_gdx_aux_ep_is_connected_v2);

static UCS_CLASS_INIT_FUNC(uct_gdx_aux_iface_t, uct_md_h md, uct_worker_h worker,
                           const uct_iface_params_t *params, const uct_iface_config_t *tl_config)
{
    uct_priv_worker_t *priv_worker = ucs_derived_of(worker, uct_priv_worker_t);
    struct sockaddr_un sa;
    ucs_status_t status;
    socklen_t len;

    UCT_CHECK_PARAM(params->field_mask & UCT_IFACE_PARAM_FIELD_OPEN_MODE,
                    "UCT_IFACE_PARAM_FIELD_OPEN_MODE is not defined");
    if (!(params->open_mode & UCT_IFACE_OPEN_MODE_DEVICE)) {
        ucs_error(UCT_GDX_AUX_NAME " supports only UCT_IFACE_OPEN_MODE_DEVICE");
        return UCS_ERR_UNSUPPORTED;
    }
    status = uct_gdx_check_am_alignment(params, UCT_GDX_AUX_NAME);
    if (status != UCS_OK) {
        return status;
    }
    UCS_CLASS_CALL_SUPER_INIT(uct_base_iface_t, &uct_gdx_aux_iface_ops, &uct_gdx_aux_internal_ops, md, worker,
                              params, tl_config UCS_STATS_ARG(NULL) UCS_STATS_ARG(UCT_GDX_AUX_NAME));
    ucs_queue_head_init(&self->pending);
    ucs_queue_head_init(&self->deferred);
    self->work      = 0;
    self->calls     = 0;
    self->armed     = 0;
    self->event_cb  = NULL;
    self->event_arg = NULL;
    if ((params->field_mask & UCT_IFACE_PARAM_FIELD_ASYNC_EVENT_CB) && (params->async_event_cb != NULL)) {
        self->event_cb  = params->async_event_cb;
        self->event_arg = (params->field_mask & UCT_IFACE_PARAM_FIELD_ASYNC_EVENT_ARG) ? params->async_event_arg :
                                                                                         NULL;
    }
    self->system_id = ucs_get_system_id();
    self->addr.pid  = (uint32_t)getpid();
    self->addr.id   = __atomic_fetch_add(&uct_gdx_aux_next_id, 1, __ATOMIC_RELAXED);
    self->fd        = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (self->fd < 0) {
        ucs_error(UCT_GDX_AUX_NAME ": socket(AF_UNIX, SOCK_DGRAM) failed: %m");
        return UCS_ERR_IO_ERROR;
    }
    len = uct_gdx_aux_sockaddr(&self->addr, &sa);
    if (bind(self->fd, (struct sockaddr*)&sa, len) != 0) {
        ucs_error(UCT_GDX_AUX_NAME ": bind to @%s failed: %m", sa.sun_path + 1);
        status = UCS_ERR_IO_ERROR;
        goto err_close;
    }
    /* CB_ASYNC: the worker's async context reads the socket; progress() runs what it could not deliver there. */
    status = ucs_async_set_event_handler(priv_worker->async->mode, self->fd, UCS_EVENT_SET_EVREAD,
                                         uct_gdx_aux_async_cb, self, priv_worker->async);
    if (status != UCS_OK) {
        ucs_error(UCT_GDX_AUX_NAME ": cannot watch fd %d in the worker's async context: %s", self->fd,
                  ucs_status_string(status));
        goto err_close;
    }
    ucs_debug(UCT_GDX_AUX_NAME ": interface bound to @%s", sa.sun_path + 1);
    return UCS_OK;

err_close:
    close(self->fd);
    return status;
}

static UCS_CLASS_CLEANUP_FUNC(uct_gdx_aux_iface_t)
{
    uct_gdx_aux_deferred_t *msg;

    ucs_async_remove_handler(self->fd, 1);
    uct_base_iface_progress_disable(&self->super.super, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    close(self->fd);
    while (!ucs_queue_is_empty(&self->deferred)) {
        msg = ucs_queue_pull_elem_non_empty(&self->deferred, uct_gdx_aux_deferred_t, queue);
        ucs_free(msg);
    }
}

UCS_CLASS_DEFINE(uct_gdx_aux_iface_t, uct_base_iface_t);
static UCS_CLASS_DEFINE_NEW_FUNC(uct_gdx_aux_iface_t, uct_iface_t, uct_md_h, uct_worker_h,
                                 const uct_iface_params_t*, const uct_iface_config_t*);
static UCS_CLASS_DEFINE_DELETE_FUNC(uct_gdx_aux_iface_t, uct_iface_t);

static ucs_status_t uct_gdx_aux_query_devices(uct_md_h md, uct_tl_device_resource_t **devices_p,
                                              unsigned *num_p)
{
    uct_tl_device_resource_t *dev = ucs_calloc(1, sizeof(*dev), "gdx_aux device");

    if (dev == NULL) {
        ucs_error(UCT_GDX_AUX_NAME ": out of memory for a device description");
        return UCS_ERR_NO_MEMORY;
    }
    ucs_strncpy_zero(dev->name, "sock", sizeof(dev->name));
    dev->type       = UCT_DEVICE_TYPE_SHM;
    dev->sys_device = UCS_SYS_DEVICE_ID_UNKNOWN;
    *devices_p      = dev;
    *num_p          = 1;
    return UCS_OK;
}

static uct_iface_ops_t uct_gdx_aux_iface_ops = {
    .ep_am_bcopy              = uct_gdx_aux_ep_am_bcopy,
    .ep_pending_add           = uct_gdx_aux_ep_pending_add,
    .ep_pending_purge         = uct_gdx_aux_ep_pending_purge,
    .ep_flush                 = uct_base_ep_flush,  /* sendto() has handed the datagram to the kernel */
    .ep_fence                 = uct_base_ep_fence,
    .ep_check                 = uct_gdx_aux_ep_check,
    .ep_create                = UCS_CLASS_NEW_FUNC_NAME(uct_gdx_aux_ep_t),
    .ep_destroy               = UCS_CLASS_DELETE_FUNC_NAME(uct_gdx_aux_ep_t),
    .iface_flush              = uct_base_iface_flush,
    .iface_fence              = uct_base_iface_fence,
    .iface_progress_enable    = uct_base_iface_progress_enable,
    .iface_progress_disable   = uct_base_iface_progress_disable,
    .iface_progress           = uct_gdx_aux_iface_progress,
    .iface_event_arm          = uct_gdx_aux_iface_event_arm,
    .iface_close              = UCS_CLASS_DELETE_FUNC_NAME(uct_gdx_aux_iface_t),
    .iface_query              = uct_gdx_aux_iface_query,
    .iface_get_device_address = uct_gdx_aux_iface_get_device_address,
    .iface_get_address        = uct_gdx_aux_iface_get_address,
    .iface_is_reachable       = uct_gdx_aux_iface_is_reachable,
};

/* ---- memory domain: none to speak of (AM only) ---------------------------------------------------------- */

static ucs_status_t uct_gdx_aux_md_query(uct_md_h md, uct_gdx_md_attr_t *attr)
{
    UCT_GDX_MD_ATTR_DEFAULTS(attr); /* first: every attribute this MD does not set keeps UCX's default */
    UCT_GDX_MD_CAP(attr).flags            = 0;
    UCT_GDX_MD_CAP(attr).reg_mem_types    = 0;
    UCT_GDX_MD_SET_CACHE_TYPES(attr, 0);
    UCT_GDX_MD_CAP(attr).access_mem_types = UCS_BIT(UCS_MEMORY_TYPE_HOST);
    UCT_GDX_MD_CAP(attr).alloc_mem_types  = 0;
    UCT_GDX_MD_CAP(attr).detect_mem_types = 0;
    UCT_GDX_MD_CAP(attr).max_alloc        = 0;
    UCT_GDX_MD_CAP(attr).max_reg          = 0;
    attr->rkey_packed_size     = 0;
    attr->reg_cost             = ucs_linear_func_make(0, 0);
    memset(&attr->local_cpus, 0xff, sizeof(attr->local_cpus));
    return UCS_OK;
}

static ucs_status_t uct_gdx_aux_md_open(uct_component_t *component, const char *md_name,
                                        const uct_md_config_t *config, uct_md_h *md_p)
{
    static uct_md_ops_t ops = {
        .close                  = (uct_md_close_func_t)ucs_empty_function,
        .query                  = uct_gdx_aux_md_query,
        .mem_alloc              = (uct_md_mem_alloc_func_t)ucs_empty_function_return_unsupported,
        .mem_free               = (uct_md_mem_free_func_t)ucs_empty_function_return_unsupported,
        .mem_advise             = (uct_md_mem_advise_func_t)ucs_empty_function_return_unsupported,
        .mem_reg                = (uct_md_mem_reg_func_t)ucs_empty_function_return_unsupported,
        .mem_dereg              = (uct_md_mem_dereg_func_t)ucs_empty_function_return_unsupported,
        .mem_query              = (uct_md_mem_query_func_t)ucs_empty_function_return_unsupported,
        .mkey_pack              = (uct_md_mkey_pack_func_t)ucs_empty_function_return_unsupported,
        .detect_memory_type     = (uct_md_detect_memory_type_func_t)ucs_empty_function_return_unsupported,
        UCT_GDX_MD_OPS_UNUSED
    };
    static uct_md_t md = {.ops = &ops, .component = &uct_gdx_aux_component};

    *md_p = &md;
    return UCS_OK;
}

static uct_component_t uct_gdx_aux_component = {
    .query_md_resources = uct_md_query_single_md_resource,
    .md_open            = uct_gdx_aux_md_open,
    .cm_open            = (uct_component_cm_open_func_t)ucs_empty_function_return_unsupported,
    .rkey_unpack        = uct_md_stub_rkey_unpack,
    .rkey_ptr           = (uct_component_rkey_ptr_func_t)ucs_empty_function_return_unsupported,
    .rkey_release       = (uct_component_rkey_release_func_t)ucs_empty_function_return_success,
    UCT_GDX_COMPONENT_INIT_RKEY_COMPARE
    .name               = UCT_GDX_AUX_NAME,
    .md_config          = UCT_MD_DEFAULT_CONFIG_INITIALIZER,
    .cm_config          = UCS_CONFIG_EMPTY_GLOBAL_LIST_ENTRY,
    .tl_list            = UCT_COMPONENT_TL_LIST_INITIALIZER(&uct_gdx_aux_component),
    .flags              = 0,
    .md_vfs_init        = (uct_component_md_vfs_init_func_t)ucs_empty_function
};

static ucs_config_field_t uct_gdx_aux_iface_config_table[] = {
    {"", "", NULL, 0, UCS_CONFIG_TYPE_TABLE(uct_iface_config_table)},
    {NULL}
};

UCT_TL_DEFINE_ENTRY(&uct_gdx_aux_component, gdx_aux, uct_gdx_aux_query_devices, uct_gdx_aux_iface_t,
                    "GDX_AUX_", uct_gdx_aux_iface_config_table, uct_iface_config_t);

/* Called by uct_gdx_register_all() (after the version guard), not by a constructor of its own. */
void uct_gdx_aux_register(void)
{
    uct_component_register(&uct_gdx_aux_component);
    uct_tl_register(&uct_gdx_aux_component, &UCT_TL_NAME(gdx_aux));
}
