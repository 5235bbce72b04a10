// The parked requests of one endpoint (UCT's pending queue), with the rules every transport shares, so they are
// written once:
//   add()       GDX_ERR_BUSY when nothing is parked and the endpoint has resources now (the caller retries the
//               operation itself: UCT's contract); otherwise the request is parked at the tail. No allocation.
//   dispatch()  runs parked requests in order while the endpoint has room; one that answers GDX_ERR_NO_RESOURCE
//               goes back to the head and dispatching stops, so the order is kept. Re-entry (a request's func
//               ending up in dispatch again) runs nothing.
//   fail_all()  runs each parked request once, so its owner learns the endpoint's error from the operation it
//               retries, and drops them (an endpoint that failed or is destroyed).
//   holds_back  while requests are parked, every new operation of the endpoint answers GDX_ERR_NO_RESOURCE, so
//               its caller parks it behind them and the endpoint's order holds (UCT's contract: UCX's mm and tcp
//               refuse a send while their pending queue is not empty): room that the peer frees (a drained ring)
//               must not let a new operation pass parked ones. An operation issued by a request that is being
//               dispatched is not held back: what was parked before it has run.
//   flush       a flush while requests are parked answers GDX_ERR_NO_RESOURCE (holds_back()): they were not
//               issued yet, so a flush that completed now would complete before them. UCP relies on it: its
//               flush then parks itself behind them. (Found as a lost MPI_Put under UCX 1.18's osc ucx: the put
//               was parked while gdx_shm connected, and the flush that MPI_Win_fence waited for said done.)
//               A flush that is itself being dispatched from the queue is not blocked: what was parked before
//               it has run, and what is still parked came after it (else a parked flush could never finish).
//               The UCT glue applies the same rule to its UCT requests before its own shortcuts
//               (uct/bridge_iface.cpp, has_parked).
#pragma once

#include "core/error.h"
#include "transport/transport.h"

namespace gdx::tp {

// An endpoint fence for a transport whose operations complete out of order (shm, cuda_ipc): after fence(), nothing
// new is issued until everything issued before it has completed. `outstanding` is the endpoint's own count of what
// was issued and has not completed. The one gate answers both questions that must agree: whether an operation may
// go now (holds), and whether pending_add may answer GDX_ERR_BUSY (open). When they disagreed (the fence was
// checked by the operations, not by pending_add), UCP's fenced rendezvous ATP spun for ever inside the RTR handler:
// the ATP answered NO_RESOURCE, pending_add answered BUSY ("retry now"), and nothing in between let the earlier puts
// complete (gdx_ipc and gdx_shm on UCX 1.16 with CUDA memory).
class FenceGate {
  public:
    void fence(bool outstanding) { armed_ = armed_ || outstanding; }
    // Whether a new operation must wait (the caller answers GDX_ERR_NO_RESOURCE); the gate opens for good once
    // what came before the fence has completed.
    bool holds(bool outstanding) {
        if (armed_ && !outstanding) armed_ = false;
        return armed_;
    }
    // The same answer without opening the gate (for room checks that must not change state).
    bool open(bool outstanding) const { return !armed_ || !outstanding; }

  private:
    bool armed_ = false;
};

class PendingQueue {
  public:
    bool empty() const { return head_ == nullptr; }
    bool holds_back() const { return head_ != nullptr && !dispatching_; }

    // `component`: for the log line of a bad request. `room_now`: the endpoint could take the operation now.
    gdx_status_t add(PendingRequest *req, bool room_now, const char *component) {
        if (req == nullptr || req->func == nullptr)
            return GDX_FAIL(GDX_ERR_INVALID_PARAM, component, "pending_add: null request or request without func");
        if (head_ == nullptr && room_now) return GDX_ERR_BUSY;
        req->next = nullptr;
        if (tail_ != nullptr) tail_->next = req;
        else head_ = req;
        tail_ = req;
        return GDX_OK;
    }

    // Runs parked requests while has_room() is true; returns how many ran.
    template <typename HasRoom>
    unsigned dispatch(HasRoom has_room) {
        if (dispatching_) return 0;
        dispatching_ = true;
        unsigned n = 0;
        while (head_ != nullptr && has_room()) {
            PendingRequest *req = pop();
            ++n;
            if (req->func(req) == GDX_ERR_NO_RESOURCE) { // still blocked: back to the head
                req->next = head_;
                head_ = req;
                if (tail_ == nullptr) tail_ = req;
                break;
            }
        }
        dispatching_ = false;
        return n;
    }

    void fail_all() {
        PendingRequest *req = head_;
        head_ = tail_ = nullptr;
        while (req != nullptr) {
            PendingRequest *next = req->next;
            req->next = nullptr;
            req->func(req);
            req = next;
        }
    }

  private:
    PendingRequest *pop() {
        PendingRequest *req = head_;
        head_ = req->next;
        if (head_ == nullptr) tail_ = nullptr;
        req->next = nullptr;
        return req;
    }

    PendingRequest *head_ = nullptr, *tail_ = nullptr;
    bool dispatching_ = false;
};

} // namespace gdx::tp
