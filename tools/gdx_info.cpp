// gdx_info: version and build configuration (default), -c the GDX_* table with values and sources, -d the
// GPUs and RDMA devices this machine has. "none found" is an answer, never an error.
#include "api/context.h"
#include "core/config.h"
#include "core/error.h"
#include "gdx/gdx.h"
#include "memtype/cuda_driver.h"
#include "memtype/free_hooks.h"
#include "memtype/memtype.h"
#include "info_sections.h"

#include <cstdio>
#include <cstring>
#include <getopt.h>
#include <infiniband/verbs.h>

namespace {

void usage(FILE *f) {
    std::fprintf(f,
                 "Usage: gdx_info [-v] [-c] [-d] [-t] [-a] [-m] [-h]\n"
                 "  -v, --version   version and build configuration (default)\n"
                 "  -c, --config    configuration: every GDX_* variable with value, default, source and doc\n"
                 "  -d, --devices   devices: GPUs (CUDA driver) and RDMA devices (libibverbs)\n"
                 "  -t, --topology  topology and path decisions for each (GPU, RDMA device) pair\n"
                 "  -a, --all       all of the above\n"
                 "  -m, --markdown  the GDX_* reference as a Markdown table (the README's)\n"
                 "  -h, --help      this help\n");
}

void print_version() {
    std::printf("# gdx %s\n", gdx_version_string());
    std::printf("#   build: %s, C++%ld\n", GDX_BUILD_TYPE, __cplusplus / 100 % 100);
    std::printf("#   CUDA support: %s (libcuda.so.1 opened at run time)\n",
                GDX_HAVE_CUDA_H ? "compiled in" : "not compiled in (no cuda.h at build time)");
    std::printf("#   UCX built against: %s\n", GDX_UCX_VERSION_STR);
    std::printf("#   sanitizers: %s\n", GDX_SANITIZE_STR[0] ? GDX_SANITIZE_STR : "none");
}

void print_config(const gdx::Config &cfg) {
    std::printf("# Configuration (GDX_* environment variables; source: default, environment or api)\n");
    for (const auto &d : gdx::config_table()) {
        std::printf("%s=%s\n", std::string(d.name).c_str(), cfg.text(d.id).c_str());
        std::printf("#   default: %s | source: %s | type: %s\n", std::string(d.default_value).c_str(),
                    gdx::config_source_name(cfg.source(d.id)), gdx::config_type_name(d.type));
        std::printf("#   accepted: %s\n", gdx::config_accepted_text(d).c_str());
        std::printf("#   %s\n\n", std::string(d.doc).c_str());
    }
}

// The README's GDX_* reference is this output (tests/unit/test_readme.cpp keeps them equal).
std::string md_escape(std::string s) {
    for (size_t i = 0; (i = s.find('|', i)) != std::string::npos; i += 2) s.insert(i, "\\");
    return s;
}

void print_config_markdown() {
    std::printf("| Variable | Type | Default | Description |\n|---|---|---|---|\n");
    for (const auto &d : gdx::config_table()) {
        std::string doc(d.doc);
        if (!d.accepted.empty() && (d.type == gdx::ConfigType::Enum || d.type == gdx::ConfigType::List))
            doc += " Accepted: " + std::string(d.accepted) + ".";
        std::printf("| `%s` | %s | `%s` | %s |\n", std::string(d.name).c_str(),
                    md_escape(gdx::config_type_name(d.type)).c_str(), std::string(d.default_value).c_str(),
                    md_escape(doc).c_str());
    }
}

// How memory-type cache hits are validated, and why (GDX_MEMTYPE_CACHE, GDX_MEMTYPE_HOOKS; src/memtype/README.md):
// a Detector made from this configuration, as a context makes one when its transports open.
void print_memtype_cache(const gdx::Config &cfg) {
    std::unique_ptr<gdx::mem::Detector> det;
    if (gdx::mem::Detector::create(cfg, &det) != GDX_OK) {
        std::printf("#   memory-type cache: %s\n", gdx::last_error().c_str());
        return;
    }
    if (!det->gpu_enabled()) {
        std::printf("#   memory-type cache: none (no GPU: every pointer is host memory)\n");
        return;
    }
    if (det->cache() == nullptr) {
        std::printf("#   memory-type cache: off (GDX_MEMTYPE_CACHE=no): every lookup asks the driver\n");
        return;
    }
    // With GDX_MEMTYPE_HOOKS=no nothing was patched; otherwise the Detector has tried, and this returns the outcome.
    const bool hooks_off = det->options().hooks == gdx::Ternary::No;
    const gdx::mem::FreeHookState *h = hooks_off ? nullptr : &gdx::mem::install_free_hooks();
    const bool trusted = det->options().validation == gdx::mem::CacheValidation::Events;
    std::printf("#   memory-type cache: %zu entries; hits %s; CUDA free hooks %s (%s)\n", det->cache()->capacity(),
                trusted ? "need no driver call (pool memory excepted)" : "validated by one driver query each",
                h != nullptr && h->installed ? "on" : "off", h != nullptr ? h->why.c_str() : "GDX_MEMTYPE_HOOKS=no");
}

void print_gpus() {
    std::printf("# GPUs (CUDA driver)\n");
#if GDX_HAVE_CUDA_H
    auto gpus = gdx::cuda::list_devices();
    if (gpus.empty()) {
        std::printf("#   none found: %s\n", gdx::cuda::why_unavailable().c_str());
        return;
    }
    const auto *api = gdx::cuda::driver();
    std::printf("#   driver API %d.%d\n", api->driver_version / 1000, (api->driver_version % 1000) / 10);
    for (const auto &g : gpus) {
        std::printf("GPU%d: %s, PCI %s, %.1f GiB, sm_%d%d%s\n", g.ordinal, g.name.c_str(), g.pci_bus_id.c_str(),
                    static_cast<double>(g.total_mem) / (1ull << 30), g.cc_major, g.cc_minor,
                    g.integrated ? ", integrated" : "");
        std::printf("#   dma-buf: %s | GPUDirect RDMA: %s | GPUDirect RDMA with VMM: %s | VMM: %s | "
                    "POSIX fd handles: %s | copy engines: %d\n",
                    g.dmabuf_supported ? "yes" : "no", g.gdr_supported ? "yes" : "no",
                    g.gdr_with_vmm ? "yes" : "no", g.vmm_supported ? "yes" : "no",
                    g.posix_fd_handles ? "yes" : "no", g.async_engines);
    }
#else
    std::printf("#   none found: gdx was built without CUDA headers\n");
#endif
}

void print_rdma_devices() {
    std::printf("# RDMA devices (libibverbs)\n");
    int n = 0;
    ibv_device **list = ibv_get_device_list(&n);
    if (list == nullptr) {
        std::printf("#   none found: ibv_get_device_list: %s\n", std::strerror(errno));
        return;
    }
    if (n == 0) std::printf("#   none found (no RDMA device or no provider library)\n");
    for (int i = 0; i < n; ++i) {
        ibv_context *ctx = ibv_open_device(list[i]);
        ibv_device_attr attr{};
        if (ctx == nullptr || ibv_query_device(ctx, &attr) != 0) {
            std::printf("%s: cannot open or query (%s)\n", ibv_get_device_name(list[i]), std::strerror(errno));
            if (ctx) ibv_close_device(ctx);
            continue;
        }
        std::printf("%s: %s, %u port(s), max_qp %d, max_mr_size %llu\n", ibv_get_device_name(list[i]),
                    ibv_node_type_str(list[i]->node_type), attr.phys_port_cnt, attr.max_qp,
                    static_cast<unsigned long long>(attr.max_mr_size));
        for (uint8_t p = 1; p <= attr.phys_port_cnt; ++p) {
            ibv_port_attr pa{};
            if (ibv_query_port(ctx, p, &pa) != 0) continue;
            std::printf("#   port %u: %s, link layer %s, active MTU %d\n", p, ibv_port_state_str(pa.state),
                        pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand",
                        128 << pa.active_mtu);
        }
        ibv_close_device(ctx);
    }
    ibv_free_device_list(list);
}

} // namespace

