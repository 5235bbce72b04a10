// The path of the bytes, as an MPI or UCX user sees it (README.md, "Which path the bytes took"):
//   GDX_LOG_LEVEL=info   one line per (transport, operation, memory kinds, peer) when a request of that kind first
//                        completes, and again when the mix changes (a path kind or staging reason not seen for it),
//                        from the engine's PathReport: what went direct, what was staged, and why;
//   GDX_UCT_STATS=yes    at exit, one line per transport with the engine's counters (bytes direct and staged, per
//                        staging reason), summed over every engine the process had, whatever the log level.
// gdx_info does not read a running process's counters: that would need a shared segment or socket per process
// and a way to find it, for numbers the exit line already gives.
#include "uct/bridge_engine.h"

#include "core/log.h"

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

using namespace gdx;

namespace gdx::uct {

namespace {

struct Totals {
    std::mutex m;
    std::map<std::string, fb::Stats> ended; // by transport: engines already destroyed
    std::vector<UctEngine *> live;
    bool print = false;
    bool hooked = false;
};

// Never destroyed: the exit handler may run after static destructors of this module.
Totals &totals() {
    static Totals *t = new Totals;
    return *t;
}

void print_line(const std::string &tl, const fb::Stats &s) {
    std::string why;
    for (unsigned i = 0; i < fb::kStageReasonCount; ++i) {
        char part[64];
        std::snprintf(part, sizeof(part), "%s%s %" PRIu64 " B", i == 0 ? "" : ", ", fb::stage_reason_name(i),
                      s.bytes_staged_by_reason[i]);
        why += part;
    }
    log::write(log::Level::Info, kComp,
               "%s path totals: direct %" PRIu64 " B (%" PRIu64 " fragments), staged %" PRIu64 " B (%" PRIu64
               " fragments; %s; small-message path %" PRIu64 " B in %" PRIu64 " messages; straight into mapped "
               "peer slots %" PRIu64 " fragments), copied for peers %" PRIu64 " B, requests %" PRIu64 " ok %" PRIu64
               " failed, copy failures %" PRIu64 ", refused control messages %" PRIu64,
               tl.c_str(), s.bytes_direct, s.frags_direct, s.bytes_staged, s.frags_staged, why.c_str(), s.bytes_small,
               s.msgs_small, s.frags_peer_mapped, s.target_bytes_copied, s.requests_completed, s.requests_failed,
               s.copy_failures, s.protocol_errors);
}

void print_totals() {
    Totals &t = totals();
    std::lock_guard<std::mutex> g(t.m);
    if (!t.print) return;
    std::map<std::string, fb::Stats> all = t.ended;
    for (UctEngine *ue : t.live) all[ue->tl()].merge(ue->engine().stats());
    for (const auto &[tl, s] : all) print_line(tl, s);
}

} // namespace

void stats_register(UctEngine *ue, bool print_at_exit) {
    Totals &t = totals();
    std::lock_guard<std::mutex> g(t.m);
    t.live.push_back(ue);
    t.ended.try_emplace(ue->tl()); // a transport that moved nothing still gets its line
    if (print_at_exit) t.print = true;
    if (t.print && !t.hooked) {
        if (std::atexit(print_totals) != 0)
            GDX_WARN(kComp, "GDX_UCT_STATS: atexit refused the handler: no totals will be printed at exit");
        t.hooked = true;
    }
}

void stats_unregister(UctEngine *ue) {
    Totals &t = totals();
    std::lock_guard<std::mutex> g(t.m);
    std::erase(t.live, ue);
    t.ended[ue->tl()].merge(ue->engine().stats());
}

void UctEngine::report_path(const GdxUctReq &q) {
    if (!log::enabled(log::Level::Info)) return;
    const fb::PathReport &p = q.r.path;
    const char *ltype = mem::type_name(q.local->info().type), *rtype = mem::type_name(q.remote->type());
    char key[192];
    std::snprintf(key, sizeof(key), "%d|%s|%s|%08x|%s|%u|%d", q.is_put ? 1 : 0, ltype, rtype, q.peer_tag, p.kind(),
                  p.reasons, p.small ? 1 : 0);
    if (!paths_logged_.insert(key).second) return;
    GDX_INFO(kComp, "%s to peer %08x: %s of %s memory %s its %s memory (%zu bytes): %s", tl_.c_str(), q.peer_tag,
             q.is_put ? "put" : "get", ltype, q.is_put ? "into" : "from", rtype, q.len, p.describe().c_str());
}

} // namespace gdx::uct
