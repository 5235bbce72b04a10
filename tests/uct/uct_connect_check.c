/* UCT's connect-to-ep contract and peer failure, as UCX's own gtest checks them (tests/uct/gtest):
 *  1. two interfaces (two MDs, as two UCX gtest entities open them); endpoints connected in gtest's order (a to b,
 *     then b to a); the first am_short of each side, with no progress call in between, is taken (UCS_OK), and
 *     the bytes arrive (uct_p2p_am_alignment.align_* sends exactly so);
 *  2. the peer's endpoint, interface and MD are destroyed: the survivor's error handler is called for its
 *     endpoint, and a flush of the survivor's interface then completes with UCS_OK (test_uct_peer_failure flushes
 *     so after inject_error, and asserts UCS_OK).
 *
 *   LD_PRELOAD=libuct_gdx.so.0 uct_connect_check <tl> [timeout_s]
 * Exit 0: PASS; 1: a check failed; 2: setup failed; 3: timed out. */
#include "uct_check.h"

#include <stdint.h>

#define AM_ID 5

typedef struct {
    uct_md_h md;
    uct_iface_h iface;
    uint8_t dev_addr[512];
    unsigned received, errors;
    uint64_t last;
} side_t;

static uct_worker_h g_worker;

static ucs_status_t am_handler(void *arg, void *data, size_t length, unsigned flags)
{
    side_t *s = (side_t*)arg;
    (void)flags;
    if (length >= sizeof(s->last)) memcpy(&s->last, data, sizeof(s->last));
    ++s->received;
    return UCS_OK;
}

static ucs_status_t err_handler(void *arg, uct_ep_h ep, ucs_status_t status)
{
    side_t *s = (side_t*)arg;
    (void)ep;
    (void)status;
    ++s->errors;
    return UCS_OK;
}

static uct_ep_h g_pend_ep;

/* A parked send: UCS_OK when taken, NO_RESOURCE to stay parked, the endpoint's error otherwise (dropped). */
static ucs_status_t pend_cb(uct_pending_req_t *self)
{
    (void)self;
    return uct_ep_am_short(g_pend_ep, AM_ID, 0, NULL, 0);
}

