// shm endpoint: operations, their completion, and the target side of the protocol (README.md, "put/get").
#include "core/error.h"
#include "memtype/access_probe.h"
#include "transport/ep_checks.h"
#include "transport/refusal_log.h"
#include "transport/shm/cma.h"
#include "transport/shm/shm_iface.h"

#include <algorithm>
#include <cstdarg>
#include <cinttypes>
#include <cstring>
#include <sched.h>
#include <unistd.h>

namespace gdx::tp::shm {

namespace {
constexpr const char *kComp = "shm";
constexpr uint32_t kMaxOps = 1024; // outstanding put/get per endpoint; more -> GDX_ERR_NO_RESOURCE

template <class T> bool body_of(const RecHdr &h, const uint8_t *rec, T *out) {
    if (h.len < sizeof(RecHdr) + sizeof(T)) return false;
    std::memcpy(out, rec + sizeof(RecHdr), sizeof(T));
    return true;
}
} // namespace

ShmEp::ShmEp(ShmIface *iface)
    : RingAmEndpoint(*iface), iface_(iface), ch_(&iface->hub(), this, 0), peer_map_(&ch_, kComp) {
    ops_.resize(kMaxOps);
    free_ops_.reserve(kMaxOps);
    for (uint32_t i = kMaxOps; i-- > 0;) free_ops_.push_back(i);
    iface_->add_ep(this);
}

ShmEp::~ShmEp() {
    // The peer may still be copying a part we granted into our registered memory: let it finish (bounded)
    // before the endpoint, and with it the quiesce bookkeeping of that range, goes away.
    int64_t until = Hub::now_ns() + iface_->tun().peer_timeout_ns;
    while (grant_outstanding() && !socket_hung_up(ch_.sock()) && Hub::now_ns() < until) {
        iface_->service_grants();
        sched_yield();
    }
    for (Op &op : ops_)
        if (op.active) complete_op(op, GDX_ERR_CANCELED);
    for (auto &f : flushes_)
        if (f.second) f.second->complete(GDX_ERR_CANCELED);
    iface_->remove_ep(this);
    iface_->retire(ch_.take_own_segment()); // an idle probe may still read our ring (IdleProbe)
}

bool ShmEp::add_probe_words(IdleProbe *probe) {
    if (!ch_.up()) return ch_.state() != Channel::State::Connecting; // a broken or unused channel gives no work
    const std::atomic<uint64_t> *head = nullptr;
    uint64_t expected = 0;
    if (!idle() || grant_outstanding() || !ch_.rx_head_word(&head, &expected)) return false;
    // The ring's word names this endpoint (deliver_probed hands over what it announces). It is the only word: our
    // grant mailbox, where the peer posts parts of our operations for us to copy, needs none while idle() holds,
    // since no operation of ours is outstanding then (a grant posted anyway is the peer's protocol error, which
    // the next full progress reports: it comes once per kernel tick). One word a peer is one load per idle look.
    return probe->add_expected(head, expected, this, &ShmEp::deliver_probed);
}

std::vector<uint8_t> ShmEp::address() const { return ch_.address({}); }

gdx_status_t ShmEp::connect(std::span<const uint8_t> remote_address) { return ch_.connect(remote_address, nullptr); }

// ---- initiator ------------------------------------------------------------------------------------------

uint64_t ShmEp::op_id(const Op &op) const {
    return (static_cast<uint64_t>(op.gen) << 32) | static_cast<uint64_t>(&op - ops_.data());
}

ShmEp::Op *ShmEp::alloc_op() {
    if (free_ops_.empty()) return nullptr;
    Op &op = ops_[free_ops_.back()];
    free_ops_.pop_back();
    uint32_t gen = op.gen + 1;
    op = Op{};
    op.gen = gen;
    op.active = true;
    op.seq = next_seq_++;
    if (active_++ == 0) busy_since_ns_ = Hub::coarse_ns();
    return &op;
}

ShmEp::Op *ShmEp::find_op(uint64_t id) {
    uint32_t idx = static_cast<uint32_t>(id);
    if (idx >= ops_.size()) return nullptr;
    Op &op = ops_[idx];
    return op.active && op.gen == static_cast<uint32_t>(id >> 32) ? &op : nullptr;
}

void ShmEp::complete_op(Op &op, gdx_status_t st) {
    if (!op.active) return;
    op.active = false;
    --active_;
    free_ops_.push_back(static_cast<uint32_t>(&op - ops_.data()));
    if (st == GDX_OK && op.status != GDX_OK) st = op.status;
    Completion *c = op.comp;
    if (c != nullptr) c->complete(st);
    check_flushes();
}

void ShmEp::check_flushes() {
    if (flushes_.empty()) return;
    uint64_t oldest = UINT64_MAX;
    for (const Op &op : ops_)
        if (op.active && op.seq < oldest) oldest = op.seq;
    for (size_t i = 0; i < flushes_.size();) {
        if (flushes_[i].first <= oldest) {
            Completion *c = flushes_[i].second;
            flushes_.erase(flushes_.begin() + static_cast<std::ptrdiff_t>(i));
            if (c) c->complete(GDX_OK);
        } else {
            ++i;
        }
    }
}

gdx_status_t ShmEp::check_op(const char *what, size_t len, const RemoteKey &rkey, uint64_t raddr, unsigned need,
                             const SoftRemoteKey **key) {
    gdx_status_t st = ch_.op_status();
    if (st == GDX_INPROGRESS) return GDX_ERR_NO_RESOURCE; // not connected yet: retry after progress()
    if (st != GDX_OK) {
        GDX_DEBUG(kComp, "%s on a failed endpoint: %s", what, gdx_status_string(st));
        return st;
    }
    *key = SoftRemoteKey::of(rkey, wire::TransportId::Shm);
    if (*key == nullptr)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "%s: remote key was not unpacked by the shm memory domain", what);
    // Early refusal from the key's own claims (the target checks its table again, trusting none of this). Under
    // gdx_put it repeats the staging layer's one check (fallback/region_table.h); it stays for the UCX module,
    // which calls this transport directly.
    if ((st = check_key_claims(*iface_, what, raddr, len, rkey, need)) != GDX_OK) return st;
    if (fence_.holds(fence_waits_on())) return GDX_ERR_NO_RESOURCE; // ordered after everything before the fence
    if (pending_.holds_back()) return GDX_ERR_NO_RESOURCE; // parked requests go first (pending_queue.h)
    return GDX_OK;
}

