// Bridge: endpoints whose peer is gone (README.md, "A peer that dies"; GAPS.md, 16). The glue's progress asks for them
// one at a time (gdx_uct_iface_take_failure) and reports each to UCT's error handler once; arm and ep_check only
// bring that look forward.
#include "uct/bridge_engine.h"
#include "uct/bridge_internal.h"

using namespace gdx;
using namespace gdx::uct;

// Why the peer behind `ep` is gone, or GDX_OK (GAPS.md, 16). A connection still being set up is not a
// failure: the transport bounds that by GDX_CONN_TIMEOUT and then answers the timeout. The staging engine's verdict
// counts too: a peer it declared dead (silent for GDX_PEER_TIMEOUT while staged work waited on it, or it said BYE
// because its endpoint went) may still hold a transport connection that looks up.
gdx_status_t gdx_uct_ep_failure(const gdx_uct_ep *ep, bool *by_staging) {
    *by_staging = false;
    if (ep->watch != gdx_uct_ep::Watch::Connected) return GDX_OK;
    gdx_status_t st = ep->ep->state();
    if (st != GDX_OK && st != GDX_INPROGRESS) return st;
    if (ep->iface->ue == nullptr) return GDX_OK;
    st = ep->iface->ue->engine().peer_state(*ep->ep);
    *by_staging = st != GDX_OK;
    return st;
}

extern "C" int gdx_uct_iface_take_failure(gdx_uct_iface_t *iface, gdx_uct_ep_failure_t *out) {
    if (!iface->failure_due) return 0;
    for (gdx_uct_ep *ep = iface->eps; ep != nullptr; ep = ep->next) {
        bool by_staging;
        const gdx_status_t st = gdx_uct_ep_failure(ep, &by_staging);
        if (st == GDX_OK) continue;
        ep->watch = gdx_uct_ep::Watch::Reported;
        *out = gdx_uct_ep_failure_t{ep->glue, st, ep->peer_tag, by_staging ? 1 : 0};
        return 1; // still due: the caller asks again, and the next look starts from the (maybe changed) list head
    }
    iface->failure_due = false;
    return 0;
}

extern "C" void gdx_uct_ep_check(gdx_uct_ep_t *ep) {
    ep->iface->touched(); // a failure found here is reported from the next full progress
    bool by_staging;
    if (gdx_uct_ep_failure(ep, &by_staging) != GDX_OK) ep->iface->failure_due = true;
}
