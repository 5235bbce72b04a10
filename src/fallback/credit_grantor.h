// CreditGrantor: the receiver side of the credit flow for one bounce pool. Peers ask for slots (WANT); the grantor
// hands out target slots (GRANT), tracks which peer holds which slot and whether a copy-out is running from it,
// and decides when a slot stays with its holder and when it goes to someone else.
//
// Fairness, which is half of the deadlock-freedom argument (README.md has the whole argument):
//   - A peer that cannot be served at once waits in a FIFO queue; freed slots are handed out one per waiter per
//     round.
//   - When somebody waits and no slot is free, every other holder is asked (RECALL) to return its idle slots.
//   - A slot whose copy-out finished stays with its holder (DONE keep=1: no round trip before the next fragment)
//     only while nobody else waits.
// So every slot is either being copied out (finishes on its own), idle with a holder that returns it when
// recalled, or free; a waiting peer is served within one round of the queue.
#pragma once

#include "fallback/bounce_pool.h"
#include "fallback/peer_link.h"

#include <deque>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace gdx::fb {

class CreditGrantor {
  public:
    explicit CreditGrantor(BouncePool &pool);

    BouncePool &pool() { return pool_; }
    void on_want(PeerLink &p, unsigned count);
    gdx_status_t on_return(PeerLink &p, std::span<const uint16_t> slots, std::string *why);
    // FILLED for `slot` from p: GDX_OK when p holds it and no copy-out of it is running.
    gdx_status_t begin_fill(PeerLink &p, unsigned slot, std::string *why);
    // The copy-out of `slot` finished: true = p keeps the slot (DONE keep=1), false = it went back to the pool.
    bool end_fill(PeerLink &p, unsigned slot);
    // The peer's endpoint is closing: every slot it holds comes back (none may be filling).
    void forget(PeerLink &p);
    // The peer was declared dead (or its transport failed): it is owed nothing more (no grant, no wait on it).
    // A slot being copied out comes back when the copy ends (end_fill): the peer announced it and touches it no
    // more. Every other slot it holds stays quarantined until its endpoint is destroyed (forget): a stopped peer
    // that resumes may finish a write it had started into one (its copy into our mapped slot, the rest of a
    // transport put), which must not land on another peer's fragment. Returns how many are quarantined.
    unsigned reclaim(PeerLink &p);
    // True while the target waits on p for slots (the silence clock runs, PeerLink::kWaitLentSlots): p holds
    // slots it asked for (WANT) and has not filled since they were granted, or holds slots we recalled because
    // another peer waits. Slots it filled and keeps (DONE keep=1) are not a wait: an idle peer may hold them.
    bool owes(const PeerLink &p) const;

  private:
    struct Account {
        unsigned held = 0;
        unsigned want = 0;
        unsigned fresh = 0; // held slots granted and not filled since
        bool queued = false;
        bool recalled = false;
        bool dead = false; // reclaimed: nothing is granted or owed; slots come back at end_fill and forget
    };
    void enqueue(PeerLink &p, Account &a);
    void serve_waiters();
    void recall_idle(const PeerLink &waiter);
    void release(unsigned slot, Account &a);
    void send_grant(PeerLink &p, const std::vector<uint16_t> &slots);
    bool others_waiting(const PeerLink &p) const;

    BouncePool &pool_;
    std::vector<PeerLink *> owner_;   // per slot
    std::vector<uint8_t> filling_;    // per slot: a copy-out runs from it
    std::vector<uint8_t> fresh_;      // per slot: granted, not filled since (Account::fresh)
    std::deque<PeerLink *> waiters_;
    std::unordered_map<PeerLink *, Account> accounts_;
};

} // namespace gdx::fb