int main(int argc, char **argv) {
    bool version = false, config = false, devices = false, topo = false, markdown = false;
    int opt;
    // Long spellings too, as users of ucx_info and nvidia-smi type them.
    static const option kLong[] = {{"version", no_argument, nullptr, 'v'}, {"config", no_argument, nullptr, 'c'},
                                   {"devices", no_argument, nullptr, 'd'}, {"topology", no_argument, nullptr, 't'},
                                   {"all", no_argument, nullptr, 'a'},     {"markdown", no_argument, nullptr, 'm'},
                                   {"help", no_argument, nullptr, 'h'},    {nullptr, 0, nullptr, 0}};
    while ((opt = getopt_long(argc, argv, "vcdtamh", kLong, nullptr)) != -1) {
        switch (opt) {
        case 'v': version = true; break;
        case 'c': config = true; break;
        case 'd': devices = true; break;
        case 't': topo = true; break;
        case 'a': version = config = devices = topo = true; break;
        case 'm': markdown = true; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        std::fprintf(stderr, "gdx_info: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if (markdown) { // no context needed: the table's defaults, whatever the environment says
        print_config_markdown();
        return 0;
    }
    if (!version && !config && !devices && !topo) version = true;

    std::unique_ptr<gdx::Context> ctx;
    if (gdx::Context::create({}, &ctx) != GDX_OK) {
        std::fprintf(stderr, "gdx_info: %s\n", gdx::last_error().c_str());
        return 1;
    }
    if (version) print_version();
    if (config) print_config(ctx->config());
    if (devices) {
        print_gpus();
        print_memtype_cache(ctx->config());
        print_rdma_devices();
    }
    if (topo) gdx::tools::print_topology(*ctx);
    return 0;
}
