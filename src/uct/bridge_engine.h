// The staging engine inside the UCX module (README.md, "The engine path"). Each gdx MD whose transport can stage
// (it reaches pinned host memory and has am_bcopy: tcp, shm, rc) runs one fb::Engine over its anchor interface, the
// gdx interface the first UCT interface borrows:
//   mem_reg / mem_dereg      -> Engine::mem_reg / mem_dereg (direct chunks where the transport reaches them; a
//                               region still in use is deregistered once its transfers ended)
//   mkey_pack / rkey_unpack  -> Engine::pack_key / unpack_key, in a compact form that fits UCP's 255 bytes
//   put_zcopy / get_zcopy    -> Engine::put / get: one UCT operation, fragments direct or staged; the UCT
//                               completion fires when the last byte is in place (at the target for a put)
//   iface_progress           -> Engine::progress (which drives the transport), then the UCT completions
// The engine's control messages use active-message id kEngineAmId of the gdx interface, which UCP never uses
// (UCP_AM_ID_LAST is 27 on UCX 1.13-1.18 and 29 on 1.22; uct_gdx_md.c asserts it at compile time), and which the
// glue never hands to UCP.
//
// Only fb::Engine's public API (fallback/engine.h) is used.
#pragma once

#include "fallback/engine.h"
#include "uct/bridge_internal.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

namespace gdx::uct {

inline constexpr uint8_t kEngineAmId = GDX_UCT_ENGINE_AM_ID;

// ---- keys (bridge_key.cpp) -----------------------------------------------------------------------------------

inline constexpr uint8_t kKeyV1 = 1; // our header + the transport's key (pass-through MDs)
inline constexpr uint8_t kKeyV2 = 2; // the engine's key, compact
inline constexpr size_t kUcpMaxKey = 255; // UCP stores each MD's key length in one byte (ucp_rkey.c asserts it)

// UCT's fixed rkey_packed_size of an engine MD whose transport packs rkeys of `transport_rkey` bytes.
size_t engine_key_size(size_t transport_rkey);
// Writes the engine's key `fb_key` (Engine::pack_key) compactly into `out` (engine_key_size bytes, zero-padded).
// A chunk list that does not fit is replaced by one chunk the peer stages (*degraded = true): slower, never wrong.
gdx_status_t compact_key(std::span<const uint8_t> fb_key, std::span<uint8_t> out, bool *degraded);
// The inverse: the engine's key format again, for Engine::unpack_key. GDX_ERR_INVALID_PARAM with the reason.
gdx_status_t expand_key(std::span<const uint8_t> packed, std::vector<uint8_t> *fb_key);

} // namespace gdx::uct

// One put or get zcopy through the engine. Pooled per engine; `r.user` points back here.
struct GdxUctReq {
    gdx::fb::Request r;
    void *uct_comp = nullptr;            // uct_completion_t*, or NULL
    gdx::uct::UctEngine *owner = nullptr;
    gdx_uct_ep *ep = nullptr;            // NULL once UCT destroyed the endpoint (the request still completes)
    gdx::tp::Endpoint *tep = nullptr;    // the gdx endpoint it runs on
    uint32_t peer_tag = 0;
    uint64_t seq = 0;
    uint64_t after = 0;                  // held: waits until the endpoint's requests up to this seq completed
    bool is_put = false;
    bool submitted = false;
    gdx_status_t early = GDX_OK;         // a held request that failed when submitted: its completion status
    gdx::fb::Region *local = nullptr;
    const gdx::fb::RemoteRegion *remote = nullptr;
    size_t loff = 0, roff = 0, len = 0;
    GdxUctReq *prev = nullptr, *next = nullptr; // the endpoint's list (submitted or held), or the free list
};

namespace gdx::uct {

class UctEngine {
  public:
    // Creates the engine over md.anchor (nothing when the transport cannot stage: *out stays null).
    static gdx_status_t create(gdx_uct_md &md, std::unique_ptr<UctEngine> *out);
    ~UctEngine();
    UctEngine(const UctEngine &) = delete;
    UctEngine &operator=(const UctEngine &) = delete;

    fb::Engine &engine() { return *eng_; }
    const std::string &tl() const { return tl_; }

    gdx_status_t mem_reg(void *addr, size_t len, unsigned access, fb::Region **out, size_t gpu_tail_slack);
    void mem_dereg(fb::Region *region);
    size_t key_size() const { return key_size_; }
    gdx_status_t pack_key(const fb::Region &region, std::span<uint8_t> out);

    // put_zcopy / get_zcopy. GDX_INPROGRESS (the UCT completion fires later), GDX_OK (nothing to move), or an
    // error with its reason logged (nothing queued).
    gdx_status_t xfer(bool is_put, gdx_uct_ep *ep, void *buf, size_t len, gdx_uct_memh *memh, uint64_t remote_addr,
                      gdx_uct_rkey *rkey, void *uct_comp);
    // The engine (and through it the transport), then the UCT completions of the requests that finished. Inline
    // up to the check for the module's own work: UCP spins on this, and an idle call should cost a few loads, not
    // the prologue of what follows (hand_over()).
    unsigned progress() {
        const unsigned n = eng_->progress();
        return has_hand_over() ? n + hand_over() : n;
    }
    // Finished, cancelled or parked work waits for progress() to hand it over to UCT (or retry it).
    bool has_hand_over() const { return hand_over_.load(std::memory_order_relaxed); }
    // Work that needs progress() even when the transport's wakeup fd stays quiet.
    bool busy() const;

