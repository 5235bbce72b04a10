/* Two-rank Open MPI check of CUDA device buffers through pml ucx (and osc ucx) over gdx (run through tools/gdx-run
 * mpirun ...). Debian's Open MPI is not CUDA-aware, but point-to-point of contiguous buffers goes to UCP untouched,
 * and UCP learns from gdx's memory domains that the pointer is device memory.
 *   1. for sizes 1 B .. MAX (odd sizes, then MAX; default 16 MiB), rank 0 sends a device buffer to rank 1 and rank 1
 *      sends it back; the sender also sends the checksum of what it uploaded, and the receiver checks the bytes it
 *      downloads against it and byte for byte against the pattern of size and direction;
 *   2. with -o, one-sided: MPI_Put into and MPI_Get from a window of device memory (fence epochs), checked the
 *      same way (UCP >= 1.16 only: 1.13's RMA memcpy's device memory, src/uct/README.md).
 * Prints "rank R: checks=N errors=E". Every wait is bounded by alarm().
 *   mpi_gpu_check -c                          probe: exit 0 when a GPU can be used, 77 with the reason when not
 *   mpi_gpu_check [-t SECONDS] [-S MAX] [-o]  the check (under mpirun -np 2) */
#include "checksum.h"
#include "gpu_check.h"

#include <mpi.h>

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int g_rank;
static long g_checks, g_errors;
static size_t g_max = 16u << 20;

static void on_alarm(int sig)
{
    static const char msg[] = "mpi_gpu_check: timed out (alarm)\n";
    ssize_t rc = write(2, msg, sizeof(msg) - 1);
    (void)sig;
    (void)rc;
    _exit(3);
}

