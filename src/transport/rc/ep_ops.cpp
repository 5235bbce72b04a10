// rc endpoint operations: put/get (RDMA WRITE/READ), active messages (SEND_WITH_IMM), flush, fence. Every
// check that can refuse an operation runs before anything is posted, so a refusal leaves the endpoint usable.
#include "transport/rc/ep.h"

#include "core/error.h"
#include "transport/ep_checks.h"

#include <algorithm>
#include <arpa/inet.h>
#include <cstring>

namespace gdx::tp::rc {

// ---- operations -------------------------------------------------------------------------------------------

gdx_status_t RcEndpoint::rdma(bool write, void *buf, size_t len, const MemHandle *lmemh, uint64_t raddr,
                              const RemoteKey &rkey, Completion *comp) {
    const char *op = write ? "put" : "get";
    const char *port = iface_->port_name_.c_str();
    if (gdx_status_t st = ready(op); st != GDX_OK) return st;
    if (len == 0) return GDX_OK;
    // No length limit here: an operation is cut into work requests of at most max_put bytes below.
    if (gdx_status_t st = check_rma_buffer(*iface_, op, buf, len, SIZE_MAX); st != GDX_OK) return st;
    auto *rk = dynamic_cast<const RcRemoteKey *>(&rkey);
    if (rk == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "%s: %s: the remote key is not an rc key", port, op);
    auto *lm = dynamic_cast<const RcMemHandle *>(lmemh);
    if (lmemh != nullptr && (lm == nullptr || lm->md_tag != iface_->md_.get()))
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "%s: %s: the local handle is not from this interface's memory domain", port, op);
    bool inline_src = write && lm == nullptr && len <= max_inline_;
    if (lm == nullptr && !inline_src)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "%s: %s of %zu bytes needs a registered local buffer", port, op, len);
    if (!write && !(lm->access() & kAccessLocalWrite))
        return GDX_FAIL(GDX_ERR_ACCESS_DENIED, kComp, "%s: get into a buffer registered without local write access", port);

    // One work request per stretch that lies in one local and one remote chunk.
    constexpr unsigned kMaxWr = 2 * kMaxChunks + 1;
    Wr wrs[kMaxWr];
    unsigned n = 0;
    char *p = static_cast<char *>(buf);
    size_t max_msg = iface_->caps_.max_put ? iface_->caps_.max_put : SIZE_MAX;
    for (size_t off = 0; off < len;) {
        uint32_t rkey32 = 0, lkey = 0;
        size_t rcontig = 0, lcontig = len - off;
        std::string why;
        // The lookup finds the NIC rkey of the chunk holding raddr + off, which the work request needs; its range
        // and rights check comes with it (the NIC enforces the registration at the target in any case).
        if (gdx_status_t st = rk->lookup(raddr + off, len - off, write ? kAccessRemoteWrite : kAccessRemoteRead, &rkey32,
                                         &rcontig, &why); st != GDX_OK)
            return GDX_FAIL(st, kComp, "%s: %s of %zu bytes at 0x%llx refused before posting: %s", port, op, len,
                            static_cast<unsigned long long>(raddr), why.c_str());
        if (lm != nullptr && !lm->lkey_at(p + off, len - off, &lkey, &lcontig))
            return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp,
                            "%s: %s: local [%p, +%zu) is outside its handle or in a chunk the NIC cannot reach "
                            "(Reach::None: stage it)", port, op, p + off, len - off);
        if (n == kMaxWr)
            return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "%s: %s of %zu bytes spans too many chunks", port, op, len);
        size_t k = std::min({len - off, rcontig, lcontig, static_cast<size_t>(max_msg)});
        Wr &w = wrs[n++];
        w = {};
        w.wr.opcode = write ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
        w.wr.num_sge = 1;
        w.wr.wr.rdma.remote_addr = raddr + off;
        w.wr.wr.rdma.rkey = rkey32;
        w.sge[0] = {reinterpret_cast<uintptr_t>(p + off), static_cast<uint32_t>(k), lkey};
        if (inline_src) w.wr.send_flags = IBV_SEND_INLINE;
        off += k;
    }
    if (n + 1 > sq_free_) return GDX_ERR_NO_RESOURCE; // one slot stays for credit announcements
    if (gdx_status_t st = post(wrs, n, comp, -1, OpKind::Rdma); st != GDX_OK) return st;
    return GDX_INPROGRESS;
}

gdx_status_t RcEndpoint::put(const void *buf, size_t len, const MemHandle *lmemh, uint64_t remote_addr,
                             const RemoteKey &rkey, Completion *comp) {
    return rdma(true, const_cast<void *>(buf), len, lmemh, remote_addr, rkey, comp);
}

