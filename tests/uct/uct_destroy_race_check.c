/* Endpoints destroyed on UCX's async thread while the application's thread delivers their messages: what UCP does
 * when wire-up or disconnect messages arrive on a CB_ASYNC transport. The module delivers what an idle interface's
 * probe announces without the async lock (GDX_UCT_LOCKFREE, src/uct/bridge_idle.cpp); an endpoint's destruction
 * must wait for such a delivery under way, or the delivery reads a freed endpoint (ASan reports it in CI).
 *
 * One interface of the transport. The main thread ping-pongs on a permanent pair of endpoints (every message
 * checked, none lost) and progresses, and every TICK_EVERY pings wakes the async thread (an eventfd it watches).
 * There, under the async lock, each tick sends a burst from the current victim pair's first endpoint to its second
 * (the idle look sees the second's ring word change and delivers), then at once destroys both and creates and
 * connects a new pair. The victims' messages are checked as they arrive; some are lost with their endpoint, by
 * design. A tick the async thread finds the lock held for runs later on the main thread (UCS's missed events).
 * With GDX_UCT_LOCKFREE=no every delivery takes the lock, which a tick holds from its burst to the destruction, so
 * no victim message may arrive at all: the check that the setting is obeyed.
 *
 *   LD_PRELOAD=libuct_gdx.so.0 uct_destroy_race_check [gdx_shm] [seconds] [timeout_s]
 * Exit 0: PASS; 1: a check failed; 2: setup failed; 3: timed out. */
#include "uct_check.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define AM_ID     7
#define BURST     16
#define TICK_EVERY 20
#define TAG_PING  0x5049u
#define TAG_VICT  0x5643u

static uct_worker_h g_worker;
static uct_iface_h g_iface;
static uint8_t *g_dev_addr;

/* A message: tag (16 bits) | sequence (48 bits) in the header word, then 24 payload bytes derived from it. */
static void payload_of(uint64_t hdr, uint8_t *p)
{
    uint64_t x = hdr * 0x9e3779b97f4a7c15ull + 1;
    for (int i = 0; i < 24; ++i) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; p[i] = (uint8_t)x; }
}

static struct {
    uint64_t pings;       /* main thread only (handler and loop) */
    uint64_t victims;     /* victim messages delivered */
    uint64_t bad;
} g_rx;

static ucs_status_t am_handler(void *arg, void *data, size_t length, unsigned flags)
{
    uint8_t want[24];
    uint64_t hdr;
    (void)arg; (void)flags;
    if (length != 8 + sizeof(want)) {
        ++g_rx.bad;
        return UCS_OK;
    }
    memcpy(&hdr, data, sizeof(hdr));
    payload_of(hdr, want);
    if (memcmp((uint8_t*)data + 8, want, sizeof(want)) != 0) {
        ++g_rx.bad;
    } else if ((hdr >> 48) == TAG_PING) {
        ++g_rx.pings;
    } else if ((hdr >> 48) == TAG_VICT) {
        ++g_rx.victims;
    } else {
        ++g_rx.bad;
    }
    return UCS_OK;
}

typedef struct { uct_ep_h a, b; } pair_t;

static void pair_create(pair_t *p)
{
    uct_check_connect_pair(g_iface, g_dev_addr, &p->a, &p->b);
}

static struct {
    pair_t victim;
    uint64_t seq, sent, ticks;
} g_async; /* the async thread's (the timer callback runs under the async lock) */

static int g_tick_fd;

static void tick(int id, ucs_event_set_types_t events, void *arg)
{
    uint8_t p[24];
    uint64_t v;
    (void)id; (void)events; (void)arg;
    if (read(g_tick_fd, &v, sizeof(v)) != sizeof(v)) {
        return; /* a spurious wakeup: nothing asked */
    }
    for (int i = 0; i < BURST; ++i) {
        uint64_t hdr = ((uint64_t)TAG_VICT << 48) | g_async.seq++;
        payload_of(hdr, p);
        /* NO_RESOURCE while the new pair still connects: the burst is simply smaller */
        if (uct_ep_am_short(g_async.victim.a, AM_ID, hdr, p, sizeof(p)) == UCS_OK) {
            ++g_async.sent;
        }
    }
    /* then, after a varying short spin, destroy them: the main thread may be delivering the burst from
     * victim.b's ring right now (~100 ns a message) */
    for (volatile unsigned spin = (unsigned)(g_async.ticks * 2654435761u) % 1024u; spin > 0; --spin) {
    }
    uct_ep_destroy(g_async.victim.b); /* the receiver first: the one whose ring the delivery reads */
    uct_ep_destroy(g_async.victim.a);
    pair_create(&g_async.victim);
    ++g_async.ticks;
}

