#include "fallback/peer_link.h"

#include "core/error.h"
#include "fallback/bounce_pool.h"
#include "transport/wire.h"

#include <algorithm>
#include <cstdio>

namespace gdx::fb {

namespace {
constexpr const char *kComp = "fallback";
}

// ---- CreditWallet ----------------------------------------------------------------------------------------------

int CreditWallet::take() {
    if (idle_.empty()) return -1;
    uint16_t s = idle_.back();
    idle_.pop_back();
    ++in_use_;
    return s;
}

void CreditWallet::put_back(uint16_t slot) {
    --in_use_;
    idle_.push_back(slot);
}

gdx_status_t CreditWallet::ask(PeerLink &peer, uint16_t pool, unsigned cap) {
    unsigned want = std::min<unsigned>(cap, in_use_ + static_cast<unsigned>(idle_.size()) + waiting);
    if (want <= want_sent_) return GDX_OK; // already asked: the peer queues us until slots free up
    CtrlMsg m;
    m.type = CtrlType::Want;
    m.pool = pool;
    m.count = static_cast<uint16_t>(std::min<unsigned>(want, kMaxCtrlSlots));
    want_sent_ = want;
    return peer.send(m, false);
}

gdx_status_t CreditWallet::on_grant(const CtrlMsg &m, tp::MemoryDomain &md, std::string *why) {
    char buf[160];
    auto bad = [&](const char *what, unsigned long long v) {
        std::snprintf(buf, sizeof(buf), "GRANT for pool %u: %s (%#llx)", m.pool, what, v);
        *why = buf;
        return GDX_ERR_PROTOCOL;
    };
    if (m.status != GDX_OK) { // the peer could not make that pool (e.g. out of pinned memory)
        error_ = m.status;
        return GDX_OK;
    }
    if (m.nslots == 0 || m.nslots > kMaxPoolSlots) return bad("slot count out of range", m.nslots);
    if (m.slot_size == 0 || m.slot_size > (uint64_t(1) << 30)) return bad("slot size out of range", m.slot_size);
    if (m.addr + uint64_t(m.nslots) * m.slot_size < m.addr) return bad("pool range wraps", m.addr);
    if (rkey_ != nullptr && (m.addr != base_ || m.slot_size != slot_size_ || m.nslots != nslots_))
        return bad("pool layout changed", m.addr);
    for (uint16_t s : m.slots) {
        if (s >= m.nslots) return bad("slot beyond the pool", s);
        if (!held_.empty() && held_[s] != 0) return bad("slot granted twice", s);
    }
    if (rkey_ == nullptr || !std::equal(m.rkey.begin(), m.rkey.end(), rkey_bytes_.begin(), rkey_bytes_.end())) {
        std::unique_ptr<tp::RemoteKey> k;
        if (m.rkey.size() != md.rkey_packed_size() || md.rkey_unpack(m.rkey, &k) != GDX_OK)
            return bad("pool rkey refused by the transport", m.rkey.size());
        rkey_ = std::move(k);
        rkey_bytes_.assign(m.rkey.begin(), m.rkey.end());
        map_unavailable = false; // another pool: try mapping it anew
    }
    base_ = m.addr;
    slot_size_ = m.slot_size;
    nslots_ = m.nslots;
    held_.resize(nslots_, 0);
    for (uint16_t s : m.slots) {
        held_[s] = 1;
        idle_.push_back(s);
    }
    return GDX_OK;
}

void CreditWallet::kept(uint16_t slot) {
    if (slot < held_.size()) held_[slot] = 2;
    put_back(slot);
}

gdx_status_t CreditWallet::return_unfilled(PeerLink &peer, uint16_t pool) {
    if (waiting > 0) return GDX_OK;
    CtrlMsg m;
    m.type = CtrlType::Return;
    m.pool = pool;
    for (size_t i = 0; i < idle_.size();) {
        uint16_t s = idle_[i];
        if (held_[s] != 1) {
            ++i;
            continue;
        }
        held_[s] = 0;
        m.slots.push_back(s);
        idle_[i] = idle_.back();
        idle_.pop_back();
    }
    if (m.slots.empty()) return GDX_OK;
    want_sent_ = in_use_ + static_cast<unsigned>(idle_.size());
    return peer.send(m, false);
}

gdx_status_t CreditWallet::on_recall(PeerLink &peer, uint16_t pool) {
    // Fragments waiting for a credit take the idle ones at our next progress: those are not idle, and handing
    // them back would only start a GRANT/RECALL ping-pong between two busy senders. They come back through DONE
    // without keep, which the peer sends while someone else waits.
    if (waiting > 0 || idle_.empty()) return GDX_OK;
    want_sent_ = in_use_;
    CtrlMsg m;
    m.type = CtrlType::Return;
    m.pool = pool;
    m.slots.assign(idle_.begin(), idle_.end());
    for (uint16_t s : idle_) held_[s] = 0;
    idle_.clear();
    return peer.send(m, false);
}

// ---- PeerLink --------------------------------------------------------------------------------------------------

gdx_status_t PeerLink::try_send(const Queued &q) {
    if (q.publishes) {
        // The peer acts on this message by reading what we put before it: order it after those puts.
        gdx_status_t st = ep_.fence();
        if (st != GDX_OK) return st;
    }
    return ep_.am_bcopy(am_id_, q.bytes.data(), q.bytes.size());
}

gdx_status_t PeerLink::send(const CtrlMsg &m, bool publishes) {
    // Declared dead: nothing more goes to it (a resumed peer would act on answers to requests it was told
    // failed); BYE goes through say_bye.
    if (dead_ != GDX_OK) return dead_;
    Queued q;
    encode_ctrl(m, &q.bytes);
    q.publishes = publishes;
    if (queue_.empty() && !defer_) {
        gdx_status_t st = try_send(q);
        if (st == GDX_OK) return GDX_OK;
        if (st != GDX_ERR_NO_RESOURCE)
            return GDX_FAIL(st, kComp, "sending %s (%zu bytes) to the peer failed", ctrl_type_name(m.type),
                            q.bytes.size());
    }
    queue_.push_back(std::move(q)); // behind earlier messages: the peer sees them in the order they were meant
    return GDX_OK;
}

void PeerLink::return_unfilled_credits() {
    for (auto &[pool, w] : wallets_)
        if (w.ready()) w.return_unfilled(*this, pool);
}

bool PeerLink::quiet() const {
    if (!queue_.empty() || bye_ == Bye::Pending || (!reclaimed && broken())) return false;
    for (const auto &[pool, w] : wallets_)
        if (w.ready() && w.has_unfilled()) return false;
    return true;
}

unsigned PeerLink::flush() {
    unsigned n = 0;
    while (!queue_.empty()) {
        gdx_status_t st = try_send(queue_.front());
        if (st == GDX_ERR_NO_RESOURCE) break;
        if (st != GDX_OK) {
            // The connection is gone; whoever waits on an answer notices broken() and fails.
            GDX_WARN(kComp, "dropping %zu queued control messages: the endpoint failed (%s)", queue_.size(),
                     gdx_status_string(st));
            queue_.clear();
            break;
        }
        queue_.pop_front();
        ++n;
    }
    return n;
}

bool PeerLink::broken() const {
    if (dead_ != GDX_OK) return true;
    gdx_status_t st = ep_.state();
    return st != GDX_OK && st != GDX_INPROGRESS;
}

gdx_status_t PeerLink::landing_rkey(std::span<const uint8_t> bytes, tp::MemoryDomain &md,
                                    std::shared_ptr<const tp::RemoteKey> *out) {
    if (landing_rkey_ == nullptr || !std::equal(bytes.begin(), bytes.end(), landing_bytes_.begin(), landing_bytes_.end())) {
        std::unique_ptr<tp::RemoteKey> k;
        if (bytes.size() != md.rkey_packed_size()) return GDX_ERR_PROTOCOL;
        if (gdx_status_t st = md.rkey_unpack(bytes, &k); st != GDX_OK) return st;
        landing_rkey_ = std::move(k);
        landing_bytes_.assign(bytes.begin(), bytes.end());
        landing_map_unavailable = false;
    }
    *out = landing_rkey_;
    return GDX_OK;
}

PeerLink::~PeerLink() {
    for (auto &[p, m] : mapped_)
        for (unsigned k = 0; k < static_cast<unsigned>(mem::MemKind::kCount); ++k)
            if (m.registered & (1u << k)) mem::ops(static_cast<mem::MemKind>(k)).host_unregister(p);
}

gdx_status_t PeerLink::map_pool(const tp::RemoteKey &rkey, mem::MemKind kind, int device, uint8_t **local) {
    uint8_t *p = nullptr;
    if (gdx_status_t st = ep_.map_remote(rkey, &p); st != GDX_OK) return st;
    MappedPool &m = mapped_[p];
    m.length = std::max<size_t>(m.length, rkey.length());
    const unsigned bit = 1u << static_cast<unsigned>(kind);
    if ((m.registered & bit) == 0) {
        if (m.refused & bit) return GDX_ERR_UNSUPPORTED;
        // Registered whole, once: cuMemHostRegister pins the pages for the copy engines (the owner did the same
        // with its own mapping), so its D2H/H2D run as DMA into the very pages the peer reads.
        if (mem::ops(kind).host_register(p, m.length, device) != GDX_OK) {
            m.refused |= bit;
            GDX_WARN(kComp,
                     "the peer's bounce pool is mapped here but cannot be registered for %s copies: staged "
                     "fragments go through the transport (one CPU copy more)",
                     mem::kind_name(kind));
            return GDX_ERR_UNSUPPORTED;
        }
        m.registered |= bit;
        GDX_INFO(kComp,
                 "staging: the peer's bounce pool (%zu bytes) is mapped here and registered for %s copies: staged "
                 "fragments are copied straight into its slots, with no CPU copy in between",
                 m.length, mem::kind_name(kind));
    }
    *local = p;
    return GDX_OK;
}

gdx_status_t PeerLink::mapped_range(const tp::RemoteKey &rkey, uint64_t addr, uint64_t len, mem::MemKind kind,
                                    int device, uint8_t **local) {
    if (!tp::wire::range_inside(addr, len, rkey.base(), rkey.length())) return GDX_ERR_PROTOCOL;
    uint8_t *base = nullptr;
    if (gdx_status_t st = map_pool(rkey, kind, device, &base); st != GDX_OK) return st;
    *local = base + (addr - rkey.base());
    return GDX_OK;
}

} // namespace gdx::fb
