/* The order-sensitive checksum the MPI checks send along with their data (mpi_check.c, mpi_gpu_check.c). */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Fletcher-style over 64-bit sums: a lost, duplicated, swapped or stale byte changes it. */
static inline uint64_t checksum(const uint8_t *buf, size_t len)
{
    uint64_t a = 1, b = 0;
    for (size_t i = 0; i < len; ++i) {
        a += buf[i];
        b += a;
    }
    return (b << 32) ^ a;
}
