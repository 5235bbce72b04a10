// cuda_ipc endpoint: P2P decision at connect, put/get as copies into/out of imported peer memory, AMs ordered
// after the copies issued before them, descriptor requests and revocations over the channel.
#include "transport/cuda_ipc/ipc_internal.h"

#include "core/error.h"
#include "transport/ep_checks.h"
#include "transport/wire.h"

#include <cinttypes>
#include <cstring>
#include <unistd.h>

namespace gdx::tp::cuda_ipc {

namespace {
constexpr const char *kComp = "cuda_ipc";
constexpr uint32_t kMaxOps = 1024;
constexpr size_t kMaxDeferred = 256;           // AMs waiting behind copies
constexpr size_t kMaxDeferredBytes = 8u << 20; // and their bytes
} // namespace

CudaIpcEp::CudaIpcEp(CudaIpcIface *iface)
    : RingAmEndpoint(*iface), iface_(iface), ch_(&iface->hub(), this, kAddrExtra),
      peer_map_(&ch_, kComp) {
    ops_.resize(kMaxOps);
    for (uint32_t i = kMaxOps; i-- > 0;) free_ops_.push_back(i);
    iface_->add_ep(this);
}

CudaIpcEp::~CudaIpcEp() {
    if (active_ > 0) { // copies still read or write user memory: let them finish rather than cut them off
        iface_->sync_streams();
        iface_->poll_streams();
    }
    for (Op &op : ops_)
        if (op.active) complete_op(op, GDX_ERR_CANCELED);
    for (auto &f : flushes_)
        if (f.second) f.second->complete(GDX_ERR_CANCELED);
    iface_->forget(this);
    iface_->remove_ep(this);
}

std::vector<uint8_t> CudaIpcEp::address() const {
    uint8_t extra[kAddrExtra] = {};
    std::memcpy(extra, iface_->bus_id().data(), std::min(iface_->bus_id().size(), kBusIdLen));
    wire::store_le32(extra + kBusIdLen, static_cast<uint32_t>(iface_->device()));
    return ch_.address({extra, kAddrExtra});
}

gdx_status_t CudaIpcEp::connect(std::span<const uint8_t> remote_address) {
    std::vector<uint8_t> pe;
    gdx_status_t st = ch_.connect(remote_address, &pe);
    if (st != GDX_INPROGRESS && st != GDX_OK) return st;
    std::string bus(reinterpret_cast<const char *>(pe.data()), strnlen(reinterpret_cast<const char *>(pe.data()),
                                                                        kBusIdLen));
    for (char &c : bus) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    peer_dev_ = -1;
    const mem::Ops &gpu = mem::ops(mem::MemKind::Cuda);
    std::vector<mem::DeviceInfo> gpus;
    gpu.devices(&gpus);
    for (const mem::DeviceInfo &d : gpus)
        if (d.pci_bus_id == bus) peer_dev_ = d.ordinal;
    p2p_ok_ = false;
    if (iface_->p2p() == Ternary::No) {
        p2p_why_ = "GDX_P2P=no";
    } else if (peer_dev_ < 0) {
        p2p_why_ = "the peer's GPU " + bus + " is not visible in this process (CUDA_VISIBLE_DEVICES?)";
    } else if (peer_dev_ == iface_->device()) {
        p2p_ok_ = true; // one GPU, two processes: device-local copies
    } else {
        p2p_ok_ = gpu.peer_access(iface_->device(), peer_dev_, &p2p_why_) == GDX_OK;
    }
    if (!p2p_ok_ && iface_->p2p() == Ternary::Yes) {
        st = GDX_FAIL(GDX_ERR_UNREACHABLE, kComp, "GDX_P2P=yes but GPU %d cannot reach the peer's GPU %s: %s",
                      iface_->device(), bus.c_str(), p2p_why_.c_str());
        ch_.fail(st, "P2P required");
        return st;
    }
    if (!p2p_ok_) {
        char key[96];
        std::snprintf(key, sizeof(key), "cuda_ipc:nop2p:%d:%s", iface_->device(), bus.c_str());
        GDX_LOG_ONCE(log::Level::Info, kComp, key,
                     "GPU %d -> GPU %s: no direct path (%s); cuda_ipc put/get return GDX_ERR_UNREACHABLE and the "
                     "staging layer moves the bytes",
                     iface_->device(), bus.c_str(), p2p_why_.c_str());
    }
    return st;
}

// ---- operations -----------------------------------------------------------------------------------------

gdx_status_t CudaIpcEp::ready_for_op() {
    gdx_status_t st = ch_.op_status();
    if (st == GDX_INPROGRESS) return GDX_ERR_NO_RESOURCE;
    if (st != GDX_OK) return st;
    if (fence_.holds(fence_waits_on())) return GDX_ERR_NO_RESOURCE; // ordered after everything before the fence
    if (pending_.holds_back()) return GDX_ERR_NO_RESOURCE; // parked requests go first (pending_queue.h)
    return GDX_OK;
}

gdx_status_t CudaIpcEp::resolve(const PackedKey &k, uint64_t raddr, size_t len, uint8_t **remote, Mapping **map) {
    *map = nullptr;
    if (k.kind == ExportKind::None)
        return GDX_FAIL(GDX_ERR_ACCESS_DENIED, kComp, "remote key opens nothing (the exporter could not export it)");
    if (!wire::range_inside(raddr, len, k.reg_base, k.reg_len))
        return GDX_FAIL(GDX_ERR_ACCESS_DENIED, kComp,
                        "[0x%" PRIx64 ", +%zu) is outside the remote key's [0x%" PRIx64 ", +%" PRIu64 ")", raddr, len,
                        k.reg_base, k.reg_len);
    if (k.exporter_pid == static_cast<uint32_t>(getpid())) {
        // Exported by this very process (CUDA refuses to IPC-open it here): the address is ours already.
        std::shared_ptr<ExportState> s = local_exporter(k.exporter_nonce);
        bool live = false;
        if (s) {
            std::lock_guard<std::mutex> g(s->mutex);
            auto l = s->live.find(k.buffer_id);
            live = l != s->live.end() && l->second.epoch == k.epoch;
        }
        if (!live)
            return GDX_FAIL(GDX_ERR_ACCESS_DENIED, kComp, "remote key for buffer %" PRIu64 " was revoked", k.buffer_id);
        *remote = reinterpret_cast<uint8_t *>(static_cast<uintptr_t>(raddr));
        return GDX_OK;
    }
    if (k.exporter_nonce != ch_.peer().iface_nonce)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "remote key was issued by another interface than this "
                        "endpoint's peer");
    bool need_fd = false;
    Mapping *m = nullptr;
    gdx_status_t st = iface_->cache().acquire(k, &m, &need_fd);
    if (need_fd) {
        FdReq r{k.token, k.buffer_id};
        gdx_status_t s2 = ch_.send_ctrl(kCtrlFdReq, &r, sizeof(r));
        if (s2 != GDX_OK) iface_->cache().on_fd(k.exporter_nonce, k.token, s2, -1);
    }
    if (st != GDX_OK) return st;
    *remote = m->ptr + (raddr - k.alloc_base);
    *map = m;
    return GDX_OK;
}

