/* UCP over gdx when the peer dies or the input is bad (issue 18, d3): nothing hangs, and the failure reaches the
 * UCP request as an error status. Two processes under tools/gdx-run; the server is the victim, the client the
 * survivor, which decides the outcome:
 *
 *   victim:    gdx-run ucp_fail_check -s SCENARIO [-S SIZE] [-p PORT] [-t SECONDS]
 *   survivor:  gdx-run ucp_fail_check -s SCENARIO [-S SIZE] [-p PORT] [-t SECONDS] VICTIM_HOST
 *
 * Scenarios (host memory; SIZE default 256 MiB):
 *   tag-kill, tag-stop  the victim sends a SIZE-byte tag message (rendezvous: the survivor gets it through the
 *                       staging engine); once the survivor has received the request and progressed its get for 20 ms
 *                       (staged, SIZE takes far longer), the victim is killed
 *                       (SIGKILL) or stopped (SIGSTOP; the survivor kills it at the end). The survivor's receive
 *                       must complete with an error (the transport's, or the engine's silence clock:
 *                       GDX_PEER_TIMEOUT), and its endpoint must close;
 *   get-kill, get-stop  the same with ucp_get_nbx of the victim's SIZE-byte registration (UCX >= 1.16: 1.13 emulates
 *                       RMA over active messages, which wait for the peer's answer for ever);
 *   wireup-kill,        the peer dies before UCP's wire-up completed, while the survivor's requests wait in UCP for it
 *   wireup-stop         (held for wire-up, never seen by the transport): the victim creates its endpoint, which sends
 *                       UCP's wire-up request, and stops itself without ever progressing (UCP sends its wire-up
 *                       acknowledgement from progress, so the survivor's wire-up never completes); the survivor
 *                       creates its endpoint (which answers that request and connects its gdx endpoints) and issues
 *                       a SIZE-byte tag send (rendezvous), and with -g or -e a ucp_get_nbx. wireup-kill then kills
 *                       the victim; wireup-stop first progresses for two GDX_CONN_TIMEOUTs, during which the
 *                       requests must stay held (a stopped peer is busy, not gone), then kills it. Each request must
 *                       then fail (the module reports the
 *                       broken gdx endpoint to UCP, which fails what waits on it), with no wire-up barrier
 *                       (ucp_pair_wireup) before. Run with gdx_aux as the only auxiliary transport
 *                       (test_ucp_fail.sh), whose wire-up messages UCP handles in its async thread. No get without
 *                       -g: UCP 1.16-1.18 abort the process ("abort is not implemented for protocol get/zcopy") when
 *                       an endpoint in error mode NONE fails under a pending get, whatever the transport; in mode
 *                       PEER they choose protocols that can be aborted;
 *   idle-kill           (-e only) the victim is killed while nothing is outstanding: the survivor's endpoint error
 *                       handler must be called (the transport sees the death; UCP's keepalive asks ep_check);
 *   badkey              the victim's packed rkey with gdx's key inside corrupted: ucp_ep_rkey_unpack must refuse it;
 *                       then (-r, UCX >= 1.16, staged: GDX_FAULT_P2P_EVERY=1) a well-formed key naming a region the
 *                       victim never had: the get fails (the victim refuses to serve it);
 * But for wireup-*, both sides flush their endpoint before anything else (ucp_pair_wireup): what dies mid-transfer
 * is a transfer that gdx carries.
 * No "get after ucp_mem_unmap" scenario: from 1.16 on, ucp_mem_map of user memory goes through UCP's registration
 * cache and ucp_mem_unmap returns the region to that cache (ucp_mm.c), so the UCT registration, and with it gdx's
 * key, stays valid until UCP evicts it; that a key stops working at uct_md_mem_dereg is checked at the UCT level
 * (uct_loopback_check: "get_zcopy from deregistered memory" must fail).
 * -e: both endpoints in error mode PEER with an error handler, which must then be called for the dead peer (once);
 * the module advertises peer-failure handling, so UCP puts such endpoints on gdx (src/uct/GAPS.md, 16).
 * The survivor prints "ucp_fail_check: PASS: <what happened>" and exits 0 when the outcome is the expected one,
 * 1 otherwise; 2 setup error, 3 timeout (alarm: something hung). The victim of a kill/stop scenario dies by SIGKILL. */
