/* gdx_mpi_bench: MPI point-to-point latency, bandwidth, bidirectional bandwidth, multi-pair bandwidth and message
 * rate, with host or CUDA buffers on either side, and a byte-exact validation pass per size. The project's own code
 * (bench/mpi/README.md says what each test measures and how to run it over gdx and over UCX alone).
 *
 * Ranks 0..P-1 ("senders", memory kind --mem) are paired with P..2P-1 ("receivers", --rmem), P = N/2; every test
 * runs all pairs at once:
 *   lat     ping-pong (blocking MPI_Send/MPI_Recv), one-way latency = round trip / 2, mean over the pairs (us)
 *   bw      window of W MPI_Isend / MPI_Irecv, MPI_Waitall, then a 4-byte ack back; per pair, mean over pairs (MB/s)
 *   bibw    both sides post W MPI_Irecv and W MPI_Isend at once, MPI_Waitall; per pair, both directions (MB/s)
 *   mbw_mr  the bw exchange on every pair; aggregate bytes and messages over the slowest pair's time (MB/s, msg/s)
 * MB = 10^6 bytes. Validation (not timed): a pattern distinct per test, size, iteration, window slot and sender,
 * the receive buffer first filled with the pattern's complement, every byte compared on the host (device buffers
 * are copied back); the errors per size go in the table, the CSV and the JSON, and any error makes the exit
 * status 1. Exit 77 (after a SKIP line) when CUDA buffers are asked for and a rank has no driver or no GPU.
 *
 * CUDA is opened at run time (dlopen libcuda.so.1); nothing links it. */
#define _GNU_SOURCE
#include <mpi.h>

#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { MEM_HOST = 0, MEM_CUDA = 1 };
enum { T_LAT = 1, T_BW = 2, T_BIBW = 4, T_MBW = 8, T_ALL = 15 };
enum { TAG_DATA = 100, TAG_BACK = 101, TAG_ACK = 102 };

static const char *const kMemName[] = {"host", "cuda"};

/* ---- CUDA driver, opened at run time ------------------------------------------------------------------------- */
typedef int cu_result;
typedef unsigned long long cu_ptr;
static struct {
    cu_result (*Init)(unsigned);
    cu_result (*DeviceGetCount)(int*);
    cu_result (*DeviceGet)(int*, int);
    cu_result (*PrimaryCtxRetain)(void**, int);
    cu_result (*CtxSetCurrent)(void*);
    cu_result (*MemAlloc)(cu_ptr*, size_t);
    cu_result (*MemFree)(cu_ptr);
    cu_result (*MemcpyHtoD)(cu_ptr, const void*, size_t);
    cu_result (*MemcpyDtoH)(void*, cu_ptr, size_t);
    cu_result (*CtxSynchronize)(void);
    int ordinal, count;
} g_cu;

static void *cu_sym(void *h, const char *name, int versioned)
{
    char v2[128];
    void *p = NULL;
    if (versioned) {
        snprintf(v2, sizeof(v2), "%s_v2", name);
        p = dlsym(h, v2);
    }
    return p != NULL ? p : dlsym(h, name);
}

/* 1 with GPU `ordinal` (or local_rank % count when ordinal < 0) current, else 0 with the reason in why. */
static int cuda_setup(int ordinal, int local_rank, char *why, size_t len)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    void *ctx = NULL;
    int dev = 0, r;
    if (h == NULL) {
        snprintf(why, len, "no CUDA driver (dlopen libcuda.so.1: %s)", dlerror());
        return 0;
    }
#define CU(field, name, versioned)                                                                                   \
    if ((*(void**)&g_cu.field = cu_sym(h, name, versioned)) == NULL) {                                               \
        snprintf(why, len, "libcuda.so.1 lacks %s", name);                                                           \
        return 0;                                                                                                    \
    }
    /* the _v2 entry points are the 64-bit-size ABI; cuCtxSynchronize's _v2 (CUDA 13) takes a context: not that one */
    CU(Init, "cuInit", 0) CU(DeviceGetCount, "cuDeviceGetCount", 0) CU(DeviceGet, "cuDeviceGet", 0)
    CU(PrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 0) CU(CtxSetCurrent, "cuCtxSetCurrent", 0)
    CU(MemAlloc, "cuMemAlloc", 1) CU(MemFree, "cuMemFree", 1) CU(MemcpyHtoD, "cuMemcpyHtoD", 1)
    CU(MemcpyDtoH, "cuMemcpyDtoH", 1) CU(CtxSynchronize, "cuCtxSynchronize", 0)
#undef CU
    if ((r = g_cu.Init(0)) != 0) {
        snprintf(why, len, "cuInit failed (CUresult %d): no usable GPU", r);
        return 0;
    }
    if ((r = g_cu.DeviceGetCount(&g_cu.count)) != 0 || g_cu.count <= 0) {
        snprintf(why, len, "no GPU (cuDeviceGetCount: CUresult %d, %d devices)", r, g_cu.count);
        return 0;
    }
    g_cu.ordinal = ordinal >= 0 ? ordinal : local_rank % g_cu.count;
    if (g_cu.ordinal >= g_cu.count) {
        snprintf(why, len, "GPU %d requested, %d present", g_cu.ordinal, g_cu.count);
        return 0;
    }
    if ((r = g_cu.DeviceGet(&dev, g_cu.ordinal)) != 0 || (r = g_cu.PrimaryCtxRetain(&ctx, dev)) != 0 ||
        (r = g_cu.CtxSetCurrent(ctx)) != 0) {
        snprintf(why, len, "GPU %d: primary context setup failed (CUresult %d)", g_cu.ordinal, r);
        return 0;
    }
    return 1;
}

