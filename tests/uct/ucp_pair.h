/* Two UCP processes connected to each other, for the UCP checks (ucp_gpu_check.c, ucp_fail_check.c): worker
 * addresses go over one TCP connection (the server listens on the port; the client names the server's host), which
 * stays open for the checks' own out-of-band steps. Header-only, one user per binary; the user defines PROG (its
 * name, for messages) before including it. Every failure exits 2 with what failed. */
#pragma once

#include <ucp/api/ucp.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define DIE(code, ...) do { fprintf(stderr, PROG ": " __VA_ARGS__); fputc('\n', stderr); exit(code); } while (0)
#define UCS(call) do { ucs_status_t s_ = (call); if (s_ != UCS_OK) DIE(2, "%s failed: %s", #call, ucs_status_string(s_)); } while (0)

/* What the process is doing now, for a check's alarm handler to say where something hung. */
static const char *volatile ucp_pair_phase = "setup";

typedef struct {
    ucp_context_h ctx;
    ucp_worker_h  worker;
    ucp_ep_h      ep;
    ucp_address_t *addr;
    void          *peer_addr;
    int           fd;      /* the out-of-band connection */
    int           err_mode_peer; /* set before ucp_pair_connect: UCP_ERR_HANDLING_MODE_PEER with an error handler */
    int           ep_errors;     /* calls of that handler so far */
    ucs_status_t  ep_error;      /* the status the last one reported */
} ucp_pair_t;

static void ucp_pair_on_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    ucp_pair_t *p = arg;
    (void)ep;
    p->ep_error = status;
    ++p->ep_errors;
}

static int oob_connect(const char *host, int port)
{
    int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0), conn;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (fd < 0) {
        DIE(2, "socket: %s", strerror(errno));
    }
    if (host == NULL) {
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        sa.sin_addr.s_addr = htonl(INADDR_ANY);
        if (bind(fd, (struct sockaddr*)&sa, sizeof(sa)) != 0 || listen(fd, 1) != 0) {
            DIE(2, "bind/listen on port %d: %s", port, strerror(errno));
        }
        conn = accept(fd, NULL, NULL);
        if (conn < 0) {
            DIE(2, "accept: %s", strerror(errno));
        }
        close(fd);
        return conn;
    }
    struct hostent *he = gethostbyname(host);
    if (he == NULL) {
        DIE(2, "cannot resolve %s", host);
    }
    memcpy(&sa.sin_addr, he->h_addr_list[0], sizeof(sa.sin_addr));
    for (int tries = 0; connect(fd, (struct sockaddr*)&sa, sizeof(sa)) != 0; ++tries) {
        if (tries == 100) {
            DIE(2, "connect to %s:%d: %s", host, port, strerror(errno));
        }
        usleep(100000);
    }
    return fd;
}

/* Moves len bytes over the out-of-band connection, all of them (out: write, else read). */
static void xfer(int fd, void *buf, size_t len, int out)
{
    for (size_t done = 0; done < len;) {
        ssize_t n = out ? write(fd, (char*)buf + done, len - done) : read(fd, (char*)buf + done, len - done);
        if (n <= 0) {
            DIE(2, "out-of-band %s failed: %s", out ? "write" : "read", n == 0 ? "peer closed" : strerror(errno));
        }
        done += (size_t)n;
    }
}

/* Context (features), worker, and the peer's worker address (host NULL: this side listens on port); no endpoint
 * yet (ucp_pair_connect). */
static void ucp_pair_open_worker(ucp_pair_t *p, uint64_t features, const char *host, int port)
{
    ucp_params_t up = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = features};
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SINGLE};
    size_t addr_len;
    uint64_t len64;

    UCS(ucp_init(&up, NULL, &p->ctx));
    UCS(ucp_worker_create(p->ctx, &wp, &p->worker));
    UCS(ucp_worker_get_address(p->worker, &p->addr, &addr_len));
    p->fd = oob_connect(host, port);
    len64 = addr_len;
    xfer(p->fd, &len64, sizeof(len64), 1);
    xfer(p->fd, p->addr, addr_len, 1);
    xfer(p->fd, &len64, sizeof(len64), 0);
    if ((p->peer_addr = malloc((size_t)len64)) == NULL) {
        DIE(2, "out of memory");
    }
    xfer(p->fd, p->peer_addr, (size_t)len64, 0);
    p->ep = NULL;
}