gdx_status_t ShmEp::issue(OpKind kind, uint8_t *local, size_t len, uint64_t raddr, const SoftRemoteKey &key,
                          Completion *comp) {
    bool cma = len >= iface_->tun().cma_thresh && (ch_.i_can_cma() || ch_.peer_can_cma());
    bool ring_put = kind == OpKind::Put && !cma;
    if (ring_put && !sendq_.empty()) return GDX_ERR_NO_RESOURCE; // keep ring puts in order behind the queue
    Op *op = alloc_op();
    if (op == nullptr) return GDX_ERR_NO_RESOURCE;
    op->kind = kind;
    op->local = local;
    op->raddr = raddr;
    op->len = len;
    op->key = key.key_id();
    if (ring_put) {
        if (!ch_.can_push(sizeof(RecHdr) + sizeof(PutDataBody) + 1)) {
            complete_op(*op, GDX_OK); // nothing sent: take the slot back (no completion is attached yet)
            return GDX_ERR_NO_RESOURCE;
        }
        op->comp = comp;
        if (!push_put_data(*op)) sendq_.push_back(op);
        return GDX_INPROGRESS;
    }
    ReqBody b{op_id(*op), op->key, raddr, len, reinterpret_cast<uintptr_t>(local)};
    if (!ch_.push(kind == OpKind::Put ? kRecPutReq : kRecGetReq, 0, cma ? 0 : kFlagRing, &b, sizeof(b), nullptr, 0)) {
        complete_op(*op, GDX_OK);
        return GDX_ERR_NO_RESOURCE;
    }
    op->comp = comp;
    return GDX_INPROGRESS;
}

bool ShmEp::push_put_data(Op &op) {
    size_t frag = ch_.max_record() - sizeof(RecHdr) - sizeof(PutDataBody);
    while (op.sent < op.len) {
        size_t n = std::min<uint64_t>(frag, op.len - op.sent);
        PutDataBody b{op_id(op), op.key, op.raddr, op.sent, {}};
        uint16_t flags = op.sent + n == op.len ? kFlagLast : 0;
        if (!ch_.push(kRecPutData, 0, flags, &b, sizeof(b), op.local + op.sent, n)) return false;
        op.sent += n;
    }
    return true;
}

