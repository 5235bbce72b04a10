// RegionTable: this engine's registrations (Region), by the unguessable id peers name them by, and the two range
// checks of staging, one per side of a request:
//   check_request       the initiator's, once per put/get where it enters the staging layer (Engine::submit):
//                       the local region is ours, both ranges lie inside their regions, both were registered with
//                       the rights the operation needs;
//   check_peer_request  the target's, on every control message that names a region of ours (StagingTarget): the
//                       enforcement point for a peer's request, which trusts nothing the peer says.
// Owned by the Engine (mem_reg adds, mem_dereg removes); the target side looks regions up through it.
#pragma once

#include "fallback/region.h"

#include <memory>
#include <string>
#include <unordered_map>

namespace gdx::fb {

class RegionTable {
  public:
    // A fresh region id: random, nonzero and unused, because a peer names regions by id in control messages and
    // a forged one must not hit. GDX_ERR_IO when getrandom fails.
    gdx_status_t new_id(uint64_t *id) const;
    Region &insert(std::unique_ptr<Region> region);
    Region *find(uint64_t id) const;
    bool owns(const Region &r) const { return find(r.id()) == &r; }
    void erase(const Region &r) { regions_.erase(r.id()); }
    void clear() { regions_.clear(); }

    // GDX_OK, or GDX_ERR_INVALID_PARAM / GDX_ERR_ACCESS_DENIED (logged, naming the operation) when `local` is not
    // ours, [local_off, +len) or [remote_off, +len) leaves its region, or a region lacks the rights of the operation.
    gdx_status_t check_request(bool is_put, const Region &local, size_t local_off, const RemoteRegion &remote,
                               size_t remote_off, size_t len) const;
    // The live region `id` if a peer may `need` (kAccessRemoteRead/Write) it over [offset, +length); else nullptr
    // with *st (GDX_ERR_ACCESS_DENIED / GDX_ERR_PROTOCOL) and *why set, for the caller's protocol_error and answer.
    Region *check_peer_request(uint64_t id, uint64_t offset, uint64_t length, unsigned need, gdx_status_t *st,
                               std::string *why) const;

  private:
    std::unordered_map<uint64_t, std::unique_ptr<Region>> regions_;
};

} // namespace gdx::fb
