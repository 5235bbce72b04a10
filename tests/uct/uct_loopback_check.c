/* UCT-level check of one gdx transport through UCX's public API only (what UCP itself calls), in one process:
 * two endpoints of one interface connected to each other (connect-to-ep), then every operation the transport
 * advertises, each outcome asserted byte for byte. Also the memory domain: attributes, mem_query, registration,
 * remote keys (including rejection of a corrupt one) and bad arguments.
 *
 *   LD_PRELOAD=libuct_gdx.so.0 uct_loopback_check [gdx_tcp] [timeout_s]
 * Exit 0: PASS; 1: a check failed (each failure printed); 2: setup failed; 3: timed out. */
#include "uct_check.h"

#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define AM_ID 5
#define MAX_MSG (64u << 10)

static uct_worker_h g_worker;

static struct {
    unsigned count;
    size_t last_len;
    uint64_t sum;          /* checksum of every payload received */
    uint64_t next_seq;     /* order check for the burst */
    int order_ok;
    uint8_t last[MAX_MSG + 64];
} g_rx = {.order_ok = 1};

static uint64_t sum_bytes(const uint8_t *p, size_t n)
{
    uint64_t a = 1, b = 0;
    for (size_t i = 0; i < n; ++i) { a += p[i]; b += a; }
    return (b << 32) ^ a;
}

static void fill(uint8_t *p, size_t n, uint64_t seed)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 3;
    for (size_t i = 0; i < n; ++i) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; p[i] = (uint8_t)x; }
}

static ucs_status_t am_handler(void *arg, void *data, size_t length, unsigned flags)
{
    (void)arg;
    CHECK(!(flags & UCT_CB_PARAM_FLAG_DESC), "AM delivered with a descriptor flag gdx never sets");
    CHECK(length <= sizeof(g_rx.last), "AM of %zu bytes exceeds what was sent", length);
    if (length <= sizeof(g_rx.last)) {
        memcpy(g_rx.last, data, length);
    }
    if (length >= 8) {
        uint64_t seq;
        memcpy(&seq, data, sizeof(seq));
        if (seq >> 56 == 0xb5) { /* burst messages carry a sequence number */
            g_rx.order_ok &= (seq & 0xffffffffffffull) == g_rx.next_seq++;
        }
    }
    g_rx.count++;
    g_rx.last_len = length;
    g_rx.sum += sum_bytes(data, length);
    return UCS_OK;
}

static void progress_until(volatile unsigned *counter, unsigned target)
{
    while (*counter < target) {
        uct_worker_progress(g_worker);
    }
}

typedef struct { uct_completion_t super; int done; ucs_status_t status; } comp_t;
static void comp_cb(uct_completion_t *self)
{
    comp_t *c = ucs_container_of(self, comp_t, super);
    c->done   = 1;
    c->status = self->status;
}
static void comp_init(comp_t *c) { c->super.func = comp_cb; c->super.count = 1; c->super.status = UCS_OK; c->done = 0; }
static ucs_status_t comp_wait(comp_t *c, ucs_status_t st)
{
    if (st == UCS_INPROGRESS) {
        while (!c->done) uct_worker_progress(g_worker);
        return c->status;
    }
    return st;
}

/* Retries an operation that reports back-pressure (or a connection still being set up) after progress. */
#define RETRY(expr) ({ ucs_status_t r_; while ((r_ = (expr)) == UCS_ERR_NO_RESOURCE) uct_worker_progress(g_worker); r_; })

static uint8_t *g_pack_src;
static size_t g_pack_len;
static size_t pack_cb(void *dest, void *arg) { (void)arg; memcpy(dest, g_pack_src, g_pack_len); return g_pack_len; }

