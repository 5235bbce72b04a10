// gdx_ext_devices_text (gdx_info -d): the GPUs the CUDA driver shows, how memory-type cache hits are validated,
// and the RDMA devices libibverbs lists. "none found" is an answer, never an error.
#include "api/ext_util.h"
#include "api/handles.h"
#include "gdx/gdx_ext.h"
#include "memtype/free_hooks.h"
#include "memtype/memory_ops.h"
#include "memtype/memtype.h"

#include <cerrno>
#include <cstring>
#include <infiniband/verbs.h>

namespace gdx::api {

namespace {

void print_gpus(TextOut &out) {
    out.printf("# GPUs (CUDA driver)\n");
    const mem::Ops &gpu = mem::ops(mem::MemKind::Cuda);
    std::vector<mem::DeviceInfo> gpus;
    gpu.devices(&gpus);
    if (gpus.empty()) {
        out.printf("#   none found: %s\n", gpu.why_unavailable().c_str());
        return;
    }
    out.printf("#   driver API %d.%d\n", gpu.driver_version() / 1000, (gpu.driver_version() % 1000) / 10);
    for (const auto &g : gpus) {
        out.printf("GPU%d: %s, PCI %s, %.1f GiB, sm_%d%d%s\n", g.ordinal, g.name.c_str(), g.pci_bus_id.c_str(),
                   static_cast<double>(g.total_mem) / (1ull << 30), g.cc_major, g.cc_minor,
                   g.integrated ? ", integrated" : "");
        out.printf("#   dma-buf: %s | GPUDirect RDMA: %s | GPUDirect RDMA with VMM: %s | VMM: %s | "
                   "POSIX fd handles: %s | copy engines: %d\n",
                   g.dmabuf_supported ? "yes" : "no", g.gdr_supported ? "yes" : "no", g.gdr_with_vmm ? "yes" : "no",
                   g.vmm_supported ? "yes" : "no", g.posix_fd_handles ? "yes" : "no", g.async_engines);
    }
}

// How memory-type cache hits are validated, and why (GDX_MEMTYPE_CACHE, GDX_MEMTYPE_HOOKS; src/memtype/README.md):
// a Detector made from this configuration, as a context makes one when its transports open.
void print_memtype_cache(const Config &cfg, TextOut &out) {
    std::unique_ptr<mem::Detector> det;
    if (mem::Detector::create(cfg, &det) != GDX_OK) {
        out.printf("#   memory-type cache: %s\n", last_error().c_str());
        return;
    }
    if (!det->gpu_enabled()) {
        out.printf("#   memory-type cache: none (no GPU: every pointer is host memory)\n");
        return;
    }
    if (det->cache() == nullptr) {
        out.printf("#   memory-type cache: off (GDX_MEMTYPE_CACHE=no): every lookup asks the driver\n");
        return;
    }
    // With GDX_MEMTYPE_HOOKS=no nothing was patched; otherwise the Detector has tried, and this returns the outcome.
    const bool hooks_off = det->options().hooks == Ternary::No;
    const mem::FreeHookState *h = hooks_off ? nullptr : &mem::install_free_hooks();
    const bool trusted = det->options().validation == mem::CacheValidation::Events;
    out.printf("#   memory-type cache: %zu entries; hits %s; CUDA free hooks %s (%s)\n", det->cache()->capacity(),
               trusted ? "need no driver call (pool memory excepted)" : "validated by one driver query each",
               h != nullptr && h->installed ? "on" : "off", h != nullptr ? h->why.c_str() : "GDX_MEMTYPE_HOOKS=no");
}

void print_rdma_devices(TextOut &out) {
    out.printf("# RDMA devices (libibverbs)\n");
    int n = 0;
    ibv_device **list = ibv_get_device_list(&n);
    if (list == nullptr) {
        out.printf("#   none found: ibv_get_device_list: %s\n", std::strerror(errno));
        return;
    }
    if (n == 0) out.printf("#   none found (no RDMA device or no provider library)\n");
    for (int i = 0; i < n; ++i) {
        ibv_context *ctx = ibv_open_device(list[i]);
        ibv_device_attr attr{};
        if (ctx == nullptr || ibv_query_device(ctx, &attr) != 0) {
            out.printf("%s: cannot open or query (%s)\n", ibv_get_device_name(list[i]), std::strerror(errno));
            if (ctx) ibv_close_device(ctx);
            continue;
        }
        out.printf("%s: %s, %u port(s), max_qp %d, max_mr_size %llu\n", ibv_get_device_name(list[i]),
                   ibv_node_type_str(list[i]->node_type), attr.phys_port_cnt, attr.max_qp,
                   static_cast<unsigned long long>(attr.max_mr_size));
        for (uint8_t p = 1; p <= attr.phys_port_cnt; ++p) {
            ibv_port_attr pa{};
            if (ibv_query_port(ctx, p, &pa) != 0) continue;
            out.printf("#   port %u: %s, link layer %s, active MTU %d\n", p, ibv_port_state_str(pa.state),
                       pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand", 128 << pa.active_mtu);
        }
        ibv_close_device(ctx);
    }
    ibv_free_device_list(list);
}

} // namespace

} // namespace gdx::api

extern "C" const char *gdx_ext_devices_text(const gdx_context_t *context) {
    thread_local std::string slot;
    if (context == nullptr) return "# GPUs (CUDA driver)\n#   no context given\n";
    return gdx::api::text_section(&slot, "# GPUs (CUDA driver)\n#   internal error while listing the devices\n",
                                  [&](gdx::api::TextOut &out) {
                                      gdx::api::print_gpus(out);
                                      gdx::api::print_memtype_cache(context->impl->config(), out);
                                      gdx::api::print_rdma_devices(out);
                                  });
}