/* ---- options ----------------------------------------------------------------------------------------------- */
static struct {
    int tests, smem, rmem, gpu, window, validate, viters, quiet;
    int lat_iters, bw_iters, lat_warm, bw_warm, lat_min, bw_min;
    size_t min, max, win_mem;
    const char *csv, *json, *label;
} o = {T_ALL, MEM_HOST, MEM_HOST, -1, 64, 1, 2, 0, 1000, 100, 100, 10, 20, 5, 1, 4u << 20, 256u << 20,
       NULL, NULL, ""};

static int g_rank, g_size, g_pairs, g_peer, g_sender, g_mem;
static char g_cmdline[4096];

static void usage(FILE *f)
{
    fprintf(f,
        "gdx_mpi_bench: MPI point-to-point latency / bandwidth / bidirectional bandwidth / multi-pair bandwidth and\n"
        "message rate, host or CUDA buffers, with a validation pass per size. Run under mpirun with an even number\n"
        "of ranks (2..16 and more): ranks 0..N/2-1 send (memory --mem), N/2..N-1 receive (memory --rmem).\n"
        "  -t, --tests LIST     lat,bw,bibw,mbw_mr or all (default all)\n"
        "  -m, --mem KIND       host|cuda: buffers of ranks 0..N/2-1 (default host)\n"
        "  -M, --rmem KIND      host|cuda: buffers of ranks N/2..N-1 (default host)\n"
        "  -g, --gpu N          GPU ordinal for CUDA buffers (default: node-local rank %% GPU count)\n"
        "      --min SIZE       smallest message, bytes (K/M/G suffixes; powers of two from there; default 1)\n"
        "      --max SIZE       largest message (default 4M; up to 64M and more)\n"
        "  -W, --window N       outstanding Isend/Irecv per iteration in bw, bibw, mbw_mr (default 64)\n"
        "      --win-mem SIZE   cap on a window's buffer: the window shrinks to SIZE/size above it (default 256M)\n"
        "  -i, --iters N        iterations at sizes <= 8 KiB for every test (default lat 1000, bw tests 100\n"
        "                       windows); above 8 KiB scaled by 8 KiB/size, not below --min-iters\n"
        "      --lat-iters N, --bw-iters N    the same for one kind of test\n"
        "  -w, --warmup N       warm-up iterations at small sizes, scaled the same way (default lat 100, bw 10)\n"
        "      --min-iters N    floor of the scaled iteration count (default lat 20, bw 5)\n"
        "      --viters N       validated iterations per size (default 2); --no-validate skips the pass\n"
        "      --csv FILE       one row per (test, size, memory kinds, ranks), header line first\n"
        "      --json FILE      the same rows and the run's header as JSON\n"
        "  -l, --label TEXT     a label put in every CSV/JSON row (e.g. gdx, ucx)\n"
        "  -q, --quiet          no table on stdout (header and errors only)\n"
        "Exit: 0, 1 on a validation error, 2 on a usage error, 77 when CUDA buffers cannot be had (SKIP line).\n");
}

static int parse_size(const char *s, size_t *out)
{
    char *end;
    unsigned long long v;
    errno = 0;
    v = strtoull(s, &end, 0);
    if (errno != 0 || end == s) return 0;
    switch (*end) {
    case 'k': case 'K': v <<= 10; ++end; break;
    case 'm': case 'M': v <<= 20; ++end; break;
    case 'g': case 'G': v <<= 30; ++end; break;
    default: break;
    }
    if (*end == 'i' && end[1] == 'B') end += 2; else if (*end == 'B') ++end;
    if (*end != '\0') return 0;
    *out = (size_t)v;
    return 1;
}

static int parse_int(const char *s, int lo, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || v < lo || v > 1000000000L) return 0;
    *out = (int)v;
    return 1;
}

static int parse_mem(const char *s, int *out)
{
    if (strcmp(s, "host") == 0) *out = MEM_HOST;
    else if (strcmp(s, "cuda") == 0) *out = MEM_CUDA;
    else return 0;
    return 1;
}

static int parse_tests(const char *s)
{
    int mask = 0;
    char buf[256], *tok, *save = NULL;
    snprintf(buf, sizeof(buf), "%s", s);
    for (tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        if (strcmp(tok, "lat") == 0) mask |= T_LAT;
        else if (strcmp(tok, "bw") == 0) mask |= T_BW;
        else if (strcmp(tok, "bibw") == 0) mask |= T_BIBW;
        else if (strcmp(tok, "mbw_mr") == 0 || strcmp(tok, "mbw") == 0) mask |= T_MBW;
        else if (strcmp(tok, "all") == 0) mask |= T_ALL;
        else return 0;
    }
    return mask;
}