/* A parked request: sends one am_bcopy when dispatched. */
typedef struct { uct_pending_req_t super; uct_ep_h ep; int calls, sent, purged; } pend_t;
static ucs_status_t pend_cb(uct_pending_req_t *self)
{
    pend_t *p = ucs_container_of(self, pend_t, super);
    ++p->calls;
    if (uct_ep_am_bcopy(p->ep, AM_ID, pack_cb, NULL, 0) < 0) return UCS_ERR_NO_RESOURCE;
    p->sent = 1;
    return UCS_OK;
}
/* A parked flush: done once the endpoint flush is accepted (OK or INPROGRESS). */
typedef struct { uct_pending_req_t super; uct_ep_h ep; int calls, done; ucs_status_t st; } flush_req_t;
static ucs_status_t flush_pend_cb(uct_pending_req_t *self)
{
    flush_req_t *f = ucs_container_of(self, flush_req_t, super);
    ++f->calls;
    f->st = uct_ep_flush(f->ep, 0, NULL);
    if (f->st == UCS_ERR_NO_RESOURCE) return UCS_ERR_NO_RESOURCE;
    f->done = 1;
    return UCS_OK;
}
static void purge_cb(uct_pending_req_t *self, void *arg)
{
    (void)arg;
    ucs_container_of(self, pend_t, super)->purged++;
}

/* Sends am_bcopy without progress until back-pressure; returns how many went out (0 if none came). */
static unsigned fill_until_busy(uct_ep_h ep)
{
    unsigned sent = 0;
    while (sent < 1000000 && uct_ep_am_bcopy(ep, AM_ID, pack_cb, NULL, 0) > 0) ++sent;
    return sent;
}

static void flush_ep(uct_ep_h ep)
{
    ucs_status_t st;
    while ((st = uct_ep_flush(ep, 0, NULL)) == UCS_INPROGRESS || st == UCS_ERR_NO_RESOURCE) {
        uct_worker_progress(g_worker);
    }
    CHECK(st == UCS_OK, "ep flush without completion: %s", ucs_status_string(st));
}

