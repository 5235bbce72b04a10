// Peer-mappable shared memory (peer_map.h has the protocol and why). Moved from shm_peer_map.cpp so that cuda_ipc
// serves and maps segments with the same code as shm.
#include "transport/shm/peer_map.h"

#include "core/error.h"
#include "transport/transport.h" // the access bits a key must grant

#include <cinttypes>
#include <cstring>
#include <string>
#include <unistd.h>

namespace gdx::tp::shm {

namespace {
constexpr unsigned kRW = kAccessRemoteRead | kAccessRemoteWrite;
} // namespace

// ---- owner: the segments ----------------------------------------------------------------------------------

gdx_status_t SharedSegments::alloc(size_t len, void **out) {
    if (out == nullptr || len == 0)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, comp_, "alloc_shared(%zu): null output or zero length", len);
    auto seg = std::make_unique<Segment>();
    if (gdx_status_t st = Segment::create(len, "gdx-shared", seg.get()); st != GDX_OK) return st;
    *out = seg->base();
    segs_.emplace(reinterpret_cast<uintptr_t>(seg->base()), std::move(seg));
    return GDX_OK;
}

void SharedSegments::free(void *p) {
    if (segs_.erase(reinterpret_cast<uintptr_t>(p)) == 0 && p != nullptr)
        GDX_ERROR(comp_, "free_shared(%p): not a segment of this memory domain (internal error)", p);
}

const Segment *SharedSegments::find(uintptr_t base, size_t len) const {
    auto it = segs_.find(base);
    return it != segs_.end() && len <= it->second->size() ? it->second.get() : nullptr;
}

// ---- requester -------------------------------------------------------------------------------------------

gdx_status_t PeerMapper::map(uint64_t key_id, uint64_t base, uint64_t len, uint8_t **local) {
    auto [it, fresh] = maps_.try_emplace(key_id);
    PeerMap &m = it->second;
    if (fresh) {
        MapReqBody b{key_id, base, len};
        if (gdx_status_t st = ch_->send_ctrl(kCtrlMapReq, &b, sizeof(b)); st != GDX_OK) {
            maps_.erase(it);
            return st;
        }
        ++pending_;
        return GDX_INPROGRESS;
    }
    if (m.status != GDX_OK) return m.status;
    // The key's range must lie inside the segment the owner handed over for it (never trust the key's numbers).
    if (!wire::range_inside(base, len, m.remote_base, m.seg.size()))
        return GDX_FAIL(GDX_ERR_PROTOCOL, comp_,
                        "map_remote: key 0x%016" PRIx64 " range 0x%" PRIx64 "+%" PRIu64
                        " is outside the segment the peer mapped for it",
                        key_id, base, len);
    *local = m.seg.base() + (base - m.remote_base);
    return GDX_OK;
}

void PeerMapper::on_grant(const uint8_t *body, size_t len, const int *fds, size_t nfds) {
    MapGrantBody g{};
    auto close_fds = [&](size_t from) {
        for (size_t i = from; i < nfds; ++i) close(fds[i]);
    };
    if (len != sizeof(g)) {
        close_fds(0);
        return protocol_error("MAP_GRANT of the wrong size");
    }
    std::memcpy(&g, body, sizeof(g));
    auto it = maps_.find(g.key);
    if (it == maps_.end() || it->second.status != GDX_INPROGRESS) {
        close_fds(0);
        return protocol_error("MAP_GRANT for a mapping that was not asked for");
    }
    PeerMap &m = it->second;
    --pending_;
    if (g.status != GDX_OK) {
        close_fds(0);
        bool known = g.status <= GDX_ERR_NO_RESOURCE && g.status >= GDX_ERR_INTERNAL;
        m.status = known ? static_cast<gdx_status_t>(g.status) : GDX_ERR_PROTOCOL;
        GDX_INFO(comp_, "pid %d does not let us map what key 0x%016" PRIx64 " opens: %s",
                 static_cast<int>(ch_->peer_pid()), g.key, gdx_status_string(m.status));
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
        GDX_DEBUG(comp_, "mapped pid %d's shared segment 0x%" PRIx64 "+%" PRIu64 " at %p (key 0x%016" PRIx64 ")",
                  static_cast<int>(ch_->peer_pid()), g.seg_base, g.seg_size, static_cast<void *>(m.seg.base()), g.key);
}

void PeerMapper::fail(gdx_status_t status) {
    for (auto &[key, m] : maps_)
        if (m.status == GDX_INPROGRESS) m.status = status;
    pending_ = 0;
}

void PeerMapper::protocol_error(const char *what) {
    ch_->fail(GDX_FAIL(GDX_ERR_PROTOCOL, comp_, "pid %d sent a bad record: %s", static_cast<int>(ch_->peer_pid()),
                       what),
              what);
}

// ---- owner: answering ------------------------------------------------------------------------------------

void PeerMapper::on_req(const uint8_t *body, size_t len, const RkeyTable &keys, const SharedSegments &segments) {
    MapReqBody b{};
    if (len != sizeof(b)) return protocol_error("MAP_REQ of the wrong size");
    std::memcpy(&b, body, sizeof(b));
    MapGrantBody g{b.key, GDX_OK, 0, 0, 0};
    const Segment *seg = nullptr;
    std::string why;
    {
        uint8_t *ptr = nullptr;
        auto pin = keys.pin();
        if (keys.check(pin, b.key, b.base, b.len, kRW, &ptr, &why) != GDX_OK) {
            g.status = GDX_ERR_ACCESS_DENIED;
        } else if ((seg = segments.find(b.base, b.len)) == nullptr) {
            g.status = GDX_ERR_UNSUPPORTED;
            why = "the range is not a shared segment of this process (only those can be mapped)";
        }
    }
    if (g.status != GDX_OK) {
        GDX_INFO(comp_, "MAP_REQ from pid %d refused: %s", static_cast<int>(ch_->peer_pid()), why.c_str());
        ch_->send_ctrl(kCtrlMapGrant, &g, sizeof(g)); // a failed send fails the channel, which the peer sees
        return;
    }
    g.seg_base = b.base;
    g.seg_size = seg->size();
    int fd = seg->fd();
    ch_->send_ctrl(kCtrlMapGrant, &g, sizeof(g), &fd, 1);
}

bool PeerMapper::on_ctrl(uint16_t type, const uint8_t *body, size_t len, const int *fds, size_t nfds,
                         const RkeyTable &keys, const SharedSegments &segments) {
    if (type == kCtrlMapGrant) {
        on_grant(body, len, fds, nfds);
        return true;
    }
    if (type != kCtrlMapReq) return false;
    for (size_t i = 0; i < nfds; ++i) close(fds[i]);
    on_req(body, len, keys, segments);
    return true;
}

} // namespace gdx::tp::shm
