#include "fallback/credit_grantor.h"

#include "core/log.h"

#include <algorithm>
#include <cstdio>
#include <map>

namespace gdx::fb {

namespace {
constexpr const char *kComp = "fallback";
}

CreditGrantor::CreditGrantor(BouncePool &pool)
    : pool_(pool), owner_(pool.nslots(), nullptr), filling_(pool.nslots(), 0), fresh_(pool.nslots(), 0) {}

void CreditGrantor::on_want(PeerLink &p, unsigned count) {
    Account &a = accounts_[&p];
    if (a.dead) return; // given up (the engine no longer reads it either): nothing more is lent to it
    a.want = std::min(count, pool_.target_slots());
    a.recalled = false;
    if (a.held < a.want) enqueue(p, a);
    serve_waiters();
    if (a.queued) recall_idle(p);
}

gdx_status_t CreditGrantor::on_return(PeerLink &p, std::span<const uint16_t> slots, std::string *why) {
    auto it = accounts_.find(&p);
    for (uint16_t s : slots) {
        if (!pool_.is_target_slot(s) || owner_[s] != &p || filling_[s] != 0 || it == accounts_.end()) {
            char buf[96];
            std::snprintf(buf, sizeof(buf), "RETURN of slot %u of pool %u, which the peer does not hold idle", s,
                          pool_.id());
            *why = buf;
            return GDX_ERR_PROTOCOL;
        }
    }
    if (it == accounts_.end()) return GDX_OK; // empty RETURN from a peer we never granted to
    for (uint16_t s : slots) release(s, it->second);
    it->second.want = it->second.held; // the peer lowered its request to what it still uses
    it->second.recalled = false;
    serve_waiters();
    return GDX_OK;
}

gdx_status_t CreditGrantor::begin_fill(PeerLink &p, unsigned slot, std::string *why) {
    char buf[96];
    const char *what = nullptr;
    if (!pool_.is_target_slot(slot))
        what = "is not a target slot";
    else if (owner_[slot] != &p)
        what = "is not granted to this peer";
    else if (filling_[slot] != 0)
        what = "is already being copied out";
    if (what != nullptr) {
        std::snprintf(buf, sizeof(buf), "FILLED slot %u of pool %u %s", slot, pool_.id(), what);
        *why = buf;
        return GDX_ERR_PROTOCOL;
    }
    filling_[slot] = 1;
    if (fresh_[slot] != 0) {
        fresh_[slot] = 0;
        --accounts_[&p].fresh;
    }
    return GDX_OK;
}

bool CreditGrantor::end_fill(PeerLink &p, unsigned slot) {
    filling_[slot] = 0;
    Account &a = accounts_[&p];
    if (a.dead) {
        // Given up while this copy-out ran. The peer wrote this slot and announced it (FILLED): it touches it no
        // more, so it comes back now, unlike the slots it still holds (reclaim).
        release(slot, a);
        serve_waiters();
        return false;
    }
    bool keep = a.held <= a.want && !others_waiting(p);
    if (!keep) {
        release(slot, a);
        if (a.held < a.want) enqueue(p, a);
        serve_waiters();
    }
    return keep;
}

void CreditGrantor::forget(PeerLink &p) {
    for (unsigned s = 0; s < owner_.size(); ++s) {
        if (owner_[s] != &p) continue;
        owner_[s] = nullptr;
        filling_[s] = 0;
        fresh_[s] = 0;
        pool_.release(s);
    }
    waiters_.erase(std::remove(waiters_.begin(), waiters_.end(), &p), waiters_.end());
    accounts_.erase(&p);
    serve_waiters();
}

unsigned CreditGrantor::reclaim(PeerLink &p) {
    auto it = accounts_.find(&p);
    if (it == accounts_.end() || it->second.dead) return 0;
    Account &a = it->second;
    unsigned quarantined = 0;
    for (unsigned s = 0; s < owner_.size(); ++s) {
        if (owner_[s] != &p) continue;
        if (fresh_[s] != 0) {
            fresh_[s] = 0;
            --a.fresh;
        }
        if (filling_[s] == 0) ++quarantined;
    }
    waiters_.erase(std::remove(waiters_.begin(), waiters_.end(), &p), waiters_.end());
    a.dead = true;
    a.queued = a.recalled = false;
    a.want = 0;
    serve_waiters();
    return quarantined;
}

bool CreditGrantor::owes(const PeerLink &p) const {
    auto it = accounts_.find(const_cast<PeerLink *>(&p));
    if (it == accounts_.end() || it->second.dead) return false;
    const Account &a = it->second;
    // A recall is a wait only while the peer it was made for still waits (recalled stays set until RETURN).
    return a.fresh > 0 || (a.recalled && a.held > 0 && others_waiting(p));
}

void CreditGrantor::enqueue(PeerLink &p, Account &a) {
    if (a.queued) return;
    a.queued = true;
    waiters_.push_back(&p);
}

bool CreditGrantor::others_waiting(const PeerLink &p) const {
    for (PeerLink *w : waiters_) {
        if (w == &p) continue;
        auto it = accounts_.find(w);
        if (it != accounts_.end() && it->second.held < it->second.want) return true;
    }
    return false;
}

void CreditGrantor::serve_waiters() {
    // One slot per waiter per round, so a peer that asked for many cannot starve one that asked for one.
    std::map<PeerLink *, std::vector<uint16_t>> batch;
    while (!waiters_.empty() && pool_.free_count(SlotRole::Target) > 0) {
        PeerLink *p = waiters_.front();
        waiters_.pop_front();
        Account &a = accounts_[p];
        if (a.held >= a.want) {
            a.queued = false;
            continue;
        }
        int s = pool_.acquire(SlotRole::Target);
        owner_[s] = p;
        fresh_[s] = 1;
        ++a.fresh;
        ++a.held;
        batch[p].push_back(static_cast<uint16_t>(s));
        if (a.held < a.want)
            waiters_.push_back(p);
        else
            a.queued = false;
    }
    for (auto &[p, slots] : batch) send_grant(*p, slots);
}

void CreditGrantor::recall_idle(const PeerLink &waiter) {
    if (pool_.free_count(SlotRole::Target) > 0) return;
    for (auto &[q, a] : accounts_) {
        if (q == &waiter || a.held == 0 || a.recalled || a.dead) continue;
        a.recalled = true;
        CtrlMsg m;
        m.type = CtrlType::Recall;
        m.pool = pool_.id();
        GDX_DEBUG(kComp, "pool %u: recalling idle slots from a peer holding %u (a peer waits)", pool_.id(), a.held);
        q->send(m, false); // a failed send means the peer is gone; its slots come back when it is forgotten
    }
}

void CreditGrantor::release(unsigned slot, Account &a) {
    owner_[slot] = nullptr;
    if (fresh_[slot] != 0) {
        fresh_[slot] = 0;
        --a.fresh;
    }
    --a.held;
    if (a.held == 0) a.recalled = false;
    pool_.release(slot);
}

void CreditGrantor::send_grant(PeerLink &p, const std::vector<uint16_t> &slots) {
    CtrlMsg m;
    m.type = CtrlType::Grant;
    m.pool = pool_.id();
    m.slots = slots;
    m.nslots = pool_.nslots();
    m.addr = pool_.base_addr();
    m.slot_size = pool_.slot_size();
    m.rkey = pool_.packed_rkey();
    if (p.send(m, false) == GDX_OK) return;
    Account &a = accounts_[&p]; // the peer is unreachable: the slots are of no use to it
    for (uint16_t s : slots) release(s, a);
}

} // namespace gdx::fb