gdx_status_t CudaIpcEp::rma(bool put, uint8_t *local, size_t len, uint64_t raddr, const RemoteKey &rkey,
                            const MemHandle *lmemh, Completion *comp) {
    gdx_status_t st = ready_for_op();
    if (st != GDX_OK) return st;
    auto *key = dynamic_cast<const IpcRemoteKey *>(&rkey);
    if (key == nullptr)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "remote key was not unpacked by the cuda_ipc memory domain");
    const bool shared = key->key().kind == ExportKind::Shared; // host memory: no peer-to-peer path needed
    if (!p2p_ok_ && !shared) {
        set_last_error("cuda_ipc: no direct path to the peer's GPU: " + p2p_why_);
        return GDX_ERR_UNREACHABLE;
    }
    unsigned need = put ? kAccessRemoteWrite : kAccessRemoteRead;
    if ((key->access() & need) != need)
        return GDX_FAIL(GDX_ERR_ACCESS_DENIED, kComp, "%s: remote key does not grant remote %s", put ? "put" : "get",
                        put ? "write" : "read");
    if (len == 0) return GDX_OK;
    if (local == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "%s: null local buffer", put ? "put" : "get");
    if (shared) return shared_rma(put, local, len, raddr, key->key(), lmemh);
    if (free_ops_.empty()) return GDX_ERR_NO_RESOURCE;
    uint8_t *remote = nullptr;
    Mapping *map = nullptr;
    if ((st = resolve(key->key(), raddr, len, &remote, &map)) != GDX_OK) return st;
    uint32_t idx = free_ops_.back();
    Op &op = ops_[idx];
    uint64_t id = (static_cast<uint64_t>(op.gen + 1) << 32) | idx;
    st = iface_->submit_copy(put ? remote : local, put ? local : remote, len, this, id, map);
    if (st != GDX_OK) return st;
    free_ops_.pop_back();
    op = Op{comp, next_seq_++, op.gen + 1, true, GDX_OK};
    ++active_;
    return GDX_INPROGRESS;
}