    // `ep` issued engine requests (or is about to): its state is looked at from progress() until it goes.
    void ep_used(gdx_uct_ep *ep);
    // UCT is destroying `ep`: its requests keep running (their completions still fire), its gdx endpoints are
    // released once the engine no longer uses them. True when one was kept for that (the caller then hands its
    // pending nodes over with add_orphan: the gdx queue that holds them lives on).
    bool ep_destroyed(gdx_uct_ep *ep);

    // ---- ordering (bridge_order.cpp) ----
    bool outstanding(const gdx_uct_ep *ep) const { return ep->eng_head != nullptr || ep->held_head != nullptr; }
    // Flush of an endpoint with engine requests: the UCT completion fires once they are complete and the transport
    // flush after them is. GDX_INPROGRESS, or (comp NULL) GDX_INPROGRESS until they are.
    gdx_status_t flush(gdx_uct_ep *ep, void *uct_comp);
    // uct_ep_fence: GDX_OK when no engine request is outstanding (then the transport's fence), else
    // GDX_ERR_NO_RESOURCE: the caller parks its request (pending_add), which waits here until they completed.
    gdx_status_t ep_fence(gdx_uct_ep *ep);
    // uct_iface_fence: engine requests issued later on each endpoint wait for the earlier ones.
    void iface_fence(gdx_uct_ep *eps);
    // pending_add while an endpoint fence waits (or held requests exist): GDX_OK and the request is held here.
    bool hold_pending(gdx_uct_ep *ep, void *uct_req);

    void add_orphan(GdxUctPending *node);

  private:
    using Completions = std::vector<std::pair<void *, gdx_status_t>>; // (uct_completion_t*, status)

    UctEngine() = default;
    GdxUctReq *get_req();
    void put_req(GdxUctReq *q);
    gdx_status_t submit(GdxUctReq *q);
    static void on_done(fb::Request *r);
    void finish(GdxUctReq *q, Completions *comps);
    // bridge_order.cpp: what completed requests on `ep` release (held requests, flushes; no UCP callback), then
    // the UCT requests an endpoint fence held (callbacks into UCP).
    bool ordered_after_fence(gdx_uct_ep *ep);
    void hold(gdx_uct_ep *ep, GdxUctReq *q);
    void release_ep(gdx_uct_ep *ep, Completions *comps);
    void release_pending(gdx_uct_ep *ep);
    void reap_graveyard();
    void retry_deregs();
    void report_path(const GdxUctReq &q);

    std::string tl_;                 // "gdx_shm": what log lines name
    size_t key_size_ = 0;
    std::vector<std::unique_ptr<GdxUctReq[]>> chunks_;
    GdxUctReq *free_ = nullptr;
    // Finished, cancelled or parked work the module hands over to UCT (or retries) after the engine's progress.
    template <typename List, typename T> void hand_over_later(List &list, T &&item) {
        list.push_back(std::forward<T>(item));
        hand_over_.store(true, std::memory_order_relaxed);
    }
    // One flag for the five lists below, set by every push to them and recomputed at the end of hand_over(), so
    // that an idle progress reads one byte. A flag left set only costs one more hand_over(); one left clear would
    // strand work, so no list is pushed to except through hand_over_later(). Atomic: the idle probe reads it
    // without the lock UCP's async thread may push under (bridge_idle.cpp).
    std::atomic<bool> hand_over_{false};
    unsigned hand_over(); // progress() past has_hand_over(): returns how many requests finished
    std::vector<GdxUctReq *> done_;  // finished inside Engine::progress; handed to UCT after it
    // progress()'s working lists, kept between calls for their capacity only (empty outside progress).
    Completions scratch_comps_;
    std::vector<GdxUctReq *> scratch_done_;
    std::vector<gdx_uct_ep *> scratch_touched_;
    std::vector<GdxUctReq *> cancelled_; // held requests of destroyed endpoints
    std::vector<fb::Region *> deregs_; // deregistered by UCT while transfers used them
    std::unordered_set<std::string> paths_logged_; // "(kinds, peer, path kind, reasons)" already said at info
    std::vector<gdx_uct_ep *> waiting_eps_; // endpoints with flushes or fenced pending requests to look at
    std::unordered_set<gdx_uct_ep *> live_eps_; // endpoints that used the engine and still exist
    GdxUctPending *orphans_ = nullptr;
    // Gdx endpoints of destroyed UCT endpoints that the engine still used (Engine::ep_close said BUSY). Declared
    // before eng_: the engine goes first, then they do.
    std::vector<std::unique_ptr<tp::Endpoint>> graveyard_;
    std::unique_ptr<fb::Engine> eng_;
};

// ---- the path as a user sees it (bridge_report.cpp) ---------------------------------------------------------

// Adds an engine's counters to the process's totals (at its destruction), and prints the totals at exit when
// GDX_UCT_STATS asks; live engines register themselves so the exit line counts them too.
void stats_register(UctEngine *ue, bool print_at_exit);
void stats_unregister(UctEngine *ue);

} // namespace gdx::uct
