// Ordering around engine requests (bridge_engine.h). An engine put completes when its bytes are at the target, but
// later operations on the same endpoint could overtake it, so UCT's flush and fence must wait for it:
//   ep flush       the UCT completion fires once the engine requests issued before it completed and the
//                  transport's own flush after them did (UCP's flush of a put rendezvous, of ucp_put_nbx);
//   ep fence       answered NO_RESOURCE while engine requests are outstanding: UCP parks the request that fenced
//                  (proto v2's fenced ATP after a put rendezvous, rma.inl's weak fence) and it waits here, held
//                  back from gdx's queue, until they completed; then it and what was parked behind it go in order;
//   iface fence    engine requests issued later on each endpoint go to the engine once the earlier ones completed.
// Nothing here calls into UCP except release_pending (parked requests), which progress() runs after all state
// changes and before the completions.
#include "uct/bridge_engine.h"

#include "core/error.h"
#include "core/log.h"

#include <cstdint>

using namespace gdx;

namespace gdx::uct {

namespace {

// The oldest engine request of `ep` not completed yet (submitted or held), UINT64_MAX when none.
uint64_t oldest(const gdx_uct_ep *ep) {
    uint64_t s = UINT64_MAX;
    if (ep->eng_head != nullptr) s = ep->eng_head->seq;
    if (ep->held_head != nullptr && ep->held_head->seq < s) s = ep->held_head->seq;
    return s;
}

} // namespace

bool UctEngine::ordered_after_fence(gdx_uct_ep *ep) {
    ep_used(ep);
    if (ep->held_head != nullptr) return true; // behind held ones, in order
    if (ep->order_after == 0) return false;
    if (ep->eng_head != nullptr && ep->eng_head->seq <= ep->order_after) return true;
    ep->order_after = 0; // every request before the fence completed
    return false;
}

void UctEngine::hold(gdx_uct_ep *ep, GdxUctReq *q) {
    q->after = ep->order_after;
    q->next = nullptr;
    q->prev = ep->held_tail;
    if (ep->held_tail != nullptr) ep->held_tail->next = q;
    else ep->held_head = q;
    ep->held_tail = q;
}

gdx_status_t UctEngine::flush(gdx_uct_ep *ep, void *uct_comp) {
    if (uct_comp == nullptr) return GDX_INPROGRESS; // UCP polls: done once no engine request is left
    ep_used(ep);
    ep->flush_waits.push_back({ep->eng_seq, uct_comp});
    return GDX_INPROGRESS;
}

gdx_status_t UctEngine::ep_fence(gdx_uct_ep *ep) {
    if (!outstanding(ep)) return GDX_OK;
    ep_used(ep);
    ep->hold_pending = ep->eng_seq;
    return GDX_ERR_NO_RESOURCE;
}

void UctEngine::iface_fence(gdx_uct_ep *eps) {
    for (gdx_uct_ep *ep = eps; ep != nullptr; ep = ep->next)
        if (outstanding(ep)) ep->order_after = ep->eng_seq;
}

bool UctEngine::hold_pending(gdx_uct_ep *ep, void *uct_req) {
    if (ep->hold_pending != 0 && oldest(ep) > ep->hold_pending) ep->hold_pending = 0; // satisfied meanwhile
    if (ep->hold_pending == 0 && ep->held_pending.empty()) return false;
    ep_used(ep);
    ep->held_pending.push_back(uct_req);
    hand_over_later(waiting_eps_, ep); // progress() looks again, also if no request completes any more
    return true;
}

void UctEngine::release_ep(gdx_uct_ep *ep, Completions *comps) {
    // Held requests whose fence is satisfied go to the engine, in order.
    while (ep->held_head != nullptr) {
        GdxUctReq *q = ep->held_head;
        if (ep->eng_head != nullptr && ep->eng_head->seq <= q->after) break;
        ep->held_head = q->next;
        if (ep->held_head == nullptr) ep->held_tail = nullptr;
        else ep->held_head->prev = nullptr;
        gdx_status_t st = submit(q);
        if (st != GDX_INPROGRESS) { // refused at submission (logged) or nothing to move: complete it now
            comps->emplace_back(q->uct_comp, st);
            put_req(q);
        }
    }
    // Flushes whose engine requests completed: the transport's flush after them.
    const uint64_t first = oldest(ep);
    while (!ep->flush_waits.empty() && ep->flush_waits.front().seq < first) {
        void *comp = ep->flush_waits.front().uct_comp;
        gdx_status_t st = gdx_uct_ep_transport_flush(ep, comp);
        if (st == GDX_ERR_NO_RESOURCE) { // UCT requests parked on gdx's queue go first: look again later
            hand_over_later(waiting_eps_, ep);
            break;
        }
        ep->flush_waits.pop_front();
        if (st != GDX_INPROGRESS) comps->emplace_back(comp, st);
    }
    if (ep->hold_pending != 0 && first > ep->hold_pending) ep->hold_pending = 0;
}

void UctEngine::release_pending(gdx_uct_ep *ep) {
    if (ep->hold_pending != 0) return;
    while (!ep->held_pending.empty()) {
        void *req = ep->held_pending.front();
        ep->held_pending.pop_front();
        ep->dispatching_held = true;
        gdx_status_t st = gdx_uct_glue_dispatch(req);
        if (live_eps_.count(ep) == 0) return; // the request's callback destroyed the endpoint
        ep->dispatching_held = false;
        if (st == GDX_OK) continue;
        ep->held_pending.push_front(req); // still first in line
        if (ep->hold_pending != 0) return; // it fenced again: wait for the requests before that fence
        // Transport back-pressure: the rest goes to gdx's queue, in order, which dispatches it when it can.
        while (!ep->held_pending.empty()) {
            if (gdx_uct_ep_transport_pending_add(ep, ep->held_pending.front()) != GDX_OK) {
                hand_over_later(waiting_eps_, ep); // resources came free meanwhile: dispatch from here next time
                return;
            }
            ep->held_pending.pop_front();
        }
        return;
    }
}

} // namespace gdx::uct