gdx_status_t CudaIpcEp::put(const void *buf, size_t len, const MemHandle *lmemh, uint64_t remote_addr,
                            const RemoteKey &rkey, Completion *comp) {
    return rma(true, static_cast<uint8_t *>(const_cast<void *>(buf)), len, remote_addr, rkey, lmemh, comp);
}

gdx_status_t CudaIpcEp::get(void *buf, size_t len, const MemHandle *lmemh, uint64_t remote_addr,
                            const RemoteKey &rkey, Completion *comp) {
    return rma(false, static_cast<uint8_t *>(buf), len, remote_addr, rkey, lmemh, comp);
}

// The staging engine's transport path into a peer's bounce slot, where its copy engines could not use the mapped
// pool directly: one CPU copy through the mapping, complete on return (so an AM after it sees the bytes).
gdx_status_t CudaIpcEp::shared_rma(bool put, uint8_t *local, size_t len, uint64_t raddr, const PackedKey &k,
                                   const MemHandle *lmemh) {
    if (!wire::range_inside(raddr, len, k.reg_base, k.reg_len))
        return GDX_FAIL(GDX_ERR_ACCESS_DENIED, kComp,
                        "[0x%" PRIx64 ", +%zu) is outside the remote key's [0x%" PRIx64 ", +%" PRIu64 ")", raddr, len,
                        k.reg_base, k.reg_len);
    if (lmemh != nullptr && !lmemh->info().host_accessible) {
        set_last_error(std::string("cuda_ipc: a peer's shared segment is copied by the CPU, and the local side is ") +
                       mem::type_name(lmemh->info().type) + " (stage it)");
        return GDX_ERR_UNREACHABLE;
    }
    uint8_t *base = nullptr;
    gdx_status_t st = peer_map_.map(k.token, k.reg_base, k.reg_len, &base);
    if (st == GDX_INPROGRESS) return GDX_ERR_NO_RESOURCE; // the peer's answer comes with progress()
    if (st != GDX_OK) return st;
    uint8_t *remote = base + (raddr - k.reg_base);
    std::memcpy(put ? remote : local, put ? local : remote, len);
    return GDX_OK;
}

gdx_status_t CudaIpcEp::map_remote(const RemoteKey &rkey, uint8_t **local) {
    if (local == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "map_remote: null output");
    if (gdx_status_t st = ch_.status(); st != GDX_OK) return st;
    const auto *key = dynamic_cast<const IpcRemoteKey *>(&rkey);
    constexpr unsigned kRW = kAccessRemoteRead | kAccessRemoteWrite;
    if (key == nullptr || key->key().kind != ExportKind::Shared || (key->access() & kRW) != kRW)
        return GDX_ERR_UNSUPPORTED; // GPU exports are imported by put/get, not mapped for the CPU
    const PackedKey &k = key->key();
    return peer_map_.map(k.token, k.reg_base, k.reg_len, local);
}

void CudaIpcEp::on_copy_done(uint64_t op_id, gdx_status_t st) {
    uint32_t idx = static_cast<uint32_t>(op_id);
    if (idx >= ops_.size() || !ops_[idx].active || ops_[idx].gen != static_cast<uint32_t>(op_id >> 32)) return;
    complete_op(ops_[idx], st);
}

