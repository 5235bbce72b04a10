/* UCP check of CUDA device buffers (or, with -m host, host buffers) between two processes over gdx (run both
 * under tools/gdx-run):
 *
 *   server:  gdx-run ucp_gpu_check [-m cuda|host] [-S MAX] [-r] [-p PORT] [-d GPU] [-t SECONDS]
 *   client:  gdx-run ucp_gpu_check [-m cuda|host] [-S MAX] [-r] [-p PORT] [-d GPU] [-t SECONDS] SERVER_HOST
 *   probe:   ucp_gpu_check [-m ...] -c   (exit 0 when the memory can be used, 77 with the reason when not)
 *   -x (with -m host): a host-only process on a GPU machine: after the transfers no GPU's primary context may be
 *            active in it (UCX's own transports make none; nor may gdx's memory domains and interfaces, which UCP
 *            opens in every process: a context holds GPU memory per rank). Skipped (77) without a GPU.
 *
 * For sizes 1 B .. MAX (default 16 MiB; odd sizes, then MAX itself): tag send/recv between buffers of the kind (once
 * with the memory type given to UCP, once left to UCP's detection, i.e. gdx_copy's memory domain); with -r also
 * ucp_put_nbx and ucp_get_nbx (not by default: UCP 1.13's basic RMA protocol memcpy's from the source, which
 * faults on CUDA memory). Host memory is what the CPU tests send through the staging engine with the direct path
 * denied by GDX_FAULT_P2P_EVERY (tests/uct/test_ucp_xfer.sh). Every transfer is compared byte for byte (for CUDA
 * after a device -> host copy) against a pattern that depends on size and direction. Prints one line per check,
 * "ucp_gpu_check: PASS" or "FAIL (n errors)".
 * Exit: 0 pass, 1 fail, 2 usage or setup error, 3 timeout, 77 skipped (no CUDA driver or no GPU).
 * The CUDA driver is opened at run time (dlopen libcuda.so.1): nothing links CUDA, so the binary builds and
 * skips cleanly on machines without one. */
#define PROG "ucp_gpu_check"
#include "gpu_check.h"
#include "ucp_pair.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SKIP 77

static ucp_pair_t g_pair;
static ucp_worker_h g_worker;
static int g_errors, g_checks, g_rma, g_host, g_no_context;
static size_t g_max = 16u << 20;

static void on_alarm(int sig)
{
    static const char msg[] = "ucp_gpu_check: timed out (alarm): a transfer never completed\n";
    (void)sig;
    if (write(2, msg, sizeof(msg) - 1) < 0) {
        _exit(3);
    }
    _exit(3);
}

#define CU(call) do { CUresult r_ = (call); if (r_ != 0) DIE(2, "%s failed: CUresult %d", #call, r_); } while (0)

/* Buffers of the kind under test: CUDA device memory, or (-m host) plain malloc'd memory. */
static CUdeviceptr buf_alloc(size_t len)
{
    CUdeviceptr d;
    void *p;
    if (g_host) {
        if ((p = malloc(len)) == NULL) {
            DIE(2, "out of host memory for %zu bytes", len);
        }
        return (CUdeviceptr)(uintptr_t)p;
    }
    CU(cu.cuMemAlloc(&d, len));
    return d;
}

static void buf_free(CUdeviceptr d)
{
    if (g_host) {
        free((void*)(uintptr_t)d);
    } else {
        CU(cu.cuMemFree(d));
    }
}

static void upload(CUdeviceptr d, const void *h, size_t len)
{
    if (g_host) {
        memcpy((void*)(uintptr_t)d, h, len);
    } else {
        CU(cuda_upload(d, h, len));
    }
}

static ucs_status_t wait_req(void *req)
{
    return ucp_pair_wait(&g_pair, req);
}

/* hint: tell UCP the memory type of the buffer (else UCP detects it through the MDs). */
static ucp_request_param_t param(int hint)
{
    ucp_request_param_t p;
    memset(&p, 0, sizeof(p));
    if (hint) {
        p.op_attr_mask = UCP_OP_ATTR_FIELD_MEMORY_TYPE;
        p.memory_type  = g_host ? UCS_MEMORY_TYPE_HOST : UCS_MEMORY_TYPE_CUDA;
    }
    return p;
}

/* Host-side messages of the check itself (acknowledgements, the rkey): always host memory, told so. */
static ucp_request_param_t host_param(void)
{
    ucp_request_param_t p;
    memset(&p, 0, sizeof(p));
    p.op_attr_mask = UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    p.memory_type  = UCS_MEMORY_TYPE_HOST;
    return p;
}

static ucs_status_t send_host(ucp_ep_h ep, const void *buf, size_t len, ucp_tag_t tag)
{
    ucp_request_param_t p = host_param();
    return wait_req(ucp_tag_send_nbx(ep, buf, len, tag, &p));
}

static ucs_status_t recv_host(void *buf, size_t len, ucp_tag_t tag)
{
    ucp_request_param_t p = host_param();
    return wait_req(ucp_tag_recv_nbx(g_worker, buf, len, tag, (ucp_tag_t)-1, &p));
}