static void die_cu(const char *what, CUresult r)
{
    fprintf(stderr, "rank %d: %s failed: CUresult %d\n", g_rank, what, r);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

/* Device buffer <- pattern(seed), complete on return; the pattern's checksum. */
static uint64_t upload(CUdeviceptr d, uint8_t *host, size_t len, uint64_t seed)
{
    CUresult r;
    pattern(host, len, seed);
    if ((r = cuda_upload(d, host, len)) != 0) die_cu("upload (cuMemcpyHtoD + cuCtxSynchronize)", r);
    return checksum(host, len);
}

static void check(CUdeviceptr d, uint8_t *h1, uint8_t *h2, size_t len, uint64_t seed, uint64_t sum, const char *what)
{
    CUresult r = cu.cuMemcpyDtoH(h1, d, len);
    if (r != 0) die_cu("cuMemcpyDtoH", r);
    pattern(h2, len, seed);
    ++g_checks;
    if (checksum(h1, len) != sum || memcmp(h1, h2, len) != 0) {
        ++g_errors;
        fprintf(stderr, "rank %d: FAIL %s of %zu bytes (device buffer): %s\n", g_rank, what, len,
                checksum(h1, len) != sum ? "checksum differs" : "bytes differ");
    }
}

static void pingpong(CUdeviceptr dbuf, uint8_t *h1, uint8_t *h2, const size_t *sizes, size_t nsizes)
{
    for (size_t i = 0; i < nsizes; ++i) {
        const size_t len = sizes[i];
        const uint64_t there = (len << 4) | 1, back = (len << 4) | 2;
        uint64_t sum;
        if (g_rank == 0) {
            sum = upload(dbuf, h1, len, there);
            MPI_Send(&sum, 1, MPI_UINT64_T, 1, 9, MPI_COMM_WORLD);
            MPI_Send((void*)(uintptr_t)dbuf, (int)len, MPI_BYTE, 1, 10, MPI_COMM_WORLD);
            upload(dbuf, h1, len, ~back); /* poison: a receive that writes nothing cannot pass */
            MPI_Recv(&sum, 1, MPI_UINT64_T, 1, 12, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Recv((void*)(uintptr_t)dbuf, (int)len, MPI_BYTE, 1, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            check(dbuf, h1, h2, len, back, sum, "Recv");
        } else {
            upload(dbuf, h1, len, ~there);
            MPI_Recv(&sum, 1, MPI_UINT64_T, 0, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Recv((void*)(uintptr_t)dbuf, (int)len, MPI_BYTE, 0, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            check(dbuf, h1, h2, len, there, sum, "Recv");
            sum = upload(dbuf, h1, len, back);
            MPI_Send(&sum, 1, MPI_UINT64_T, 0, 12, MPI_COMM_WORLD);
            MPI_Send((void*)(uintptr_t)dbuf, (int)len, MPI_BYTE, 0, 11, MPI_COMM_WORLD);
        }
    }
}

/* Rank 0 puts into rank 1's device window, then rank 1 gets it back out of rank 0's, both in fence epochs. */
static void one_sided(CUdeviceptr dbuf, uint8_t *h1, uint8_t *h2, const size_t *sizes, size_t nsizes)
{
    CUdeviceptr dwin;
    CUresult r;
    MPI_Win win;

    if ((r = cu.cuMemAlloc(&dwin, g_max)) != 0) die_cu("cuMemAlloc (window)", r);
    MPI_Win_create((void*)(uintptr_t)dwin, (MPI_Aint)g_max, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    for (size_t i = 0; i < nsizes; ++i) {
        const size_t len = sizes[i];
        const uint64_t put_seed = (len << 4) | 5, get_seed = (len << 4) | 6;
        uint64_t sum = upload(dwin, h1, len, g_rank == 0 ? get_seed : ~put_seed);
        MPI_Win_fence(0, win);
        if (g_rank == 0) {
            upload(dbuf, h1, len, put_seed);
            MPI_Put((void*)(uintptr_t)dbuf, (int)len, MPI_BYTE, 1, 0, (int)len, MPI_BYTE, win);
        }
        MPI_Win_fence(0, win);
        if (g_rank == 1) {
            pattern(h2, len, put_seed);
            check(dwin, h1, h2, len, put_seed, checksum(h2, len), "MPI_Put (target's window)");
            upload(dbuf, h1, len, ~get_seed);
            MPI_Get((void*)(uintptr_t)dbuf, (int)len, MPI_BYTE, 0, 0, (int)len, MPI_BYTE, win);
        }
        MPI_Win_fence(0, win);
        MPI_Bcast(&sum, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD); /* the window's checksum at rank 0 */
        if (g_rank == 1) {
            check(dbuf, h1, h2, len, get_seed, sum, "MPI_Get");
        }
    }
    MPI_Win_free(&win);
    cu.cuMemFree(dwin);
}

int main(int argc, char **argv)
{
    size_t sizes[16], nsizes;
    unsigned timeout = 240;
    int opt, rma = 0;
    char why[256];
    CUdeviceptr dbuf;
    CUresult r;
    long all_checks = 0, all_errors = 0;

    while ((opt = getopt(argc, argv, "ct:S:o")) != -1) {
        switch (opt) {
        case 'c':
            if (!cuda_open(0, why, sizeof(why))) {
                printf("mpi_gpu_check: SKIP: %s\n", why);
                return 77;
            }
            return 0;
        case 't': timeout = (unsigned)strtoul(optarg, NULL, 10); break;
        case 'S': g_max = strtoull(optarg, NULL, 0); break;
        case 'o': rma = 1; break;
        default:
            fprintf(stderr, "usage: mpi_gpu_check [-c] [-t seconds] [-S max] [-o]\n");
            return 2;
        }
    }
    if (g_max == 0 || g_max > (1ull << 30)) {
        fprintf(stderr, "mpi_gpu_check: -S takes 1 .. 1 GiB in bytes\n");
        return 2;
    }
    signal(SIGALRM, on_alarm);
    alarm(timeout);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    if (!cuda_open(0, why, sizeof(why))) {
        fprintf(stderr, "rank %d: %s\n", g_rank, why);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    uint8_t *h1 = malloc(g_max), *h2 = malloc(g_max);
    if (h1 == NULL || h2 == NULL) MPI_Abort(MPI_COMM_WORLD, 2);
    if ((r = cu.cuMemAlloc(&dbuf, g_max)) != 0) die_cu("cuMemAlloc", r);
    nsizes = sizes_upto(g_max, sizes);
    pingpong(dbuf, h1, h2, sizes, nsizes);
    if (rma) {
        one_sided(dbuf, h1, h2, sizes, nsizes);
    }
    MPI_Allreduce(&g_checks, &all_checks, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&g_errors, &all_errors, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d: checks=%ld errors=%ld (all ranks: checks=%ld errors=%ld)\n", g_rank, g_checks, g_errors,
           all_checks, all_errors);
    fflush(stdout);
    cu.cuMemFree(dbuf);
    free(h1);
    free(h2);
    MPI_Finalize();
    return all_errors == 0 ? 0 : 1;
}