void CudaIpcEp::complete_op(Op &op, gdx_status_t st) {
    op.active = false;
    --active_;
    free_ops_.push_back(static_cast<uint32_t>(&op - ops_.data()));
    if (st == GDX_OK) st = op.status; // the peer died while the copy ran
    if (op.comp) op.comp->complete(st);
    check_flushes();
}

uint64_t CudaIpcEp::oldest_active() const {
    if (active_ == 0) return UINT64_MAX;
    uint64_t o = UINT64_MAX;
    for (const Op &op : ops_)
        if (op.active && op.seq < o) o = op.seq;
    return o;
}

void CudaIpcEp::check_flushes() {
    if (flushes_.empty()) return;
    uint64_t oldest = oldest_active();
    for (size_t i = 0; i < flushes_.size();) {
        if (flushes_[i].first <= oldest && deferred_.empty()) {
            Completion *c = flushes_[i].second;
            flushes_.erase(flushes_.begin() + static_cast<std::ptrdiff_t>(i));
            if (c) c->complete(GDX_OK);
        } else {
            ++i;
        }
    }
}

bool CudaIpcEp::push_am(uint8_t id, const void *h, size_t hl, const void *p, size_t pl) {
    return ch_.push(kRecAm, id, 0, h, hl, p, pl);
}

gdx_status_t CudaIpcEp::am_zcopy(uint8_t id, const void *header, size_t header_len, const void *payload, size_t len,
                                 const MemHandle *memh, Completion *) {
    if (gdx_status_t st = check_am_zcopy(*iface_, id, header, header_len, payload, len); st != GDX_OK) return st;
    if (memh != nullptr && len != 0 && !memh->info().host_accessible)
        return GDX_FAIL(GDX_ERR_UNSUPPORTED, kComp, "am_zcopy payload in GPU memory: use put, then an AM");
    gdx_status_t st = ready_for_op();
    if (st != GDX_OK) return st;
    // An AM issued after put/get is delivered after their bytes landed: the peer's handler may read them.
    if (active_ == 0 && deferred_.empty()) return push_am(id, header, header_len, payload, len) ? GDX_OK
                                                                                                : GDX_ERR_NO_RESOURCE;
    if (deferred_.size() >= kMaxDeferred || deferred_bytes_ + header_len + len > kMaxDeferredBytes)
        return GDX_ERR_NO_RESOURCE;
    DeferredAm d{id, {}, next_seq_ - 1};
    d.bytes.resize(header_len + len);
    if (header_len) std::memcpy(d.bytes.data(), header, header_len);
    if (len) std::memcpy(d.bytes.data() + header_len, payload, len);
    deferred_bytes_ += d.bytes.size();
    deferred_.push_back(std::move(d));
    return GDX_OK;
}

void CudaIpcEp::drain() {
    uint64_t oldest = oldest_active();
    while (!deferred_.empty() && deferred_.front().after_seq < oldest) {
        DeferredAm &d = deferred_.front();
        if (!push_am(d.id, nullptr, 0, d.bytes.data(), d.bytes.size())) break;
        deferred_bytes_ -= d.bytes.size();
        deferred_.pop_front();
    }
    while (!revokes_.empty()) {
        RevokeBody b = revokes_.front();
        if (!ch_.push(kRecRevoke, 0, 0, &b, sizeof(b), nullptr, 0)) break;
        revokes_.pop_front();
    }
    check_flushes();
}

gdx_status_t CudaIpcEp::flush(Completion *comp) {
    gdx_status_t st = ch_.status();
    if (st != GDX_OK && st != GDX_INPROGRESS) return st;
    if (pending_.holds_back()) return GDX_ERR_NO_RESOURCE; // pending_queue.h: parked requests go first
    if (active_ == 0 && deferred_.empty()) return GDX_OK;
    if (comp) flushes_.push_back({next_seq_, comp});
    return GDX_INPROGRESS;
}

gdx_status_t CudaIpcEp::fence() {
    fence_.fence(fence_waits_on());
    return GDX_OK;
}

gdx_status_t CudaIpcEp::pending_add(PendingRequest *req) {
    return pending_.add(req, has_room(), kComp);
}

void CudaIpcEp::queue_revoke(uint64_t buffer_id, uint64_t epoch) {
    if (ch_.up()) revokes_.push_back({buffer_id, epoch});
}

