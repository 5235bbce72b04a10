// StagingPipeline, continued: the small-message path and the peer's answers (DONE, GET_DONE, SMALL_GET_DATA).
// Every answer is matched against a live request by its token (request id << 32 | fragment index) and checked
// against what that fragment is waiting for; anything else is a protocol error, logged and dropped.
#include "core/error.h"
#include "fallback/staging_pipeline.h"

#include <algorithm>

namespace gdx::fb {

SmallLimits SmallLimits::of(const tp::Capabilities &caps, const Params &params) {
    SmallLimits l;
    if ((caps.flags & tp::kCapAmBcopy) == 0) return l; // no active messages: no small path
    if (caps.max_am_bcopy > kSmallPutOverhead)
        l.put = std::min<uint64_t>(params.small_thresh, caps.max_am_bcopy - kSmallPutOverhead);
    if (caps.max_am_bcopy > kSmallPutNotifyOverhead)
        l.put_notify = std::min<uint64_t>(params.small_thresh, caps.max_am_bcopy - kSmallPutNotifyOverhead);
    return l;
}

// Below GDX_STAGING_THRESH a staged message is one active message: the source is copied straight into the
// message (one D2H copy for GPU memory), the peer copies it straight to the destination (one H2D copy) and
// answers DONE. No bounce slot, no credit, no fragment machinery: the latency is two copies and one round trip.
void StagingPipeline::send_small(Op &op) {
    op.small = true;
    op.next = op.nfrags;
    op.decided = false;
    op.req->path.small = true;
    ++report_.stats().msgs_small;
    report_.stats().bytes_small += op.len;
    Frag &f = op.frags[0];
    f.op = &op;
    f.index = 0;
    f.len = op.len;
    f.state = FragState::Wait;
    ++op.staged_active;
    CtrlMsg m;
    m.token = token(op, 0);
    m.region = op.remote->id();
    m.offset = op.roff;
    std::vector<uint8_t> data; // outlives the send below, which encodes m.data (a view)
    if (op.is_put) {
        m.type = op.notify_embedded ? CtrlType::SmallPutNotify : CtrlType::SmallPut;
        m.value = op.notify_value;
        data.resize(op.len);
        gdx_status_t st = copies_.copy_sync(data.data(), op.local->ptr(op.loff), op.len, op.local->info(),
                                          mem::CopyDir::ToHost);
        if (st != GDX_OK) {
            fail(f, st);
            return;
        }
        m.data = data;
    } else {
        m.type = CtrlType::SmallGetReq;
        m.length = op.len;
    }
    if (gdx_status_t st = op.peer->send(m, false); st != GDX_OK) {
        fail(f, st);
        return;
    }
    f.remote_pending = true;
}

Op *StagingPipeline::find(uint64_t token, const PeerLink &peer, const char *what) {
    auto it = by_id_.find(static_cast<uint32_t>(token >> 32));
    if (it == by_id_.end() || it->second->peer != &peer) {
        report_.protocol_error(what, "token " + std::to_string(token) + " names no request of this peer");
        return nullptr;
    }
    return it->second;
}

Frag *StagingPipeline::find_frag(Op &op, uint64_t token) {
    uint32_t index = static_cast<uint32_t>(token);
    for (Frag &f : op.frags)
        if (f.state == FragState::Wait && f.remote_pending && f.index == index) return &f;
    return nullptr;
}

void StagingPipeline::on_done(PeerLink &peer, const CtrlMsg &m) {
    Op *op = find(m.token, peer, "DONE");
    if (op == nullptr) return;
    Frag *f = op->is_put ? find_frag(*op, m.token) : nullptr;
    if (f == nullptr) {
        report_.protocol_error("DONE", "request " + std::to_string(op->id) + " awaits no DONE for that fragment");
        return;
    }
    if (op->small) {
        if (m.pool != kNoSlot || m.slot != kNoSlot) {
            report_.protocol_error("DONE", "a small put's answer names a slot");
            return;
        }
    } else {
        if (m.pool != op->remote->pool_id() || m.slot != f->rslot) {
            report_.protocol_error("DONE", "slot " + std::to_string(m.slot) + " of pool " + std::to_string(m.pool) +
                                             " is not the one the fragment filled");
            return;
        }
        CreditWallet &w = peer.wallet(m.pool);
        if (m.keep)
            w.kept(m.slot);
        else
            w.dropped(m.slot);
        f->rslot = -1;
    }
    f->remote_pending = false;
    if (m.status != GDX_OK) {
        GDX_DEBUG(kComp, "request %u fragment %u: the peer reports %s", op->id, f->index, gdx_status_string(m.status));
        fail(*f, m.status);
    }
}

void StagingPipeline::on_get_done(PeerLink &peer, const CtrlMsg &m) {
    Op *op = find(m.token, peer, "GET_DONE");
    if (op == nullptr) return;
    Frag *f = !op->is_put && !op->small ? find_frag(*op, m.token) : nullptr;
    if (f == nullptr) {
        report_.protocol_error("GET_DONE", "request " + std::to_string(op->id) + " awaits no stage-out for that fragment");
        return;
    }
    f->remote_pending = false;
    if (m.status != GDX_OK) fail(*f, m.status);
}

void StagingPipeline::on_small_get_data(PeerLink &peer, const CtrlMsg &m) {
    Op *op = find(m.token, peer, "SMALL_GET_DATA");
    if (op == nullptr) return;
    Frag *f = !op->is_put && op->small ? find_frag(*op, m.token) : nullptr;
    if (f == nullptr) {
        report_.protocol_error("SMALL_GET_DATA", "request " + std::to_string(op->id) + " is not a small get awaiting data");
        return;
    }
    f->remote_pending = false;
    if (m.status != GDX_OK) {
        fail(*f, m.status);
        return;
    }
    if (m.data.size() != op->len) {
        report_.protocol_error("SMALL_GET_DATA", std::to_string(m.data.size()) + " bytes for a get of " +
                                                   std::to_string(op->len));
        fail(*f, GDX_ERR_PROTOCOL);
        return;
    }
    gdx_status_t st =
        copies_.copy_sync(op->local->ptr(op->loff), m.data.data(), op->len, op->local->info(), mem::CopyDir::ToDevice);
    if (st != GDX_OK) fail(*f, st);
}

bool StagingPipeline::uses_peer(const PeerLink &p) const {
    for (const Op *op : active_)
        if (op->peer == &p) return true;
    return false;
}

void StagingPipeline::cancel_all() {
    for (Op *op : active_) {
        fail(*op, GDX_ERR_CANCELED);
        for (Frag &f : op->frags) f.remote_pending = false;
    }
}

} // namespace gdx::fb
