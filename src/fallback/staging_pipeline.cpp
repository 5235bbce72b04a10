#include "fallback/staging_pipeline.h"

#include "core/error.h"

#include <algorithm>

namespace gdx::fb {

StagingPipeline::~StagingPipeline() = default;

gdx_status_t StagingPipeline::submit(bool is_put, PeerLink &peer, Region &local, uint64_t loff,
                                     const RemoteRegion &remote, uint64_t roff, uint64_t len, Request *req,
                                     const uint64_t *notify) {
    const tp::Capabilities &caps = caps_;
    uint64_t frag = std::min(params_.frag_size(local.info().kind), remote.frag_size());
    uint64_t max_op = is_put ? caps.max_put : caps.max_get;
    // The value of a put with notification takes 8 bytes of the small path's message.
    const uint64_t small_max = notify != nullptr ? small_.put_notify : small_.put;
    const bool small = len != 0 && len <= small_max;
    // A message that fits the small path is decided as one piece: staged, it is one active message.
    if (small) frag = len;
    if (max_op != 0) frag = std::min(frag, max_op);
    uint64_t nfrags = (len + frag - 1) / frag;
    if (nfrags > UINT32_MAX)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "%s of %llu bytes: more than 2^32 fragments of %llu bytes",
                        is_put ? "put" : "get", static_cast<unsigned long long>(len),
                        static_cast<unsigned long long>(frag));
    Op *recycled = nullptr;
    if (!free_.empty()) {
        recycled = free_.back().release();
        free_.pop_back();
    }
    Op &op = recycled != nullptr ? *recycled : *new Op; // owned by active_ until complete() recycles it
    std::vector<Frag> frags = std::move(op.frags);    // keeps its capacity across recycling
    op = Op{};
    op.frags = std::move(frags);
    op.frags.assign(params_.depth, Frag{});
    do { // ids are 32 bits and wrap; a live id is never reused (answers are matched by it)
        op.id = next_id_++;
    } while (op.id == 0 || by_id_.count(op.id) != 0);
    op.is_put = is_put;
    op.req = req;
    op.peer = &peer;
    op.local = &local;
    op.remote = &remote;
    op.loff = loff;
    op.roff = roff;
    op.len = len;
    op.frag = frag;
    op.nfrags = static_cast<uint32_t>(nfrags);
    op.direct.op = &op;
    for (Frag &f : op.frags) f.op = &op;
    req->status = GDX_INPROGRESS;
    req->error.clear();
    req->path = PathReport{};
    req->path.frag_size = static_cast<uint32_t>(frag);
    req->path.depth = params_.depth;
    req->op_ = &op;
    ++local.busy;
    ++peer.users;
    by_id_[op.id] = &op;
    active_.push_back(&op);
    if (small) decide(op);
    const bool staged_small = small && (op.pending_local_staged || op.pending_remote_staged);
    if (notify != nullptr) {
        op.notify = true;
        op.notify_value = *notify;
        // Riding with the data keeps issue order only when no earlier notification to this peer is still owed.
        op.notify_embedded = staged_small && peer.outbox.empty();
        peer.outbox.add(op.id, op.notify_value, op.notify_embedded);
    }
    if (staged_small) {
        send_small(op);
        return GDX_INPROGRESS;
    }
    advance(op); // the first fragments leave now, not at the next progress()
    return GDX_INPROGRESS;
}