int main(int argc, char **argv)
{
    const char *tl = (argc > 1) ? argv[1] : "gdx_tcp";
    unsigned timeout = (argc > 2) ? (unsigned)atoi(argv[2]) : 120;
    uct_component_h *comps, comp;
    ucs_async_context_t *async;

    uct_check_alarm("uct_loopback_check: an operation never completed", timeout);
    comp = uct_check_setup(tl, &async, &g_worker, &comps);

    /* ---- memory domain ---- */
    uct_md_config_t *md_cfg;
    uct_md_h md;
    uct_md_attr_t md_attr;
    SETUP(uct_md_config_read(comp, NULL, NULL, &md_cfg));
    SETUP(uct_md_open(comp, tl, md_cfg, &md));
    uct_config_release(md_cfg);
    SETUP(uct_md_query(md, &md_attr));
    CHECK(md_attr.cap.flags & UCT_MD_FLAG_REG, "MD does not register memory");
    CHECK(md_attr.cap.flags & UCT_MD_FLAG_NEED_RKEY, "MD does not ask for remote keys");
    CHECK(md_attr.cap.reg_mem_types & UCS_BIT(UCS_MEMORY_TYPE_HOST), "host memory not registrable");
    /* CUDA may be registrable (the engine path) but is never "accessed" by a gdx MD: UCP builds its memory-type
     * copy endpoint from MDs that access CUDA, and gdx_copy alone claims that (uct_gdx_md.c). */
    CHECK(md_attr.cap.access_mem_types == (md_attr.cap.reg_mem_types & UCS_BIT(UCS_MEMORY_TYPE_HOST)),
          "access types 0x%llx are not the host bit of the registration types 0x%llx",
          (unsigned long long)md_attr.cap.access_mem_types, (unsigned long long)md_attr.cap.reg_mem_types);
    CHECK(md_attr.rkey_packed_size > 8, "rkey_packed_size %zu", md_attr.rkey_packed_size);
    /* Memory types are gdx_copy's to detect (GDX_UCT_DETECT=copy, as cuda_copy's upstream): a transport's MD does
     * only when asked, and never without CUDA registration. */
    const char *detect = getenv("GDX_UCT_DETECT");
    if ((detect == NULL) || (strcmp(detect, "all") != 0)) {
        CHECK(md_attr.cap.detect_mem_types == 0, "%s detects memory types 0x%llx without GDX_UCT_DETECT=all", tl,
              (unsigned long long)md_attr.cap.detect_mem_types);
    } else if (md_attr.cap.detect_mem_types != 0) {
        CHECK(md_attr.cap.reg_mem_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA), "detects CUDA but does not register it");
    }

    const size_t len = 1u << 20;
    uint8_t *src = malloc(len), *dst = malloc(len), *ref = malloc(len);
    if (src == NULL || dst == NULL || ref == NULL) return 2;
    uct_md_mem_attr_t mattr = {.field_mask = UCT_MD_MEM_ATTR_FIELD_MEM_TYPE | UCT_MD_MEM_ATTR_FIELD_ALLOC_LENGTH};
    CHECK(uct_md_mem_query(md, src, len, &mattr) == UCS_OK && mattr.mem_type == UCS_MEMORY_TYPE_HOST,
          "mem_query of malloc memory is not host");
    CHECK(uct_md_mem_query(md, NULL, 0, &mattr) == UCS_ERR_INVALID_PARAM, "mem_query(NULL, 0) accepted");
    ucs_memory_type_t mt = UCS_MEMORY_TYPE_LAST;
    CHECK(uct_md_detect_memory_type(md, dst, len, &mt) == UCS_OK && mt == UCS_MEMORY_TYPE_HOST,
          "detect_memory_type of malloc memory is not host");

    uct_mem_h src_memh, dst_memh;
    SETUP(uct_md_mem_reg(md, src, len, UCT_MD_MEM_ACCESS_ALL, &src_memh));
    SETUP(uct_md_mem_reg(md, dst, len, UCT_MD_MEM_ACCESS_ALL, &dst_memh));
    uint8_t *rkey_buf = calloc(1, md_attr.rkey_packed_size), *bad = calloc(1, md_attr.rkey_packed_size);
    uct_rkey_bundle_t src_rkey, dst_rkey, bad_rkey;
    SETUP(uct_md_mkey_pack(md, dst_memh, rkey_buf));
    SETUP(uct_rkey_unpack(comp, rkey_buf, &dst_rkey));
    SETUP(uct_md_mkey_pack(md, src_memh, rkey_buf));
    SETUP(uct_rkey_unpack(comp, rkey_buf, &src_rkey));
    CHECK(uct_rkey_unpack(comp, bad, &bad_rkey) != UCS_OK, "an all-zero remote key was accepted");

    /* ---- interface and two connected endpoints ---- */
    uct_tl_resource_desc_t *rsc;
    unsigned nrsc;
    SETUP(uct_md_query_tl_resources(md, &rsc, &nrsc));
    CHECK(nrsc >= 1, "%s lists no device", tl);
    if (nrsc == 0) return 1;
    uct_iface_config_t *if_cfg;
    SETUP(uct_md_iface_config_read(md, rsc[0].tl_name, NULL, NULL, &if_cfg));
    uct_iface_params_t ip = {.field_mask = UCT_IFACE_PARAM_FIELD_OPEN_MODE | UCT_IFACE_PARAM_FIELD_DEVICE,
                             .open_mode  = UCT_IFACE_OPEN_MODE_DEVICE};
    ip.mode.device.tl_name  = "no-such";
    ip.mode.device.dev_name = "no-such-device";
    uct_iface_h iface;
    CHECK(uct_iface_open(md, g_worker, &ip, if_cfg, &iface) != UCS_OK, "iface on a non-existent device opened");
    ip.mode.device.tl_name  = rsc[0].tl_name;
    ip.mode.device.dev_name = rsc[0].dev_name;
    /* AM alignment parameters are validated as UCX's own transports do (UCX's gtest uct_p2p_am_alignment
     * invalid_align / invalid_offset): an alignment that is not a power of 2, or an offset without one, is refused. */
    {
        static const struct { uint64_t mask; size_t align, offset; } bad_align[] = {
            {UCT_IFACE_PARAM_FIELD_AM_ALIGNMENT, 0, 0},
            {UCT_IFACE_PARAM_FIELD_AM_ALIGNMENT, 3, 1},
            {UCT_IFACE_PARAM_FIELD_AM_ALIGN_OFFSET, 0, 11},
            {UCT_IFACE_PARAM_FIELD_AM_ALIGN_OFFSET, 8, 8},
        };
        for (size_t i = 0; i < sizeof(bad_align) / sizeof(bad_align[0]); i++) {
            uct_iface_params_t bp = ip;
            bp.field_mask     |= bad_align[i].mask;
            bp.am_alignment    = bad_align[i].align;
            bp.am_align_offset = bad_align[i].offset;
            uct_iface_h bad_iface;
            ucs_status_t bst = uct_iface_open(md, g_worker, &bp, if_cfg, &bad_iface);
            CHECK(bst == UCS_ERR_INVALID_PARAM, "iface with AM alignment %zu offset %zu (mask 0x%llx): %s, not "
                  "INVALID_PARAM", bad_align[i].align, bad_align[i].offset, (unsigned long long)bad_align[i].mask,
                  ucs_status_string(bst));
            if (bst == UCS_OK) uct_iface_close(bad_iface);
        }
        uct_iface_params_t gp = ip;
        gp.field_mask  |= UCT_IFACE_PARAM_FIELD_AM_ALIGNMENT | UCT_IFACE_PARAM_FIELD_AM_ALIGN_OFFSET;
        gp.am_alignment = 64;
        gp.am_align_offset = 8;
        uct_iface_h good_iface;
        ucs_status_t gst = uct_iface_open(md, g_worker, &gp, if_cfg, &good_iface);
        CHECK(gst == UCS_OK, "iface with AM alignment 64 offset 8 refused: %s", ucs_status_string(gst));
        if (gst == UCS_OK) uct_iface_close(good_iface);
    }
    SETUP(uct_iface_open(md, g_worker, &ip, if_cfg, &iface));
    uct_config_release(if_cfg);
    uct_iface_attr_t ia;
    SETUP(uct_iface_query(iface, &ia));
    CHECK(ia.cap.flags & UCT_IFACE_FLAG_CONNECT_TO_EP, "no CONNECT_TO_EP");
    CHECK(ia.cap.flags & UCT_IFACE_FLAG_PENDING, "no PENDING");
    CHECK(ia.ep_addr_len > 0 && ia.iface_addr_len == 0, "addresses: ep %zu iface %zu", ia.ep_addr_len,
          ia.iface_addr_len);
    SETUP(uct_iface_set_am_handler(iface, AM_ID, am_handler, NULL, 0));
    uct_iface_progress_enable(iface, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);

    uct_ep_h a, b;
    uint8_t *dev_addr = malloc(ia.device_addr_len + 1);
    SETUP(uct_iface_get_device_address(iface, (uct_device_addr_t*)dev_addr));
    CHECK(uct_iface_is_reachable(iface, (uct_device_addr_t*)dev_addr, NULL), "own device address unreachable");
    uct_check_connect_pair(iface, dev_addr, &a, &b);

    /* am_short: header then payload, contiguous at the receiver */
    if (ia.cap.flags & UCT_IFACE_FLAG_AM_SHORT) {
        uint8_t payload[40];
        fill(payload, sizeof(payload), 1);
        unsigned before = g_rx.count;
        CHECK(RETRY(uct_ep_am_short(a, AM_ID, 0x1122334455667788ull, payload, sizeof(payload))) == UCS_OK,
              "am_short failed");
        progress_until(&g_rx.count, before + 1);
        uint64_t hdr;
        memcpy(&hdr, g_rx.last, sizeof(hdr));
        CHECK(g_rx.last_len == 8 + sizeof(payload) && hdr == 0x1122334455667788ull &&
              memcmp(g_rx.last + 8, payload, sizeof(payload)) == 0, "am_short arrived altered");
        CHECK(uct_ep_am_short(a, AM_ID, 0, payload, (unsigned)ia.cap.am.max_short) == UCS_ERR_INVALID_PARAM,
              "am_short above max_short accepted");
    }
    /* am_bcopy */
    if (ia.cap.flags & UCT_IFACE_FLAG_AM_BCOPY) {
        g_pack_len = ia.cap.am.max_bcopy < 5000 ? ia.cap.am.max_bcopy : 5000;
        g_pack_src = ref;
        fill(ref, g_pack_len, 2);
        unsigned before = g_rx.count;
        ssize_t n;
        while ((n = uct_ep_am_bcopy(b, AM_ID, pack_cb, NULL, 0)) == UCS_ERR_NO_RESOURCE) uct_worker_progress(g_worker);
        CHECK(n == (ssize_t)g_pack_len, "am_bcopy returned %zd", n);
        progress_until(&g_rx.count, before + 1);
        CHECK(g_rx.last_len == g_pack_len && memcmp(g_rx.last, ref, g_pack_len) == 0, "am_bcopy arrived altered");

        /* a burst in one direction: all arrive, in order, intact */
        unsigned burst = 2000;
        uint64_t want_sum = 0;
        g_pack_len = ia.cap.am.max_bcopy < 2048 ? ia.cap.am.max_bcopy : 2048;
        g_rx.sum = 0;
        before = g_rx.count;
        for (uint64_t i = 0; i < burst; ++i) {
            uint64_t seq = (0xb5ull << 56) | i;
            fill(ref, g_pack_len, 100 + i);
            memcpy(ref, &seq, sizeof(seq));
            want_sum += sum_bytes(ref, g_pack_len);
            while ((n = uct_ep_am_bcopy(a, AM_ID, pack_cb, NULL, 0)) == UCS_ERR_NO_RESOURCE) {
                uct_worker_progress(g_worker);
            }
            CHECK(n == (ssize_t)g_pack_len, "burst am_bcopy %llu returned %zd", (unsigned long long)i, n);
        }
        progress_until(&g_rx.count, before + burst);
        CHECK(g_rx.sum == want_sum && g_rx.order_ok, "burst: checksum %s, order %s",
              g_rx.sum == want_sum ? "ok" : "wrong", g_rx.order_ok ? "ok" : "wrong");
    }
    /* am_zcopy: header + registered payload */
    if (ia.cap.flags & UCT_IFACE_FLAG_AM_ZCOPY) {
        size_t plen = ia.cap.am.max_zcopy - 16 < 40000 ? ia.cap.am.max_zcopy - 16 : 40000;
        uint8_t hdr[16];
        fill(hdr, sizeof(hdr), 3);
        fill(src, plen, 4);
        uct_iov_t iov = {.buffer = src, .length = plen, .memh = src_memh, .stride = 0, .count = 1};
        comp_t c;
        comp_init(&c);
        unsigned before = g_rx.count;
        ucs_status_t st = comp_wait(&c, RETRY(uct_ep_am_zcopy(a, AM_ID, hdr, sizeof(hdr), &iov, 1, 0, &c.super)));
        CHECK(st == UCS_OK, "am_zcopy: %s", ucs_status_string(st));
        progress_until(&g_rx.count, before + 1);
        CHECK(g_rx.last_len == sizeof(hdr) + plen && memcmp(g_rx.last, hdr, sizeof(hdr)) == 0 &&
              memcmp(g_rx.last + sizeof(hdr), src, plen) == 0, "am_zcopy arrived altered");
    }
    /* put_zcopy and get_zcopy at several sizes and offsets */
    static const size_t sizes[] = {1, 7, 4096, 65537, 1u << 20};
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); ++s) {
        size_t n = sizes[s] < ia.cap.put.max_zcopy ? sizes[s] : ia.cap.put.max_zcopy, off = (len - n) / 2;
        comp_t c;
        if (!(ia.cap.flags & UCT_IFACE_FLAG_PUT_ZCOPY) || n == 0) break;
        fill(src, len, 10 + s);
        memset(dst, 0, len);
        uct_iov_t iov = {.buffer = src + off, .length = n, .memh = src_memh, .count = 1};
        comp_init(&c);
        ucs_status_t st = comp_wait(&c, RETRY(uct_ep_put_zcopy(a, &iov, 1, (uint64_t)(uintptr_t)(dst + off),
                                                               dst_rkey.rkey, &c.super)));
        flush_ep(a);
        CHECK(st == UCS_OK && memcmp(dst + off, src + off, n) == 0, "put_zcopy of %zu: %s%s", n,
              ucs_status_string(st), memcmp(dst + off, src + off, n) ? ", bytes differ" : "");
        CHECK((off == 0 || dst[off - 1] == 0) && (off + n == len || dst[off + n] == 0), "put_zcopy wrote outside");
    }
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); ++s) {
        size_t n = sizes[s] < ia.cap.get.max_zcopy ? sizes[s] : ia.cap.get.max_zcopy, off = (len - n) / 3;
        comp_t c;
        if (!(ia.cap.flags & UCT_IFACE_FLAG_GET_ZCOPY) || n == 0) break;
        fill(src, len, 20 + s);
        memset(dst, 0, len);
        uct_iov_t iov = {.buffer = dst + off, .length = n, .memh = dst_memh, .count = 1};
        comp_init(&c);
        ucs_status_t st = comp_wait(&c, RETRY(uct_ep_get_zcopy(b, &iov, 1, (uint64_t)(uintptr_t)(src + off),
                                                               src_rkey.rkey, &c.super)));
        CHECK(st == UCS_OK && memcmp(dst + off, src + off, n) == 0, "get_zcopy of %zu: %s", n, ucs_status_string(st));
    }
    /* a get outside the registration must fail, not read */
    if (ia.cap.flags & UCT_IFACE_FLAG_GET_ZCOPY) {
        uct_iov_t iov = {.buffer = dst, .length = 64, .memh = dst_memh, .count = 1};
        comp_t c;
        comp_init(&c);
        ucs_status_t st = comp_wait(&c, RETRY(uct_ep_get_zcopy(b, &iov, 1, (uint64_t)(uintptr_t)(src + len - 32),
                                                               src_rkey.rkey, &c.super)));
        CHECK(st != UCS_OK, "get_zcopy past the end of the registration succeeded");
    }
    /* back-pressure: a parked request is dispatched once resources free up, and a purged one never is */
    if (ia.cap.flags & UCT_IFACE_FLAG_AM_BCOPY) {
        pend_t p1 = {.super.func = pend_cb, .ep = a}, p2 = {.super.func = pend_cb, .ep = a};
        g_pack_len = ia.cap.am.max_bcopy < 1024 ? ia.cap.am.max_bcopy : 1024;
        fill(ref, g_pack_len, 77);
        unsigned base = g_rx.count, sent = fill_until_busy(a), extra = 0;
        ucs_status_t pst = uct_ep_pending_add(a, &p1.super, 0);
        printf("# back-pressure after %u messages; pending_add: %s\n", sent, ucs_status_string(pst));
        CHECK(pst == UCS_OK || pst == UCS_ERR_BUSY, "pending_add under back-pressure: %s", ucs_status_string(pst));
        if (pst == UCS_OK) {
            /* The parked request is not sent yet, so no flush may report it covered: UCT's answer is NO_RESOURCE,
             * and the caller parks the flush behind it (UCP's fence once passed a put parked during wire-up: the
             * first MPI_Put of a window was lost under UCX 1.18 + Open MPI 5). */
            comp_t fc;
            comp_init(&fc);
            ucs_status_t fst = uct_ep_flush(a, 0, NULL);
            CHECK(fst == UCS_ERR_NO_RESOURCE, "ep flush with a parked request: %s", ucs_status_string(fst));
            fst = uct_ep_flush(a, 0, &fc.super);
            CHECK(fst == UCS_ERR_NO_RESOURCE, "ep flush (completion) with a parked request: %s", ucs_status_string(fst));
            fst = uct_iface_flush(iface, 0, NULL); /* no NO_RESOURCE for an interface: UCP takes it as an error */
            CHECK(fst == UCS_INPROGRESS, "iface flush with a parked request: %s", ucs_status_string(fst));
            /* The flush parked behind it covers it, not a request parked behind the flush: request, flush,
             * request all go (counting the last one kept the flush at the head of the queue: UCP 1.13's
             * ucp_put_bw hung). */
            flush_req_t fr = {.super.func = flush_pend_cb, .ep = a};
            pend_t p3      = {.super.func = pend_cb, .ep = a};
            CHECK(uct_ep_pending_add(a, &fr.super, 0) == UCS_OK, "a flush was not parked behind a request");
            CHECK(uct_ep_pending_add(a, &p3.super, 0) == UCS_OK, "a request was not parked behind a flush");
            for (unsigned i = 0; (i < 200000) && !(p1.sent && fr.done && p3.sent); ++i) {
                uct_worker_progress(g_worker);
            }
            CHECK(p1.sent && fr.done && p3.sent, "request, flush, request parked: sent %d, flush done %d (%d calls, "
                  "last %s), sent %d", p1.sent, fr.done, fr.calls, ucs_status_string(fr.st), p3.sent);
            extra = 1;
        }
        if (pst == UCS_ERR_BUSY) { /* resources came back in between: send it ourselves */
            while (pend_cb(&p1.super) != UCS_OK) uct_worker_progress(g_worker);
        }
        while (!p1.sent) uct_worker_progress(g_worker);
        progress_until(&g_rx.count, base + sent + 1 + extra);
        CHECK(p1.sent && g_rx.count == base + sent + 1 + extra, "parked request: sent %d, received %u of %u", p1.sent,
              g_rx.count - base, sent + 1 + extra);
        base = g_rx.count;
        sent = fill_until_busy(a);
        pst  = uct_ep_pending_add(a, &p2.super, 0);
        printf("# back-pressure after %u messages; pending_add then purge: %s\n", sent, ucs_status_string(pst));
        if (pst == UCS_OK) {
            uct_ep_pending_purge(a, purge_cb, NULL);
            CHECK(p2.purged == 1, "purge handed back %d requests (expected 1)", p2.purged);
        }
        progress_until(&g_rx.count, base + sent);
        flush_ep(a);
        CHECK(p2.calls == 0 && !p2.sent, "a purged request was dispatched (%d calls)", p2.calls);
    }

    /* an endpoint connected to its own address (UCP's endpoint to its own worker): a loopback */
    {
        uct_ep_params_t ep_params = {.field_mask = UCT_EP_PARAM_FIELD_IFACE, .iface = iface};
        uct_ep_h self_ep;
        uint8_t *self_addr = malloc(ia.ep_addr_len);
        SETUP(uct_ep_create(&ep_params, &self_ep));
        SETUP(uct_ep_get_address(self_ep, (uct_ep_addr_t*)self_addr));
        SETUP(uct_ep_connect_to_ep(self_ep, (uct_device_addr_t*)dev_addr, (uct_ep_addr_t*)self_addr));
        g_pack_len = ia.cap.am.max_bcopy < 3000 ? ia.cap.am.max_bcopy : 3000;
        fill(ref, g_pack_len, 55);
        unsigned before = g_rx.count;
        ssize_t n;
        while ((n = uct_ep_am_bcopy(self_ep, AM_ID, pack_cb, NULL, 0)) == UCS_ERR_NO_RESOURCE) {
            uct_worker_progress(g_worker);
        }
        CHECK(n == (ssize_t)g_pack_len, "am_bcopy to self returned %zd", n);
        progress_until(&g_rx.count, before + 1);
        CHECK(g_rx.last_len == g_pack_len && memcmp(g_rx.last, ref, g_pack_len) == 0, "am_bcopy to self altered");
        if (ia.cap.flags & UCT_IFACE_FLAG_PUT_ZCOPY) {
            comp_t c;
            fill(src, 4096, 56);
            memset(dst, 0, 4096);
            uct_iov_t iov = {.buffer = src, .length = 4096, .memh = src_memh, .count = 1};
            comp_init(&c);
            ucs_status_t st = comp_wait(&c, RETRY(uct_ep_put_zcopy(self_ep, &iov, 1, (uint64_t)(uintptr_t)dst,
                                                                   dst_rkey.rkey, &c.super)));
            flush_ep(self_ep);
            CHECK(st == UCS_OK && memcmp(dst, src, 4096) == 0, "put_zcopy to self: %s", ucs_status_string(st));
        }
        uct_ep_destroy(self_ep);
        free(self_addr);
    }

    /* flush with a completion, iface flush, fence, pending_add, wakeup */
    comp_t fc;
    comp_init(&fc);
    CHECK(comp_wait(&fc, uct_ep_flush(b, 0, &fc.super)) == UCS_OK, "ep flush with completion");
    ucs_status_t st;
    while ((st = uct_iface_flush(iface, 0, NULL)) == UCS_INPROGRESS) uct_worker_progress(g_worker);
    CHECK(st == UCS_OK, "iface flush: %s", ucs_status_string(st));
    CHECK(uct_ep_fence(a, 0) == UCS_OK && uct_iface_fence(iface, 0) == UCS_OK, "fence");
    uct_pending_req_t req = {.func = NULL};
    st = uct_ep_pending_add(a, &req, 0);
    CHECK(st == UCS_ERR_BUSY, "pending_add with resources available: %s (expected Busy)", ucs_status_string(st));
    if (ia.cap.event_flags & UCT_IFACE_FLAG_EVENT_FD) {
        /* As UCX's test_uct_event: once progress finds nothing, arming must succeed (a wakeup fd left readable by
         * signals already consumed kept gdx_shm answering busy forever), and an AM sent then wakes the fd. */
        int fd = -1;
        CHECK(uct_iface_event_fd_get(iface, &fd) == UCS_OK && fd >= 0, "event fd");
        for (int round = 0; round < 3; ++round) { /* the second arm finds the first wakeup's signal */
            unsigned rounds = 0, work;
            do {
                work = uct_worker_progress(g_worker);
                st   = uct_iface_event_arm(iface, UCT_EVENT_SEND_COMP | UCT_EVENT_RECV);
            } while ((st == UCS_ERR_BUSY || work != 0) && ++rounds < 100000);
            CHECK(st == UCS_OK, "event_arm %d on an idle interface: %s after %u rounds of progress", round,
                  ucs_status_string(st), rounds);
            if ((st != UCS_OK) || !(ia.cap.flags & UCT_IFACE_FLAG_AM_BCOPY)) break;
            unsigned before = g_rx.count;
            ssize_t n;
            struct pollfd pfd = {.fd = fd, .events = POLLIN};
            while ((n = uct_ep_am_bcopy(b, AM_ID, pack_cb, NULL, 0)) == UCS_ERR_NO_RESOURCE) {
                uct_worker_progress(g_worker);
            }
            CHECK(n == (ssize_t)g_pack_len, "am_bcopy after arming returned %zd", n);
            CHECK(poll(&pfd, 1, 10000) == 1, "an AM sent after event_arm did not make the event fd readable");
            progress_until(&g_rx.count, before + 1);
        }
    }

    /* a get from memory the target deregistered must fail (its key names nothing any more), staged or direct.
     * Last of all on this pair: over RC the peer's NIC refuses it with a remote access error, which moves the queue
     * pair to the error state and fails the endpoint, as on any verbs transport (checks after it would hang). */
    if (ia.cap.flags & UCT_IFACE_FLAG_GET_ZCOPY) {
        uint8_t *gone = calloc(1, 4096);
        uct_mem_h gone_memh;
        uct_rkey_bundle_t gone_rkey;
        uct_iov_t iov = {.buffer = dst, .length = 64, .memh = dst_memh, .count = 1};
        comp_t c;
        if (gone == NULL) return 2;
        SETUP(uct_md_mem_reg(md, gone, 4096, UCT_MD_MEM_ACCESS_ALL, &gone_memh));
        SETUP(uct_md_mkey_pack(md, gone_memh, rkey_buf));
        SETUP(uct_rkey_unpack(comp, rkey_buf, &gone_rkey));
        SETUP(uct_md_mem_dereg(md, gone_memh));
        comp_init(&c);
        ucs_status_t st = comp_wait(&c, RETRY(uct_ep_get_zcopy(b, &iov, 1, (uint64_t)(uintptr_t)gone,
                                                               gone_rkey.rkey, &c.super)));
        CHECK(st != UCS_OK, "get_zcopy from deregistered memory succeeded");
        uct_rkey_release(comp, &gone_rkey);
        free(gone);
    }

    uct_ep_destroy(a);
    uct_ep_destroy(b);
    uct_iface_close(iface);
    uct_rkey_release(comp, &src_rkey);
    uct_rkey_release(comp, &dst_rkey);
    SETUP(uct_md_mem_dereg(md, src_memh));
    SETUP(uct_md_mem_dereg(md, dst_memh));
    uct_release_tl_resource_list(rsc);
    uct_md_close(md);
    uct_release_component_list(comps);
    uct_worker_destroy(g_worker);
    ucs_async_context_destroy(async);
    free(src); free(dst); free(ref); free(rkey_buf); free(bad); free(dev_addr);
    printf("uct_loopback_check %s: %s (%d checks, %d failed)\n", tl, g_failed ? "FAIL" : "PASS", g_checks, g_failed);
    return g_failed ? 1 : 0;
}