#define PROG "ucp_fail_check"
#include "ucp_pair.h"

#include <dirent.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <time.h>

enum { TAG = 7 };

static ucp_pair_t g;
static size_t g_size = 256u << 20;
static int g_rma;
static int g_wireup_get; /* -g: wireup-* also issue a get (see the scenarios above) */

static void on_alarm(int sig)
{
    static const char msg[] = "ucp_fail_check: timed out (alarm): something hung while ";
    const char *phase = ucp_pair_phase;
    ssize_t rc = write(2, msg, sizeof(msg) - 1);
    rc = write(2, phase, strlen(phase));
    rc = write(2, "\n", 1);
    (void)sig;
    (void)rc;
    _exit(3);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Error mode PEER (-e): UCP must call the endpoint's error handler for the dead peer (it may come after the
 * request's own failure: the module reports broken endpoints from progress). 0 when it was called, 1 otherwise;
 * without -e, 0. */
static int expect_err_handler(void)
{
    if (!g.err_mode_peer) {
        return 0;
    }
    ucp_pair_phase = "waiting for the endpoint's error handler (error mode PEER)";
    while (g.ep_errors == 0) {
        ucp_worker_progress(g.worker);
    }
    printf("ucp_fail_check: %s: the endpoint's error handler was called %d time(s), last with '%s'\n",
           g.ep_errors == 1 ? "PASS" : "FAIL", g.ep_errors, ucs_status_string(g.ep_error));
    return g.ep_errors != 1;
}

static void *alloc_pattern(size_t len, uint8_t seed)
{
    uint8_t *p = malloc(len);
    if (p == NULL) {
        DIE(2, "out of memory for %zu bytes", len);
    }
    for (size_t i = 0; i < len; ++i) {
        p[i] = (uint8_t)(i * 31u + seed);
    }
    return p;
}

/* Registers buf and sends {address, packed rkey} to the peer. */
static ucp_mem_h expose(void *buf, size_t len)
{
    ucp_mem_map_params_t mp = {.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH,
                               .address = buf, .length = len};
    ucp_mem_h memh;
    void *rkey;
    size_t rkey_len;
    uint64_t hdr[2];
    UCS(ucp_mem_map(g.ctx, &mp, &memh));
    UCS(ucp_rkey_pack(g.ctx, memh, &rkey, &rkey_len));
    hdr[0] = (uint64_t)(uintptr_t)buf;
    hdr[1] = rkey_len;
    xfer(g.fd, hdr, sizeof(hdr), 1);
    xfer(g.fd, rkey, rkey_len, 1);
    ucp_rkey_buffer_release(rkey);
    return memh;
}

/* The victim: serves the transfer (progress) until the survivor says how to die, or, without one, that it is done. */
static int victim(const char *scenario)
{
    uint32_t pid = (uint32_t)getpid();
    void *buf = alloc_pattern(g_size, 1), *req = NULL;
    ucp_mem_h memh = NULL;
    char cmd = 0;
    xfer(g.fd, &pid, sizeof(pid), 1);
    if (strncmp(scenario, "tag-", 4) == 0) {
        ucp_request_param_t p = {0};
        req = ucp_tag_send_nbx(g.ep, buf, g_size, TAG, &p);
    } else {
        memh = expose(buf, g_size);
    }
    ucp_pair_phase = "serving the transfer";
    ucp_pair_progress_until_told(&g); /* what to do (kill, stop) or that it is over (done) */
    xfer(g.fd, &cmd, 1, 0);
    if (cmd == 'k') {
        raise(SIGKILL); /* mid-transfer, as a crash would */
    } else if (cmd == 's') {
        raise(SIGSTOP); /* the survivor kills it once it has given up on it */
    }
    if (req != NULL && !UCS_PTR_IS_ERR(req)) {
        ucp_request_cancel(g.worker, req);
        ucp_pair_wait(&g, req);
    }
    if (memh != NULL) {
        UCS(ucp_mem_unmap(g.ctx, memh));
    }
    ucp_pair_close(&g, 0);
    free(buf);
    return 0;
}

/* Progress `req` for a while (the transfer is under way), tell the victim how to die, then wait for the request:
 * it must fail. */
static int survive(void *req, char how, uint32_t pid, const char *what)
{
    ucs_status_t st;
    double until = now_s() + 0.02; /* a fraction of what SIZE takes staged: the transfer is still under way */
    ucp_pair_phase = "progressing the request before the victim dies";
    while (now_s() < until && ucp_request_check_status(req) == UCS_INPROGRESS) {
        ucp_worker_progress(g.worker);
    }
    if (ucp_request_check_status(req) != UCS_INPROGRESS) {
        printf("ucp_fail_check: FAIL: the %s finished before the victim died (%s): nothing was tested\n", what,
               ucs_status_string(ucp_request_check_status(req)));
        kill((pid_t)pid, SIGKILL);
        return 1;
    }
    xfer(g.fd, &how, 1, 1);
    ucp_pair_phase = how == 'k' ? "waiting for the request after the victim was killed"
                                : "waiting for the request after the victim was stopped";
    st = ucp_pair_wait(&g, req);
    if (how == 's') {
        kill((pid_t)pid, SIGKILL); /* it stayed stopped all along: the failure came from the silence clock */
    }
    if (st == UCS_OK) {
        printf("ucp_fail_check: FAIL: the %s succeeded although the victim was %s mid-transfer\n", what,
               how == 'k' ? "killed" : "stopped");
        return 1;
    }
    printf("ucp_fail_check: PASS: the %s failed with '%s' after the victim was %s mid-transfer\n", what,
           ucs_status_string(st), how == 'k' ? "killed" : "stopped");
    return expect_err_handler();
}

/* The victim's address and packed rkey (the survivor's half of the RMA scenarios). */
static size_t recv_key(uint64_t *addr, uint8_t *key, size_t max)
{
    uint64_t hdr[2];
    xfer(g.fd, hdr, sizeof(hdr), 0);
    if (hdr[1] > max) {
        DIE(2, "the victim's rkey of %llu bytes is too large", (unsigned long long)hdr[1]);
    }
    xfer(g.fd, key, hdr[1], 0);
    *addr = hdr[0];
    return (size_t)hdr[1];
}

/* Unpacks a copy of the key with gdx's engine key inside ("GDXK", version 2, flags, bytes used, region id, ...)
 * corrupted: how=1 breaks its length field, how=2 leaves it well formed but naming another region. */
static ucs_status_t unpack_corrupted(const uint8_t *key, size_t len, int how, ucp_rkey_h *rkey)
{
    uint8_t buf[4096];
    int found = 0;
    memcpy(buf, key, len);
    for (size_t i = 0; i + 16 <= len; ++i) {
        if (memcmp(buf + i, "GDXK\x02", 5) == 0) {
            found = 1;
            if (how == 1) {
                buf[i + 6] = 0xff;
                buf[i + 7] = 0xff;
            } else {
                buf[i + 8] ^= 0x5a;
            }
        }
    }
    if (!found) {
        DIE(2, "no gdx engine key inside the victim's rkey (is the engine on?)");
    }
    *rkey = NULL;
    return ucp_ep_rkey_unpack(g.ep, buf, rkey);
}

/* A get of the whole registration, flushed; its status. */
static ucs_status_t get_all(void *buf, uint64_t addr, ucp_rkey_h rkey)
{
    ucp_request_param_t p = {0};
    ucs_status_t st = ucp_pair_wait(&g, ucp_get_nbx(g.ep, buf, g_size, addr, rkey, &p));
    return st == UCS_OK ? ucp_pair_wait(&g, ucp_ep_flush_nbx(g.ep, &p)) : st;
}

static int expect_error(ucs_status_t st, const char *what)
{
    printf("ucp_fail_check: %s: %s returned '%s'\n", st == UCS_OK ? "FAIL" : "PASS", what, ucs_status_string(st));
    return st == UCS_OK;
}

static int survivor_keys(void *buf)
{
    uint8_t key[4096];
    uint64_t addr;
    ucp_rkey_h rkey;
    int rc;
    size_t len = recv_key(&addr, key, sizeof(key));
    rc = expect_error(unpack_corrupted(key, len, 1, &rkey), "ucp_ep_rkey_unpack of a corrupted gdx key");
    if (rkey != NULL) {
        ucp_rkey_destroy(rkey);
    }
    if (g_rma) {
        UCS(unpack_corrupted(key, len, 2, &rkey));
        rc |= expect_error(get_all(buf, addr, rkey), "a get through a key naming a region the victim never had");
        ucp_rkey_destroy(rkey);
    }
    return rc;
}

/* idle-kill: the victim dies while nothing is outstanding; error mode PEER must still tell (expect_err_handler). */
static int survivor_idle(uint32_t pid)
{
    uint8_t key[4096];
    uint64_t addr;
    char how = 'k';
    int rc;
    recv_key(&addr, key, sizeof(key));
    xfer(g.fd, &how, 1, 1);
    rc = expect_err_handler();
    kill((pid_t)pid, SIGKILL); /* it killed itself; in case it did not */
    ucp_pair_close(&g, 0);
    return rc;
}

static int survivor_rma(const char *scenario, uint32_t pid)
{
    void *buf = malloc(g_size);
    uint64_t addr;
    uint8_t key[4096];
    ucp_rkey_h rkey;
    ucp_request_param_t p = {0};
    char done = 'd';
    int rc;
    if (buf == NULL) {
        DIE(2, "out of memory");
    }
    if (strcmp(scenario, "badkey") == 0) {
        rc = survivor_keys(buf);
        xfer(g.fd, &done, 1, 1);
        ucp_pair_close(&g, 0);
        free(buf);
        return rc;
    }
    recv_key(&addr, key, sizeof(key));
    UCS(ucp_ep_rkey_unpack(g.ep, key, &rkey));
    void *req = ucp_get_nbx(g.ep, buf, g_size, addr, rkey, &p);
    if (UCS_PTR_IS_ERR(req) || req == NULL) {
        DIE(2, "ucp_get_nbx: %s", req == NULL ? "done at once" : ucs_status_string(UCS_PTR_STATUS(req)));
    }
    rc = survive(req, scenario[4] == 'k' ? 'k' : 's', pid, "ucp_get_nbx");
    ucp_rkey_destroy(rkey);
    ucp_pair_close(&g, 0);
    free(buf);
    return rc;
}

/* wireup-*: the victim's half. Its registration's key goes to the survivor, then its endpoint's wire-up request (from
 * ucp_ep_create), then it stops itself, never having progressed: its wire-up acknowledgement, which UCP sends from
 * progress, never leaves. The survivor kills it (wireup-kill, or at its end). */
static void __attribute__((noreturn)) victim_wireup(void)
{
    uint32_t pid = (uint32_t)getpid();
    void *buf = alloc_pattern(g_size, 1);
    char created = 'c';
    xfer(g.fd, &pid, sizeof(pid), 1);
    expose(buf, g_size);
    ucp_pair_connect(&g);
    xfer(g.fd, &created, 1, 1);
    raise(SIGSTOP);
    for (;;) {
        pause(); /* continued by someone: still never progress (only SIGKILL ends it) */
    }
}

/* Until process pid is stopped (state T in /proc/pid/stat) or gone. */
static void wait_stopped(uint32_t pid)
{
    char path[64], stat[512];
    snprintf(path, sizeof(path), "/proc/%u/stat", pid);
    for (;;) {
        FILE *f = fopen(path, "r");
        if (f == NULL) {
            return; /* gone */
        }
        size_t n = fread(stat, 1, sizeof(stat) - 1, f);
        fclose(f);
        stat[n] = '\0';
        const char *end = strrchr(stat, ')'); /* "pid (comm) S ...": comm may hold spaces and parentheses */
        if (end != NULL && (end[2] == 'T' || end[2] == 't')) {
            return;
        }
        usleep(1000);
    }
}

/* This process's gdx_aux socket (bound to "@gdx-aux-<pid>-<n>" in the abstract namespace), found through /proc:
 * /proc/net/unix names its inode, /proc/self/fd the descriptor holding that inode. */
static int aux_socket_fd(void)
{
    char line[512], path[256], want[64], link[64], fdpath[300];
    unsigned long inode = 0, found = 0;
    struct dirent *e;
    FILE *f = fopen("/proc/net/unix", "r");
    DIR *d;
    if (f == NULL) {
        DIE(2, "/proc/net/unix: %s", strerror(errno));
    }
    snprintf(want, sizeof(want), "@gdx-aux-%d-", (int)getpid());
    while (fgets(line, sizeof(line), f) != NULL) {
        /* Num RefCount Protocol Flags Type St Inode Path */
        if (sscanf(line, "%*s %*s %*s %*s %*s %*s %lu %255s", &inode, path) == 2 &&
            strncmp(path, want, strlen(want)) == 0) {
            found = inode;
        }
    }
    fclose(f);
    if (found == 0 || (d = opendir("/proc/self/fd")) == NULL) {
        DIE(2, "no gdx_aux socket of this process (%s): the wireup-* scenarios need gdx_aux as auxiliary transport",
            want);
    }
    while ((e = readdir(d)) != NULL) {
        snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(fdpath, link, sizeof(link) - 1);
        if (n > 0) {
            link[n] = '\0';
            if (sscanf(link, "socket:[%lu]", &inode) == 1 && inode == found) {
                int fd = atoi(e->d_name);
                closedir(d);
                return fd;
            }
        }
    }
    closedir(d);
    DIE(2, "the gdx_aux socket (inode %lu) is not among this process's descriptors", found);
}

/* Until the victim's wire-up request, which waits in our gdx_aux socket since the victim said it created its
 * endpoint, has been taken in: the worker's async thread reads and handles it with the worker's async context
 * blocked, which our ucp_ep_create blocks too, so the endpoint we create afterwards is the one that request made
 * (UCP matches it). Created before, ours would send a request of its own, and UCP lets one of two simultaneous
 * requests be ignored, by worker uuid: ours waits in the stopped victim's socket for ever, and nothing of ours
 * gets connected that could break. Progress runs a handler the async thread missed (it found the context busy). */
static void wait_request_taken(void)
{
    int fd = aux_socket_fd(), queued = 1;
    for (;;) {
        if (ioctl(fd, FIONREAD, &queued) != 0) {
            DIE(2, "ioctl(FIONREAD) on the gdx_aux socket: %s", strerror(errno));
        }
        if (queued == 0) {
            return;
        }
        ucp_worker_progress(g.worker);
        usleep(1000);
    }
}

/* A request issued before wire-up completed: it must not be done at once (UCP holds it for wire-up). */
static void *held(void *req, const char *what, uint32_t pid)
{
    if (req == NULL || UCS_PTR_IS_ERR(req)) {
        printf("ucp_fail_check: FAIL: %s before wire-up completed returned at once (%s): nothing was tested\n", what,
               req == NULL ? "done" : ucs_status_string(UCS_PTR_STATUS(req)));
        kill((pid_t)pid, SIGKILL);
        exit(1);
    }
    return req;
}

/* Waits for a request held for wire-up: 0 when it failed (as it must), 1 when it succeeded. */
static int expect_failed(void *req, const char *what, char how)
{
    ucs_status_t st = ucp_pair_wait(&g, req);
    if (st == UCS_OK) {
        printf("ucp_fail_check: FAIL: the %s succeeded although the victim never completed wire-up\n", what);
        return 1;
    }
    printf("ucp_fail_check: PASS: the %s held for wire-up failed with '%s' after the victim was %s\n", what,
           ucs_status_string(st), how == 'k' ? "killed" : "stopped");
    return 0;
}

/* GDX_CONN_TIMEOUT in seconds ("5s", "500ms"; 10 s, gdx's default, when unset or unreadable). */
static double conn_timeout_s(void)
{
    const char *v = getenv("GDX_CONN_TIMEOUT");
    char *end = NULL;
    double t = v != NULL ? strtod(v, &end) : 0;
    if (v == NULL || end == v || t <= 0) {
        return 10;
    }
    return strcmp(end, "ms") == 0 ? t / 1e3 : strcmp(end, "us") == 0 ? t / 1e6 : t;
}

/* wireup-stop: a victim that stays stopped is busy, not gone: for two GDX_CONN_TIMEOUTs the requests held for its
 * wire-up must stay held (gdx waits for a live peer's connection). 0 when they did. */
static int expect_held(void *send_req, void *get_req)
{
    const double until = conn_timeout_s() * 2;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        ucp_worker_progress(g.worker);
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9 < until);
    if (ucp_request_check_status(send_req) != UCS_INPROGRESS ||
        (get_req != NULL && ucp_request_check_status(get_req) != UCS_INPROGRESS)) {
        printf("ucp_fail_check: FAIL: a request held for the wire-up of a stopped (busy) victim ended within "
               "%.1f s: '%s'\n", until, ucs_status_string(ucp_request_check_status(send_req)));
        return 1;
    }
    printf("ucp_fail_check: PASS: the requests stayed held for %.1f s (two GDX_CONN_TIMEOUTs) while the victim "
           "was stopped\n", until);
    return 0;
}