void StagingPipeline::decide(Op &op) {
    uint64_t off = uint64_t(op.next) * op.frag;
    uint64_t len = std::min(op.frag, op.len - off);
    bool local_ok = op.local->direct(op.loff + off, len);
    bool remote_ok = op.remote->direct(op.roff + off, len);
    uint8_t reasons = 0;
    if (!local_ok) reasons |= kStageLocalUnreachable;
    if (!remote_ok) reasons |= kStageRemoteUnreachable;
    if (!op.is_put && remote_ok && (caps_.flags & tp::kCapGet) == 0) {
        remote_ok = false; // the peer stages out and puts to us instead
        reasons |= kStageNoTransportOp;
    }
    if ((local_ok || remote_ok) && !op.peer->ep().direct_possible()) {
        local_ok = remote_ok = false; // no direct path to this peer (cuda_ipc without P2P): both sides stage
        reasons |= kStageNoTransportOp;
    }
    if (faults_.deny_direct()) {
        local_ok = remote_ok = false;
        reasons |= kStageFaultInjected;
    }
    op.pending_local_staged = !local_ok;
    op.pending_remote_staged = !remote_ok;
    op.pending_reasons = reasons;
    op.decided = true;

    PathReport &p = op.req->path;
    Stats &s = report_.stats();
    const tp::ChunkReg *lchunk = op.local->chunk_at(op.loff + off);
    if (reasons == 0) {
        p.bytes_direct += len;
        ++p.frags_direct;
        p.local_reach |= reach_bit(lchunk != nullptr ? lchunk->reach : tp::Reach::Host);
        p.remote_reach |= reach_bit(op.remote->reach_at(op.roff + off));
        s.bytes_direct += len;
        ++s.frags_direct;
    } else {
        p.bytes_staged += len;
        ++p.frags_staged;
        p.reasons |= reasons;
        p.stage_sides |= (local_ok ? 0 : kStageSideLocal) | (remote_ok ? 0 : kStageSideRemote);
        s.bytes_staged += len;
        ++s.frags_staged;
        for (unsigned i = 0; i < kStageReasonCount; ++i)
            if (reasons & (1u << i)) s.bytes_staged_by_reason[i] += len;
    }
    GDX_DEBUG(kComp, "request %u %s fragment %u [%llu, +%llu): %s%s%s%s", op.id, op.is_put ? "put" : "get", op.next,
              static_cast<unsigned long long>(off), static_cast<unsigned long long>(len),
              reasons == 0 ? "direct" : "staged: ", stage_reasons_text(reasons).c_str(),
              (reasons & kStageLocalUnreachable) && lchunk != nullptr ? " — " : "",
              (reasons & kStageLocalUnreachable) && lchunk != nullptr ? lchunk->reason.c_str() : "");
}

// ---- the request state machine ---------------------------------------------------------------------------------

bool StagingPipeline::advance(Op &op) {
    bool progressed = start_fragments(op);
    for (Frag &f : op.frags) {
        if (f.state == FragState::Free) continue;
        for (int guard = 0; guard < 16 && step(f); ++guard) progressed = true;
    }
    return progressed;
}

// Walks the fragments in order. Consecutive direct fragments are issued as one transport operation (a "run", up to
// the transport's limit): each is still decided and counted on its own, but the wire sees one large put or get.
bool StagingPipeline::start_fragments(Op &op) {
    bool progressed = false;
    const tp::Capabilities &caps = caps_;
    const uint64_t max_op = op.is_put ? caps.max_put : caps.max_get;
    const uint64_t run_cap = max_op != 0 ? max_op : uint64_t(1) << 30;
    while (op.status == GDX_OK && (op.next < op.nfrags || op.run_len != 0)) {
        if (op.next < op.nfrags && !op.decided) decide(op);
        uint64_t off = uint64_t(op.next) * op.frag;
        uint64_t len = op.next < op.nfrags ? std::min(op.frag, op.len - off) : 0;
        bool direct = op.next < op.nfrags && !op.pending_local_staged && !op.pending_remote_staged;
        if (direct && (op.run_len == 0 || op.run_len + len <= run_cap)) {
            if (op.run_len == 0) op.run_off = off;
            op.run_len += len;
        } else if (op.run_len != 0) {
            gdx_status_t st = issue_direct(op, op.run_off, op.run_len);
            if (st == GDX_ERR_NO_RESOURCE) break; // the transport pushes back: the same run, later
            if (st != GDX_OK && st != GDX_INPROGRESS) {
                fail(op, st);
                break;
            }
            if (op.is_put) op.needs_flush = true;
            op.run_len = 0;
            progressed = true;
            continue;
        } else {
            if (op.staged_active == op.frags.size()) break; // GDX_STAGING_DEPTH staged fragments in flight
            auto it = std::find_if(op.frags.begin(), op.frags.end(),
                                   [](const Frag &f) { return f.state == FragState::Free; });
            Frag &f = *it;
            FragCompletion comp;
            comp.cb = frag_completed;
            comp.frag = &f;
            f = Frag{};
            f.op = &op;
            f.comp = comp;
            f.index = op.next;
            f.off = off;
            f.len = len;
            f.local_staged = op.pending_local_staged;
            f.remote_staged = op.pending_remote_staged;
            // A get always lands in a local slot when anything is staged; a put needs one only to copy its source,
            // and not even then when the peer's slot is mapped here (the source is copied straight into it).
            bool into_peer = op.is_put && f.remote_staged && map_possible(op);
            f.state = (!op.is_put || (f.local_staged && !into_peer)) ? FragState::NeedSlot : FragState::NeedCredit;
            ++op.staged_active;
        }
        op.decided = false;
        ++op.next;
        progressed = true;
    }
    return progressed;
}

