/* Two-rank Open MPI check of CUDA device buffers through pml ucx over gdx (run through tools/gdx-run mpirun ...).
 * Debian's Open MPI is not CUDA-aware, but point-to-point of contiguous buffers goes to UCP untouched, and UCP
 * learns from gdx's memory domains that the pointer is device memory. For sizes 1 B .. 16 MiB, rank 0 sends a
 * device buffer to rank 1 and rank 1 sends it back, both checked byte for byte (device -> host copy) against a
 * pattern of size and direction. Prints "rank R: checks=N errors=E". Every wait is bounded by alarm().
 *   mpi_gpu_check -c        probe: exit 0 when a GPU can be used, 77 with the reason when not (before mpirun)
 *   mpi_gpu_check [SECONDS] the check (under mpirun -np 2) */
#include "gpu_check.h"

#include <mpi.h>

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_SIZE (16u << 20)

static int g_rank;
static long g_checks, g_errors;

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

/* Device buffer <- pattern(seed), complete on return. */
static void upload(CUdeviceptr d, uint8_t *host, size_t len, uint64_t seed)
{
    CUresult r;
    pattern(host, len, seed);
    if ((r = cuda_upload(d, host, len)) != 0) die_cu("upload (cuMemcpyHtoD + cuCtxSynchronize)", r);
}

static void check(CUdeviceptr d, uint8_t *h1, uint8_t *h2, size_t len, uint64_t seed, const char *what)
{
    CUresult r = cu.cuMemcpyDtoH(h1, d, len);
    if (r != 0) die_cu("cuMemcpyDtoH", r);
    pattern(h2, len, seed);
    ++g_checks;
    if (memcmp(h1, h2, len) != 0) {
        ++g_errors;
        fprintf(stderr, "rank %d: FAIL %s of %zu bytes (device buffer)\n", g_rank, what, len);
    }
}

int main(int argc, char **argv)
{
    static const size_t sizes[] = {1, 8, 4095, 65536, 1u << 20, MAX_SIZE};
    char why[256];
    CUdeviceptr dbuf;
    CUresult r;
    long all_checks = 0, all_errors = 0;

    if (argc > 1 && strcmp(argv[1], "-c") == 0) {
        if (!cuda_open(0, why, sizeof(why))) {
            printf("mpi_gpu_check: SKIP: %s\n", why);
            return 77;
        }
        return 0;
    }
    signal(SIGALRM, on_alarm);
    alarm(argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 240);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    if (!cuda_open(0, why, sizeof(why))) {
        fprintf(stderr, "rank %d: %s\n", g_rank, why);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    uint8_t *h1 = malloc(MAX_SIZE), *h2 = malloc(MAX_SIZE);
    if (h1 == NULL || h2 == NULL) MPI_Abort(MPI_COMM_WORLD, 2);
    if ((r = cu.cuMemAlloc(&dbuf, MAX_SIZE)) != 0) die_cu("cuMemAlloc", r);
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
        const size_t len = sizes[i];
        const uint64_t there = (len << 4) | 1, back = (len << 4) | 2;
        if (g_rank == 0) {
            upload(dbuf, h1, len, there);
            MPI_Send((void*)(uintptr_t)dbuf, (int)len, MPI_BYTE, 1, 10, MPI_COMM_WORLD);
            upload(dbuf, h1, len, ~back); /* poison: a receive that writes nothing cannot pass */
            MPI_Recv((void*)(uintptr_t)dbuf, (int)len, MPI_BYTE, 1, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            check(dbuf, h1, h2, len, back, "Recv");
        } else {
            upload(dbuf, h1, len, ~there);
            MPI_Recv((void*)(uintptr_t)dbuf, (int)len, MPI_BYTE, 0, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            check(dbuf, h1, h2, len, there, "Recv");
            upload(dbuf, h1, len, back);
            MPI_Send((void*)(uintptr_t)dbuf, (int)len, MPI_BYTE, 0, 11, MPI_COMM_WORLD);
        }
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