gdx_status_t ShmEp::put(const void *buf, size_t len, const MemHandle *, uint64_t remote_addr, const RemoteKey &rkey,
                        Completion *comp) {
    const SoftRemoteKey *key = nullptr;
    gdx_status_t st = check_rma_buffer(*iface_, "put", buf, len, iface_->caps().max_put);
    if (st == GDX_OK) st = check_op("put", len, rkey, remote_addr, kAccessRemoteWrite, &key);
    if (st != GDX_OK || len == 0) return st;
    return issue(OpKind::Put, static_cast<uint8_t *>(const_cast<void *>(buf)), len, remote_addr, *key, comp);
}

gdx_status_t ShmEp::get(void *buf, size_t len, const MemHandle *, uint64_t remote_addr, const RemoteKey &rkey,
                        Completion *comp) {
    const SoftRemoteKey *key = nullptr;
    gdx_status_t st = check_rma_buffer(*iface_, "get", buf, len, iface_->caps().max_get);
    if (st == GDX_OK) st = check_op("get", len, rkey, remote_addr, kAccessRemoteRead, &key);
    if (st != GDX_OK || len == 0) return st;
    return issue(OpKind::Get, static_cast<uint8_t *>(buf), len, remote_addr, *key, comp);
}

gdx_status_t ShmEp::flush(Completion *comp) {
    gdx_status_t st = ch_.status();
    if (st != GDX_OK && st != GDX_INPROGRESS) return st;
    if (pending_.holds_back()) return GDX_ERR_NO_RESOURCE; // pending_queue.h: parked requests go first
    if (active_ == 0) return GDX_OK;
    if (comp != nullptr) flushes_.push_back({next_seq_, comp});
    return GDX_INPROGRESS;
}

gdx_status_t ShmEp::fence() {
    fence_.fence(fence_waits_on());
    return GDX_OK;
}

bool ShmEp::resources_free() {
    return ch_.up() && !free_ops_.empty() && sendq_.empty() && ch_.can_push(ch_.max_record()) &&
           fence_.open(fence_waits_on());
}

gdx_status_t ShmEp::pending_add(PendingRequest *req) { return pending_.add(req, resources_free(), kComp); }

// ---- target side ----------------------------------------------------------------------------------------

void ShmEp::reply(uint8_t type, uint16_t flags, const void *body, size_t len) {
    if (replies_.empty() && ch_.push(type, 0, flags, body, len, nullptr, 0)) return;
    const uint8_t *b = static_cast<const uint8_t *>(body);
    replies_.push_back({type, flags, std::vector<uint8_t>(b, b + len)});
}

void ShmEp::op_done(uint64_t op, gdx_status_t st, bool granted) {
    DoneBody d{op, static_cast<int32_t>(st), granted ? kDoneGranted : 0u};
    reply(kRecOpDone, 0, &d, sizeof(d));
}

bool ShmEp::drain_replies() {
    bool any = false;
    while (!replies_.empty()) {
        Reply &r = replies_.front();
        if (!ch_.push(r.type, 0, r.flags, r.body.data(), r.body.size(), nullptr, 0)) break;
        replies_.pop_front();
        any = true;
    }
    return any;
}