gdx_status_t StagingPipeline::issue_direct(Op &op, uint64_t off, uint64_t len) {
    tp::Endpoint &ep = op.peer->ep();
    uint8_t *lptr = op.local->ptr(op.loff + off);
    uint64_t raddr = op.remote->base() + op.roff + off;
    ++op.direct.count; // counted before the call: the transport may complete it from a later progress() only
    gdx_status_t st = op.is_put ? ep.put(lptr, len, &op.local->memh(), raddr, op.remote->rkey(), &op.direct)
                                : ep.get(lptr, len, &op.local->memh(), raddr, op.remote->rkey(), &op.direct);
    if (st != GDX_INPROGRESS) --op.direct.count;
    return st;
}

void StagingPipeline::frag_completed(tp::Completion *c) {
    static_cast<FragCompletion *>(c)->frag->xfer_pending = false; // status stays in c->status; step() reads it
}

bool StagingPipeline::step(Frag &f) {
    Op &op = *f.op;
    // A broken peer answers nothing: not a DONE, nor a GRANT a credit wait needs (issue 16: waits for credits
    // hung when the target destroyed its endpoint or stopped).
    if (op.status == GDX_OK && op.peer->broken()) fail(op, op.peer->failure());
    if (op.status != GDX_OK) {
        // The request failed elsewhere: nothing new starts; what runs (copies, transport operations, a
        // published FILLED) finishes first.
        switch (f.state) {
        case FragState::NeedSlot:
        case FragState::NeedCredit:
        case FragState::Transfer:
        case FragState::Publish:
        case FragState::SendGetReq: f.state = FragState::Wait; return true;
        default: break;
        }
    }
    if (f.state == FragState::Wait) {
        if (f.remote_pending && op.peer->broken()) {
            f.remote_pending = false; // no answer will come
            fail(f, op.peer->failure());
        }
        if (!f.xfer_pending && f.comp.status != GDX_OK && f.status == GDX_OK) fail(f, f.comp.status);
        if (op.is_put && !f.xfer_pending && f.lslot >= 0) {
            // The transport is done reading the slot: the next fragment may use it while this one awaits DONE.
            op.lpool->release(static_cast<unsigned>(f.lslot));
            f.lslot = -1;
        }
        if (f.xfer_pending || f.remote_pending) return false;
        // A get's data is in the landing slot: copy it to the destination.
        if (!op.is_put && op.status == GDX_OK && f.status == GDX_OK && f.lslot >= 0) {
            gdx_status_t st = start_copy(f, false);
            if (st != GDX_OK && st != GDX_INPROGRESS) {
                fail(f, st);
                return finish_if_quiet(f);
            }
            f.state = FragState::CopyOut;
            return true;
        }
        return finish_if_quiet(f);
    }
    if (f.state == FragState::NeedSlot) {
        if (!take_slot(f)) return false;
        if (f.status != GDX_OK) return true; // no pool: fail() moved the fragment to Wait
        if (!op.is_put) {
            f.state = f.remote_staged ? FragState::SendGetReq : FragState::Transfer;
            return true;
        }
        gdx_status_t st = start_copy(f, true);
        if (st != GDX_OK && st != GDX_INPROGRESS)
            fail(f, st);
        else
            f.state = FragState::CopyIn;
        return true;
    }
    return op.is_put ? step_put(f) : step_get(f);
}

