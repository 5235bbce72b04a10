/* Probe (a diagnosis, never a bar): how many regions UCX's global memory-type cache holds once a UCP context and
 * worker are up with the transports in UCX_TLS. UCP 1.22 sends a small host message on its fast path only while
 * that cache is empty (ucs_memtype_cache_is_empty() in ucp_proto_select_is_short) as soon as any MD detects memory
 * types, so a region left there by anyone costs every small send the slow path. Prints each region's range
 * (the region type is private to libucs).
 * Build against a UCX source tree and its build tree (memtype_cache.h is not installed):
 *   cc -O1 -o ucp_memtype_cache bench/probes/ucp_memtype_cache.c -I<src>/src -I<build> -I<build>/src \
 *      -I<prefix>/include -L<prefix>/lib -lucp -lucs */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <ucp/api/ucp.h>
#include <ucs/memory/memtype_cache.h>

/* The /proc/self/maps lines that overlap [start, end): what the region was recorded from. */
static void print_maps(unsigned long start, unsigned long end)
{
    char line[512];
    unsigned long lo, hi;
    FILE *f = fopen("/proc/self/maps", "r");

    if (f == NULL) {
        return;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        if ((sscanf(line, "%lx-%lx", &lo, &hi) == 2) && (lo < end) && (hi > start)) {
            printf("    maps: %s", line);
        }
    }
    fclose(f);
}

static void print_region(const ucs_pgtable_t *pgtable, ucs_pgt_region_t *pgt_region, void *arg)
{
    (void)pgtable;
    if (++*(unsigned*)arg > 20) {
        return;
    }
    printf("region 0x%lx..0x%lx (%lu bytes)\n", (unsigned long)pgt_region->start, (unsigned long)pgt_region->end,
           (unsigned long)(pgt_region->end - pgt_region->start));
    print_maps(pgt_region->start, pgt_region->end);
}

int main(void)
{
    ucp_params_t params = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_TAG};
    ucp_worker_params_t wparams = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                                   .thread_mode = UCS_THREAD_MODE_SINGLE};
    ucp_context_h ctx;
    ucp_worker_h worker;
    ucs_memory_info_t info;
    ucs_status_t status;
    static char buf[64];
    unsigned n = 0;

    if (ucp_init(&params, NULL, &ctx) != UCS_OK || ucp_worker_create(ctx, &wparams, &worker) != UCS_OK) {
        fprintf(stderr, "ucp_init or ucp_worker_create failed\n");
        return 1;
    }
    /* UCP creates the cache at its first lookup (its first send or receive): so does this. UCM then scans
     * /proc/self/maps and records every mapping without access rights or of /dev/nvidia* as memory of unknown type. */
    status = ucs_memtype_cache_lookup(buf, sizeof(buf), &info);
    printf("lookup of a host buffer: %s\n", ucs_status_string(status));
    if (ucs_memtype_cache_global_instance == NULL) {
        printf("memtype cache: none (no detecting MD, or UCX_MEMTYPE_CACHE=n)\n");
    } else {
        ucs_pgtable_search_range(&ucs_memtype_cache_global_instance->pgtable, 0, UINTPTR_MAX - 1, print_region, &n);
        printf("memtype cache: %u regions (num_regions %u): small host sends take UCP's %s path\n", n,
               ucs_memtype_cache_global_instance->pgtable.num_regions,
               ucs_memtype_cache_is_empty() ? "fast" : "slow");
    }
    ucp_worker_destroy(worker);
    ucp_cleanup(ctx);
    return 0;
}