/* wireup-*: the survivor's half (see the scenarios above). */
static int survivor_wireup(char how, uint32_t pid)
{
    void *sbuf = malloc(g_size), *gbuf = malloc(g_size), *send_req, *get_req = NULL;
    const int with_get = g_wireup_get || g.err_mode_peer;
    uint8_t key[4096];
    uint64_t addr;
    ucp_rkey_h rkey = NULL;
    ucp_request_param_t p = {0};
    char created;
    int rc;
    if (sbuf == NULL || gbuf == NULL) {
        DIE(2, "out of memory");
    }
    memset(sbuf, 0x5a, g_size);
    recv_key(&addr, key, sizeof(key));
    xfer(g.fd, &created, 1, 0);
    ucp_pair_phase = "waiting for the victim to stop itself";
    wait_stopped(pid);
    ucp_pair_phase = "waiting for the victim's wire-up request to be handled";
    wait_request_taken();
    /* Handling it connected our gdx endpoints to the victim's and answered it; the answer waits in its socket for
     * ever, so does the acknowledgement that would complete our side's wire-up: the requests wait in UCP. */
    ucp_pair_connect(&g);
    send_req = held(ucp_tag_send_nbx(g.ep, sbuf, g_size, TAG, &p), "rendezvous tag send", pid);
    if (with_get) {
        UCS(ucp_ep_rkey_unpack(g.ep, key, &rkey));
        get_req = held(ucp_get_nbx(g.ep, gbuf, g_size, addr, rkey, &p), "ucp_get_nbx", pid);
    }
    rc = 0;
    if (how == 's') {
        ucp_pair_phase = "progressing while the victim stays stopped before wire-up completed";
        rc = expect_held(send_req, get_req);
    }
    /* our answer is in its socket already: no send of ours fails (UCP's own path) */
    kill((pid_t)pid, SIGKILL);
    ucp_pair_phase = "waiting for the requests after the victim was killed before wire-up completed";
    rc |= expect_failed(send_req, "rendezvous tag send", 'k');
    if (get_req != NULL) {
        rc |= expect_failed(get_req, "get", 'k');
    }
    kill((pid_t)pid, SIGKILL);
    if (rc == 0) {
        rc = expect_err_handler();
    }
    if (rkey != NULL) {
        ucp_rkey_destroy(rkey);
    }
    ucp_pair_close(&g, 0);
    free(sbuf);
    free(gbuf);
    return rc;
}

