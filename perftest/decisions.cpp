// The path decisions gdx_info -t prints, narrowed to this run's device pair. Both tools print the library's one
// text (gdx_ext_topology_text); gdx_perftest keeps the lines about its GPU(s) and, over rc, its NIC, so the two
// always say the same thing.
#include "decisions.h"

#include <gdx/gdx.h>
#include <gdx/gdx_ext.h>

namespace gdx::perf {

namespace {

bool starts_with(const std::string &s, const std::string &p) { return s.rfind(p, 0) == 0; }

// gdx_info -t's whole output (a context of its own: the environment's GDX_* values), or false with *why.
bool capture_topology(std::vector<std::string> *lines, std::string *why) {
    gdx_context_t *ctx = nullptr;
    if (gdx_context_create(nullptr, &ctx) != GDX_OK) {
        *why = std::string("cannot create a gdx context: ") + gdx_last_error();
        return false;
    }
    const std::string text = gdx_ext_topology_text(ctx);
    gdx_context_destroy(ctx);
    for (size_t pos = 0; pos < text.size();) {
        size_t nl = text.find('\n', pos);
        lines->push_back(text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos));
        pos = nl == std::string::npos ? text.size() : nl + 1;
    }
    return true;
}

} // namespace

std::vector<std::string> filter_decisions(const std::vector<std::string> &all, const std::vector<int> &gpus,
                                          const std::string &transport, const std::string &device) {
    const std::string nic = transport == "rc" ? device.substr(0, device.find(':')) : "";
    std::vector<std::string> out;
    for (const std::string &l : all) {
        if (starts_with(l, "# Topology")) continue;
        if (starts_with(l, "#   source:") || starts_with(l, "#   GDX_GDR=")) {
            out.push_back(l.substr(4));
            continue;
        }
        if (starts_with(l, "#   ")) { // one line per NIC
            if (!nic.empty() && starts_with(l.substr(4), nic + ":")) out.push_back(l.substr(4));
            continue;
        }
        if (starts_with(l, "no GPU")) {
            out.push_back(l);
            continue;
        }
        for (int g : gpus) {
            const std::string name = "GPU" + std::to_string(g);
            if (starts_with(l, name + " → ")) {
                // Over rc only the pair with this run's NIC matters; other transports never use a NIC.
                if (!nic.empty() && starts_with(l, name + " → " + nic + ":")) out.push_back(l);
            } else if (starts_with(l, name + ":") || starts_with(l, name + " nearest:")) {
                out.push_back(l);
            }
        }
    }
    return out;
}

std::vector<std::string> topology_decisions(const std::vector<int> &gpus, const std::string &transport,
                                            const std::string &device) {
    static std::vector<std::string> all;
    static std::string failure;
    static bool captured = false;
    if (!captured) {
        captured = true;
        if (!capture_topology(&all, &failure)) all.clear();
    }
    if (!failure.empty()) return {"gdx_info -t decisions unavailable: " + failure};
    return filter_decisions(all, gpus, transport, device);
}

} // namespace gdx::perf
