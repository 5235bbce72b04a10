// StagingTarget: the side of staging that serves peers. It grants slots of our pools (WANT/RETURN through the
// CreditGrantor), copies what a peer put into a granted slot out to the destination region (FILLED → copy-out →
// DONE), stages regions out for a peer's get (GET_REQ → copy into an initiator slot → put into the peer's landing
// slot → put complete → GET_DONE), and serves the small-message path (SMALL_PUT, SMALL_GET_REQ).
//
// Every field of every request is checked before use: the region id must name a live region of this engine with
// the right access, [offset, offset+length) must lie inside it (RegionTable::check_peer_request: this side is the
// enforcement point for a peer's request), the slot must be granted to this very peer and not in use. A refused
// request is answered with an error status (GDX_ERR_ACCESS_DENIED / GDX_ERR_PROTOCOL) so the peer's request fails
// cleanly, and logged; nothing is touched.
#pragma once

#include "fallback/copy_service.h"
#include "fallback/engine.h"
#include "fallback/peer_link.h"
#include "fallback/pool_registry.h"
#include "fallback/region_table.h"
#include "fallback/reporter.h"

#include <list>
#include <memory>

namespace gdx::fb {

class StagingTarget {
  public:
    // `caps`: kCapPeerMap and the am_bcopy limit; `md`: unpacks the rkeys of peers' landing slots; `params`: this
    // side's fragment sizes; `regions`: what peers' requests name; `pools`: grantors and responder slots;
    // `copies`: every copy; `report`: counters and refused requests. All must outlive the target.
    StagingTarget(const tp::Capabilities &caps, tp::MemoryDomain &md, const Params &params, RegionTable &regions,
                  PoolRegistry &pools, CopyService &copies, Reporter &report)
        : caps_(caps), md_(md), params_(params), regions_(regions), pools_(pools), copies_(copies), report_(report) {}

    void on_want(PeerLink &peer, const CtrlMsg &m);
    void on_return(PeerLink &peer, const CtrlMsg &m);
    void on_filled(PeerLink &peer, const CtrlMsg &m);
    void on_get_req(PeerLink &peer, const CtrlMsg &m);
    void on_small_put(PeerLink &peer, const CtrlMsg &m);
    void on_small_get_req(PeerLink &peer, const CtrlMsg &m);

    unsigned progress();
    bool idle() const { return copy_outs_.empty() && stage_outs_.empty(); } // progress() would do nothing
    size_t active() const { return copy_outs_.size() + stage_outs_.size(); }
    bool uses_peer(const PeerLink &p) const;

  private:
    struct CopyOutJob {
        PeerLink *peer = nullptr;
        CreditGrantor *grantor = nullptr;
        Region *region = nullptr;
        uint16_t slot = 0;
        uint64_t token = 0;
        mem::CopyHandle copy;
        bool copy_pending = false;
        gdx_status_t status = GDX_OK;
    };
    enum class StageOutState : uint8_t { NeedSlot, CopyIn, Transfer, Wait };
    struct StageOutJob {
        PeerLink *peer = nullptr;
        Region *region = nullptr; // held (busy) until its bytes are in the slot; nullptr after
        uint64_t token = 0, offset = 0, length = 0, landing = 0;
        std::shared_ptr<const tp::RemoteKey> landing_rkey;
        BouncePool *pool = nullptr;
        int slot = -1;
        StageOutState state = StageOutState::NeedSlot;
        bool pool_waited = false;
        bool copy_pending = false;
        bool via_map = false; // copied straight into the peer's landing slot, mapped here: no put, no fence
        mem::CopyHandle copy;
        tp::Completion comp;
        gdx_status_t status = GDX_OK;
    };

    // The live region `m.region` if the peer may `need` it over [m.offset, +m.length); else nullptr with *st set.
    Region *check_region(const CtrlMsg &m, unsigned need, const char *what, gdx_status_t *st);
    bool step(StageOutJob &j);
    // Drops the job's hold on its region (once): after the copy into the slot, or when the job ends.
    static void release_region(StageOutJob &j);
    // Stage-out straight into the requester's landing slot, mapped here (kCapPeerMap); false when that is not
    // possible now or ever (then the job takes a responder slot and a transport put).
    bool stage_out_mapped(StageOutJob &j);
    void answer_done(PeerLink &peer, uint64_t token, gdx_status_t st, uint16_t pool, uint16_t slot, bool keep);
    void answer_get_done(PeerLink &peer, uint64_t token, gdx_status_t st, bool publishes);

    const tp::Capabilities &caps_;
    tp::MemoryDomain &md_;
    const Params &params_;
    RegionTable &regions_;
    PoolRegistry &pools_;
    CopyService &copies_;
    Reporter &report_;
    std::list<CopyOutJob> copy_outs_;   // list: jobs do not move while copies and completions refer to them
    std::list<StageOutJob> stage_outs_;
};

} // namespace gdx::fb