int main(int argc, char **argv)
{
    const char *scenario = NULL, *victim_host;
    int port = 13338, timeout = 120, opt, rc;
    void *buf = NULL;
    uint32_t pid;

    while ((opt = getopt(argc, argv, "s:S:p:t:reg")) != -1) {
        switch (opt) {
        case 's': scenario = optarg; break;
        case 'S': g_size = strtoull(optarg, NULL, 0); break;
        case 'p': port = atoi(optarg); break;
        case 't': timeout = atoi(optarg); break;
        case 'r': g_rma = 1; break;
        case 'e': g.err_mode_peer = 1; break;
        case 'g': g_wireup_get = 1; break;
        default:
            DIE(2, "usage: ucp_fail_check -s SCENARIO [-S size] [-p port] [-t seconds] [-r] [-e] [-g] [victim_host]");
        }
    }
    if (scenario == NULL || g_size == 0) {
        DIE(2, "-s tag-kill|tag-stop|get-kill|get-stop|wireup-kill|wireup-stop|idle-kill|badkey is required (-S > 0)");
    }
    if (strcmp(scenario, "idle-kill") == 0 && !g.err_mode_peer) {
        DIE(2, "idle-kill needs -e (without an error handler nothing tells the survivor)");
    }
    victim_host = (optind < argc) ? argv[optind] : NULL;
    /* Line-buffered: UCX's log and our verdict reach the log file even when the alarm ends the process. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGALRM, on_alarm);
    alarm((unsigned)timeout);
    if (strncmp(scenario, "wireup-", 7) == 0) {
        ucp_pair_open_worker(&g, UCP_FEATURE_TAG | UCP_FEATURE_RMA, victim_host, port);
        if (victim_host == NULL) {
            victim_wireup();
        }
        xfer(g.fd, &pid, sizeof(pid), 0);
        return survivor_wireup(scenario[7] == 'k' ? 'k' : 's', pid);
    }
    ucp_pair_open(&g, UCP_FEATURE_TAG | UCP_FEATURE_RMA, victim_host, port);
    /* Both endpoints wired up first: these scenarios are about a death while gdx carries the transfer. One while UCP
     * still waits for wire-up (the survivor hung there, ~1 run in 30 under load, before the module reported broken
     * endpoints to UCP) is what wireup-* checks, deterministically. */
    ucp_pair_wireup(&g);
    if (victim_host == NULL) {
        return victim(scenario);
    }
    xfer(g.fd, &pid, sizeof(pid), 0);
    if (strncmp(scenario, "tag-", 4) == 0) {
        ucp_request_param_t p = {0};
        buf = malloc(g_size);
        if (buf == NULL) {
            DIE(2, "out of memory");
        }
        ucp_tag_recv_info_t info;
        /* The rendezvous request must be here before the victim dies: a receive nothing ever matches waits for
         * ever (UCP's contract, not a hang of gdx's). */
        while (ucp_tag_probe_nb(g.worker, TAG, (ucp_tag_t)-1, 0, &info) == NULL) {
            ucp_worker_progress(g.worker);
        }
        rc = survive(ucp_tag_recv_nbx(g.worker, buf, g_size, TAG, (ucp_tag_t)-1, &p),
                     scenario[4] == 'k' ? 'k' : 's', pid, "tag receive");
    } else if (strcmp(scenario, "idle-kill") == 0) {
        return survivor_idle(pid);
    } else {
        return survivor_rma(scenario, pid);
    }
    ucp_pair_close(&g, 0);
    free(buf); /* after the close: the failed receive may be touched until its endpoint is gone */
    return rc;
}