void ShmEp::handle_cma_request(bool put, const uint8_t *body, size_t len) {
    ReqBody r;
    if (len < sizeof(r)) return protocol_error("short request");
    std::memcpy(&r, body, sizeof(r));
    RkeyTable &t = iface_->shm_md().table();
    unsigned need = put ? kAccessRemoteWrite : kAccessRemoteRead;
    RkeyTable::Pin pin = t.pin(); // held while we copy: a revoke from another thread waits for us
    uint8_t *ptr = nullptr;
    std::string why;
    gdx_status_t st = t.check(pin, r.key, r.raddr, r.len, need, &ptr, &why);
    if (st != GDX_OK) {
        log_refusal(st, why, "refused %s of %" PRIu64 " bytes at 0x%" PRIx64 " from pid %d: %s", put ? "put" : "get",
                    r.len, r.raddr, static_cast<int>(ch_.peer_pid()), why.c_str());
        return op_done(r.op, st, false);
    }
    bool me = ch_.i_can_cma(), peer = ch_.peer_can_cma();
    if (!me && !peer) {
        st = GDX_FAIL(GDX_ERR_PROTOCOL, kComp, "CMA %s request from pid %d, but CMA works in neither direction",
                      put ? "put" : "get", static_cast<int>(ch_.peer_pid()));
        return op_done(r.op, st, false);
    }
    // [0, mine) is ours; [mine, len) is granted to the initiator, who copies it at the same time into the range
    // we just validated. Until it reports done, this channel's later records wait (on_record stalls), and a
    // deregistration of the key waits too (ShmIface::quiesce_key): validation keeps covering the copy.
    uint64_t mine = 0;
    if (me) mine = (peer && r.len >= iface_->tun().cma_split) ? (r.len / 2) & ~uint64_t{4095} : r.len;
    bool granted = mine < r.len;
    if (granted) {
        auto *px = reinterpret_cast<ShmExtra *>(ch_.peer_extra_area());
        px->grant.op = r.op;
        px->grant.off = mine;
        px->grant.len = r.len - mine;
        px->grant.kind = put ? 1u : 2u;
        grant_key_ = r.key;
        px->grant.seq.store(++grant_seq_, std::memory_order_release);
        ch_.signal_peer();
    }
    // A get both ways could serve (serve_by_ring): our share's time is the get's, the initiator's share running
    // beside it; its rate goes to the choice.
    const bool measured = !put && me && peer && r.len >= iface_->tun().cma_thresh && iface_->tun().cma_learn;
    const int64_t t0 = measured ? clock::now_ns() : 0;
    if (mine > 0)
        st = put ? cma_read(ch_.peer_pid(), ptr, r.laddr, mine) : cma_write(ch_.peer_pid(), ptr, r.laddr, mine);
    if (measured && st == GDX_OK) iface_->get_paths().record(GetPathChooser::Path::Cma, r.len, clock::now_ns() - t0);
    op_done(r.op, st, granted);
}

bool ShmEp::service_grant() {
    if (!ch_.up()) return false;
    auto *mine = reinterpret_cast<ShmExtra *>(ch_.local_extra());
    uint64_t s = mine->grant.seq.load(std::memory_order_acquire);
    if (s == serviced_grant_) return false;
    uint64_t id = mine->grant.op, off = mine->grant.off, len = mine->grant.len;
    uint32_t kind = mine->grant.kind;
    Op *op = find_op(id);
    gdx_status_t st;
    if (op == nullptr || static_cast<uint32_t>(op->kind) != kind || off > op->len || len > op->len - off) {
        st = GDX_FAIL(GDX_ERR_PROTOCOL, kComp, "grant from pid %d for an unknown operation or range",
                      static_cast<int>(ch_.peer_pid()));
    } else {
        // The target address comes from our own operation record, never from the grant.
        st = op->kind == OpKind::Put ? cma_write(ch_.peer_pid(), op->local + off, op->raddr + off, len)
                                     : cma_read(ch_.peer_pid(), op->local + off, op->raddr + off, len);
        if (st != GDX_OK && op->status == GDX_OK) op->status = st;
        op->granted_done = true;
    }
    auto *px = reinterpret_cast<ShmExtra *>(ch_.peer_extra_area());
    px->done.status = st;
    px->done.seq.store(s, std::memory_order_release);
    serviced_grant_ = s;
    ch_.signal_peer(); // the target's ring is stalled behind this grant
    return true;
}