/* 0 on success, 2 on a usage error (printed by rank 0), -1 for --help */
static int parse_args(int argc, char **argv)
{
    enum { O_MIN = 256, O_MAX, O_WINMEM, O_LATI, O_BWI, O_MINI, O_VIT, O_NOVAL, O_CSV, O_JSON };
    static const struct option lo[] = {
        {"tests", 1, 0, 't'}, {"mem", 1, 0, 'm'}, {"rmem", 1, 0, 'M'}, {"gpu", 1, 0, 'g'}, {"min", 1, 0, O_MIN},
        {"max", 1, 0, O_MAX}, {"window", 1, 0, 'W'}, {"win-mem", 1, 0, O_WINMEM}, {"iters", 1, 0, 'i'},
        {"lat-iters", 1, 0, O_LATI}, {"bw-iters", 1, 0, O_BWI}, {"warmup", 1, 0, 'w'}, {"min-iters", 1, 0, O_MINI},
        {"viters", 1, 0, O_VIT}, {"no-validate", 0, 0, O_NOVAL}, {"csv", 1, 0, O_CSV}, {"json", 1, 0, O_JSON},
        {"label", 1, 0, 'l'}, {"quiet", 0, 0, 'q'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    int c, n, ok = 1;
    while ((c = getopt_long(argc, argv, "t:m:M:g:W:i:w:l:qh", lo, NULL)) != -1) {
        switch (c) {
        case 't': ok = (o.tests = parse_tests(optarg)) != 0; break;
        case 'm': ok = parse_mem(optarg, &o.smem); break;
        case 'M': ok = parse_mem(optarg, &o.rmem); break;
        case 'g': ok = parse_int(optarg, 0, &o.gpu); break;
        case O_MIN: ok = parse_size(optarg, &o.min) && o.min >= 1; break;
        case O_MAX: ok = parse_size(optarg, &o.max) && o.max >= 1 && o.max <= (1ull << 31) - 1; break;
        case 'W': ok = parse_int(optarg, 1, &o.window); break;
        case O_WINMEM: ok = parse_size(optarg, &o.win_mem) && o.win_mem >= 1; break;
        case 'i': ok = parse_int(optarg, 1, &n); o.lat_iters = o.bw_iters = n; break;
        case O_LATI: ok = parse_int(optarg, 1, &o.lat_iters); break;
        case O_BWI: ok = parse_int(optarg, 1, &o.bw_iters); break;
        case 'w': ok = parse_int(optarg, 0, &n); o.lat_warm = o.bw_warm = n; break;
        case O_MINI: ok = parse_int(optarg, 1, &n); o.lat_min = o.bw_min = n; break;
        case O_VIT: ok = parse_int(optarg, 1, &o.viters); break;
        case O_NOVAL: o.validate = 0; break;
        case O_CSV: o.csv = optarg; break;
        case O_JSON: o.json = optarg; break;
        case 'l': o.label = optarg; break;
        case 'q': o.quiet = 1; break;
        case 'h': if (g_rank == 0) usage(stdout); return -1;
        default: ok = 0; break;
        }
        if (!ok) {
            if (g_rank == 0) {
                if (c != '?') fprintf(stderr, "gdx_mpi_bench: bad value for option %s: %s\n", argv[optind - 1],
                                      optarg ? optarg : "");
                usage(stderr);
            }
            return 2;
        }
    }
    if (optind < argc || o.min > o.max) {
        if (g_rank == 0) {
            fprintf(stderr, "gdx_mpi_bench: %s\n", optind < argc ? "unexpected argument" : "--min above --max");
            usage(stderr);
        }
        return 2;
    }
    return 0;
}

/* ---- buffers and patterns ------------------------------------------------------------------------------------ */
static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t seed_of(int test, size_t size, int iter, int slot, int src)
{
    return mix64(mix64(mix64(((uint64_t)test << 32) ^ (uint64_t)src) ^ size) ^ (((uint64_t)iter << 20) | slot));
}

/* Bytes of seed (complemented with invert): 8 bytes per xorshift step. */
static void fill(uint8_t *p, size_t n, uint64_t seed, int invert)
{
    uint64_t x = seed | 1, v;
    const uint64_t inv = invert ? ~0ull : 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        v = (x * 0x2545f4914f6cdd1dull) ^ inv;
        memcpy(p + i, &v, 8);
    }
    if (i < n) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        v = (x * 0x2545f4914f6cdd1dull) ^ inv;
        memcpy(p + i, &v, n - i);
    }
}

static void *host_alloc(size_t n)
{
    void *p = NULL;
    if (posix_memalign(&p, 4096, n ? n : 1) != 0) return NULL;
    memset(p, 0, n);
    return p;
}

struct buf {
    int kind;
    uint8_t *p; /* host pointer, or the device address */
    size_t len;
};

static void die(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "gdx_mpi_bench: rank %d: ", g_rank);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    MPI_Abort(MPI_COMM_WORLD, 3);
    exit(3);
}

