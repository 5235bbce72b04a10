#include "fallback/staging_target.h"

#include "core/error.h"

namespace gdx::fb {

Region *StagingTarget::check_region(const CtrlMsg &m, unsigned need, const char *what, gdx_status_t *st) {
    std::string why;
    Region *r = regions_.check_peer_request(m.region, m.offset, m.length, need, st, &why);
    if (r == nullptr) report_.protocol_error(what, why);
    return r;
}

void StagingTarget::answer_done(PeerLink &peer, uint64_t token, gdx_status_t st, uint16_t pool, uint16_t slot,
                                bool keep) {
    CtrlMsg m;
    m.type = CtrlType::Done;
    m.token = token;
    m.status = st;
    m.pool = pool;
    m.slot = slot;
    m.keep = keep;
    peer.send(m, false); // a failed send means the peer is gone: it no longer waits for the answer
}

void StagingTarget::answer_get_done(PeerLink &peer, uint64_t token, gdx_status_t st, bool publishes) {
    CtrlMsg m;
    m.type = CtrlType::GetDone;
    m.token = token;
    m.status = st;
    peer.send(m, publishes);
}

// ---- credits -------------------------------------------------------------------------------------------------

void StagingTarget::on_want(PeerLink &peer, const CtrlMsg &m) {
    CreditGrantor *g = nullptr;
    if (gdx_status_t st = pools_.grantor(m.pool, &g); st != GDX_OK) {
        CtrlMsg no; // the peer fails the fragments waiting on this pool instead of waiting forever
        no.type = CtrlType::Grant;
        no.pool = m.pool;
        no.status = st;
        peer.send(no, false);
        return;
    }
    g->on_want(peer, m.count);
}

void StagingTarget::on_return(PeerLink &peer, const CtrlMsg &m) {
    CreditGrantor *g = pools_.find_grantor(m.pool);
    std::string why = "no pool " + std::to_string(m.pool);
    if (g == nullptr || g->on_return(peer, m.slots, &why) != GDX_OK)
        report_.protocol_error("RETURN", why);
}

// ---- put into a granted slot -------------------------------------------------------------------------------

void StagingTarget::on_filled(PeerLink &peer, const CtrlMsg &m) {
    CreditGrantor *grantor = pools_.find_grantor(m.pool);
    std::string why;
    if (grantor == nullptr || grantor->begin_fill(peer, m.slot, &why) != GDX_OK) {
        report_.protocol_error("FILLED", grantor == nullptr ? "no pool " + std::to_string(m.pool) : why);
        answer_done(peer, m.token, GDX_ERR_PROTOCOL, m.pool, m.slot, false);
        return;
    }
    CreditGrantor &g = *grantor;
    gdx_status_t st = GDX_OK;
    Region *r = check_region(m, tp::kAccessRemoteWrite, "FILLED", &st);
    if (r != nullptr && m.length > g.pool().slot_size()) {
        report_.protocol_error("FILLED", "length " + std::to_string(m.length) + " exceeds the slot size");
        st = GDX_ERR_PROTOCOL;
        r = nullptr;
    }
    if (r == nullptr) {
        answer_done(peer, m.token, st, m.pool, m.slot, g.end_fill(peer, m.slot));
        return;
    }
    CopyOutJob &j = copy_outs_.emplace_back();
    j.peer = &peer;
    j.grantor = &g;
    j.region = r;
    j.slot = m.slot;
    j.token = m.token;
    ++r->busy;
    ++peer.users;
    // Started here, not at the next progress(): the H2D copy overlaps the next fragment on the wire.
    st = copies_.copy_async(r->ptr(m.offset), g.pool().slot_ptr(m.slot), m.length, r->info().kind, r->info().device,
                          mem::CopyDir::ToDevice, &j.copy, /*peer_named=*/true);
    j.copy_pending = st == GDX_INPROGRESS;
    if (st != GDX_OK && st != GDX_INPROGRESS) j.status = st;
    report_.stats().target_bytes_copied += m.length;
}

// ---- get from a region the initiator cannot reach: stage it out -------------------------------------------------

void StagingTarget::on_get_req(PeerLink &peer, const CtrlMsg &m) {
    gdx_status_t st = GDX_OK;
    Region *r = check_region(m, tp::kAccessRemoteRead, "GET_REQ", &st);
    if (r != nullptr && m.length > params_.frag_size(r->info().kind)) {
        report_.protocol_error("GET_REQ", "length " + std::to_string(m.length) + " exceeds this side's fragment size");
        st = GDX_ERR_PROTOCOL;
        r = nullptr;
    }
    std::shared_ptr<const tp::RemoteKey> rkey;
    if (r != nullptr && peer.landing_rkey(m.rkey, md_, &rkey) != GDX_OK) {
        report_.protocol_error("GET_REQ", "the landing slot's rkey was refused by the transport");
        st = GDX_ERR_PROTOCOL;
        r = nullptr;
    }
    if (r == nullptr) {
        answer_get_done(peer, m.token, st, false);
        return;
    }
    StageOutJob &j = stage_outs_.emplace_back();
    j.peer = &peer;
    j.region = r;
    j.token = m.token;
    j.offset = m.offset;
    j.length = m.length;
    j.landing = m.addr;
    j.landing_rkey = std::move(rkey);
    ++r->busy;
    ++peer.users; // started by progress(), right after this handler returns
}

// One transition of a stage-out; true when it made one. The slot comes from the responder partition, which waits on
// nothing remote: a landing slot a peer holds for this get depends on it (README: deadlock freedom).
bool StagingTarget::stage_out_mapped(StageOutJob &j) {
    PeerLink &peer = *j.peer;
    if ((caps_.flags & tp::kCapPeerMap) == 0 || peer.landing_map_unavailable) return false;
    const mem::MemInfo &ri = j.region->info();
    uint8_t *dst = nullptr;
    gdx_status_t st = peer.mapped_range(*j.landing_rkey, j.landing, j.length, ri.kind, ri.device, &dst);
    if (st == GDX_INPROGRESS) return true; // asked; the job stays in NeedSlot until the answer
    if (st == GDX_ERR_UNSUPPORTED) {
        peer.landing_map_unavailable = true;
        return false;
    }
    if (st == GDX_ERR_PROTOCOL) report_.protocol_error("GET_REQ", "the landing range lies outside the landing pool's key");
    if (st == GDX_OK)
        st = copies_.copy_async(dst, j.region->ptr(j.offset), j.length, ri.kind, ri.device, mem::CopyDir::ToHost,
                              &j.copy, /*peer_named=*/true);
    j.copy_pending = st == GDX_INPROGRESS;
    if (st != GDX_OK && st != GDX_INPROGRESS) j.status = st;
    j.via_map = true;
    j.state = j.status == GDX_OK ? StageOutState::CopyIn : StageOutState::Wait;
    report_.stats().target_bytes_copied += j.length;
    ++report_.stats().frags_peer_mapped;
    return true;
}

bool StagingTarget::step(StageOutJob &j) {
    // A broken peer (declared dead, said BYE, transport failed) reads nothing more: a stage-out for it that has
    // not reached the wire stops here. One whose copy or put is in flight finishes first (the put's completion
    // comes from the transport, whose own clock bounds it).
    if (j.status == GDX_OK && (j.state == StageOutState::NeedSlot || j.state == StageOutState::Transfer) &&
        j.peer->broken()) {
        j.status = j.peer->failure();
        j.state = StageOutState::Wait;
        return true;
    }
    switch (j.state) {
    case StageOutState::NeedSlot: {
        if (stage_out_mapped(j)) return j.state != StageOutState::NeedSlot;
        if (j.pool == nullptr) {
            if (gdx_status_t st = pools_.pool(j.region->info().kind, j.region->info().device, &j.pool); st != GDX_OK) {
                j.status = st;
                j.state = StageOutState::Wait;
                return true;
            }
        }
        j.slot = j.pool->acquire(SlotRole::Responder);
        if (j.slot < 0) {
            if (!j.pool_waited) ++report_.stats().pool_waits;
            j.pool_waited = true;
            return false;
        }
        gdx_status_t st = copies_.copy_async(j.pool->slot_ptr(j.slot), j.region->ptr(j.offset), j.length,
                                           j.region->info().kind, j.region->info().device, mem::CopyDir::ToHost,
                                           &j.copy, /*peer_named=*/true);
        j.copy_pending = st == GDX_INPROGRESS;
        if (st != GDX_OK && st != GDX_INPROGRESS) j.status = st;
        j.state = j.status == GDX_OK ? StageOutState::CopyIn : StageOutState::Wait;
        report_.stats().target_bytes_copied += j.length;
        return true;
    }
    case StageOutState::CopyIn: {
        if (j.copy_pending) {
            gdx_status_t st = copies_.copy_test(&j.copy);
            if (st == GDX_INPROGRESS) return false;
            j.copy_pending = false;
            if (st != GDX_OK) {
                j.status = st;
                j.state = StageOutState::Wait;
                return true;
            }
        }
        // The region's bytes are in the slot: the region is free to go (mem_dereg) while the put still runs.
        release_region(j);
        j.state = j.via_map ? StageOutState::Wait : StageOutState::Transfer;
        return true;
    }
    case StageOutState::Transfer: {
        j.comp = tp::Completion{};
        j.comp.count = 1;
        gdx_status_t st = j.peer->ep().put(j.pool->slot_ptr(j.slot), j.length, &j.pool->memh(), j.landing,
                                           *j.landing_rkey, &j.comp);
        if (st == GDX_ERR_NO_RESOURCE) return false;
        if (st == GDX_OK) j.comp.count = 0;
        if (st != GDX_OK && st != GDX_INPROGRESS) {
            j.comp.count = 0;
            j.status = st;
            j.state = StageOutState::Wait;
            return true;
        }
        j.state = StageOutState::Wait;
        return true;
    }
    case StageOutState::Wait: return false;
    }
    return false;
}

// ---- small messages: one active message each way, copied synchronously ---------------------------------------------

void StagingTarget::on_small_put(PeerLink &peer, const CtrlMsg &m) {
    gdx_status_t st = GDX_OK;
    Region *r = check_region(m, tp::kAccessRemoteWrite, ctrl_type_name(m.type), &st);
    if (r != nullptr) {
        st = copies_.copy_sync(r->ptr(m.offset), m.data.data(), m.length, r->info(),
                             mem::CopyDir::ToDevice, true);
        report_.stats().target_bytes_copied += m.length;
    }
    // The copy is synchronous: the bytes are in the buffer, so the value may be seen now; a refused or failed
    // copy delivers nothing. Queued before DONE, which is what lets the initiator release later notifications.
    if (st == GDX_OK && m.type == CtrlType::SmallPutNotify) peer.inbox.push(m.value, report_.stats());
    answer_done(peer, m.token, st, kNoSlot, kNoSlot, false);
}

void StagingTarget::on_small_get_req(PeerLink &peer, const CtrlMsg &m) {
    CtrlMsg a;
    a.type = CtrlType::SmallGetData;
    a.token = m.token;
    std::vector<uint8_t> data;
    gdx_status_t st = GDX_OK;
    Region *r = check_region(m, tp::kAccessRemoteRead, "SMALL_GET_REQ", &st);
    if (r != nullptr && m.length + kSmallGetDataOverhead > caps_.max_am_bcopy) {
        report_.protocol_error("SMALL_GET_REQ", "length " + std::to_string(m.length) + " does not fit one message");
        st = GDX_ERR_PROTOCOL;
        r = nullptr;
    }
    if (r != nullptr) {
        data.resize(m.length);
        st = copies_.copy_sync(data.data(), r->ptr(m.offset), m.length, r->info(),
                             mem::CopyDir::ToHost, true);
        report_.stats().target_bytes_copied += m.length;
    }
    a.status = st;
    if (st == GDX_OK) a.data = data;
    peer.send(a, false);
}

// ---- progress ------------------------------------------------------------------------------------------------

unsigned StagingTarget::progress() {
    unsigned n = 0;
    for (auto it = copy_outs_.begin(); it != copy_outs_.end();) {
        CopyOutJob &j = *it;
        if (j.copy_pending) {
            gdx_status_t st = copies_.copy_test(&j.copy);
            if (st == GDX_INPROGRESS) {
                ++it;
                continue;
            }
            j.copy_pending = false;
            if (st != GDX_OK) j.status = st;
        }
        bool keep = j.grantor->end_fill(*j.peer, j.slot);
        answer_done(*j.peer, j.token, j.status, j.grantor->pool().id(), j.slot, keep);
        --j.region->busy;
        --j.peer->users;
        it = copy_outs_.erase(it);
        ++n;
    }
    for (auto it = stage_outs_.begin(); it != stage_outs_.end();) {
        StageOutJob &j = *it;
        for (int guard = 0; guard < 8 && step(j); ++guard) ++n;
        if (j.state != StageOutState::Wait || j.copy_pending || j.comp.count != 0) {
            ++it;
            continue;
        }
        if (j.status == GDX_OK && j.comp.status != GDX_OK) j.status = j.comp.status;
        // Answered only once the put has completed, with its outcome: the initiator takes GET_DONE as proof that
        // its landing slot holds the bytes (fenced, so it is read after the put on transports that pipeline).
        answer_get_done(*j.peer, j.token, j.status, j.status == GDX_OK && !j.via_map);
        if (j.slot >= 0) j.pool->release(static_cast<unsigned>(j.slot));
        release_region(j);
        --j.peer->users;
        it = stage_outs_.erase(it);
        ++n;
    }
    return n;
}

void StagingTarget::release_region(StageOutJob &j) {
    if (j.region == nullptr) return;
    --j.region->busy;
    j.region = nullptr;
}

bool StagingTarget::uses_peer(const PeerLink &p) const {
    for (const CopyOutJob &j : copy_outs_)
        if (j.peer == &p) return true;
    for (const StageOutJob &j : stage_outs_)
        if (j.peer == &p) return true;
    return false;
}

} // namespace gdx::fb