static void report(const char *what, size_t len, ucs_status_t st, int same)
{
    ++g_checks;
    if (st != UCS_OK || !same) {
        ++g_errors;
    }
    printf("%-26s %9zu B: %s%s%s\n", what, len, (st == UCS_OK && same) ? "OK" : "FAIL",
           st != UCS_OK ? " " : "", st != UCS_OK ? ucs_status_string(st) : (same ? "" : " (bytes differ)"));
    fflush(stdout);
}

/* Compares `len` bytes of the buffer with the pattern of seed. */
static int device_equals(CUdeviceptr d, size_t len, uint64_t seed, uint8_t *h1, uint8_t *h2)
{
    if (g_host) {
        memcpy(h1, (void*)(uintptr_t)d, len);
    } else {
        CU(cu.cuMemcpyDtoH(h1, d, len));
    }
    pattern(h2, len, seed);
    return memcmp(h1, h2, len) == 0;
}

static void run(ucp_context_h ctx, ucp_ep_h ep, int server)
{
    size_t sizes[16];
    const size_t nsizes = sizes_upto(g_max, sizes);
    const size_t max = g_max;
    uint8_t *h1 = malloc(max), *h2 = malloc(max);
    CUdeviceptr dsend, drecv;
    ucs_status_t st;

    if (h1 == NULL || h2 == NULL) {
        DIE(2, "out of host memory");
    }
    dsend = buf_alloc(max);
    drecv = buf_alloc(max);
    for (size_t i = 0; i < nsizes; ++i) {
        size_t len = sizes[i];
        for (int hint = 1; hint >= 0; --hint) {
            const char *what = hint ? "tag (memory type given)" : "tag (memory type detected)";
            ucp_request_param_t p = param(hint);
            uint64_t seed = (len << 8) | (uint64_t)hint;
            int same = 0;
            if (server) {
                pattern(h1, len, ~seed); /* poison: a transfer that writes nothing cannot pass */
                upload(drecv, h1, len);
                st = wait_req(ucp_tag_recv_nbx(g_worker, (void*)(uintptr_t)drecv, len, seed, (ucp_tag_t)-1, &p));
                same = (st == UCS_OK) && device_equals(drecv, len, seed, h1, h2);
                report(what, len, st, same);
                int ok = (st == UCS_OK) && same;
                send_host(ep, &ok, sizeof(ok), 1);
            } else {
                int ok = 0;
                pattern(h1, len, seed);
                upload(dsend, h1, len);
                st = wait_req(ucp_tag_send_nbx(ep, (void*)(uintptr_t)dsend, len, seed, &p));
                recv_host(&ok, sizeof(ok), 1);
                report(what, len, st, ok);
            }
        }
    }

    if (!g_rma) {
        /* UCP 1.13's basic RMA protocol packs puts with memcpy from the source buffer (rma_basic.c): a CUDA
         * source faults. Run with -r once gdx offers RMA lanes UCP drives with zcopy for CUDA memory. */
        printf("rma (ucp_put_nbx/ucp_get_nbx) on %s memory: not run (-r runs it)\n", g_host ? "host" : "CUDA");
        buf_free(dsend);
        buf_free(drecv);
        free(h1);
        free(h2);
        return;
    }
    /* RMA: the server exposes a device buffer; the client puts into it and gets from it. */
    ucp_mem_map_params_t mp = {.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                                             UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE,
                               .address = (void*)(uintptr_t)(server ? drecv : dsend), .length = max,
                               .memory_type = g_host ? UCS_MEMORY_TYPE_HOST : UCS_MEMORY_TYPE_CUDA};
    ucp_mem_h memh;
    UCS(ucp_mem_map(ctx, &mp, &memh));
    if (server) {
        void *rkey_buf;
        size_t rkey_len;
        uint64_t msg[2] = {(uint64_t)drecv, 0};
        UCS(ucp_rkey_pack(ctx, memh, &rkey_buf, &rkey_len));
        msg[1] = rkey_len;
        UCS(send_host(ep, msg, sizeof(msg), 2));
        UCS(send_host(ep, rkey_buf, rkey_len, 3));
        ucp_rkey_buffer_release(rkey_buf);
        for (size_t i = 0; i < nsizes; ++i) {
            size_t len = sizes[i];
            int done = 0, same;
            pattern(h1, max, 0); /* poison, then wait for the client's put */
            upload(drecv, h1, max);
            UCS(send_host(ep, &done, sizeof(done), 4));
            UCS(recv_host(&done, sizeof(done), 5));
            same = device_equals(drecv, len, 0x5000 + len, h1, h2);
            report("put (server checks)", len, UCS_OK, same);
            pattern(h1, len, 0x6000 + len); /* then serve a get */
            upload(drecv, h1, len);
            UCS(send_host(ep, &same, sizeof(same), 6));
            UCS(recv_host(&done, sizeof(done), 7));
        }
    } else {
        uint64_t msg[2];
        uint8_t rkey_buf[4096];
        ucp_rkey_h rkey;
        UCS(recv_host(msg, sizeof(msg), 2));
        if (msg[1] > sizeof(rkey_buf)) {
            DIE(2, "server's rkey of %llu bytes is too large", (unsigned long long)msg[1]);
        }
        UCS(recv_host(rkey_buf, msg[1], 3));
        UCS(ucp_ep_rkey_unpack(ep, rkey_buf, &rkey));
        for (size_t i = 0; i < nsizes; ++i) {
            size_t len = sizes[i];
            ucp_request_param_t p = param(1);
            int go = 0, ok = 0;
            UCS(recv_host(&go, sizeof(go), 4));
            pattern(h1, len, 0x5000 + len);
            upload(dsend, h1, len);
            st = wait_req(ucp_put_nbx(ep, (void*)(uintptr_t)dsend, len, msg[0], rkey, &p));
            if (st == UCS_OK) {
                st = wait_req(ucp_ep_flush_nbx(ep, &p));
            }
            UCS(send_host(ep, &go, sizeof(go), 5));
            UCS(recv_host(&ok, sizeof(ok), 6));
            report("put (client side)", len, st, ok);
            pattern(h2, len, 1); /* poison before the get */
            upload(dsend, h2, len);
            st = wait_req(ucp_get_nbx(ep, (void*)(uintptr_t)dsend, len, msg[0], rkey, &p));
            if (st == UCS_OK) {
                st = wait_req(ucp_ep_flush_nbx(ep, &p));
            }
            report("get (client checks)", len, st, st == UCS_OK && device_equals(dsend, len, 0x6000 + len, h1, h2));
            UCS(send_host(ep, &go, sizeof(go), 7));
        }
        ucp_rkey_destroy(rkey);
    }
    UCS(ucp_mem_unmap(ctx, memh));
    buf_free(dsend);
    buf_free(drecv);
    free(h1);
    free(h2);
}