static void buf_alloc(struct buf *b, int kind, size_t len)
{
    b->kind = kind;
    b->len = len;
    if (kind == MEM_HOST) {
        if ((b->p = host_alloc(len)) == NULL) die("cannot allocate %zu bytes of host memory", len);
    } else {
        cu_ptr d = 0;
        int r = g_cu.MemAlloc(&d, len ? len : 1);
        if (r != 0) die("cuMemAlloc(%zu) on GPU %d failed: CUresult %d", len, g_cu.ordinal, r);
        b->p = (uint8_t*)(uintptr_t)d;
    }
}

static void buf_free(struct buf *b)
{
    if (b->kind == MEM_HOST) free(b->p);
    else g_cu.MemFree((cu_ptr)(uintptr_t)b->p);
    b->p = NULL;
}

/* host bytes -> b at off, complete on return (the copy from pageable memory is synchronized before MPI sees it) */
static void put_bytes(struct buf *b, size_t off, const uint8_t *src, size_t n)
{
    int r;
    if (b->kind == MEM_HOST) {
        memcpy(b->p + off, src, n);
        return;
    }
    if ((r = g_cu.MemcpyHtoD((cu_ptr)(uintptr_t)(b->p + off), src, n)) != 0 || (r = g_cu.CtxSynchronize()) != 0)
        die("cuMemcpyHtoD(%zu) failed: CUresult %d", n, r);
}

static const uint8_t *get_bytes(struct buf *b, size_t off, uint8_t *scratch, size_t n)
{
    int r;
    if (b->kind == MEM_HOST) return b->p + off;
    if ((r = g_cu.MemcpyDtoH(scratch, (cu_ptr)(uintptr_t)(b->p + off), n)) != 0)
        die("cuMemcpyDtoH(%zu) failed: CUresult %d", n, r);
    return scratch;
}

/* ---- measurement --------------------------------------------------------------------------------------------- */
static struct buf g_sbuf, g_rbuf;
static uint8_t *g_expect, *g_down; /* host scratch: one message each */
static int *g_ack;

static int window_for(size_t size)
{
    size_t w = o.win_mem / size;
    if (w < 1) w = 1;
    return (int)(w < (size_t)o.window ? w : (size_t)o.window);
}

static int scaled(int base, int floor_, size_t size)
{
    double n = size <= 8192 ? base : (double)base * 8192.0 / (double)size;
    if (base == 0) return 0;
    return n < floor_ ? floor_ : (int)n;
}

static void *sp(size_t off) { return g_sbuf.p + off; }
static void *rp(size_t off) { return g_rbuf.p + off; }