// ---- incoming -------------------------------------------------------------------------------------------

bool CudaIpcEp::on_record(const shm::RecHdr &h, const uint8_t *rec) {
    const uint8_t *body = rec + sizeof(shm::RecHdr);
    size_t blen = h.len - sizeof(shm::RecHdr);
    if (h.type == kRecAm) {
        iface_->dispatch_am(h.id, this, body, blen);
    } else if (h.type == kRecRevoke && blen >= sizeof(RevokeBody)) {
        RevokeBody b;
        std::memcpy(&b, body, sizeof(b));
        iface_->cache().revoke(ch_.peer().iface_nonce, b.buffer_id, b.epoch);
    } else {
        ch_.fail(GDX_FAIL(GDX_ERR_PROTOCOL, kComp, "unknown record type %u from pid %d", h.type,
                          static_cast<int>(ch_.peer_pid())),
                 "record");
    }
    return true;
}

void CudaIpcEp::on_ctrl(uint16_t type, const uint8_t *body, size_t len, const int *fds, size_t nfds) {
    const IpcMd &md = iface_->ipc_md();
    if (peer_map_.on_ctrl(type, body, len, fds, nfds, md.shared_keys(), md.shared())) return;
    if (type == kCtrlFdReq && len == sizeof(FdReq) && nfds == 0) {
        FdReq r;
        std::memcpy(&r, body, sizeof(r));
        FdRep rep{r.token, GDX_ERR_NOT_FOUND, 0};
        int fd = -1;
        ExportState &ex = iface_->exports();
        {
            std::lock_guard<std::mutex> g(ex.mutex);
            auto it = ex.by_token.find(r.token);
            if (it != ex.by_token.end() && it->second.buffer_id == r.buffer_id) {
                fd = it->second.fd; // sent while the lock holds it open; SCM_RIGHTS duplicates it into the peer
                rep.status = GDX_OK;
                ch_.send_ctrl(kCtrlFdRep, &rep, sizeof(rep), &fd, 1);
                return;
            }
        }
        GDX_INFO(kComp, "pid %d asked for an export that is gone (deregistered)", static_cast<int>(ch_.peer_pid()));
        ch_.send_ctrl(kCtrlFdRep, &rep, sizeof(rep));
        return;
    }
    if (type == kCtrlFdRep && len == sizeof(FdRep) && nfds <= 1) {
        FdRep rep;
        std::memcpy(&rep, body, sizeof(rep));
        gdx_status_t st = static_cast<gdx_status_t>(rep.status);
        if (st == GDX_OK && nfds != 1) st = GDX_ERR_PROTOCOL;
        if (st != GDX_OK && nfds == 1) close(fds[0]);
        iface_->cache().on_fd(ch_.peer().iface_nonce, rep.token, st, st == GDX_OK ? fds[0] : -1);
        return;
    }
    for (size_t i = 0; i < nfds; ++i) close(fds[i]);
    ch_.fail(GDX_FAIL(GDX_ERR_PROTOCOL, kComp, "unexpected control message %u from pid %d", type,
                      static_cast<int>(ch_.peer_pid())),
             "ctrl");
}

void CudaIpcEp::on_failed(gdx_status_t status) {
    // Copies already on our streams still run (they touch mappings we keep); they complete with the error.
    for (Op &op : ops_)
        if (op.active) op.status = status;
    deferred_.clear();
    deferred_bytes_ = 0;
    revokes_.clear();
    for (auto &f : flushes_)
        if (f.second) f.second->complete(status);
    flushes_.clear();
    if (ch_.peer().iface_nonce != 0) iface_->cache().exporter_gone(ch_.peer().iface_nonce);
    peer_map_.fail(status);
    pending_.fail_all(); // they see the error from the operation they retry
}

unsigned CudaIpcEp::progress() {
    if (!ch_.up()) return 0;
    unsigned n = ch_.poll(*this, 64);
    if (!ch_.up()) return n;
    drain();
    n += pending_.dispatch([this] { return has_room(); });
    return n;
}

bool CudaIpcEp::has_work() const { return !deferred_.empty() || !revokes_.empty() || !pending_.empty(); }

} // namespace gdx::tp::cuda_ipc