void ShmEp::handle_put_data(const RecHdr &h, const uint8_t *rec, size_t len) {
    PutDataBody b;
    if (len < sizeof(b)) return protocol_error("short PUT_DATA");
    std::memcpy(&b, rec + sizeof(RecHdr), sizeof(b));
    size_t n = len - sizeof(b);
    gdx_status_t st = GDX_OK;
    std::string why;
    if (b.off > UINT64_MAX - b.raddr) {
        st = GDX_ERR_ACCESS_DENIED;
        why = "address + offset wraps";
    } else {
        RkeyTable &t = iface_->shm_md().table();
        RkeyTable::Pin pin = t.pin();
        uint8_t *ptr = nullptr;
        st = t.check(pin, b.key, b.raddr + b.off, n, kAccessRemoteWrite, &ptr, &why);
        // Guarded (access_probe.h): memory unmapped since registration fails this put, not the process.
        if (st == GDX_OK && n) {
            if (int e = mem::guarded_copy(ptr, rec + sizeof(RecHdr) + sizeof(b), n); e != 0) {
                st = GDX_ERR_INVALID_ADDR;
                why = std::string("the registered destination is no longer writable (") + std::strerror(e) + ")";
            }
        }
    }
    if (st != GDX_OK && put_errors_.emplace(b.op, st).second) // once per operation, not per record
        log_refusal(st, why, "refused put of %zu bytes at 0x%" PRIx64 " from pid %d: %s", n, b.raddr + b.off,
                    static_cast<int>(ch_.peer_pid()), why.c_str());
    if (h.flags & kFlagLast) {
        auto it = put_errors_.find(b.op);
        if (it != put_errors_.end()) {
            st = it->second;
            put_errors_.erase(it);
        }
        op_done(b.op, st, false);
    }
}

bool ShmEp::serve_by_ring(const ReqBody &r) {
    const ShmTunables &tun = iface_->tun();
    if (!tun.cma_learn || r.len < tun.cma_thresh || r.len == 0 || r.raddr > UINT64_MAX - r.len || !ch_.i_can_cma() ||
        !ch_.peer_can_cma() || iface_->get_paths().choose(r.len, kComp) != GetPathChooser::Path::Ring)
        return false;
    gets_.push_back({r.op, r.key, r.raddr, r.len, 0, true, false, 0});
    serve_get_streams();
    return true;
}

bool ShmEp::serve_get_streams() {
    bool any = false;
    RkeyTable &t = iface_->shm_md().table();
    size_t frag = ch_.max_record() - sizeof(RecHdr) - sizeof(GetDataBody);
    while (!gets_.empty() && replies_.empty()) {
        GetStream &s = gets_.front();
        size_t n = std::min<uint64_t>(frag, s.len - s.off);
        GetDataBody b{s.op, s.off, GDX_OK, 0, {}};
        uint16_t flags = s.off + n == s.len ? kFlagLast : 0;
        RkeyTable::Pin pin = t.pin();
        uint8_t *ptr = nullptr;
        std::string why;
        gdx_status_t st = t.check(pin, s.key, s.raddr + s.off, n, kAccessRemoteRead, &ptr, &why);
        // Registered and probed at registration, but the owner may have unmapped or protected it since: probed
        // again (the whole source, once, ~0.4 us where the kernel answers PROCMAP_QUERY) before the first record,
        // so that it fails this get, not the process. The records then copy with memcpy straight into the ring;
        // a copy through process_vm_readv on ourselves (the guard before) pinned every page, ~3 us per record.
        // What this leaves: the owner unmapping the source while the get streams, which nothing here can see.
        if (st == GDX_OK && !s.probed) {
            s.probed = true;
            uint8_t *all = nullptr;
            if (t.check(pin, s.key, s.raddr, s.len, kAccessRemoteRead, &all, &why) == GDX_OK &&
                mem::probe_host_range(all, s.len, true, false, kComp) != GDX_OK) {
                st = GDX_ERR_INVALID_ADDR;
                why = std::string("the registered source is no longer readable (") + last_error() + ")";
            }
        }
        if (st != GDX_OK) {
            log_refusal(st, why, "refused get of %" PRIu64 " bytes at 0x%" PRIx64 " from pid %d: %s", s.len,
                        s.raddr, static_cast<int>(ch_.peer_pid()), why.c_str());
            b.status = st;
            reply(kRecGetData, kFlagLast, &b, sizeof(b));
            gets_.pop_front();
            continue;
        }
        uint8_t *dst = ch_.begin_record(sizeof(b) + n);
        if (dst == nullptr) break;
        std::memcpy(dst, &b, sizeof(b));
        const int64_t t0 = s.measured ? clock::now_ns() : 0;
        if (n) std::memcpy(dst + sizeof(b), ptr, n);
        if (s.measured) s.copy_ns += clock::now_ns() - t0;
        ch_.end_record(kRecGetData, 0, flags, sizeof(b) + n);
        any = true;
        s.off += n;
        if (flags & kFlagLast) {
            if (s.measured)
                iface_->get_paths().record(GetPathChooser::Path::Ring, s.len, s.copy_ns);
            gets_.pop_front();
        }
    }
    return any;
}

