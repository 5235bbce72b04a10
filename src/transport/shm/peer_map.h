// Peer-mappable shared memory (kCapPeerMap), the one implementation every transport built on channels uses (shm,
// cuda_ipc): MemoryDomain::alloc_shared and Endpoint::map_remote.
//
// Why: staging between two processes of one host needs no CPU copy when the receiver's bounce slots live in
// memory both processes map: the sender's copy engine writes a slot (D2H), the receiver's copy engine reads it
// (H2D). The staging engine allocates its pools here and asks for the peer's pool with map_remote.
//
// Protocol (control socket, which carries descriptors): the requester sends MAP_REQ {key, base, len} as it
// unpacked the owner's key; the owner checks the key in its table (live, range inside, remote read AND write:
// mapping grants both), checks that the range is exactly one of its shared segments (never user memory: only
// what alloc_shared made can be mapped), and answers MAP_GRANT {status, segment base and size} with the memfd.
// The requester maps it after Segment::attach's checks (a sealed memfd of exactly that size, so the owner cannot
// shrink it under our mapping), and answers later map_remote calls for that key from the mapping. Both ends are
// the same uid (the channel checked SO_PEERCRED). A mapping lives until the endpoint goes; the segment's pages
// until the last process unmaps them, so a dead peer leaves nothing behind.
#pragma once

#include "transport/rkey_table.h"
#include "transport/shm/channel.h"

#include <cstdint>
#include <map>
#include <memory>
#include <unordered_map>

namespace gdx::tp::shm {

// The control messages of the service: the first two owner types. An owner that serves peer maps numbers its own
// control messages from kCtrlAfterPeerMap.
inline constexpr uint16_t kCtrlMapReq = kCtrlOwnerFirst + 0;   // MapReqBody: "map me what this key opens"
inline constexpr uint16_t kCtrlMapGrant = kCtrlOwnerFirst + 1; // MapGrantBody, + the segment's memfd on GDX_OK
inline constexpr uint16_t kCtrlAfterPeerMap = kCtrlOwnerFirst + 2;

struct MapReqBody {
    uint64_t key, base, len; // the key as the requester unpacked it; the owner checks all three
};
struct MapGrantBody {
    uint64_t key;
    int32_t status;    // GDX_OK (one fd follows) or why not
    uint32_t reserved;
    uint64_t seg_base; // the owner's address of the segment's first byte
    uint64_t seg_size;
};

// Owner side, one per memory domain: the segments alloc_shared made (memfd, 0600, size-sealed, untouched).
class SharedSegments {
  public:
    explicit SharedSegments(const char *comp) : comp_(comp) {}
    gdx_status_t alloc(size_t len, void **out);
    void free(void *p);
    // The segment that starts at `base` and holds `len` bytes, or nullptr.
    const Segment *find(uintptr_t base, size_t len) const;

  private:
    const char *comp_;
    std::map<uintptr_t, std::unique_ptr<Segment>> segs_; // by base address
};

// One endpoint's half of the service, on its channel: the requests it makes for the peer's segments, and its
// answers to the peer's requests for ours. Driven from the endpoint's on_ctrl and on_failed.
class PeerMapper {
  public:
    PeerMapper(Channel *ch, const char *comp) : ch_(ch), comp_(comp) {}

    // Requester: the peer memory key `key_id` opens ([base, base+len) as the key says), mapped here. GDX_OK: *local
    // is where `base` lies here; GDX_INPROGRESS: asked (or still asking); an error once the answer was one.
    gdx_status_t map(uint64_t key_id, uint64_t base, uint64_t len, uint8_t **local);
    // Requests asked and not answered (outstanding work for a silence clock).
    size_t pending() const { return pending_; }
    // A control message of the service: handled (descriptors taken) and true; false for any other type.
    // `keys` and `segments` are the owner's, for answering MAP_REQ.
    bool on_ctrl(uint16_t type, const uint8_t *body, size_t len, const int *fds, size_t nfds, const RkeyTable &keys,
                 const SharedSegments &segments);
    // The channel failed: requests still asked fail with `status`.
    void fail(gdx_status_t status);

  private:
    void on_req(const uint8_t *body, size_t len, const RkeyTable &keys, const SharedSegments &segments);
    void on_grant(const uint8_t *body, size_t len, const int *fds, size_t nfds);
    void protocol_error(const char *what);

    struct PeerMap { // the peer's shared memory mapped here, by the peer's key id
        gdx_status_t status = GDX_INPROGRESS;
        Segment seg;
        uint64_t remote_base = 0; // the peer's address of seg's first byte
    };
    Channel *ch_;
    const char *comp_;
    std::unordered_map<uint64_t, PeerMap> maps_;
    size_t pending_ = 0;
};

} // namespace gdx::tp::shm
