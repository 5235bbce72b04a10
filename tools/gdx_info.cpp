// gdx_info: version and build configuration (default), -c the GDX_* table with values and sources, -d the
// GPUs and RDMA devices this machine has, -t the topology and path decisions. "none found" is an answer, never an
// error. Through gdx.h and gdx_ext.h only: the sections are the library's own text (gdx_perftest prints the same).
#include <gdx/gdx.h>
#include <gdx/gdx_ext.h>

#include <cstdio>
#include <cstring>
#include <getopt.h>
#include <string>

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

// -c: each variable's value and where it came from, as the context parsed them.
void print_config(const gdx_context_t *ctx) {
    std::printf("# Configuration (GDX_* environment variables; source: default, environment or api)\n");
    for (size_t i = 0; i < gdx_ext_config_count(); ++i) {
        gdx_ext_config_var_t v;
        if (gdx_ext_config_var(i, &v) != GDX_OK) continue; // cannot happen below the count
        const char *value = gdx_context_config_get(ctx, v.name), *source = gdx_ext_config_source(ctx, v.name);
        std::printf("%s=%s\n", v.name, value != nullptr ? value : "?");
        std::printf("#   default: %s | source: %s | type: %s\n", v.default_value, source != nullptr ? source : "?",
                    v.type);
        std::printf("#   accepted: %s\n", v.accepted);
        std::printf("#   %s\n\n", v.doc);
    }
}

// The README's GDX_* reference is this output (tests/unit/test_readme.cpp keeps them equal).
std::string md_escape(std::string s) {
    for (size_t i = 0; (i = s.find('|', i)) != std::string::npos; i += 2) s.insert(i, "\\");
    return s;
}

void print_config_markdown() {
    std::printf("| Variable | Type | Default | Description |\n|---|---|---|---|\n");
    for (size_t i = 0; i < gdx_ext_config_count(); ++i) {
        gdx_ext_config_var_t v;
        if (gdx_ext_config_var(i, &v) != GDX_OK) continue;
        std::string doc(v.doc);
        if (v.values[0] != '\0') doc += " Accepted: " + std::string(v.values) + ".";
        std::printf("| `%s` | %s | `%s` | %s |\n", v.name, md_escape(v.type).c_str(), v.default_value,
                    md_escape(doc).c_str());
    }
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

    gdx_context_t *ctx = nullptr;
    if (gdx_context_create(nullptr, &ctx) != GDX_OK) { // the environment's GDX_* values, checked
        std::fprintf(stderr, "gdx_info: %s\n", gdx_last_error());
        return 1;
    }
    if (version) std::fputs(gdx_ext_build_text(), stdout);
    if (config) print_config(ctx);
    if (devices) std::fputs(gdx_ext_devices_text(ctx), stdout);
    if (topo) std::fputs(gdx_ext_topology_text(ctx), stdout);
    gdx_context_destroy(ctx);
    return 0;
}