// A local initiator slot for `f`, from the pool of the local memory's kind (made on first use). False while the
// pool is exhausted: the fragment waits, which is the back-pressure.
bool StagingPipeline::take_slot(Frag &f) {
    Op &op = *f.op;
    if (op.lpool == nullptr) {
        if (gdx_status_t st = pools_.pool(op.local->info().kind, op.local->info().device, &op.lpool); st != GDX_OK) {
            fail(f, st);
            return true;
        }
    }
    int s = op.lpool->acquire(SlotRole::Initiator);
    if (s < 0) {
        if (!f.pool_waited) ++report_.stats().pool_waits;
        f.pool_waited = true;
        return false;
    }
    f.lslot = s;
    return true;
}

bool StagingPipeline::step_put(Frag &f) {
    Op &op = *f.op;
    switch (f.state) {
    case FragState::CopyIn:
        if (!poll_copy(f)) return false;
        f.state = f.status != GDX_OK ? FragState::Wait : f.remote_staged ? FragState::NeedCredit : FragState::Transfer;
        return true;
    case FragState::NeedCredit: return take_credit(f);
    case FragState::MapPeer: return step_map_peer(f);
    case FragState::CopyToPeer:
        if (!poll_copy(f)) return false;
        f.state = f.status != GDX_OK ? FragState::Wait : FragState::Publish;
        return true;
    case FragState::Transfer: return put_fragment(f);
    case FragState::Publish: {
        CtrlMsg m;
        m.type = CtrlType::Filled;
        m.pool = op.remote->pool_id();
        m.slot = static_cast<uint16_t>(f.rslot);
        m.token = token(op, f.index);
        m.region = op.remote->id();
        m.offset = op.roff + f.off;
        m.length = f.len;
        // After a transport put the peer must read the slot after the put landed: fence first. A copy straight
        // into the mapped slot has completed (its event fired) before this message exists.
        if (gdx_status_t st = op.peer->send(m, !f.via_map); st != GDX_OK) {
            fail(f, st);
            return true;
        }
        f.remote_pending = true;
        f.state = FragState::Wait;
        return true;
    }
    default: return false;
    }
}

// A put fragment bound for a peer slot takes one of the credits the peer granted, or asks for more (WANT) and
// waits: the credit flow's back-pressure.
bool StagingPipeline::take_credit(Frag &f) {
    Op &op = *f.op;
    CreditWallet &w = op.peer->wallet(op.remote->pool_id());
    if (w.error() != GDX_OK) {
        fail(f, w.error());
        return true;
    }
    int c = w.take();
    if (c < 0) {
        if (!f.credit_waited) {
            ++report_.stats().credit_waits;
            ++w.waiting;
            f.credit_waited = true;
        }
        if (gdx_status_t st = w.ask(*op.peer, op.remote->pool_id(), kMaxCtrlSlots); st != GDX_OK) fail(f, st);
        return f.status != GDX_OK;
    }
    if (f.credit_waited) --w.waiting;
    f.credit_waited = false;
    f.rslot = c;
    if (w.slot_size() < f.len) {
        report_.protocol_error("GRANT", "the peer's slots are smaller than the fragment its key promised");
        fail(f, GDX_ERR_PROTOCOL);
        return true;
    }
    f.state = f.lslot < 0 && map_possible(op) ? FragState::MapPeer : FragState::Transfer;
    return true;
}

// The transport put of a fragment: from the local slot or straight from the source, into the peer's slot (staged
// there) or straight to the destination.
bool StagingPipeline::put_fragment(Frag &f) {
    Op &op = *f.op;
    const void *src = f.local_staged ? op.lpool->slot_ptr(f.lslot) : op.local->ptr(op.loff + f.off);
    const tp::MemHandle *memh = f.local_staged ? &op.lpool->memh() : &op.local->memh();
    uint64_t raddr;
    const tp::RemoteKey *rkey;
    if (f.remote_staged) {
        CreditWallet &w = op.peer->wallet(op.remote->pool_id());
        raddr = w.slot_addr(static_cast<uint16_t>(f.rslot));
        rkey = &w.rkey();
    } else {
        raddr = op.remote->base() + op.roff + f.off;
        rkey = &op.remote->rkey();
        op.needs_flush = true;
    }
    f.comp.count = 1;
    f.comp.status = GDX_OK;
    gdx_status_t st = op.peer->ep().put(src, f.len, memh, raddr, *rkey, &f.comp);
    if (st == GDX_ERR_NO_RESOURCE) return false;
    if (st != GDX_OK && st != GDX_INPROGRESS) {
        fail(f, st);
        return true;
    }
    f.xfer_pending = st == GDX_INPROGRESS;
    f.state = f.remote_staged ? FragState::Publish : FragState::Wait;
    return true;
}