void ShmEp::handle_get_data(const RecHdr &h, const uint8_t *rec, size_t len) {
    GetDataBody b;
    if (len < sizeof(b)) return protocol_error("short GET_DATA");
    std::memcpy(&b, rec + sizeof(RecHdr), sizeof(b));
    size_t n = len - sizeof(b);
    Op *op = find_op(b.op);
    if (op == nullptr || op->kind != OpKind::Get || b.off > op->len || n > op->len - b.off ||
        (b.status != GDX_OK && n != 0))
        return protocol_error("GET_DATA for an unknown operation or range");
    if (n) std::memcpy(op->local + b.off, rec + sizeof(RecHdr) + sizeof(b), n);
    if (b.status != GDX_OK && op->status == GDX_OK) {
        op->status = static_cast<gdx_status_t>(b.status);
        failed_at_peer(*op, op->status);
    }
    if (h.flags & kFlagLast) complete_op(*op, GDX_OK);
}

void ShmEp::log_refusal(gdx_status_t st, std::string_view cause, const char *fmt, ...) const {
    // The level is decided once per line (first_time counts): WARN for the first of its kind from this peer.
    log::Level level = refusal_level("shm", "pid " + std::to_string(static_cast<int>(ch_.peer_pid())), st, cause);
    if (!log::enabled(level)) return;
    va_list ap;
    va_start(ap, fmt);
    log::vwrite(level, kComp, fmt, ap);
    va_end(ap);
}

void ShmEp::failed_at_peer(const Op &op, gdx_status_t st) {
    // The initiator's half of "logged on both sides" (the target said why in its own log).
    log_refusal(st, "failed at the peer", "%s of %" PRIu64 " bytes at 0x%" PRIx64 " (key 0x%016" PRIx64 ") failed at "
                "pid %d: %s", op.kind == OpKind::Put ? "put" : "get", op.len, op.raddr, op.key,
                static_cast<int>(ch_.peer_pid()), gdx_status_string(st));
}

void ShmEp::protocol_error(const char *what) {
    ch_.fail(GDX_FAIL(GDX_ERR_PROTOCOL, kComp, "pid %d sent a bad record: %s", static_cast<int>(ch_.peer_pid()), what),
             what);
}

bool ShmEp::on_other_record(const RecHdr &h, const uint8_t *rec) {
    // A granted copy of the peer's is still running: what it sent after that request must not overtake it
    // (put, then AM "data ready"). Leave the record in the ring; progress() offers it again.
    if (grant_outstanding()) return false;
    size_t blen = h.len - sizeof(RecHdr);
    const uint8_t *body = rec + sizeof(RecHdr);
    switch (h.type) {
    case kRecAm: deliver_am(h, rec); break;
    case kRecPutReq: handle_cma_request(true, body, blen); break;
    case kRecGetReq: {
        ReqBody r;
        if (!body_of(h, rec, &r)) {
            protocol_error("short GET request");
            break;
        }
        if ((h.flags & kFlagRing) == 0) {
            if (!serve_by_ring(r)) handle_cma_request(false, body, blen);
        } else if (r.len == 0 || r.raddr > UINT64_MAX - r.len) {
            GetDataBody b{r.op, 0, GDX_ERR_ACCESS_DENIED, 0, {}};
            reply(kRecGetData, kFlagLast, &b, sizeof(b));
        } else {
            gets_.push_back({r.op, r.key, r.raddr, r.len, 0});
            serve_get_streams();
        }
        break;
    }
    case kRecOpDone: {
        DoneBody d;
        Op *op = body_of(h, rec, &d) ? find_op(d.op) : nullptr;
        if (op == nullptr) {
            protocol_error("completion for an unknown operation");
            break;
        }
        if ((d.reserved & kDoneGranted) != 0) {
            service_grant(); // published before this record: ours to copy now if progress has not yet
            if (!op->granted_done) {
                protocol_error("completion announces a grant that was never posted");
                break;
            }
        }
        if (d.status != GDX_OK) failed_at_peer(*op, static_cast<gdx_status_t>(d.status));
        complete_op(*op, static_cast<gdx_status_t>(d.status));
        break;
    }
    case kRecPutData: handle_put_data(h, rec, blen); break;
    case kRecGetData: handle_get_data(h, rec, blen); break;
    default: protocol_error("unknown record type"); break;
    }
    return true;
}

