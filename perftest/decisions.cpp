// The path decisions gdx_info -t prints, narrowed to this run's device pair. gdx_info's own function
// (tools/info_topology.cpp, print_topology) produces them; gdx_perftest captures its output and keeps the lines
// about its GPU(s) and, over rc, its NIC, so both tools always say the same thing.
#include "decisions.h"

#include "api/context.h"
#include "core/error.h"
#include "info_sections.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <unistd.h>

namespace gdx::perf {

namespace {

bool starts_with(const std::string &s, const std::string &p) { return s.rfind(p, 0) == 0; }

// gdx_info -t's whole output, or false with *why.
bool capture_topology(std::vector<std::string> *lines, std::string *why) {
    std::unique_ptr<Context> ctx;
    if (Context::create({}, &ctx) != GDX_OK) {
        *why = "cannot create a gdx context: " + last_error();
        return false;
    }
    FILE *tmp = std::tmpfile();
    if (tmp == nullptr) {
        *why = std::string("tmpfile: ") + std::strerror(errno);
        return false;
    }
    std::fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    if (saved < 0 || dup2(fileno(tmp), STDOUT_FILENO) < 0) {
        *why = std::string("cannot redirect stdout: ") + std::strerror(errno);
        if (saved >= 0) close(saved);
        std::fclose(tmp);
        return false;
    }
    tools::print_topology(*ctx);
    std::fflush(stdout);
    bool restored = dup2(saved, STDOUT_FILENO) >= 0;
    close(saved);
    if (!restored) {
        std::fclose(tmp);
        *why = std::string("cannot restore stdout: ") + std::strerror(errno);
        return false;
    }
    std::rewind(tmp);
    char buf[1024];
    while (std::fgets(buf, sizeof(buf), tmp) != nullptr) {
        std::string l(buf);
        while (!l.empty() && (l.back() == '\n' || l.back() == '\r')) l.pop_back();
        lines->push_back(l);
    }
    std::fclose(tmp);
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
