/* What the UCT-level check programs (uct_loopback_check.c, uct_destroy_race_check.c) share: the check and setup
 * macros, the alarm that bounds a run, and the worker and component a run starts from. Exit codes: 0 PASS, 1 a check
 * failed, 2 setup failed, 3 timed out. */
#ifndef GDX_TESTS_UCT_CHECK_H
#define GDX_TESTS_UCT_CHECK_H

#include <uct/api/uct.h>
#include <ucs/async/async_fwd.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int g_failed, g_checks;

#define CHECK(cond, ...) do { ++g_checks; if (!(cond)) { ++g_failed; \
    fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } \
    } while (0)
#define SETUP(call) do { ucs_status_t s_ = (call); if (s_ != UCS_OK) { \
    fprintf(stderr, "setup: %s failed: %s\n", #call, ucs_status_string(s_)); exit(2); } } while (0)

static char g_alarm_msg[160];

static void uct_check_on_alarm(int sig)
{
    (void)sig;
    if (write(2, g_alarm_msg, strlen(g_alarm_msg)) < 0) {
        _exit(3);
    }
    _exit(3);
}

/* Exits 3 with "<what>: timed out (alarm)" after timeout_s. */
static void uct_check_alarm(const char *what, unsigned timeout_s)
{
    snprintf(g_alarm_msg, sizeof(g_alarm_msg), "%s: timed out (alarm)\n", what);
    signal(SIGALRM, uct_check_on_alarm);
    alarm(timeout_s);
}

/* A worker on a thread-spinlock async context (UCP's kind), and the component named tl; exits 2 without it. The
 * component list is *comps_p, for uct_release_component_list. */
static uct_component_h uct_check_setup(const char *tl, ucs_async_context_t **async_p, uct_worker_h *worker_p,
                                       uct_component_h **comps_p)
{
    uct_component_h comp = NULL;
    unsigned ncomps;

    SETUP(ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK, async_p));
    SETUP(uct_worker_create(*async_p, UCS_THREAD_MODE_SINGLE, worker_p));
    SETUP(uct_query_components(comps_p, &ncomps));
    for (unsigned i = 0; i < ncomps; ++i) {
        uct_component_attr_t ca = {.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME};
        SETUP(uct_component_query((*comps_p)[i], &ca));
        if (strcmp(ca.name, tl) == 0) comp = (*comps_p)[i];
    }
    if (comp == NULL) {
        fprintf(stderr, "setup: no UCT component '%s' (is libuct_gdx.so.0 in LD_PRELOAD?)\n", tl);
        exit(2);
    }
    return comp;
}

/* Two endpoints of one interface connected to each other (connect-to-ep), addresses of up to 512 bytes. */
static UCS_F_MAYBE_UNUSED void uct_check_connect_pair(uct_iface_h iface, const void *dev_addr, uct_ep_h *a, uct_ep_h *b)
{
    uct_ep_params_t params = {.field_mask = UCT_EP_PARAM_FIELD_IFACE, .iface = iface};
    uint8_t a_addr[512], b_addr[512];
    uct_iface_attr_t ia;

    SETUP(uct_iface_query(iface, &ia));
    if (ia.ep_addr_len > sizeof(a_addr)) {
        fprintf(stderr, "setup: endpoint addresses of %zu bytes (at most %zu here)\n", ia.ep_addr_len,
                sizeof(a_addr));
        exit(2);
    }
    SETUP(uct_ep_create(&params, a));
    SETUP(uct_ep_create(&params, b));
    SETUP(uct_ep_get_address(*a, (uct_ep_addr_t*)a_addr));
    SETUP(uct_ep_get_address(*b, (uct_ep_addr_t*)b_addr));
    SETUP(uct_ep_connect_to_ep(*a, (const uct_device_addr_t*)dev_addr, (const uct_ep_addr_t*)b_addr));
    SETUP(uct_ep_connect_to_ep(*b, (const uct_device_addr_t*)dev_addr, (const uct_ep_addr_t*)a_addr));
}

#endif /* GDX_TESTS_UCT_CHECK_H */
