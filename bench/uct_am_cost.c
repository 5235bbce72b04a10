/* Per-call CPU cost of the small-message path of UCT transports, one process, one thread, UCX's public API only
 * (what UCP calls): an empty iface progress, and active messages sent and delivered between two endpoints of one
 * interface (connect-to-ep transports: gdx_*) or an endpoint to its own interface (connect-to-iface: posix,
 * sysv). Send cost and delivery cost are timed apart: a batch of sends, then the progress calls that deliver it.
 * No second core and no cache-line transfer is involved: this is what each call costs the CPU, the part of a
 * two-process latency a transport controls (ucx_perftest measures the whole).
 *
 *   LD_PRELOAD=libuct_gdx.so.0 uct_am_cost TL[:DEV] [TL[:DEV] ...]     e.g. gdx_shm posix sysv gdx_aux
 * Prints, per transport, ns per call, the fastest of 9 repetitions (other load only adds time):
 *   progress_empty   uct_iface_progress with nothing to do: no endpoint, then idle endpoints (2 connected
 *                    to each other for connect-to-ep transports, 1 to its own interface for the others)
 *   short 16         uct_ep_am_short, 8-byte header + 8-byte payload (UCP's eager tag message of 8 bytes)
 *   bcopy N          uct_ep_am_bcopy of N bytes (the pack callback is a memcpy)
 *     stream send / recv   a batch of sends timed, then the progress calls that deliver it (handler included:
 *                          it reads the bytes), per message
 *     one-by-one           send one, progress until it is delivered, per message (a ping-pong's CPU work)
 * Rows a transport cannot run are left out. Exit 2 on a setup failure (what failed is printed). */
#include <uct/api/uct.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define AM_ID 7
#define REPS 9
#define BATCH 64 /* messages in flight before delivery: well below any ring's capacity */

typedef struct {
    uct_component_h comp;
    uct_md_h md;
    uct_iface_h iface;
    uct_iface_attr_t attr;
    uct_ep_h tx;       /* sends */
    uct_ep_h rx_ep;    /* the peer endpoint (connect-to-ep), or NULL */
    uct_worker_h worker;
    ucs_async_context_t *async;
} bench_t;

static volatile unsigned g_received;
static volatile uint64_t g_sink;
static uint8_t g_src[65536];
static size_t g_pack_len;

