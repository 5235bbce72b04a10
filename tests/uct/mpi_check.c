/* Two-rank Open MPI check of gdx under pml ucx / osc ucx (run through tools/gdx-run mpirun ...):
 *   1. blocking Send/Recv ping-pong for sizes 1 B .. 4 MiB (odd sizes and powers of two; up to MAX with a second
 *      argument, e.g. 268435456), each direction checked byte for byte and by checksum against a pattern that
 *      depends on size, iteration and sender;
 *   2. a window of non-blocking Isend/Irecv in flight at once (back-pressure, pending queues);
 *   3. Allreduce (sum) of int64 vectors of several lengths, checked against the closed form;
 *   4. one-sided: MPI_Put and MPI_Get on a window (fence epochs), checked byte for byte.
 * Prints "rank R: checks=N errors=E" and exits non-zero when E > 0. Every wait is bounded by alarm().
 *   mpi_check [SECONDS [MAX]] */
#include "checksum.h"

#include <mpi.h>

#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_SIZE    (4u << 20) /* the ping-pong's largest size unless a larger MAX is given */
#define WINDOW      16
#define WINDOW_SIZE (64u << 10)

static int g_rank;
static long g_checks, g_errors;
static size_t g_max = MAX_SIZE;

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "mpi_check: timed out (alarm); a message was lost or the transport hangs\n";
    ssize_t rc = write(2, msg, sizeof(msg) - 1);
    (void)rc;
    _exit(3);
}

/* Deterministic bytes for (seed, offset): any lost, duplicated, shifted or stale byte changes them. */
static void fill(uint8_t *buf, size_t len, uint64_t seed)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < len; ++i) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        buf[i] = (uint8_t)x;
    }
}

static void check(int ok, const char *what, size_t size, int iter)
{
    ++g_checks;
    if (!ok) {
        ++g_errors;
        fprintf(stderr, "rank %d: FAIL %s size %zu iteration %d\n", g_rank, what, size, iter);
    }
}

static void verify(const uint8_t *got, uint8_t *expect, size_t len, uint64_t seed, uint64_t sum, const char *what,
                   int iter)
{
    fill(expect, len, seed);
    check(checksum(got, len) == sum && checksum(expect, len) == sum, what, len, iter);
    check(memcmp(got, expect, len) == 0, what, len, iter);
}

static uint64_t seed_of(size_t size, int iter, int sender)
{
    return ((uint64_t)size << 20) ^ ((uint64_t)iter << 4) ^ (uint64_t)sender;
}