/* One ping-pong iteration; the sender side starts. */
static void lat_iter(size_t size)
{
    if (g_sender) {
        MPI_Send(sp(0), (int)size, MPI_BYTE, g_peer, TAG_DATA, MPI_COMM_WORLD);
        MPI_Recv(rp(0), (int)size, MPI_BYTE, g_peer, TAG_BACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(rp(0), (int)size, MPI_BYTE, g_peer, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(sp(0), (int)size, MPI_BYTE, g_peer, TAG_BACK, MPI_COMM_WORLD);
    }
}

static MPI_Request *g_reqs;
static MPI_Status *g_stats;

/* One window of bw (and mbw_mr): W Isend -> W Irecv, then the receiver's ack. */
static void bw_iter(size_t size, int w)
{
    int j;
    if (g_sender) {
        for (j = 0; j < w; ++j)
            MPI_Isend(sp((size_t)j * size), (int)size, MPI_BYTE, g_peer, TAG_DATA, MPI_COMM_WORLD, &g_reqs[j]);
        MPI_Waitall(w, g_reqs, MPI_STATUSES_IGNORE);
        MPI_Recv(g_ack, 1, MPI_INT, g_peer, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        for (j = 0; j < w; ++j)
            MPI_Irecv(rp((size_t)j * size), (int)size, MPI_BYTE, g_peer, TAG_DATA, MPI_COMM_WORLD, &g_reqs[j]);
        MPI_Waitall(w, g_reqs, g_stats);
        MPI_Send(g_ack, 1, MPI_INT, g_peer, TAG_ACK, MPI_COMM_WORLD);
    }
}

/* One window of bibw: both sides post W receives and W sends, then wait for all 2W. */
static void bibw_iter(size_t size, int w)
{
    int j;
    for (j = 0; j < w; ++j)
        MPI_Irecv(rp((size_t)j * size), (int)size, MPI_BYTE, g_peer, TAG_DATA, MPI_COMM_WORLD, &g_reqs[j]);
    for (j = 0; j < w; ++j)
        MPI_Isend(sp((size_t)j * size), (int)size, MPI_BYTE, g_peer, TAG_DATA, MPI_COMM_WORLD, &g_reqs[w + j]);
    MPI_Waitall(2 * w, g_reqs, g_stats);
}

struct result {
    int test;
    size_t size;
    double value, vmin, vmax, msgrate; /* value: us (lat) or MB/s; msgrate: msg/s (mbw_mr), else 0 */
    int iters, warmup, window;
    long long bad_bytes, bad_msgs, checked_msgs;
    int validated;
};

static const char *test_name(int t)
{
    return t == T_LAT ? "lat" : t == T_BW ? "bw" : t == T_BIBW ? "bibw" : "mbw_mr";
}

static const char *test_unit(int t) { return t == T_LAT ? "us" : "MB/s"; }

/* Elapsed seconds of iters iterations after warm iterations, all pairs started together. */
static double timed(int test, size_t size, int w, int warm, int iters)
{
    double t0;
    int i;
    for (i = 0; i < warm; ++i) {
        if (test == T_LAT) lat_iter(size);
        else if (test == T_BIBW) bibw_iter(size, w);
        else bw_iter(size, w);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    for (i = 0; i < iters; ++i) {
        if (test == T_LAT) lat_iter(size);
        else if (test == T_BIBW) bibw_iter(size, w);
        else bw_iter(size, w);
    }
    return MPI_Wtime() - t0;
}

/* What a wrong message holds, for the report: another message of this exchange (another slot or iteration of the
 * same test and size, from the peer or from this rank), the poison (nothing written), or something else. */
static void identify(int test, size_t size, int w, const uint8_t *got, char *out, size_t len)
{
    uint8_t head[64];
    const size_t n = size < sizeof(head) ? size : sizeof(head);
    int it, j, src, inv;
    for (inv = 0; inv < 2; ++inv)
        for (src = 0; src < 2; ++src)
            for (it = 0; it < o.viters; ++it)
                for (j = 0; j < w; ++j) {
                    fill(head, n, seed_of(test, size, it, j, src ? g_rank : g_peer), inv);
                    if (memcmp(head, got, n) == 0) {
                        snprintf(out, len, "%s of %s's message of iteration %d, slot %d", inv ? "the poison" :
                                 "the start", src ? "this rank" : "the peer", it, j);
                        return;
                    }
                }
    snprintf(out, len, "no message of this exchange (stale or foreign bytes)");
}

/* Checks message `slot` of size bytes in the receive buffer against its pattern; 1 if all bytes match. */
static int check_msg(struct result *r, int test, int w, int it, size_t off, size_t size, uint64_t seed,
                     const MPI_Status *st, const char *what)
{
    char ident[128];
    const uint8_t *got;
    size_t i, bad = 0, first = (size_t)-1;
    int count = -1;
    static int reported;
    ++r->checked_msgs;
    if (st != NULL) {
        MPI_Get_count(st, MPI_BYTE, &count);
        if (count != (int)size) {
            ++r->bad_msgs;
            r->bad_bytes += (long long)size;
            if (reported++ < 20)
                fprintf(stderr, "gdx_mpi_bench: rank %d: VALIDATION %s size %zu: received %d bytes, expected %zu\n",
                        g_rank, what, size, count, size);
            return 0;
        }
    }
    fill(g_expect, size, seed, 0);
    got = get_bytes(&g_rbuf, off, g_down, size);
    if (memcmp(got, g_expect, size) == 0) return 1;
    for (i = 0; i < size; ++i) {
        if (got[i] != g_expect[i]) {
            if (first == (size_t)-1) first = i;
            ++bad;
        }
    }
    ++r->bad_msgs;
    r->bad_bytes += (long long)bad;
    if (reported++ < 20) {
        identify(test, size, w, got, ident, sizeof(ident));
        fprintf(stderr, "gdx_mpi_bench: rank %d: VALIDATION %s size %zu iteration %d slot %zu (%s -> %s, from rank "
                "%d): %zu of %zu bytes differ, first at byte %zu (got 0x%02x, expected 0x%02x); it holds %s\n",
                g_rank, what, size, it, off / size, kMemName[g_sender ? o.rmem : o.smem], kMemName[g_mem], g_peer,
                bad, size, first, got[first], g_expect[first], ident);
    }
    return 0;
}

static void prep_send(int test, size_t size, int iter, int slot)
{
    fill(g_expect, size, seed_of(test, size, iter, slot, g_rank), 0);
    put_bytes(&g_sbuf, (size_t)slot * size, g_expect, size);
}

static void poison_recv(int test, size_t size, int iter, int slot)
{
    fill(g_expect, size, seed_of(test, size, iter, slot, g_peer), 1);
    put_bytes(&g_rbuf, (size_t)slot * size, g_expect, size);
}

/* The validation pass of one test at one size: the same exchange, with patterns, not timed. */
static void validate(int test, size_t size, int w, struct result *r)
{
    int it, j;
    MPI_Status st;
    const char *name = test_name(test);
    for (it = 0; it < o.viters; ++it) {
        if (test == T_LAT) {
            /* there: sender -> receiver; back: receiver -> sender, each with its own pattern */
            prep_send(test, size, it, 0);
            poison_recv(test, size, it, 0);
            MPI_Barrier(MPI_COMM_WORLD);
            if (g_sender) {
                MPI_Send(sp(0), (int)size, MPI_BYTE, g_peer, TAG_DATA, MPI_COMM_WORLD);
                MPI_Recv(rp(0), (int)size, MPI_BYTE, g_peer, TAG_BACK, MPI_COMM_WORLD, &st);
            } else {
                MPI_Recv(rp(0), (int)size, MPI_BYTE, g_peer, TAG_DATA, MPI_COMM_WORLD, &st);
                MPI_Send(sp(0), (int)size, MPI_BYTE, g_peer, TAG_BACK, MPI_COMM_WORLD);
            }
            check_msg(r, test, 1, it, 0, size, seed_of(test, size, it, 0, g_peer), &st, name);
        } else if (test == T_BIBW) {
            for (j = 0; j < w; ++j) {
                prep_send(test, size, it, j);
                poison_recv(test, size, it, j);
            }
            MPI_Barrier(MPI_COMM_WORLD);
            bibw_iter(size, w);
            for (j = 0; j < w; ++j)
                check_msg(r, test, w, it, (size_t)j * size, size, seed_of(test, size, it, j, g_peer), &g_stats[j],
                          name);
        } else {
            for (j = 0; j < w; ++j) {
                if (g_sender) prep_send(test, size, it, j);
                else poison_recv(test, size, it, j);
            }
            MPI_Barrier(MPI_COMM_WORLD);
            bw_iter(size, w);
            if (!g_sender)
                for (j = 0; j < w; ++j)
                    check_msg(r, test, w, it, (size_t)j * size, size, seed_of(test, size, it, j, g_peer),
                              &g_stats[j], name);
        }
    }
    r->validated = 1;
}

static void run_one(int test, size_t size, struct result *r)
{
    const int is_lat = test == T_LAT;
    const int w = is_lat ? 1 : window_for(size);
    const int iters = scaled(is_lat ? o.lat_iters : o.bw_iters, is_lat ? o.lat_min : o.bw_min, size);
    const int warm = scaled(is_lat ? o.lat_warm : o.bw_warm, 1, size); /* 0 with -w 0 */
    double t, mine = 0, *all = NULL;
    long long errs[3], sum[3];
    int p;

    memset(r, 0, sizeof(*r));
    r->test = test;
    r->size = size;
    r->iters = iters;
    r->warmup = warm;
    r->window = w;
    t = timed(test, size, w, r->warmup, iters);
    /* the sender's view: it started the first message and saw the last reply / ack / receive */
    if (test == T_LAT) mine = t * 1e6 / (2.0 * iters);
    else if (test == T_BIBW) mine = 2.0 * (double)size * w * iters / t / 1e6;
    else if (test == T_BW) mine = (double)size * w * iters / t / 1e6;
    else mine = t; /* mbw_mr: the time; the aggregate is computed below */
    if (g_rank == 0) all = malloc(sizeof(double) * (size_t)g_size);
    MPI_Gather(&mine, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (g_rank == 0) {
        double s = 0, lo = all[0], hi = all[0];
        for (p = 0; p < g_pairs; ++p) {
            s += all[p];
            if (all[p] < lo) lo = all[p];
            if (all[p] > hi) hi = all[p];
        }
        if (test == T_MBW) {
            /* aggregate over the slowest pair's time; min/max: the pairs' own rates */
            const double bytes = (double)size * w * iters;
            r->value = bytes * g_pairs / hi / 1e6;
            r->msgrate = (double)w * iters * g_pairs / hi;
            r->vmin = bytes / hi / 1e6;
            r->vmax = bytes / lo / 1e6;
        } else {
            r->value = s / g_pairs;
            r->vmin = lo;
            r->vmax = hi;
        }
        free(all);
    }
    if (o.validate) {
        validate(test, size, w, r);
        errs[0] = r->bad_bytes;
        errs[1] = r->bad_msgs;
        errs[2] = r->checked_msgs;
        MPI_Reduce(errs, sum, 3, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
        if (g_rank == 0) {
            r->bad_bytes = sum[0];
            r->bad_msgs = sum[1];
            r->checked_msgs = sum[2];
        }
    }
}

/* ---- output -------------------------------------------------------------------------------------------------- */
static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; ++s) {
        if (*s == '"' || *s == '\\') fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20) fprintf(f, "\\u%04x", *s);
        else fputc(*s, f);
    }
    fputc('"', f);
}

static void csv_str(FILE *f, const char *s)
{
    if (strpbrk(s, ",\"\n") == NULL) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; ++s) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static const char *g_csv_header =
    "label,test,size,smem,rmem,ranks,pairs,value,unit,min,max,msg_rate,iters,warmup,window,validated,checked_msgs,"
    "bad_msgs,errors";

static void csv_row(FILE *f, const struct result *r)
{
    csv_str(f, o.label);
    fprintf(f, ",%s,%zu,%s,%s,%d,%d,%.4f,%s,%.4f,%.4f,%.1f,%d,%d,%d,%d,%lld,%lld,%lld\n", test_name(r->test),
            r->size, kMemName[o.smem], kMemName[o.rmem], g_size, g_pairs, r->value, test_unit(r->test), r->vmin,
            r->vmax, r->msgrate, r->iters, r->warmup, r->window, r->validated, r->checked_msgs, r->bad_msgs,
            r->bad_bytes);
}

static void json_row(FILE *f, const struct result *r, int first)
{
    fprintf(f, "%s\n    {\"label\": ", first ? "" : ",");
    json_str(f, o.label);
    fprintf(f, ", \"test\": \"%s\", \"size\": %zu, \"smem\": \"%s\", \"rmem\": \"%s\", \"ranks\": %d, \"pairs\": %d, "
            "\"value\": %.4f, \"unit\": \"%s\", \"min\": %.4f, \"max\": %.4f, \"msg_rate\": %.1f, \"iters\": %d, "
            "\"warmup\": %d, \"window\": %d, \"validated\": %s, \"checked_msgs\": %lld, \"bad_msgs\": %lld, "
            "\"errors\": %lld}",
            test_name(r->test), r->size, kMemName[o.smem], kMemName[o.rmem], g_size, g_pairs, r->value,
            test_unit(r->test), r->vmin, r->vmax, r->msgrate, r->iters, r->warmup, r->window,
            r->validated ? "true" : "false", r->checked_msgs, r->bad_msgs, r->bad_bytes);
}

static void table_head(int test)
{
    static const char *const what[] = {
        "", "one-way latency (ping-pong round trip / 2), us, mean over pairs",
        "bandwidth per pair, MB/s, window then ack, mean over pairs", "",
        "bidirectional bandwidth per pair (both directions), MB/s, mean over pairs", "", "", "",
        "aggregate bandwidth MB/s and message rate msg/s over all pairs (slowest pair's time)"};
    printf("\n# %s: %s\n# ranks %d, pairs %d, memory %s (ranks 0..%d) %s %s (ranks %d..%d), all pairs at once\n",
           test_name(test), what[test], g_size, g_pairs, kMemName[o.smem], g_pairs - 1,
           test == T_BW || test == T_MBW ? "->" : "<->", kMemName[o.rmem], g_pairs, g_size - 1);
    printf("%10s %13s %13s %13s %13s %8s %6s %6s %10s\n", "size", test == T_LAT ? "lat_us" : "MB/s", "min", "max",
           test == T_MBW ? "msg/s" : "-", "iters", "warm", "window", "errors");
    fflush(stdout);
}

static void table_row(const struct result *r)
{
    char err[32];
    if (!r->validated) snprintf(err, sizeof(err), "-");
    else snprintf(err, sizeof(err), "%lld", r->bad_bytes);
    char rate[32];
    if (r->test == T_MBW) snprintf(rate, sizeof(rate), "%.0f", r->msgrate);
    else snprintf(rate, sizeof(rate), "-");
    printf("%10zu %13.3f %13.3f %13.3f %13s %8d %6d %6d %10s\n", r->size, r->value, r->vmin, r->vmax, rate, r->iters,
           r->warmup, r->window, err);
    fflush(stdout);
}

static void now_utc(char *buf, size_t len)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int main(int argc, char **argv)
{
    static const int order[] = {T_LAT, T_BW, T_BIBW, T_MBW};
    char why[512] = "", host[256] = "", date[64], mpiver[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int rc, i, ok, all_ok, local_rank = 0, len = 0, need_cuda, first_json = 1;
    long long total_errors = 0;
    size_t size, need = 0, msgmax;
    FILE *csv = NULL, *json = NULL;
    MPI_Comm node;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    for (i = 0, len = 0; i < argc && len < (int)sizeof(g_cmdline) - 1; ++i)
        len += snprintf(g_cmdline + len, sizeof(g_cmdline) - (size_t)len, "%s%s", i ? " " : "", argv[i]);
    rc = parse_args(argc, argv);
    if (rc != 0) {
        MPI_Finalize();
        return rc < 0 ? 0 : rc;
    }
    if (g_size < 2 || g_size % 2 != 0) {
        if (g_rank == 0) fprintf(stderr, "gdx_mpi_bench: needs an even number of ranks (2, 4, ... 16), got %d\n",
                                 g_size);
        MPI_Finalize();
        return 2;
    }
    g_pairs = g_size / 2;
    g_sender = g_rank < g_pairs;
    g_peer = g_sender ? g_rank + g_pairs : g_rank - g_pairs;
    g_mem = g_sender ? o.smem : o.rmem;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local_rank);
    MPI_Comm_free(&node);

    need_cuda = g_mem == MEM_CUDA;
    ok = need_cuda ? cuda_setup(o.gpu, local_rank, why, sizeof(why)) : 1;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) {
        if (!ok) fprintf(stderr, "gdx_mpi_bench: rank %d: %s\n", g_rank, why);
        MPI_Barrier(MPI_COMM_WORLD);
        if (g_rank == 0) {
            printf("SKIP: gdx_mpi_bench: CUDA buffers requested (--mem %s --rmem %s) but a rank cannot have them%s%s\n",
                   kMemName[o.smem], kMemName[o.rmem], ok ? "" : ": ", ok ? " (see its message)" : why);
            fflush(stdout);
        }
        MPI_Finalize();
        return 77;
    }

    /* one buffer per direction, big enough for the largest window of any size */
    msgmax = 1;
    while (msgmax < o.min) msgmax <<= 1;
    for (size = msgmax; size <= o.max; size <<= 1) {
        size_t w = (o.tests & ~T_LAT) ? (size_t)window_for(size) : 1;
        if (size * w > need) need = size * w;
        msgmax = size;
        if (size > o.max / 2) break;
    }
    g_reqs = calloc(2 * (size_t)o.window, sizeof(*g_reqs));
    g_stats = calloc(2 * (size_t)o.window, sizeof(*g_stats));
    g_ack = calloc(4, sizeof(int));
    g_expect = host_alloc(msgmax);
    g_down = host_alloc(msgmax);
    if (!g_reqs || !g_stats || !g_ack || !g_expect || !g_down) die("out of host memory");
    buf_alloc(&g_sbuf, g_mem, need);
    buf_alloc(&g_rbuf, g_mem, need);
    {
        /* touch the buffers with something (host: already zeroed) */
        uint8_t *z = host_alloc(msgmax);
        size_t off;
        if (g_mem == MEM_CUDA && z != NULL)
            for (off = 0; off < need; off += msgmax) {
                size_t n = need - off < msgmax ? need - off : msgmax;
                put_bytes(&g_sbuf, off, z, n);
                put_bytes(&g_rbuf, off, z, n);
            }
        free(z);
    }

    if (g_rank == 0) {
        gethostname(host, sizeof(host) - 1);
        now_utc(date, sizeof(date));
        MPI_Get_library_version(mpiver, &len);
        for (i = 0; mpiver[i]; ++i)
            if (mpiver[i] == '\n' || mpiver[i] == '\r') mpiver[i] = ' ';
        while (len > 0 && (mpiver[len - 1] == ' ' || mpiver[len - 1] == '\0')) mpiver[--len] = '\0';
        printf("# gdx_mpi_bench  %s\n# date %s  host %s  ranks %d (pairs %d)  memory %s -> %s%s  label '%s'\n"
               "# MPI: %s\n# sizes %zu..%zu B, window %d (cap %zu B per window), iters lat %d / bw %d at <= 8 KiB, "
               "validation %s\n",
               g_cmdline, date, host, g_size, g_pairs, kMemName[o.smem], kMemName[o.rmem],
               (o.smem == MEM_CUDA || o.rmem == MEM_CUDA) ? " (CUDA: GPU = --gpu or node-local rank % GPUs)" : "",
               o.label, mpiver, o.min, o.max, o.window, o.win_mem, o.lat_iters, o.bw_iters,
               o.validate ? "on" : "off");
        fflush(stdout);
        if (o.csv && (csv = fopen(o.csv, "w")) == NULL) fprintf(stderr, "gdx_mpi_bench: %s: %s\n", o.csv,
                                                                strerror(errno));
        if (o.json && (json = fopen(o.json, "w")) == NULL) fprintf(stderr, "gdx_mpi_bench: %s: %s\n", o.json,
                                                                   strerror(errno));
        if (csv) fprintf(csv, "%s\n", g_csv_header);
        if (json) {
            fprintf(json, "{\n  \"tool\": \"gdx_mpi_bench\",\n  \"command\": ");
            json_str(json, g_cmdline);
            fprintf(json, ",\n  \"date\": \"%s\",\n  \"host\": ", date);
            json_str(json, host);
            fprintf(json, ",\n  \"mpi\": ");
            json_str(json, mpiver);
            fprintf(json, ",\n  \"label\": ");
            json_str(json, o.label);
            fprintf(json, ",\n  \"ranks\": %d,\n  \"pairs\": %d,\n  \"smem\": \"%s\",\n  \"rmem\": \"%s\",\n"
                    "  \"window\": %d,\n  \"rows\": [", g_size, g_pairs, kMemName[o.smem], kMemName[o.rmem],
                    o.window);
        }
    }

    for (i = 0; i < 4; ++i) {
        const int test = order[i];
        if (!(o.tests & test)) continue;
        if (g_rank == 0 && !o.quiet) table_head(test);
        for (size = 1; size < o.min; size <<= 1) {}
        for (; size <= o.max; size <<= 1) {
            struct result r;
            run_one(test, size, &r);
            if (g_rank == 0) {
                total_errors += r.bad_bytes + r.bad_msgs;
                if (!o.quiet) table_row(&r);
                else if (r.bad_msgs) printf("%s %zu: %lld bytes wrong in %lld messages\n", test_name(test), size,
                                            r.bad_bytes, r.bad_msgs);
                if (csv) { csv_row(csv, &r); fflush(csv); }
                if (json) { json_row(json, &r, first_json); first_json = 0; }
            }
            if (size > o.max / 2) break;
        }
    }

    if (g_rank == 0) {
        if (json) {
            fprintf(json, "\n  ],\n  \"total_errors\": %lld\n}\n", total_errors);
            fclose(json);
        }
        if (csv) fclose(csv);
        if (o.validate) printf("\n# validation: %s (%lld bad bytes + messages over all tests and sizes)\n",
                               total_errors ? "ERRORS" : "all bytes correct", total_errors);
        else printf("\n# validation: off\n");
        fflush(stdout);
    }
    MPI_Bcast(&total_errors, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
    buf_free(&g_sbuf);
    buf_free(&g_rbuf);
    MPI_Finalize();
    return total_errors ? 1 : 0;
}