static void open_side(uct_component_h comp, const char *tl, side_t *s)
{
    uct_md_config_t *md_cfg;
    uct_iface_config_t *if_cfg;
    uct_tl_resource_desc_t *rsc;
    unsigned nrsc;

    memset(s, 0, sizeof(*s));
    SETUP(uct_md_config_read(comp, NULL, NULL, &md_cfg));
    SETUP(uct_md_open(comp, tl, md_cfg, &s->md));
    uct_config_release(md_cfg);
    SETUP(uct_md_query_tl_resources(s->md, &rsc, &nrsc));
    if (nrsc == 0) {
        fprintf(stderr, "setup: %s lists no device\n", tl);
        exit(2);
    }
    SETUP(uct_md_iface_config_read(s->md, rsc[0].tl_name, NULL, NULL, &if_cfg));
    uct_iface_params_t ip = {.field_mask = UCT_IFACE_PARAM_FIELD_OPEN_MODE | UCT_IFACE_PARAM_FIELD_DEVICE |
                                           UCT_IFACE_PARAM_FIELD_ERR_HANDLER | UCT_IFACE_PARAM_FIELD_ERR_HANDLER_ARG |
                                           UCT_IFACE_PARAM_FIELD_ERR_HANDLER_FLAGS,
                             .open_mode = UCT_IFACE_OPEN_MODE_DEVICE,
                             .err_handler = err_handler,
                             .err_handler_arg = s,
                             .err_handler_flags = 0};
    ip.mode.device.tl_name  = rsc[0].tl_name;
    ip.mode.device.dev_name = rsc[0].dev_name;
    SETUP(uct_iface_open(s->md, g_worker, &ip, if_cfg, &s->iface));
    uct_config_release(if_cfg);
    uct_release_tl_resource_list(rsc);
    SETUP(uct_iface_set_am_handler(s->iface, AM_ID, am_handler, s, 0));
    SETUP(uct_iface_get_device_address(s->iface, (uct_device_addr_t*)s->dev_addr));
    uct_iface_progress_enable(s->iface, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
}

static void progress_until(volatile unsigned *counter, unsigned target)
{
    while (*counter < target) uct_worker_progress(g_worker);
}

int main(int argc, char **argv)
{
    const char *tl = (argc > 1) ? argv[1] : "gdx_shm";
    unsigned timeout = (argc > 2) ? (unsigned)atoi(argv[2]) : 120;
    uct_component_h *comps, comp;
    ucs_async_context_t *async;
    side_t a, b;
    uct_ep_h ea, eb;
    uint8_t a_addr[512], b_addr[512];

    uct_check_alarm("uct_connect_check: a wait never ended", timeout);
    comp = uct_check_setup(tl, &async, &g_worker, &comps);
    open_side(comp, tl, &a);
    open_side(comp, tl, &b);

    uct_ep_params_t pa = {.field_mask = UCT_EP_PARAM_FIELD_IFACE, .iface = a.iface};
    uct_ep_params_t pb = {.field_mask = UCT_EP_PARAM_FIELD_IFACE, .iface = b.iface};
    SETUP(uct_ep_create(&pa, &ea));
    SETUP(uct_ep_create(&pb, &eb));
    SETUP(uct_ep_get_address(ea, (uct_ep_addr_t*)a_addr));
    SETUP(uct_ep_get_address(eb, (uct_ep_addr_t*)b_addr));
    SETUP(uct_ep_connect_to_ep(ea, (const uct_device_addr_t*)b.dev_addr, (const uct_ep_addr_t*)b_addr));
    SETUP(uct_ep_connect_to_ep(eb, (const uct_device_addr_t*)a.dev_addr, (const uct_ep_addr_t*)a_addr));

    /* 1. The first send of each side right after connect, no progress in between. */
    uint64_t to_b = 0x1111222233334444ull, to_a = 0x5555666677778888ull;
    ucs_status_t st = uct_ep_am_short(ea, AM_ID, to_b, NULL, 0);
    CHECK(st == UCS_OK, "%s: first am_short of the side that connected first: %s", tl, ucs_status_string(st));
    st = uct_ep_am_short(eb, AM_ID, to_a, NULL, 0);
    CHECK(st == UCS_OK, "%s: first am_short of the side that connected second: %s", tl, ucs_status_string(st));
    if (g_failed == 0) {
        progress_until(&b.received, 1);
        progress_until(&a.received, 1);
        CHECK(b.last == to_b && a.last == to_a, "%s: wrong bytes (0x%llx, 0x%llx)", tl, (unsigned long long)b.last,
              (unsigned long long)a.last);
    }

    /* 2. As test_uct_peer_failure.purge_failed_peer: a's sends fill what b has room for (b does not progress), a
     * request is parked, and b goes away. Flushing a's interface (progress, flush, again while it answers
     * INPROGRESS or NO_RESOURCE, as uct_test::flush does) must end in UCS_OK, and a's endpoint is reported. */
    unsigned sent = 0;
    while ((sent < 1000000) && (uct_ep_am_short(ea, AM_ID, to_b, NULL, 0) == UCS_OK)) ++sent;
    g_pend_ep = ea;
    uct_pending_req_t req = {.func = pend_cb};
    st = uct_ep_pending_add(ea, &req, 0);
    CHECK(st == UCS_OK, "%s: pending_add after %u sends filled the peer: %s", tl, sent, ucs_status_string(st));
    uct_ep_destroy(eb);
    uct_iface_close(b.iface);
    uct_md_close(b.md);
    do {
        uct_worker_progress(g_worker);
        st = uct_iface_flush(a.iface, 0, NULL);
    } while ((st == UCS_INPROGRESS) || (st == UCS_ERR_NO_RESOURCE));
    CHECK(st == UCS_OK, "%s: interface flush after the peer died: %s (UCX's transports give UCS_OK)", tl,
          ucs_status_string(st));
    progress_until(&a.errors, 1);
    CHECK(a.errors == 1, "%s: error handler called %u times for one endpoint", tl, a.errors);
    uct_ep_pending_purge(ea, NULL, NULL);

    uct_ep_destroy(ea);
    uct_iface_close(a.iface);
    uct_md_close(a.md);
    uct_release_component_list(comps);
    uct_worker_destroy(g_worker);
    ucs_async_context_destroy(async);
    printf("uct_connect_check %s: %s (%d checks, %d failed)\n", tl, g_failed ? "FAIL" : "PASS", g_checks, g_failed);
    return g_failed ? 1 : 0;
}