#define SETUP(call) do { ucs_status_t s_ = (call); if (s_ != UCS_OK) { \
    fprintf(stderr, "uct_am_cost: %s failed: %s\n", #call, ucs_status_string(s_)); exit(2); } } while (0)

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

/* The fastest repetition: on a shared machine other work only ever adds time to a CPU-bound loop. */
static double best(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return v[0];
}

static ucs_status_t am_handler(void *arg, void *data, size_t length, unsigned flags)
{
    uint64_t first = 0;
    (void)arg;
    (void)flags;
    memcpy(&first, data, length < 8 ? length : 8); /* the handler reads the message, as UCP's does */
    g_sink += first + length;
    g_received++;
    return UCS_OK;
}

static size_t pack_cb(void *dest, void *arg)
{
    (void)arg;
    memcpy(dest, g_src, g_pack_len);
    return g_pack_len;
}

static void open_bench(bench_t *b, const char *spec)
{
    char tl[64], dev[64] = "";
    const char *colon = strchr(spec, ':');
    uct_component_h *comps;
    unsigned ncomps;

    snprintf(tl, sizeof(tl), "%.*s", colon ? (int)(colon - spec) : (int)strlen(spec), spec);
    if (colon) snprintf(dev, sizeof(dev), "%s", colon + 1);
    memset(b, 0, sizeof(*b));
    SETUP(ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK, &b->async));
    SETUP(uct_worker_create(b->async, UCS_THREAD_MODE_SINGLE, &b->worker));
    SETUP(uct_query_components(&comps, &ncomps));
    for (unsigned c = 0; c < ncomps && b->iface == NULL; ++c) {
        uct_component_attr_t ca = {.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME |
                                                 UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT};
        SETUP(uct_component_query(comps[c], &ca));
        uct_md_resource_desc_t mds[ca.md_resource_count + 1];
        ca.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
        ca.md_resources = mds;
        SETUP(uct_component_query(comps[c], &ca));
        for (unsigned m = 0; m < ca.md_resource_count && b->iface == NULL; ++m) {
            uct_md_config_t *mc;
            uct_md_h md;
            uct_tl_resource_desc_t *rsc;
            unsigned nrsc;
            SETUP(uct_md_config_read(comps[c], NULL, NULL, &mc));
            if (uct_md_open(comps[c], mds[m].md_name, mc, &md) != UCS_OK) {
                uct_config_release(mc);
                continue;
            }
            uct_config_release(mc);
            SETUP(uct_md_query_tl_resources(md, &rsc, &nrsc));
            for (unsigned r = 0; r < nrsc; ++r) {
                if (strcmp(rsc[r].tl_name, tl) || (dev[0] && strcmp(rsc[r].dev_name, dev))) continue;
                uct_iface_config_t *ic;
                uct_iface_params_t ip = {.field_mask = UCT_IFACE_PARAM_FIELD_OPEN_MODE |
                                                       UCT_IFACE_PARAM_FIELD_DEVICE,
                                         .open_mode  = UCT_IFACE_OPEN_MODE_DEVICE};
                ip.mode.device.tl_name  = rsc[r].tl_name;
                ip.mode.device.dev_name = rsc[r].dev_name;
                SETUP(uct_md_iface_config_read(md, rsc[r].tl_name, NULL, NULL, &ic));
                SETUP(uct_iface_open(md, b->worker, &ip, ic, &b->iface));
                uct_config_release(ic);
                b->md   = md;
                b->comp = comps[c];
                break;
            }
            uct_release_tl_resource_list(rsc);
            if (b->iface == NULL) uct_md_close(md);
        }
    }
    if (b->iface == NULL) {
        fprintf(stderr, "uct_am_cost: no transport '%s' (is libuct_gdx.so.0 in LD_PRELOAD?)\n", spec);
        exit(2);
    }
    SETUP(uct_iface_query(b->iface, &b->attr));
    SETUP(uct_iface_set_am_handler(b->iface, AM_ID, am_handler, NULL, 0));
    uct_iface_progress_enable(b->iface, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
}

static void connect_bench(bench_t *b)
{
    uct_ep_params_t ep = {.field_mask = UCT_EP_PARAM_FIELD_IFACE, .iface = b->iface};
    uint8_t dev_addr[256], iface_addr[256], a_addr[256], b_addr[256];

    SETUP(uct_iface_get_device_address(b->iface, (uct_device_addr_t*)dev_addr));
    if (b->attr.cap.flags & UCT_IFACE_FLAG_CONNECT_TO_IFACE) {
        SETUP(uct_iface_get_address(b->iface, (uct_iface_addr_t*)iface_addr));
        ep.field_mask |= UCT_EP_PARAM_FIELD_DEV_ADDR | UCT_EP_PARAM_FIELD_IFACE_ADDR;
        ep.dev_addr   = (uct_device_addr_t*)dev_addr;
        ep.iface_addr = (uct_iface_addr_t*)iface_addr;
        SETUP(uct_ep_create(&ep, &b->tx));
        return;
    }
    SETUP(uct_ep_create(&ep, &b->tx));
    SETUP(uct_ep_create(&ep, &b->rx_ep));
    SETUP(uct_ep_get_address(b->tx, (uct_ep_addr_t*)a_addr));
    SETUP(uct_ep_get_address(b->rx_ep, (uct_ep_addr_t*)b_addr));
    SETUP(uct_ep_connect_to_ep(b->tx, (uct_device_addr_t*)dev_addr, (uct_ep_addr_t*)b_addr));
    SETUP(uct_ep_connect_to_ep(b->rx_ep, (uct_device_addr_t*)dev_addr, (uct_ep_addr_t*)a_addr));
}

static double progress_empty(bench_t *b)
{
    const int n = 200000;
    double v[REPS];
    for (int r = 0; r < REPS; ++r) {
        double t0 = now_ns();
        for (int i = 0; i < n; ++i) uct_iface_progress(b->iface);
        v[r] = (now_ns() - t0) / n;
    }
    return best(v, REPS);
}

/* One message of `len` bytes (short: 8-byte header + len - 8 payload), NO_RESOURCE retried after progress. */
static int send_one(bench_t *b, int is_short, size_t len)
{
    for (;;) {
        if (is_short) {
            ucs_status_t st = uct_ep_am_short(b->tx, AM_ID, 0x0123456789abcdefull, g_src, (unsigned)(len - 8));
            if (st == UCS_OK) return 1;
            if (st != UCS_ERR_NO_RESOURCE) return 0;
        } else {
            ssize_t n = uct_ep_am_bcopy(b->tx, AM_ID, pack_cb, NULL, 0);
            if (n >= 0) return 1;
            if (n != UCS_ERR_NO_RESOURCE) return 0;
        }
        uct_iface_progress(b->iface);
    }
}

/* ns per send and ns per delivery, timed apart (the fastest of REPS rounds of batches of BATCH messages, after a
 * warm-up round): a progress call delivers many messages, as in a stream. */
static int am_cost(bench_t *b, int is_short, size_t len, double *send_ns, double *recv_ns)
{
    const int batches = 2000, batch = BATCH;
    double vs[REPS], vr[REPS];

    g_pack_len = len;
    for (int r = -1; r < REPS; ++r) {
        double ts = 0, tr = 0;
        for (int k = 0; k < batches; ++k) {
            unsigned target = g_received + (unsigned)batch;
            double t0 = now_ns();
            for (int i = 0; i < batch; ++i) {
                if (!send_one(b, is_short, len)) return 0;
            }
            double t1 = now_ns();
            while (g_received < target) uct_iface_progress(b->iface);
            tr += now_ns() - t1;
            ts += t1 - t0;
        }
        if (r >= 0) {
            vs[r] = ts / ((double)batches * batch);
            vr[r] = tr / ((double)batches * batch);
        }
    }
    *send_ns = best(vs, REPS);
    *recv_ns = best(vr, REPS);
    return 1;
}

/* ns per message sent and delivered before the next is sent (one progress call delivering one message, as in a
 * ping-pong), timed over the whole loop: the fastest of REPS rounds. */
static int am_one(bench_t *b, int is_short, size_t len, double *ns)
{
    const int n = 100000;
    double v[REPS];

    g_pack_len = len;
    for (int r = -1; r < REPS; ++r) {
        double t0 = now_ns();
        for (int i = 0; i < n; ++i) {
            unsigned target = g_received + 1;
            if (!send_one(b, is_short, len)) return 0;
            while (g_received < target) uct_iface_progress(b->iface);
        }
        if (r >= 0) v[r] = (now_ns() - t0) / n;
    }
    *ns = best(v, REPS);
    return 1;
}

static void run(const char *spec)
{
    static const size_t bsizes[] = {8, 64, 1024, 8192};
    bench_t b;
    double s, r, o;

    open_bench(&b, spec);
    printf("%-10s progress_empty %7.1f ns", spec, progress_empty(&b));
    if (!(b.attr.cap.flags & (UCT_IFACE_FLAG_AM_SHORT | UCT_IFACE_FLAG_AM_BCOPY))) {
        printf("  (no active messages)\n");
        return;
    }
    connect_bench(&b);
    for (int i = 0; i < 1000000 && !send_one(&b, 0, 8); ++i) uct_iface_progress(b.iface); /* wire-up */
    while (g_received == 0) uct_iface_progress(b.iface);
    printf("  with idle endpoints %7.1f ns\n", progress_empty(&b));
    if ((b.attr.cap.flags & UCT_IFACE_FLAG_AM_SHORT) && am_cost(&b, 1, 16, &s, &r) && am_one(&b, 1, 16, &o)) {
        printf("%-10s short %5u  stream send %7.1f recv %6.1f  one-by-one %7.1f ns\n", spec, 16, s, r, o);
    }
    for (size_t i = 0; i < sizeof(bsizes) / sizeof(bsizes[0]); ++i) {
        if ((b.attr.cap.flags & UCT_IFACE_FLAG_AM_BCOPY) && bsizes[i] <= b.attr.cap.am.max_bcopy &&
            am_cost(&b, 0, bsizes[i], &s, &r) && am_one(&b, 0, bsizes[i], &o)) {
            printf("%-10s bcopy %5zu  stream send %7.1f recv %6.1f  one-by-one %7.1f ns\n", spec, bsizes[i], s, r, o);
        }
    }
    fflush(stdout);
    /* Interfaces stay open until exit: nothing here measures teardown. */
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: LD_PRELOAD=libuct_gdx.so.0 uct_am_cost TL[:DEV] ...\n");
        return 2;
    }
    memset(g_src, 0x5a, sizeof(g_src));
    printf("# uct_am_cost: ns per call, fastest of %d repetitions (one process, one thread)\n", REPS);
    for (int i = 1; i < argc; ++i) run(argv[i]);
    return 0;
}
