// PeerLink: the staging engine's state for one transport endpoint (one peer): the queue of control messages the
// transport could not take yet, the credits the peer granted us (CreditWallet, one per peer pool), the cached
// rkey of the peer's landing slots for stage-out puts, and the notifications of puts with notification, both ways.
#pragma once

#include "fallback/control_msg.h"
#include "fallback/notify.h"
#include "memtype/memory_ops.h"
#include "transport/transport.h"

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace gdx::fb {

class PeerLink;

// BYE {st} straight through the transport, not queued behind anything: GDX_OK, or why not (logged at debug).
gdx_status_t send_bye(tp::Endpoint &ep, uint8_t am_id, gdx_status_t st);

// Sender side of the credit flow: the slots of one peer pool that the peer granted to us.
class CreditWallet {
  public:
    // An idle granted slot (now in use), or -1.
    int take();
    // A slot taken but never filled, or one a DONE let us keep: idle again.
    void put_back(uint16_t slot);
    // A DONE without keep: the slot went back to the peer's pool.
    void dropped(uint16_t slot) {
        --in_use_;
        if (slot < held_.size()) held_[slot] = 0;
    }
    // Called by a fragment that found no idle slot: asks the peer (WANT) for enough slots for everything now in
    // use or waiting, at most `cap`, unless it already asked for that many.
    gdx_status_t ask(PeerLink &peer, uint16_t pool, unsigned cap);
    // A DONE let us keep the slot we filled: idle again, and no longer "granted, not filled".
    void kept(uint16_t slot);
    // GRANT: checks the fields against what the transport can use and takes the slots.
    gdx_status_t on_grant(const CtrlMsg &m, tp::MemoryDomain &md, std::string *why);
    // Called once no request of ours uses the peer: idle slots granted to us that we never filled go back
    // (RETURN). The peer waits on a slot it granted until it is filled (CreditGrantor::owes), so one we will not
    // fill would keep its silence clock running on us; slots we filled and kept stay (no round trip next time).
    gdx_status_t return_unfilled(PeerLink &peer, uint16_t pool);
    // RECALL: unless fragments are waiting to use them, gives every idle slot back (RETURN) and lowers our
    // standing request to what is in use.
    gdx_status_t on_recall(PeerLink &peer, uint16_t pool);

    bool ready() const { return rkey_ != nullptr; }
    // An idle slot granted to us and never filled: return_unfilled would give it back.
    bool has_unfilled() const {
        for (uint16_t s : idle_)
            if (s < held_.size() && held_[s] == 1) return true;
        return false;
    }
    gdx_status_t error() const { return error_; }
    uint64_t slot_addr(uint16_t slot) const { return base_ + uint64_t(slot) * slot_size_; }
    uint64_t slot_size() const { return slot_size_; }
    const tp::RemoteKey &rkey() const { return *rkey_; }
    unsigned waiting = 0; // fragments blocked on a credit of this pool (each counts itself in and out)
    // Set once the transport or the copy engine refused to map this peer pool here (PeerLink::mapped_range):
    // fragments are then put into its slots through the transport, as without kCapPeerMap. Reset by a GRANT that
    // carries another key.
    bool map_unavailable = false;

  private:
    std::vector<uint16_t> idle_;
    std::vector<uint8_t> held_; // per slot of the peer pool: 0 not ours, 1 granted (not filled yet), 2 filled once
    unsigned in_use_ = 0;
    unsigned want_sent_ = 0;
    uint64_t base_ = 0, slot_size_ = 0;
    uint32_t nslots_ = 0;
    std::vector<uint8_t> rkey_bytes_;
    std::unique_ptr<tp::RemoteKey> rkey_;
    gdx_status_t error_ = GDX_OK;
};

class PeerLink {
  public:
    ~PeerLink();
    // `defer`: while it is true (the engine is inside the interface's progress(), running our handler), messages
    // are queued instead of sent, so no transport call is made from inside a transport callback.
    PeerLink(tp::Endpoint &ep, uint8_t am_id, const bool &defer) : ep_(ep), am_id_(am_id), defer_(defer) {}
    tp::Endpoint &ep() const { return ep_; }

    // Sends a control message now, or queues it behind earlier ones (transport back-pressure, or called from a
    // handler: see the constructor). `publishes`:
    // the message tells the peer that data put before it has landed, so a fence goes first. Errors other than
    // back-pressure are returned (and logged): the connection is unusable.
    gdx_status_t send(const CtrlMsg &m, bool publishes);
    // Retries queued messages in order; returns how many went out.
    unsigned flush();
    bool queue_empty() const { return queue_.empty(); }
    // Engine::progress would do nothing for this peer while no request or job uses it: nothing queued, no BYE to
    // retry, not broken and waiting to be reclaimed, no granted slot to give back (Engine::quiet).
    bool quiet() const;
    // CreditWallet::return_unfilled for every pool of the peer (no request of ours uses it now).
    void return_unfilled_credits();
    // The endpoint reports an error, or the peer was declared dead (silent, or said BYE): whatever waits on this
    // peer will never be answered.
    bool broken() const;
    // Why: the status requests waiting on this peer fail with (GDX_OK while not broken).
    gdx_status_t failure() const;

    // ---- liveness (peer_liveness.cpp) ----
    // What this process waits for from the peer, by side (Engine::progress computes it each call). Any of them
    // runs the one silence clock below.
    enum Wait : unsigned {
        kWaitRequests = 1,  // initiator: a request of ours (credit, grant, DONE, GET_DONE, direct operation)
        kWaitPeerJobs = 2,  // target: a copy-out or stage-out we run for its request (a landing-pool map, a put)
        kWaitLentSlots = 4, // target: it holds slots of our pools it asked for and has not filled, or was asked
                            // (RECALL) to return because another peer waits for them
    };
    // A control message came from the peer: its engine is alive.
    void heard() { heard_since_watch_ = true; }
    // The peer said BYE, or its silence outlived GDX_PEER_TIMEOUT: what waits on it fails with `st`. Final: the
    // engine takes back what was lent to it and logs `why` once (Engine::progress), and drops what it sends after.
    void declare_dead(gdx_status_t st, std::string why);
    bool dead() const { return dead_ != GDX_OK; }
    const std::string &dead_why() const { return dead_why_; }
    // Called from every engine progress with the Wait bits that hold now (0: none). While any holds, a peer
    // silent for timeout/4 is sent PING (its progress answers PONG); one silent for the whole timeout is
    // declared dead with GDX_ERR_TIMEOUT. Silence counts only while we progress (peer_liveness.cpp).
    void watch(unsigned waiting, int64_t now_ns, int64_t timeout_ns);
    // BYE straight through the transport (not queued behind anything), once: `st` GDX_ERR_CONNECTION_RESET when
    // our endpoint goes, GDX_ERR_TIMEOUT when we declared the peer dead. Best effort (logged at debug); under
    // back-pressure it stays pending and retry_bye (every engine progress) sends it.
    void say_bye(gdx_status_t st);
    void retry_bye();
    // Set by the engine once it took back what was lent to this peer after it broke (reclaim_peer).
    bool reclaimed = false;

    CreditWallet &wallet(uint16_t pool) { return wallets_[pool]; }

    // The peer's landing-pool rkey from a GET_REQ, unpacked once and reused while the bytes stay the same (shared:
    // a stage-out still using the old key keeps it alive when the bytes change).
    gdx_status_t landing_rkey(std::span<const uint8_t> bytes, tp::MemoryDomain &md,
                              std::shared_ptr<const tp::RemoteKey> *out);
    // As CreditWallet::map_unavailable, for the current landing key.
    bool landing_map_unavailable = false;

    // Maps the peer pool `rkey` opens into this process (Endpoint::map_remote, kCapPeerMap) and registers the
    // mapping with the copy engines of `kind` once: GDX_OK with *local = where rkey.base() lies here;
    // GDX_INPROGRESS while the peer answers; GDX_ERR_UNSUPPORTED when it cannot be mapped or registered (the
    // caller puts through the transport instead); the endpoint's error once it failed. The registrations are
    // undone when the link goes, before its endpoint (and with it the mapping) does.
    gdx_status_t map_pool(const tp::RemoteKey &rkey, mem::MemKind kind, int device, uint8_t **local);
    // Where the peer's [addr, addr+len) inside `rkey` lies here, through map_pool (same results). The range is
    // checked against the key first (GDX_ERR_PROTOCOL): a write through the mapping is checked by no one else.
    gdx_status_t mapped_range(const tp::RemoteKey &rkey, uint64_t addr, uint64_t len, mem::MemKind kind, int device,
                              uint8_t **local);

    uint32_t users = 0; // requests and peer jobs that refer to this link; ep_close refuses while nonzero
    NotifyOutbox outbox; // notifications we owe the peer (gdx_put_notify), in issue order (notify.h)
    NotifyInbox inbox;   // notifications the peer sent us, until the user takes them

  private:
    struct Queued {
        std::vector<uint8_t> bytes;
        bool publishes = false;
    };
    gdx_status_t try_send(const Queued &q);

    tp::Endpoint &ep_;
    uint8_t am_id_;
    const bool &defer_;
    std::deque<Queued> queue_;
    std::map<uint16_t, CreditWallet> wallets_;
    std::vector<uint8_t> landing_bytes_;
    std::shared_ptr<const tp::RemoteKey> landing_rkey_;
    struct MappedPool {
        size_t length = 0;
        unsigned registered = 0; // bits (1 << MemKind) whose copy engines have the mapping registered
        unsigned refused = 0;    // bits whose registration failed (said once)
    };
    std::map<uint8_t *, MappedPool> mapped_; // by local address
    gdx_status_t dead_ = GDX_OK;
    std::string dead_why_;
    enum class Bye : uint8_t { None, Pending, Sent } bye_ = Bye::None;
    gdx_status_t bye_status_ = GDX_OK;
    bool heard_since_watch_ = false;
    int64_t quiet_ns_ = 0;      // silence counted while waiting and listening (watch)
    int64_t last_watch_ns_ = 0; // 0: never watched
    int64_t last_ping_ns_ = 0;
};

} // namespace gdx::fb
