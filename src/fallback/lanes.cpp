#include "fallback/lanes.h"

#include "core/error.h"
#include "fallback/reporter.h"

#include <string>

namespace gdx::fb {

size_t choose_lane(std::span<const Lane> lanes, const Transfer &t, const char **why) {
    size_t stage = SIZE_MAX, any = SIZE_MAX;
    for (size_t i = 0; i < lanes.size(); ++i) {
        const Lane &l = lanes[i];
        if (l.local == nullptr || l.remote == nullptr) continue;
        // direct_possible: a lane whose registrations say "direct" may still have no direct path to this peer
        // (cuda_ipc between GPUs without P2P); it is then one that stages, not a direct one.
        if (l.ep->direct_possible() && l.local->direct(t.local_off, t.len) && l.remote->direct(t.remote_off, t.len)) {
            *why = "reaches both buffers directly";
            return i;
        }
        if (stage == SIZE_MAX && l.engine->can_stage()) stage = i;
        if (any == SIZE_MAX) any = i;
    }
    *why = stage != SIZE_MAX ? "no lane reaches both buffers directly; the first that can stage"
           : any != SIZE_MAX ? "no lane reaches both buffers directly or can stage; the first with both keys"
                             : "no lane has both this registration and the peer's key";
    return stage != SIZE_MAX ? stage : any;
}

gdx_status_t submit(std::span<const Lane> lanes, const Transfer &t, Request *req, size_t *chosen) {
    const char *why = "";
    const size_t i = choose_lane(lanes, t, &why);
    if (i == SIZE_MAX) {
        std::string names;
        for (const Lane &l : lanes) {
            std::string_view n = l.engine->iface().transport_name();
            names += (names.empty() ? "" : "+") + std::string(n);
        }
        return GDX_FAIL(GDX_ERR_UNREACHABLE, kComp, "no lane of the endpoint (%s) has both this registration and "
                        "the peer's key", names.c_str());
    }
    *chosen = i;
    const Lane &l = lanes[i];
    if (lanes.size() > 1 && log::enabled(log::Level::Debug)) {
        std::string_view n = l.engine->iface().transport_name();
        GDX_DEBUG(kComp, "%s of %zu bytes over %.*s: %s", t.is_put ? "put" : "get", t.len, static_cast<int>(n.size()),
                  n.data(), why);
    }
    if (!t.is_put) return l.engine->get(*l.ep, *l.local, t.local_off, *l.remote, t.remote_off, t.len, req);
    if (t.notify != nullptr)
        return l.engine->put_notify(*l.ep, *l.local, t.local_off, *l.remote, t.remote_off, t.len, *t.notify, req);
    return l.engine->put(*l.ep, *l.local, t.local_off, *l.remote, t.remote_off, t.len, req);
}

} // namespace gdx::fb