bool StagingPipeline::step_get(Frag &f) {
    Op &op = *f.op;
    switch (f.state) {
    case FragState::Transfer: {
        f.comp.count = 1;
        f.comp.status = GDX_OK;
        gdx_status_t st = op.peer->ep().get(op.lpool->slot_ptr(f.lslot), f.len, &op.lpool->memh(),
                                            op.remote->base() + op.roff + f.off, op.remote->rkey(), &f.comp);
        if (st == GDX_ERR_NO_RESOURCE) return false;
        if (st != GDX_OK && st != GDX_INPROGRESS) {
            fail(f, st);
            return true;
        }
        f.xfer_pending = st == GDX_INPROGRESS;
        f.state = FragState::Wait;
        return true;
    }
    case FragState::SendGetReq: {
        CtrlMsg m;
        m.type = CtrlType::GetReq;
        m.token = token(op, f.index);
        m.region = op.remote->id();
        m.offset = op.roff + f.off;
        m.length = f.len;
        m.addr = op.lpool->slot_addr(f.lslot);
        m.rkey = op.lpool->packed_rkey();
        if (gdx_status_t st = op.peer->send(m, false); st != GDX_OK) {
            fail(f, st);
            return true;
        }
        f.remote_pending = true;
        f.state = FragState::Wait;
        return true;
    }
    case FragState::CopyOut:
        if (!poll_copy(f)) return false;
        return finish_if_quiet(f);
    default: return false;
    }
}

bool StagingPipeline::map_possible(Op &op) {
    return (caps_.flags & tp::kCapPeerMap) != 0 && !op.peer->wallet(op.remote->pool_id()).map_unavailable;
}

// A put fragment holding a peer slot, without a local one: map the peer's pool here (once per pool) and copy the
// source straight into the slot. Where the pool cannot be mapped, the fragment takes the transport path.
bool StagingPipeline::step_map_peer(Frag &f) {
    Op &op = *f.op;
    CreditWallet &w = op.peer->wallet(op.remote->pool_id());
    const mem::MemInfo &li = op.local->info();
    uint8_t *dst = nullptr;
    gdx_status_t st = w.map_unavailable ? GDX_ERR_UNSUPPORTED
                                        : op.peer->mapped_range(w.rkey(), w.slot_addr(static_cast<uint16_t>(f.rslot)),
                                                                f.len, li.kind, li.device, &dst);
    if (st == GDX_INPROGRESS) return false;
    if (st == GDX_ERR_UNSUPPORTED) {
        w.map_unavailable = true;
        if (f.local_staged) { // it needs a local slot after all: the credit waits idle for its turn
            w.put_back(static_cast<uint16_t>(f.rslot));
            f.rslot = -1;
            f.state = FragState::NeedSlot;
        } else {
            f.state = FragState::Transfer;
        }
        return true;
    }
    if (st == GDX_ERR_PROTOCOL) report_.protocol_error("GRANT", "a granted slot lies outside the pool's key");
    if (st != GDX_OK) {
        fail(f, st);
        return true;
    }
    st = copies_.copy_async(dst, op.local->ptr(op.loff + f.off), f.len, li.kind, li.device, mem::CopyDir::ToHost,
                          &f.copy);
    f.copy_pending = st == GDX_INPROGRESS;
    if (st != GDX_OK && st != GDX_INPROGRESS) {
        fail(f, st);
        return true;
    }
    f.via_map = true;
    ++report_.stats().frags_peer_mapped;
    op.req->path.peer_mapped = true;
    f.state = FragState::CopyToPeer;
    return true;
}