int main(int argc, char **argv)
{
    int port = 13337, gpu = 0, timeout = 300, probe = 0, opt;
    const char *peer_host;
    char why[256];

    while ((opt = getopt(argc, argv, "p:d:t:m:S:crx")) != -1) {
        switch (opt) {
        case 'c': probe = 1; break;
        case 'x': g_no_context = 1; break;
        case 'r': g_rma = 1; break;
        case 'm':
            if (strcmp(optarg, "host") != 0 && strcmp(optarg, "cuda") != 0) {
                DIE(2, "-m takes host or cuda, not '%s'", optarg);
            }
            g_host = strcmp(optarg, "host") == 0;
            break;
        case 'S':
            g_max = strtoull(optarg, NULL, 0);
            if (g_max == 0 || g_max > (1ull << 31)) {
                DIE(2, "-S takes a size of 1 .. 2 GiB in bytes, not '%s'", optarg);
            }
            break;
        case 'p': port = atoi(optarg); break;
        case 'd': gpu = atoi(optarg); break;
        case 't': timeout = atoi(optarg); break;
        default: DIE(2, "usage: ucp_gpu_check [-c] [-r] [-x] [-m cuda|host] [-S max] [-p port] [-d gpu] [-t seconds] "
                        "[server_host]");
        }
    }
    peer_host = (optind < argc) ? argv[optind] : NULL;
    signal(SIGALRM, on_alarm);
    alarm((unsigned)timeout);
    if (!g_host && !cuda_open(gpu, why, sizeof(why))) {
        printf("ucp_gpu_check: SKIP: %s\n", why);
        return SKIP;
    }
    if (probe) {
        if (g_host) {
            printf("ucp_gpu_check: host memory\n");
        } else {
            printf("ucp_gpu_check: GPU %d usable\n", gpu);
        }
        return 0;
    }

    if (g_no_context) {
        if (!g_host) {
            DIE(2, "-x checks a host-only process: give -m host");
        }
        if (cuda_active_contexts(why, sizeof(why)) < 0) {
            printf("ucp_gpu_check: SKIP: -x: %s\n", why);
            return SKIP;
        }
    }
    ucp_pair_open(&g_pair, UCP_FEATURE_TAG | UCP_FEATURE_RMA, peer_host, port);
    g_worker = g_pair.worker;
    run(g_pair.ctx, g_pair.ep, peer_host == NULL);
    if (g_no_context) {
        int n = cuda_active_contexts(why, sizeof(why));
        ++g_checks;
        printf("host-only process: %d GPU primary context(s) active after UCP init and the transfers: %s\n", n,
               n == 0 ? "OK" : "FAIL (opening the transports made a context, and took GPU memory, for no GPU work)");
        g_errors += n != 0;
    }
    ucp_pair_close(&g_pair, 1); /* both sides are done before either closes its endpoint */
    if (g_errors == 0) {
        printf("ucp_gpu_check: PASS (%d checks)\n", g_checks);
        return 0;
    }
    printf("ucp_gpu_check: FAIL (%d of %d checks)\n", g_errors, g_checks);
    return 1;
}