int main(int argc, char **argv)
{
    const char *tl   = (argc > 1) ? argv[1] : "gdx_shm";
    double seconds   = (argc > 2) ? atof(argv[2]) : 2.0;
    unsigned timeout = (argc > 3) ? (unsigned)atoi(argv[3]) : 120;
    uct_component_h *comps, comp;
    ucs_async_context_t *async;

    uct_check_alarm("uct_destroy_race_check", timeout);
    comp = uct_check_setup(tl, &async, &g_worker, &comps);
    uct_md_config_t *md_cfg;
    uct_md_h md;
    SETUP(uct_md_config_read(comp, NULL, NULL, &md_cfg));
    SETUP(uct_md_open(comp, tl, md_cfg, &md));
    uct_config_release(md_cfg);
    uct_tl_resource_desc_t *rsc;
    unsigned nrsc;
    SETUP(uct_md_query_tl_resources(md, &rsc, &nrsc));
    if (nrsc == 0) {
        fprintf(stderr, "setup: %s lists no device\n", tl);
        return 2;
    }
    uct_iface_config_t *if_cfg;
    SETUP(uct_md_iface_config_read(md, rsc[0].tl_name, NULL, NULL, &if_cfg));
    uct_iface_params_t ip = {.field_mask = UCT_IFACE_PARAM_FIELD_OPEN_MODE | UCT_IFACE_PARAM_FIELD_DEVICE,
                             .open_mode  = UCT_IFACE_OPEN_MODE_DEVICE};
    ip.mode.device.tl_name  = rsc[0].tl_name;
    ip.mode.device.dev_name = rsc[0].dev_name;
    SETUP(uct_iface_open(md, g_worker, &ip, if_cfg, &g_iface));
    uct_config_release(if_cfg);
    uct_iface_attr_t ia;
    SETUP(uct_iface_query(g_iface, &ia));
    if (!(ia.cap.flags & UCT_IFACE_FLAG_AM_SHORT)) {
        fprintf(stderr, "setup: %s has no am_short\n", tl);
        return 2;
    }
    g_dev_addr    = malloc(ia.device_addr_len + 1);
    SETUP(uct_iface_get_device_address(g_iface, (uct_device_addr_t*)g_dev_addr));
    SETUP(uct_iface_set_am_handler(g_iface, AM_ID, am_handler, NULL, 0));
    uct_iface_progress_enable(g_iface, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);

    pair_t ping;
    pair_create(&ping);
    pair_create(&g_async.victim);
    g_tick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (g_tick_fd < 0) {
        perror("setup: eventfd");
        return 2;
    }
    SETUP(ucs_async_set_event_handler(UCS_ASYNC_MODE_THREAD_SPINLOCK, g_tick_fd, UCS_EVENT_SET_EVREAD, tick, NULL,
                                      async));

    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uint64_t sent = 0;
    uint8_t p[24];
    do {
        uint64_t hdr = ((uint64_t)TAG_PING << 48) | sent;
        ucs_status_t st;
        payload_of(hdr, p);
        while ((st = uct_ep_am_short(ping.a, AM_ID, hdr, p, sizeof(p))) == UCS_ERR_NO_RESOURCE) {
            uct_worker_progress(g_worker);
        }
        CHECK(st == UCS_OK, "am_short on the permanent pair: %s", ucs_status_string(st));
        if (st != UCS_OK) break;
        ++sent;
        if (((sent % TICK_EVERY) == 0) && (write(g_tick_fd, &(uint64_t){1}, sizeof(uint64_t)) != sizeof(uint64_t))) {
            CHECK(0, "eventfd write: %m");
        }
        while (g_rx.pings < sent) {
            uct_worker_progress(g_worker);
        }
        /* Idle calls: a progress that finds nothing fills the interface's probe, and the calls after it are the
         * idle looks (and lock-free deliveries) under test. A loop that always finds a message never gets there. */
        for (int i = 0; i < 8; ++i) {
            uct_worker_progress(g_worker);
        }
        __ucs_async_poll_missed(async); /* ticks that found the lock held */
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((double)(t.tv_sec - t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - t0.tv_nsec) < seconds);

    SETUP(ucs_async_remove_handler(g_tick_fd, 1));
    __ucs_async_poll_missed(async);
    for (int i = 0; i < 1000; ++i) {
        uct_worker_progress(g_worker); /* what the last victim burst left */
    }
    printf("%s: %llu pings, %llu victim pairs destroyed, victim messages %llu sent / %llu delivered, %llu bad\n", tl,
           (unsigned long long)sent, (unsigned long long)g_async.ticks, (unsigned long long)g_async.sent,
           (unsigned long long)g_rx.victims, (unsigned long long)g_rx.bad);
    CHECK(g_rx.pings == sent, "pings delivered %llu of %llu", (unsigned long long)g_rx.pings,
          (unsigned long long)sent);
    CHECK(g_rx.bad == 0, "%llu messages arrived altered", (unsigned long long)g_rx.bad);
    CHECK(g_rx.victims <= g_async.sent, "more victim messages delivered than sent");
    CHECK(g_async.ticks >= 10, "only %llu victim pairs were destroyed: the race was hardly run",
          (unsigned long long)g_async.ticks);
    if ((getenv("GDX_FAULT_UCT_MEMBARRIER") != NULL) && (strcmp(getenv("GDX_FAULT_UCT_MEMBARRIER"), "yes") == 0)) {
        /* The first destruction finds the barrier refused: it waits for a delivery under way by other means, and
         * every later delivery takes the lock; nothing to expect of the victims' count either way. */
    } else if ((getenv("GDX_UCT_LOCKFREE") != NULL) && (strcmp(getenv("GDX_UCT_LOCKFREE"), "no") == 0)) {
        /* Every delivery takes the async lock, which the tick holds from its burst to the destruction. */
        CHECK(g_rx.victims == 0, "%llu victim messages delivered with GDX_UCT_LOCKFREE=no: a delivery ran while "
              "the async thread held the lock", (unsigned long long)g_rx.victims);
    } else {
        CHECK(g_rx.victims > 0, "no victim message was delivered: the race was not run");
    }

    uct_ep_destroy(g_async.victim.a);
    uct_ep_destroy(g_async.victim.b);
    uct_ep_destroy(ping.a);
    uct_ep_destroy(ping.b);
    uct_iface_close(g_iface);
    uct_release_tl_resource_list(rsc);
    uct_md_close(md);
    uct_release_component_list(comps);
    uct_worker_destroy(g_worker);
    ucs_async_context_destroy(async);
    free(g_dev_addr);
    close(g_tick_fd);
    printf("%s: %d checks, %d failed\n", tl, g_checks, g_failed);
    return g_failed ? 1 : 0;
}