/* The endpoint to the peer's worker. UCP sends its wire-up request from here; the rest of the wire-up runs in the
 * workers' progress (and their async threads, for an asynchronous auxiliary transport such as gdx_aux). */
static void ucp_pair_connect(ucp_pair_t *p)
{
    ucp_ep_params_t ep_params = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS, .address = p->peer_addr};
    const char *mode = getenv("UCP_PAIR_ERR_MODE"); /* "peer": the checks that have no option for it (ucp_gpu_check) */
    if (mode != NULL && strcmp(mode, "peer") == 0) {
        p->err_mode_peer = 1;
    }
    if (p->err_mode_peer) {
        ep_params.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
        ep_params.err_mode       = UCP_ERR_HANDLING_MODE_PEER;
        ep_params.err_handler.cb  = ucp_pair_on_ep_error;
        ep_params.err_handler.arg = p;
    }
    UCS(ucp_ep_create(p->worker, &ep_params, &p->ep));
}

/* Context, worker, and an endpoint to the peer (host NULL: this side listens on port). */
static void ucp_pair_open(ucp_pair_t *p, uint64_t features, const char *host, int port)
{
    ucp_pair_open_worker(p, features, host, port);
    ucp_pair_connect(p);
}

/* Waits for a request (NULL: done at once), progressing the worker; its status. */
static ucs_status_t ucp_pair_wait(ucp_pair_t *p, void *req)
{
    ucs_status_t st;
    if (req == NULL) {
        return UCS_OK;
    }
    if (UCS_PTR_IS_ERR(req)) {
        return UCS_PTR_STATUS(req);
    }
    while ((st = ucp_request_check_status(req)) == UCS_INPROGRESS) {
        ucp_worker_progress(p->worker);
    }
    ucp_request_free(req);
    return st;
}

/* Progresses the worker until the peer has written something on the out-of-band connection (it is not read). */
static inline void ucp_pair_progress_until_told(ucp_pair_t *p)
{
    for (;;) {
        struct pollfd pfd = {.fd = p->fd, .events = POLLIN};
        ucp_worker_progress(p->worker);
        if (poll(&pfd, 1, 0) > 0) {
            return;
        }
    }
}

/* Waits until the endpoint is wired up on both sides: a request issued before that waits in UCP for the peer's
 * wire-up messages and never reaches the transport (a peer that dies meanwhile fails it only through the module's
 * report of the broken endpoint: src/uct/GAPS.md, 16, and ucp_fail_check's wireup-* scenarios), so checks
 * about what a transport does with a death mid-transfer wire up first. A flush completes once this side's lanes are
 * up; the peer may still need this side's progress for its own (UCP 1.13 over gdx_shm hung there when
 * one side stopped progressing after its flush), so each side then progresses until the other says it is done. */
static inline void ucp_pair_wireup(ucp_pair_t *p)
{
    ucp_request_param_t fp = {0};
    char byte = 1;
    ucp_pair_phase = "wiring up the endpoint (flush)";
    UCS(ucp_pair_wait(p, ucp_ep_flush_nbx(p->ep, &fp)));
    ucp_pair_phase = "progressing until the peer's endpoint is wired up too";
    xfer(p->fd, &byte, 1, 1);
    ucp_pair_progress_until_told(p);
    xfer(p->fd, &byte, 1, 0);
}

/* Closes the endpoint (forced: the peer may be gone), then everything else. sync: both sides first agree over
 * the out-of-band connection that they are done (a peer that is gone cannot). */
static void ucp_pair_close(ucp_pair_t *p, int sync)
{
    ucp_request_param_t cp = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = UCP_EP_CLOSE_FLAG_FORCE};
    char byte = 0;
    ucp_pair_phase = "closing the endpoint, worker and context";
    if (sync) {
        xfer(p->fd, &byte, 1, 1);
        xfer(p->fd, &byte, 1, 0);
    }
    if (p->ep != NULL) {
        ucp_pair_wait(p, ucp_ep_close_nbx(p->ep, &cp));
    }
    close(p->fd);
    free(p->peer_addr);
    ucp_worker_release_address(p->worker, p->addr);
    ucp_worker_destroy(p->worker);
    ucp_cleanup(p->ctx);
}