static void pingpong(uint8_t *sbuf, uint8_t *rbuf, uint8_t *tmp)
{
    static const size_t sizes[] = {1, 2, 3, 7, 8, 63, 64, 255, 1000, 4095, 4096, 8191, 8192, 8193, 65535, 65536,
                                   100000, 262144, 524287, 1048576, 2097153, MAX_SIZE, 16777259, 67108879,
                                   268435399};
    const int peer = 1 - g_rank;

    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]) && sizes[s] <= g_max; ++s) {
        size_t len = sizes[s];
        for (int iter = 0; iter < (len > MAX_SIZE ? 1 : 3); ++iter) {
            uint64_t sum;
            MPI_Status st;
            int count;
            if (g_rank == 0) {
                fill(sbuf, len, seed_of(len, iter, 0));
                sum = checksum(sbuf, len);
                MPI_Send(&sum, 1, MPI_UINT64_T, peer, 1, MPI_COMM_WORLD);
                MPI_Send(sbuf, (int)len, MPI_BYTE, peer, 2, MPI_COMM_WORLD);
                MPI_Recv(&sum, 1, MPI_UINT64_T, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                memset(rbuf, 0, len);
                MPI_Recv(rbuf, (int)len, MPI_BYTE, peer, 4, MPI_COMM_WORLD, &st);
                MPI_Get_count(&st, MPI_BYTE, &count);
                check((size_t)count == len, "pong length", len, iter);
                verify(rbuf, tmp, len, seed_of(len, iter, 1), sum, "pong payload", iter);
            } else {
                MPI_Recv(&sum, 1, MPI_UINT64_T, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                memset(rbuf, 0, len);
                MPI_Recv(rbuf, (int)len, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &st);
                MPI_Get_count(&st, MPI_BYTE, &count);
                check((size_t)count == len, "ping length", len, iter);
                verify(rbuf, tmp, len, seed_of(len, iter, 0), sum, "ping payload", iter);
                fill(sbuf, len, seed_of(len, iter, 1));
                sum = checksum(sbuf, len);
                MPI_Send(&sum, 1, MPI_UINT64_T, peer, 3, MPI_COMM_WORLD);
                MPI_Send(sbuf, (int)len, MPI_BYTE, peer, 4, MPI_COMM_WORLD);
            }
        }
    }
}

/* WINDOW messages in flight each way at once: exercises back-pressure and pending queues. */
static void window(uint8_t *sbuf, uint8_t *rbuf, uint8_t *tmp)
{
    MPI_Request req[2 * WINDOW];
    const int peer = 1 - g_rank;

    for (int w = 0; w < WINDOW; ++w) {
        fill(sbuf + (size_t)w * WINDOW_SIZE, WINDOW_SIZE, seed_of(WINDOW_SIZE, 100 + w, (uint64_t)g_rank));
        MPI_Irecv(rbuf + (size_t)w * WINDOW_SIZE, WINDOW_SIZE, MPI_BYTE, peer, 10 + w, MPI_COMM_WORLD, &req[w]);
    }
    for (int w = 0; w < WINDOW; ++w) {
        MPI_Isend(sbuf + (size_t)w * WINDOW_SIZE, WINDOW_SIZE, MPI_BYTE, peer, 10 + w, MPI_COMM_WORLD,
                  &req[WINDOW + w]);
    }
    MPI_Waitall(2 * WINDOW, req, MPI_STATUSES_IGNORE);
    for (int w = 0; w < WINDOW; ++w) {
        const uint8_t *got = rbuf + (size_t)w * WINDOW_SIZE;
        fill(tmp, WINDOW_SIZE, seed_of(WINDOW_SIZE, 100 + w, (uint64_t)peer));
        check(memcmp(got, tmp, WINDOW_SIZE) == 0, "window payload", WINDOW_SIZE, w);
    }
}

static void allreduce(void)
{
    static const int counts[] = {1, 17, 1000, 65536, 262144};
    int nranks;

    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); ++c) {
        int n = counts[c];
        int64_t *in = malloc((size_t)n * sizeof(*in)), *out = malloc((size_t)n * sizeof(*out));
        if (in == NULL || out == NULL) {
            fprintf(stderr, "rank %d: out of memory for allreduce of %d\n", g_rank, n);
            MPI_Abort(MPI_COMM_WORLD, 4);
        }
        for (int i = 0; i < n; ++i) {
            in[i] = (int64_t)i * (g_rank + 1) - g_rank;
        }
        MPI_Allreduce(in, out, n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
        /* sum over ranks r of i*(r+1) - r = i*R(R+1)/2 - R(R-1)/2 */
        int bad = 0;
        for (int i = 0; i < n; ++i) {
            int64_t want = (int64_t)i * nranks * (nranks + 1) / 2 - (int64_t)nranks * (nranks - 1) / 2;
            bad += out[i] != want;
        }
        check(bad == 0, "allreduce", (size_t)n, 0);
        free(in);
        free(out);
    }
}

