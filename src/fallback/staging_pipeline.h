// StagingPipeline: the initiator side of puts and gets. Each request (Op) walks its fragments in order: a direct
// fragment is one transport operation; a staged fragment is a small state machine (Frag) that holds at most one
// local bounce slot and one peer slot, and at most GDX_STAGING_DEPTH of them run at once per request. Copies run
// on the copy engines' streams while earlier fragments are on the wire and later ones are still being copied, so
// D2H of fragment k+1, the wire of fragment k and the peer's H2D of fragment k-1 overlap.
//
// Staged put fragment:  [local slot → copy source into it] → [peer credit] → transport put (into the peer's slot
//                       or straight to the destination) → [FILLED, wait for DONE]
//   where the peer's pool is mapped here (kCapPeerMap, intra-node): peer credit → copy the source straight into
//                       the peer's slot (D2H for GPU memory; the peer's H2D reads the same pages) → FILLED → DONE
// Staged get fragment:  local landing slot → (GET_REQ, the peer stages out and puts into the landing slot, GET_DONE)
//                       or (transport get into the landing slot) → copy landing slot → destination
#pragma once

#include "fallback/copy_service.h"
#include "fallback/engine.h"
#include "fallback/peer_link.h"
#include "fallback/pool_registry.h"
#include "fallback/reporter.h"

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace gdx::fb {

enum class FragState : uint8_t {
    Free,        // entry unused
    NeedSlot,    // waiting for a local initiator slot (pool back-pressure)
    CopyIn,      // put: source → local slot copy running
    NeedCredit,  // put: waiting for a slot of the peer's pool
    MapPeer,     // put: holds a peer slot; the peer's pool is being mapped here (first use; kCapPeerMap)
    CopyToPeer,  // put: source → the peer's slot, mapped here, copy running (no local slot, no transport put)
    Transfer,    // the transport put/get is to be issued (retried after back-pressure)
    Publish,     // put into a peer slot issued: FILLED to send
    SendGetReq,  // get from a staged remote: GET_REQ to send
    Wait,        // waiting for the transport operation and/or the peer's answer
    CopyOut,     // get: landing slot → destination copy running
    Done,
};

struct Frag;

struct FragCompletion : tp::Completion {
    Frag *frag = nullptr;
};

struct Frag {
    Op *op = nullptr;
    uint32_t index = 0;
    uint64_t off = 0, len = 0; // within the request
    FragState state = FragState::Free;
    bool local_staged = false, remote_staged = false;
    bool xfer_pending = false;   // a transport operation of this fragment has not completed
    bool remote_pending = false; // an answer from the peer (DONE / GET_DONE) is outstanding
    bool copy_pending = false;
    bool pool_waited = false;    // counted once in pool_waits
    bool credit_waited = false;  // counted once in credit_waits and in the wallet's `waiting`
    bool via_map = false;        // copied straight into the peer's mapped slot: FILLED needs no fence
    int lslot = -1;              // local bounce slot (initiator partition)
    int rslot = -1;              // peer slot (credit) of a put
    mem::CopyHandle copy;
    FragCompletion comp;
    gdx_status_t status = GDX_OK;
};

struct OpCompletion : tp::Completion {
    Op *op = nullptr;
};

struct Op {
    uint32_t id = 0;
    bool is_put = true;
    bool small = false;
    Request *req = nullptr;
    PeerLink *peer = nullptr;
    Region *local = nullptr;
    const RemoteRegion *remote = nullptr;
    uint64_t loff = 0, roff = 0, len = 0;
    uint64_t frag = 0;
    uint32_t nfrags = 0, next = 0;
    bool decided = false;     // `pending` holds the decision for fragment `next` (kept across back-pressure)
    uint8_t pending_reasons = 0;
    bool pending_local_staged = false, pending_remote_staged = false;
    uint64_t run_off = 0, run_len = 0; // consecutive direct fragments not issued yet (one transport operation)
    BouncePool *lpool = nullptr;
    std::vector<Frag> frags;  // GDX_STAGING_DEPTH entries
    unsigned staged_active = 0;
    OpCompletion direct;      // direct transport operations and the final flush (count = outstanding)
    bool needs_flush = false; // some bytes went straight into the peer's memory: flush before completing
    bool flush_issued = false;
    bool small_sent = false;
    bool notify = false;          // gdx_put_notify: the peer is told notify_value once every byte is there
    bool notify_embedded = false; // ... by the SMALL_PUT_NOTIFY itself (else NOTIFY after completion: notify.h)
    uint64_t notify_value = 0;
    gdx_status_t status = GDX_OK;
};

// The small-message path's limits (GDX_STAGING_THRESH, and what one am_bcopy holds after the header): the largest
// staged message that takes it, for a put and for a put with notification (its value takes 8 bytes); 0 = none.
struct SmallLimits {
    size_t put = 0;
    size_t put_notify = 0;
    static SmallLimits of(const tp::Capabilities &caps, const Params &params); // staging_replies.cpp
};

class StagingPipeline {
  public:
    // `caps`: the transport's operation limits and flags (max_put/max_get, kCapGet, kCapPeerMap); `params`: fragment
    // size and depth, and the fragment faults (GDX_FAULT_P2P_*), which the pipeline owns; `pools`: local bounce slots;
    // `copies`: every copy; `report`: counters and refused answers. All must outlive the pipeline.
    StagingPipeline(const tp::Capabilities &caps, const Params &params, SmallLimits small, PoolRegistry &pools,
                    CopyService &copies, Reporter &report)
        : caps_(caps), params_(params), small_(small), faults_(params.fault), pools_(pools), copies_(copies),
          report_(report) {}
    ~StagingPipeline();

    // `notify`: a put with notification (its value), else nullptr.
    gdx_status_t submit(bool is_put, PeerLink &peer, Region &local, uint64_t loff, const RemoteRegion &remote,
                        uint64_t roff, uint64_t len, Request *req, const uint64_t *notify = nullptr);
    unsigned progress();
    bool idle() const { return active_.empty() && done_.empty(); } // progress() would do nothing
    size_t active() const { return active_.size(); }
    bool uses_peer(const PeerLink &p) const;

    // Answers addressed to initiator-side state.
    void on_done(PeerLink &peer, const CtrlMsg &m);
    void on_get_done(PeerLink &peer, const CtrlMsg &m);
    void on_small_get_data(PeerLink &peer, const CtrlMsg &m);
    // Engine teardown: every request fails with GDX_ERR_CANCELED; answers from peers are no longer awaited, but
    // copies and transport operations in flight still finish (the caller keeps calling progress()).
    void cancel_all();

  private:
    bool advance(Op &op);
    bool start_fragments(Op &op);
    void decide(Op &op);
    gdx_status_t issue_direct(Op &op, uint64_t off, uint64_t len);
    bool step(Frag &f);
    bool step_put(Frag &f);
    bool take_credit(Frag &f);
    bool put_fragment(Frag &f);
    bool step_get(Frag &f);
    bool take_slot(Frag &f);
    bool map_possible(Op &op);
    bool step_map_peer(Frag &f);
    gdx_status_t start_copy(Frag &f, bool into_slot);
    bool poll_copy(Frag &f);
    bool finish_if_quiet(Frag &f);
    void fail(Frag &f, gdx_status_t st);
    void fail(Op &op, gdx_status_t st);
    bool finished(Op &op);
    void send_small(Op &op);
    Op *find(uint64_t token, const PeerLink &peer, const char *what);
    Frag *find_frag(Op &op, uint64_t token);
    void complete(Op &op);
    std::string describe_failure(const Op &op, gdx_status_t st) const; // request_error.cpp
    static void frag_completed(tp::Completion *c);
    static uint64_t token(const Op &op, uint32_t index) { return (uint64_t(op.id) << 32) | index; }

    const tp::Capabilities &caps_;
    const Params &params_;
    const SmallLimits small_;
    DirectFaults faults_; // asked once per fragment decision (decide)
    PoolRegistry &pools_;
    CopyService &copies_;
    Reporter &report_;
    std::vector<Op *> active_;
    std::vector<Op *> done_;                 // completed during a pass: callbacks run after it
    std::vector<std::unique_ptr<Op>> free_;  // recycled Op objects
    std::unordered_map<uint32_t, Op *> by_id_;
    uint32_t next_id_ = 1;
};

} // namespace gdx::fb
