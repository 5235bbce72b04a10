// Peer-mappable shared memory (kCapPeerMap): MemoryDomain::alloc_shared and Endpoint::map_remote for shm.
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
// the same uid (the channel checked SO_PEERCRED), as for cross-memory attach. A mapping lives until the endpoint
// goes; the segment's pages until the last process unmaps them, so a dead peer leaves nothing behind.
#include "core/error.h"
#include "transport/shm/shm_iface.h"

#include <cinttypes>
#include <cstring>
#include <unistd.h>

namespace gdx::tp::shm {

namespace {
constexpr const char *kComp = "shm";
constexpr unsigned kRW = kAccessRemoteRead | kAccessRemoteWrite;
} // namespace

// ---- owner: the segments ----------------------------------------------------------------------------------

gdx_status_t ShmMd::alloc_shared(size_t len, void **out) {
    if (out == nullptr || len == 0)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "alloc_shared(%zu): null output or zero length", len);
    auto seg = std::make_unique<Segment>();
    if (gdx_status_t st = Segment::create(len, "gdx-shared", seg.get()); st != GDX_OK) return st;
    *out = seg->base();
    shared_.emplace(reinterpret_cast<uintptr_t>(seg->base()), std::move(seg));
    return GDX_OK;
}

void ShmMd::free_shared(void *p) {
    if (shared_.erase(reinterpret_cast<uintptr_t>(p)) == 0 && p != nullptr)
        GDX_ERROR(kComp, "free_shared(%p): not a segment of this memory domain (internal error)", p);
}

const Segment *ShmMd::shared_segment(uintptr_t base, size_t len) const {
    auto it = shared_.find(base);
    return it != shared_.end() && len <= it->second->size() ? it->second.get() : nullptr;
}

// ---- requester -------------------------------------------------------------------------------------------

gdx_status_t ShmEp::map_remote(const RemoteKey &rkey, uint8_t **local) {
    if (local == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "map_remote: null output");
    if (gdx_status_t st = ch_.status(); st != GDX_OK) return st;
    const auto *key = dynamic_cast<const ShmRemoteKey *>(&rkey);
    if (key == nullptr || key->key_id() == 0 || (key->access() & kRW) != kRW) return GDX_ERR_UNSUPPORTED;
    auto [it, fresh] = peer_maps_.try_emplace(key->key_id());
    PeerMap &m = it->second;
    if (fresh) {
        MapReqBody b{key->key_id(), key->base(), key->length()};
        if (gdx_status_t st = ch_.send_ctrl(kCtrlMapReq, &b, sizeof(b)); st != GDX_OK) {
            peer_maps_.erase(it);
            return st;
        }
        if (active_ + maps_pending_++ == 0) busy_since_ns_ = Hub::coarse_ns();
        return GDX_INPROGRESS;
    }
    if (m.status != GDX_OK) return m.status;
    // The key's range must lie inside the segment the owner handed over for it (never trust the key's numbers).
    if (!wire::range_inside(key->base(), key->length(), m.remote_base, m.seg.size()))
        return GDX_FAIL(GDX_ERR_PROTOCOL, kComp,
                        "map_remote: key 0x%016" PRIx64 " range 0x%" PRIx64 "+%" PRIu64
                        " is outside the segment the peer mapped for it",
                        key->key_id(), key->base(), key->length());
    *local = m.seg.base() + (key->base() - m.remote_base);
    return GDX_OK;
}

void ShmEp::on_map_grant(const uint8_t *body, size_t len, const int *fds, size_t nfds) {
    MapGrantBody g{};
    auto close_fds = [&](size_t from) {
        for (size_t i = from; i < nfds; ++i) close(fds[i]);
    };
    if (len != sizeof(g)) {
        close_fds(0);
        return protocol_error("MAP_GRANT of the wrong size");
    }
    std::memcpy(&g, body, sizeof(g));
    auto it = peer_maps_.find(g.key);
    if (it == peer_maps_.end() || it->second.status != GDX_INPROGRESS) {
        close_fds(0);
        return protocol_error("MAP_GRANT for a mapping that was not asked for");
    }
    PeerMap &m = it->second;
    --maps_pending_;
    if (g.status != GDX_OK) {
        close_fds(0);
        bool known = g.status <= GDX_ERR_NO_RESOURCE && g.status >= GDX_ERR_INTERNAL;
        m.status = known ? static_cast<gdx_status_t>(g.status) : GDX_ERR_PROTOCOL;
        GDX_INFO(kComp, "pid %d does not let us map what key 0x%016" PRIx64 " opens: %s",
                 static_cast<int>(ch_.peer_pid()), g.key, gdx_status_string(m.status));
        return;
    }
    if (nfds != 1) {
        close_fds(0);
        m.status = GDX_ERR_PROTOCOL;
        return protocol_error("MAP_GRANT without exactly one descriptor");
    }
    m.status = Segment::attach(fds[0], g.seg_size, "peer shared segment", &m.seg); // takes fds[0]
    m.remote_base = g.seg_base;
    if (m.status == GDX_OK)
        GDX_DEBUG(kComp, "mapped pid %d's shared segment 0x%" PRIx64 "+%" PRIu64 " at %p (key 0x%016" PRIx64 ")",
                  static_cast<int>(ch_.peer_pid()), g.seg_base, g.seg_size, static_cast<void *>(m.seg.base()), g.key);
}

void ShmEp::fail_peer_maps(gdx_status_t status) {
    for (auto &[key, m] : peer_maps_)
        if (m.status == GDX_INPROGRESS) m.status = status;
    maps_pending_ = 0;
}

// ---- owner: answering ------------------------------------------------------------------------------------

void ShmEp::on_map_req(const uint8_t *body, size_t len) {
    MapReqBody b{};
    if (len != sizeof(b)) return protocol_error("MAP_REQ of the wrong size");
    std::memcpy(&b, body, sizeof(b));
    MapGrantBody g{b.key, GDX_OK, 0, 0, 0};
    ShmMd &md = iface_->shm_md();
    const Segment *seg = nullptr;
    std::string why;
    {
        uint8_t *ptr = nullptr;
        auto pin = md.table().pin();
        if (md.table().check(pin, b.key, b.base, b.len, kRW, &ptr, &why) != GDX_OK) {
            g.status = GDX_ERR_ACCESS_DENIED;
        } else if ((seg = md.shared_segment(b.base, b.len)) == nullptr) {
            g.status = GDX_ERR_UNSUPPORTED;
            why = "the range is not a shared segment of this process (only those can be mapped)";
        }
    }
    if (g.status != GDX_OK) {
        GDX_INFO(kComp, "MAP_REQ from pid %d refused: %s", static_cast<int>(ch_.peer_pid()), why.c_str());
        ch_.send_ctrl(kCtrlMapGrant, &g, sizeof(g)); // a failed send fails the channel, which the peer sees
        return;
    }
    g.seg_base = b.base;
    g.seg_size = seg->size();
    int fd = seg->fd();
    ch_.send_ctrl(kCtrlMapGrant, &g, sizeof(g), &fd, 1);
}

} // namespace gdx::tp::shm
