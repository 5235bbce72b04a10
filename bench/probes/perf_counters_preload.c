/* Probe (a diagnosis, never a bar): LD_PRELOAD it into a process (ucx_perftest, one side of a ping-pong) to count,
 * in user space and on the main thread only (UCX's async thread is not counted), from load to exit: cycles,
 * instructions, branch misses, L1 instruction-cache and instruction-TLB misses, last-level-cache misses, and any raw
 * events named in PERF_PRELOAD_RAW. Written for the host latency gap of issue 18: instruction cuts in the module
 * (bench/results/cpu-2026-11-27/) did not move the GPU machine's latency, so what its cycles go to is the question;
 * no perf binary is there, but perf_event_open() of a process on itself may be allowed (perf_event_paranoid <= 2).
 *
 *   cc -O1 -shared -fPIC -o perf_counters_preload.so bench/probes/perf_counters_preload.c
 *   PERF_PRELOAD_OUT=/tmp/pc.client PERF_PRELOAD_RAW=0x02c3,0x01c3 LD_PRELOAD=$PWD/perf_counters_preload.so \
 *     ucx_perftest ... -n 200000          (and again with -n 400000)
 *
 * PERF_PRELOAD_RAW: comma-separated raw event codes (umask << 8 | event), model-specific: on Intel cores since
 * Skylake 0x02c3 is MACHINE_CLEARS.MEMORY_ORDERING (a spinning load whose line another core wrote: the pipeline is
 * flushed) and 0x01c3 MACHINE_CLEARS.COUNT. The counts include process start and UCX's set-up, so compare two runs
 * of different iteration counts: (count(2n) - count(n)) / n is the cost of one iteration. Each event is opened on
 * its own: one the CPU or the hypervisor does not offer is reported as unavailable, with errno, and the rest still
 * count. Output: one line per event, "perf_preload <name> <count>" (scaled when the kernel multiplexed it), or
 * "perf_preload <name> unavailable: <why>", to PERF_PRELOAD_OUT (appended) or standard error. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/perf_event.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_EVENTS 16

static struct {
    char name[32];
    int fd;
    int err;
} g_ev[MAX_EVENTS];
static int g_n;

static void open_event(const char *name, uint32_t type, uint64_t config)
{
    struct perf_event_attr a;

    if (g_n == MAX_EVENTS) {
        return;
    }
    memset(&a, 0, sizeof(a));
    a.size           = sizeof(a);
    a.type           = type;
    a.config         = config;
    a.exclude_kernel = 1; /* what perf_event_paranoid 2 allows, and the module's path is user space anyway */
    a.exclude_hv     = 1;
    a.read_format    = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
    snprintf(g_ev[g_n].name, sizeof(g_ev[g_n].name), "%s", name);
    g_ev[g_n].fd  = (int)syscall(SYS_perf_event_open, &a, 0 /* this thread */, -1, -1, 0);
    g_ev[g_n].err = g_ev[g_n].fd < 0 ? errno : 0;
    ++g_n;
}

static uint64_t cache_event(uint64_t cache, uint64_t op, uint64_t result)
{
    return cache | (op << 8) | (result << 16);
}

__attribute__((constructor)) static void start(void)
{
    const char *raw = getenv("PERF_PRELOAD_RAW");

    open_event("cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES);
    open_event("instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS);
    open_event("branch-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES);
    open_event("L1-icache-misses", PERF_TYPE_HW_CACHE,
               cache_event(PERF_COUNT_HW_CACHE_L1I, PERF_COUNT_HW_CACHE_OP_READ, PERF_COUNT_HW_CACHE_RESULT_MISS));
    open_event("iTLB-misses", PERF_TYPE_HW_CACHE,
               cache_event(PERF_COUNT_HW_CACHE_ITLB, PERF_COUNT_HW_CACHE_OP_READ, PERF_COUNT_HW_CACHE_RESULT_MISS));
    open_event("LLC-load-misses", PERF_TYPE_HW_CACHE,
               cache_event(PERF_COUNT_HW_CACHE_LL, PERF_COUNT_HW_CACHE_OP_READ, PERF_COUNT_HW_CACHE_RESULT_MISS));
    while (raw != NULL && *raw != '\0') {
        char *end, name[32];
        unsigned long long code = strtoull(raw, &end, 0);
        if (end == raw) {
            fprintf(stderr, "perf_preload: PERF_PRELOAD_RAW: '%s' is not an event code\n", raw);
            break;
        }
        snprintf(name, sizeof(name), "raw-0x%llx", code);
        open_event(name, PERF_TYPE_RAW, code);
        raw = (*end == ',') ? end + 1 : end;
    }
}

__attribute__((destructor)) static void report(void)
{
    const char *path = getenv("PERF_PRELOAD_OUT");
    FILE *out = (path != NULL) ? fopen(path, "a") : NULL;
    int i;

    if (out == NULL) {
        out = stderr;
    }
    fprintf(out, "perf_preload pid %d\n", (int)getpid());
    for (i = 0; i < g_n; ++i) {
        uint64_t v[3] = {0, 0, 0};
        if (g_ev[i].fd < 0) {
            fprintf(out, "perf_preload %s unavailable: %s\n", g_ev[i].name, strerror(g_ev[i].err));
            continue;
        }
        if (read(g_ev[i].fd, v, sizeof(v)) != (ssize_t)sizeof(v)) {
            fprintf(out, "perf_preload %s unavailable: read: %s\n", g_ev[i].name, strerror(errno));
        } else if (v[2] == 0) {
            fprintf(out, "perf_preload %s unavailable: never scheduled on the PMU\n", g_ev[i].name);
        } else {
            /* scaled by enabled/running time when the kernel multiplexed the counters */
            fprintf(out, "perf_preload %s %.0f\n", g_ev[i].name, (double)v[0] * (double)v[1] / (double)v[2]);
        }
        close(g_ev[i].fd);
    }
    if (out != stderr) {
        fclose(out);
    }
}
