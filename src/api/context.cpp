#include "api/context.h"

#include "core/error.h"
#include "transport/config_vars.h"
#include "transport/open_interfaces.h"

#include <cstdio>
#include <fstream>
#include <unistd.h>

namespace gdx {

namespace {
constexpr const char *kComp = "api";
}

gdx_status_t Context::create(const Config::Overrides &overrides, std::unique_ptr<Context> *out) {
    std::unique_ptr<Context> ctx(new Context);
    std::string error;
    if (gdx_status_t st = Config::load(overrides, &ctx->config_, &error); st != GDX_OK)
        return GDX_FAIL(st, "config", "%s", error.c_str());
    if (gdx_status_t st = config_apply_logging(ctx->config_, &error); st != GDX_OK)
        return GDX_FAIL(st, "config", "%s", error.c_str());
    *out = std::move(ctx);
    return GDX_OK;
}

Context::~Context() {
    // Engines before their interfaces (an engine deregisters its buffers with the interface's memory domain).
    for (TransportSlot &t : transports_) t.engine.reset();
    transports_.clear();
}

gdx_status_t Context::open_transports() {
    if (opened_) return transports_.empty() ? GDX_ERR_UNREACHABLE : GDX_OK;
    opened_ = true;
    if (gdx_status_t st = mem::Detector::create(config_, &detector_); st != GDX_OK) return st;
    tp::OpenRequest req;
    req.allow = [this](std::string_view name) { return config_.list_allows(tp::TransportVar::TLS, name); };
    req.try_next_device = false; // one interface per transport: on the GPU this process is bound to
    std::string skipped;
    for (tp::OpenOutcome &o : tp::open_interfaces(config_, req)) {
        std::string name(o.component->name());
        if (o.status != GDX_OK) {
            skipped += " " + name;
            skipped +=
                o.devices == 0 ? " (no device)" : std::string(" (open failed: ") + gdx_status_string(o.status) + ")";
            continue;
        }
        TransportSlot slot;
        slot.component = o.component;
        slot.device = std::move(o.device);
        slot.iface = std::move(o.iface);
        if (gdx_status_t st = fb::Engine::create(*slot.iface, config_, &slot.engine, detector_.get()); st != GDX_OK) {
            skipped += " " + name + " (staging engine: " + gdx_status_string(st) + ")";
            continue;
        }
        GDX_INFO(kComp, "transport %s on %s opened: %s", name.c_str(), slot.device.name.c_str(),
                 slot.iface->caps().describe().c_str());
        transports_.push_back(std::move(slot));
    }
    if (!skipped.empty()) GDX_DEBUG(kComp, "transports not opened:%s", skipped.c_str());
    if (transports_.empty())
        return GDX_FAIL(GDX_ERR_UNREACHABLE, kComp, "no transport could be opened (GDX_TLS=%s):%s",
                        config_.text(tp::TransportVar::TLS).c_str(),
                        skipped.empty() ? " none compiled in" : skipped.c_str());
    return GDX_OK;
}

TransportSlot *Context::transport(std::string_view name) {
    for (TransportSlot &t : transports_)
        if (t.component->name() == name) return &t;
    return nullptr;
}

unsigned Context::progress() {
    unsigned n = 0;
    for (TransportSlot &t : transports_) n += t.engine->progress();
    return n;
}

uint64_t Context::host_id() {
    static const uint64_t id = [] {
        // FNV-1a over host name and boot id: the same machine (and boot) gives the same id in every process.
        std::string s;
        char host[256] = {};
        if (gethostname(host, sizeof(host) - 1) == 0) s = host;
        std::ifstream boot("/proc/sys/kernel/random/boot_id");
        std::string b;
        if (boot >> b) s += "/" + b;
        uint64_t h = 1469598103934665603ull;
        for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
        return h;
    }();
    return id;
}

} // namespace gdx
