// gdx_ext.h's decision text about one endpoint: the devices its transports use, and how they reach a
// registration (chunk by chunk, with each transport's reason), for gdx_perftest's decision lines.
#include "api/ext_util.h"
#include "api/handles.h"
#include "gdx/gdx_ext.h"

namespace {

// "host", "dma-buf", "staged (GDX_GDR=no)": each distinct chunk outcome once, in order.
std::string reach_text(const gdx::fb::Region &r) {
    std::string s;
    for (const gdx::tp::ChunkReg &c : r.memh().chunks()) {
        std::string line = c.reach == gdx::tp::Reach::None ? "staged" : gdx::tp::reach_name(c.reach);
        if (!c.reason.empty()) line += " (" + c.reason + ")";
        if (s.find(line) == std::string::npos) s += (s.empty() ? "" : "; ") + line;
    }
    return s.empty() ? "host" : s;
}

} // namespace

extern "C" {

const char *gdx_ext_ep_devices(const gdx_ep_t *ep) {
    thread_local std::string slot;
    if (ep == nullptr) return "";
    try {
        std::string s;
        for (const gdx::Endpoint::Lane &l : ep->impl->lanes())
            s += (s.empty() ? "" : "+") + std::string(l.slot->iface->device_name());
        return gdx::api::hand_out(&slot, std::move(s));
    } catch (...) { // out of memory for a few names: nothing crosses the C boundary
        return "";
    }
}

const char *gdx_ext_mem_reach(const gdx_mem_t *mem, const gdx_ep_t *ep) {
    thread_local std::string slot;
    if (mem == nullptr || ep == nullptr || mem->ctx != ep->ctx) return nullptr;
    try {
        const auto &lanes = ep->impl->lanes();
        std::string s;
        for (const gdx::Endpoint::Lane &l : lanes) {
            const gdx::fb::Region *r = mem->impl->region(l.slot);
            std::string text = r != nullptr ? reach_text(*r) : "not registered (" + l.slot->name() + " refused it)";
            if (lanes.size() > 1) text = l.slot->name() + ": " + text;
            s += (s.empty() ? "" : " | ") + text;
        }
        return gdx::api::hand_out(&slot, std::move(s));
    } catch (...) {
        return nullptr;
    }
}

} // extern "C"