// into_slot: put source → local slot; otherwise a get's landing slot → destination.
gdx_status_t StagingPipeline::start_copy(Frag &f, bool into_slot) {
    Op &op = *f.op;
    uint8_t *slot = op.lpool->slot_ptr(f.lslot);
    uint8_t *user = op.local->ptr(op.loff + f.off);
    gdx_status_t st = copies_.copy_async(into_slot ? slot : user, into_slot ? user : slot, f.len,
                                       op.local->info().kind, op.local->info().device,
                                       into_slot ? mem::CopyDir::ToHost : mem::CopyDir::ToDevice, &f.copy);
    f.copy_pending = st == GDX_INPROGRESS;
    return st;
}

bool StagingPipeline::poll_copy(Frag &f) {
    if (!f.copy_pending) return true;
    gdx_status_t st = copies_.copy_test(&f.copy);
    if (st == GDX_INPROGRESS) return false;
    f.copy_pending = false;
    if (st != GDX_OK) fail(f, st);
    return true;
}

bool StagingPipeline::finish_if_quiet(Frag &f) {
    if (f.xfer_pending || f.copy_pending || f.remote_pending) return false;
    Op &op = *f.op;
    if (f.lslot >= 0) op.lpool->release(static_cast<unsigned>(f.lslot));
    if (f.rslot >= 0 || f.credit_waited) {
        CreditWallet &w = op.peer->wallet(op.remote->pool_id());
        if (f.rslot >= 0) w.put_back(static_cast<uint16_t>(f.rslot)); // never published: still ours, idle
        if (f.credit_waited) --w.waiting;
    }
    f.lslot = f.rslot = -1;
    f.state = FragState::Free;
    --op.staged_active;
    return false;
}

void StagingPipeline::fail(Frag &f, gdx_status_t st) {
    if (f.status == GDX_OK) f.status = st;
    fail(*f.op, st);
    f.state = FragState::Wait;
}

void StagingPipeline::fail(Op &op, gdx_status_t st) {
    if (op.status != GDX_OK) return;
    op.status = st;
    GDX_DEBUG(kComp, "request %u failed: %s (fragments in flight finish first)", op.id, gdx_status_string(st));
}

bool StagingPipeline::finished(Op &op) {
    if (op.staged_active != 0 || op.direct.count != 0) return false;
    if (op.status == GDX_OK && (op.next < op.nfrags || op.run_len != 0)) return false;
    if (op.status == GDX_OK && op.direct.status != GDX_OK) op.status = op.direct.status;
    if (op.status == GDX_OK && op.needs_flush && !op.flush_issued) {
        // Direct puts are complete at the target only after a flush; staged ones were confirmed by DONE.
        ++op.direct.count;
        gdx_status_t st = op.peer->ep().flush(&op.direct);
        if (st != GDX_INPROGRESS) --op.direct.count;
        if (st == GDX_ERR_NO_RESOURCE) return false;
        op.flush_issued = true;
        if (st != GDX_OK && st != GDX_INPROGRESS) fail(op, st);
        return st != GDX_INPROGRESS;
    }
    return true;
}

void StagingPipeline::complete(Op &op) {
    gdx_status_t st = op.status != GDX_OK ? op.status : op.direct.status;
    op.req->status = st;
    if (st != GDX_OK) op.req->error = describe_failure(op, st);
    op.req->op_ = nullptr;
    ++(st == GDX_OK ? report_.stats().requests_completed : report_.stats().requests_failed);
    // Completion means every byte is at the peer: now the peer may be told (in issue order, notify.h).
    if (op.notify) op.peer->outbox.complete(*op.peer, op.id, st == GDX_OK, report_.stats());
    --op.local->busy;
    --op.peer->users;
    by_id_.erase(op.id);
    done_.push_back(&op);
}

unsigned StagingPipeline::progress() {
    if (idle()) return 0;
    unsigned n = 0;
    size_t keep = 0;
    for (size_t i = 0; i < active_.size(); ++i) {
        Op *op = active_[i];
        if (advance(*op)) ++n;
        if (finished(*op)) {
            complete(*op);
            ++n;
        } else {
            active_[keep++] = op;
        }
    }
    active_.resize(keep);
    // Callbacks last: one may submit a new request, which must not land in the list being walked.
    std::vector<Op *> done;
    done.swap(done_);
    for (Op *op : done) {
        Request *req = op->req;
        free_.emplace_back(op);
        if (req->cb != nullptr) req->cb(req);
    }
    return n;
}

} // namespace gdx::fb