gdx_status_t RcEndpoint::get(void *buf, size_t len, const MemHandle *lmemh, uint64_t remote_addr,
                             const RemoteKey &rkey, Completion *comp) {
    return rdma(false, buf, len, lmemh, remote_addr, rkey, comp);
}

gdx_status_t RcEndpoint::am_send(unsigned id, const void *hdr, size_t hlen, const void *payload, size_t len,
                                 uint32_t lkey, Completion *comp, const char *op) {
    RcInterface &I = *iface_; // the arguments were checked by the caller (ep_checks.h)
    if (gdx_status_t st = ready(op); st != GDX_OK) return st;
    if (sq_free_ < 2 || credits() <= 0) return GDX_ERR_NO_RESOURCE; // one slot stays for credit announcements
    Wr w{};
    w.wr.opcode = IBV_WR_SEND_WITH_IMM;
    w.wr.imm_data = htonl(kImmAmTag << 24 | id << 16);
    int tb = -1;
    if (payload == nullptr && hlen <= max_inline_) { // short: the header is the message, copied by the post
        w.wr.send_flags = IBV_SEND_INLINE;
        w.sge[0] = {reinterpret_cast<uintptr_t>(hdr), static_cast<uint32_t>(hlen), 0};
        w.wr.num_sge = hlen ? 1 : 0;
    } else {
        if (hlen > 0 || payload == nullptr) {
            if ((tb = I.txbuf_get()) < 0) return GDX_ERR_NO_RESOURCE;
            if (hlen) std::memcpy(I.txbuf(tb), hdr, hlen);
            w.sge[w.wr.num_sge++] = {reinterpret_cast<uintptr_t>(I.txbuf(tb)), static_cast<uint32_t>(hlen), I.tx_mr_->lkey};
        }
        if (payload != nullptr && len > 0)
            w.sge[w.wr.num_sge++] = {reinterpret_cast<uintptr_t>(payload), static_cast<uint32_t>(len), lkey};
    }
    if (gdx_status_t st = post(&w, 1, comp, tb, OpKind::Am); st != GDX_OK) {
        if (tb >= 0) I.txbuf_put(tb);
        return st;
    }
    ++am_sent_;
    return comp ? GDX_INPROGRESS : GDX_OK;
}

gdx_status_t RcEndpoint::am_short(uint8_t id, const void *data, size_t len) {
    if (gdx_status_t st = check_am_short(*iface_, id, data, len); st != GDX_OK) return st;
    return am_send(id, data, len, nullptr, 0, 0, nullptr, "am_short");
}

gdx_status_t RcEndpoint::am_bcopy(uint8_t id, const void *data, size_t len) {
    if (gdx_status_t st = check_am_bcopy(*iface_, id, data, len); st != GDX_OK) return st; // max_am_bcopy: a segment
    // Inlined or copied into a bounce buffer now, as the contract says: the caller's buffer is free on return.
    return am_send(id, data, len, nullptr, 0, 0, nullptr, "am_bcopy");
}

gdx_status_t RcEndpoint::am_zcopy(uint8_t id, const void *header, size_t header_len, const void *payload, size_t len,
                                  const MemHandle *memh, Completion *comp) {
    const char *port = iface_->port_name_.c_str();
    // max_am_zcopy is a segment: header and payload land in one receive buffer.
    if (gdx_status_t st = check_am_zcopy(*iface_, id, header, header_len, payload, len); st != GDX_OK) return st;
    uint32_t lkey = 0;
    if (len > 0) {
        auto *lm = dynamic_cast<const RcMemHandle *>(memh);
        size_t contig = 0;
        if (lm == nullptr || lm->md_tag != iface_->md_.get() || !lm->lkey_at(payload, len, &lkey, &contig) || contig < len)
            return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp,
                            "%s: am_zcopy payload [%p, +%zu) is not inside one directly reachable chunk of a handle "
                            "of this memory domain", port, payload, len);
    }
    static const char empty = 0;
    return am_send(id, header_len ? header : &empty, header_len, len ? payload : &empty, len, lkey, comp, "am_zcopy");
}

gdx_status_t RcEndpoint::flush(Completion *comp) {
    if (error_ != GDX_OK) return ready("flush");
    if (pending_.holds_back()) return GDX_ERR_NO_RESOURCE; // pending_queue.h: parked requests go first
    if (posted_seq_ == completed_seq_) return GDX_OK;
    if (comp == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "flush with operations outstanding needs a Completion");
    flushes_.emplace_back(posted_seq_, comp);
    return GDX_INPROGRESS;
}

gdx_status_t RcEndpoint::fence() {
    // RC executes in order except that RDMA READ responses may land after later writes; the fence flag makes
    // the next request wait for earlier reads.
    fence_next_ = true;
    return GDX_OK;
}

} // namespace gdx::tp::rc