static void one_sided(uint8_t *tmp)
{
    static const size_t sizes[] = {1, 8, 4096, 65537, 1048576};
    const size_t win_size = 1u << 20;
    const int peer = 1 - g_rank;
    uint8_t *base, *local = malloc(win_size);
    MPI_Win win;

    if (local == NULL || MPI_Alloc_mem((MPI_Aint)win_size, MPI_INFO_NULL, &base) != MPI_SUCCESS) {
        fprintf(stderr, "rank %d: cannot allocate the one-sided window\n", g_rank);
        MPI_Abort(MPI_COMM_WORLD, 4);
    }
    MPI_Win_create(base, (MPI_Aint)win_size, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); ++s) {
        size_t len = sizes[s];
        /* Put: rank 0 writes into rank 1's window at a size-dependent offset. */
        memset(base, 0, win_size);
        MPI_Win_fence(0, win);
        size_t off = (win_size - len) / 3;
        if (g_rank == 0) {
            fill(local, len, seed_of(len, 7, 0));
            MPI_Put(local, (int)len, MPI_BYTE, peer, (MPI_Aint)off, (int)len, MPI_BYTE, win);
        }
        MPI_Win_fence(0, win);
        if (g_rank == 1) {
            fill(tmp, len, seed_of(len, 7, 0));
            check(memcmp(base + off, tmp, len) == 0, "MPI_Put", len, 0);
            int outside_ok = (off == 0 || base[off - 1] == 0) && (off + len == win_size || base[off + len] == 0);
            check(outside_ok, "MPI_Put wrote outside its range", len, 0);
        }
        /* Get: rank 1 reads from rank 0's window. */
        fill(base, win_size, seed_of(len, 9, (uint64_t)g_rank));
        MPI_Win_fence(0, win);
        if (g_rank == 1) {
            memset(local, 0, len);
            MPI_Get(local, (int)len, MPI_BYTE, peer, (MPI_Aint)off, (int)len, MPI_BYTE, win);
        }
        MPI_Win_fence(0, win);
        if (g_rank == 1) {
            fill(tmp, win_size, seed_of(len, 9, 0));
            check(memcmp(local, tmp + off, len) == 0, "MPI_Get", len, 0);
        }
    }
    MPI_Win_free(&win);
    MPI_Free_mem(base);
    free(local);
}

int main(int argc, char **argv)
{
    unsigned timeout = (argc > 1) ? (unsigned)strtoul(argv[1], NULL, 10) : 300;
    int nranks;

    if (argc > 2) {
        g_max = strtoull(argv[2], NULL, 0);
        if (g_max < MAX_SIZE || g_max > (1ull << 30)) {
            fprintf(stderr, "mpi_check: MAX must be 4 MiB .. 1 GiB (bytes), not '%s'\n", argv[2]);
            return 2;
        }
    }
    signal(SIGALRM, on_alarm);
    alarm(timeout);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (nranks != 2) {
        if (g_rank == 0) {
            fprintf(stderr, "mpi_check: needs exactly 2 ranks, got %d\n", nranks);
        }
        MPI_Finalize();
        return 2;
    }
    const size_t bufsize = (size_t)WINDOW * WINDOW_SIZE > g_max ? (size_t)WINDOW * WINDOW_SIZE : g_max;
    uint8_t *sbuf = malloc(bufsize);
    uint8_t *rbuf = malloc(bufsize);
    uint8_t *tmp  = malloc(bufsize);
    if (sbuf == NULL || rbuf == NULL || tmp == NULL) {
        fprintf(stderr, "rank %d: out of memory\n", g_rank);
        MPI_Abort(MPI_COMM_WORLD, 4);
    }
    pingpong(sbuf, rbuf, tmp);
    window(sbuf, rbuf, tmp);
    allreduce();
    one_sided(tmp);

    long total[2] = {g_checks, g_errors}, sum[2];
    MPI_Allreduce(total, sum, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d: checks=%ld errors=%ld (all ranks: checks=%ld errors=%ld)\n", g_rank, g_checks, g_errors,
           sum[0], sum[1]);
    free(sbuf);
    free(rbuf);
    free(tmp);
    MPI_Finalize();
    return sum[1] == 0 ? 0 : 1;
}