void ShmEp::on_ctrl(uint16_t type, const uint8_t *body, size_t len, const int *fds, size_t nfds) {
    ShmMd &md = iface_->shm_md();
    if (peer_map_.on_ctrl(type, body, len, fds, nfds, md.table(), md.shared())) return;
    for (size_t i = 0; i < nfds; ++i) close(fds[i]);
    protocol_error("unexpected control message");
}

// map_remote (kCapPeerMap): the peer-map service of the channel layer (peer_map.h) does the work; shm keys are
// ids in the owner's RkeyTable.
gdx_status_t ShmEp::map_remote(const RemoteKey &rkey, uint8_t **local) {
    if (local == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "map_remote: null output");
    if (gdx_status_t st = ch_.status(); st != GDX_OK) return st;
    const auto *key = SoftRemoteKey::of(rkey, wire::TransportId::Shm);
    constexpr unsigned kRW = kAccessRemoteRead | kAccessRemoteWrite;
    if (key == nullptr || key->key_id() == 0 || (key->access() & kRW) != kRW) return GDX_ERR_UNSUPPORTED;
    const size_t before = peer_map_.pending();
    gdx_status_t st = peer_map_.map(key->key_id(), key->base(), key->length(), local);
    if (peer_map_.pending() > before && active_ + before == 0) busy_since_ns_ = Hub::coarse_ns();
    return st;
}

void ShmEp::on_failed(gdx_status_t status) {
    for (Op &op : ops_)
        if (op.active) complete_op(op, status);
    sendq_.clear();
    replies_.clear();
    gets_.clear();
    put_errors_.clear();
    for (auto &f : flushes_)
        if (f.second) f.second->complete(status);
    flushes_.clear();
    peer_map_.fail(status);
    pending_.fail_all(); // they see the error from the operation they retry
}

// ---- progress -------------------------------------------------------------------------------------------


void ShmEp::check_silence() {
    int64_t now = Hub::coarse_ns();
    if (ch_.rx_records() != rx_seen_) { // something arrived since the last look: the peer spoke by then
        rx_seen_ = ch_.rx_records();
        last_rx_ns_ = now;
    }
    if (now - std::max(last_rx_ns_, busy_since_ns_) > iface_->tun().silence_timeout_ns) {
        ch_.fail(GDX_FAIL(GDX_ERR_TIMEOUT, kComp,
                          "pid %d silent for GDX_PEER_SILENCE_TIMEOUT with %zu operation(s) outstanding: declared dead",
                          static_cast<int>(ch_.peer_pid()), active_ + peer_map_.pending()),
                 "peer timeout");
    }
}

unsigned ShmEp::progress_work() {
    // The interface asks quiet() for every endpoint on each of its progress calls, inline, and calls this only
    // past it: an idle endpoint costs those few loads, no call, no clock and no queue walk.
    // Each step is asked inline whether it has anything to do, so that a call that only delivers a message (the
    // latency path) makes no call that returns at once (callgrind: ~100 instructions of such calls per message).
    unsigned n = grant_posted() && service_grant() ? 1 : 0;
    n += ch_.poll(*this, kPollBudget);
    if (!ch_.up()) return n;
    if (!replies_.empty()) n += drain_replies() ? 1 : 0;
    if (!gets_.empty()) n += serve_get_streams() ? 1 : 0;
    while (!sendq_.empty() && push_put_data(*sendq_.front())) {
        sendq_.pop_front();
        ++n;
    }
    if (!pending_.empty()) n += pending_.dispatch([this] { return resources_free(); });
    if (active_ + peer_map_.pending() > 0 && iface_->tun().silence_timeout_ns != INT64_MAX) check_silence();
    return n;
}

bool ShmEp::has_work() {
    if (!ch_.up()) return false;
    return !replies_.empty() || !gets_.empty() || !sendq_.empty() || (!pending_.empty() && resources_free()) ||
           grant_posted() || grant_outstanding();
}

} // namespace gdx::tp::shm
