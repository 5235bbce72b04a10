#include "fallback/bounce_pool.h"

#include "core/config.h"
#include "core/error.h"
#include "fallback/numa_placement.h"

namespace gdx::fb {

namespace {
constexpr const char *kComp = "fallback";
}

gdx_status_t BouncePool::create(tp::MemoryDomain &md, mem::MemKind kind, int device, uint16_t id,
                                const Layout &layout, std::unique_ptr<BouncePool> *out) {
    unsigned n = layout.initiator_slots + layout.responder_slots + layout.target_slots;
    if (layout.slot_size == 0 || layout.initiator_slots == 0 || layout.responder_slots == 0 ||
        layout.target_slots == 0 || n > kMaxPoolSlots)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "bounce pool %u: bad layout (%u+%u+%u slots of %zu bytes)", id,
                        layout.initiator_slots, layout.responder_slots, layout.target_slots, layout.slot_size);
    std::unique_ptr<BouncePool> p(new BouncePool);
    p->id_ = id;
    p->kind_ = kind;
    p->device_ = device;
    p->layout_ = layout;
    p->bytes_ = size_t(n) * layout.slot_size;
    const mem::Ops &row = mem::ops(kind);
    void *mem = nullptr;
    const int near = kind == mem::MemKind::Host ? -1 : device;
    // Where the transport can share memory with its peers (kCapPeerMap), the pool lives in a shared segment that
    // peers map: a peer's copy engine then writes our slots directly (README.md, "Zero-copy between processes").
    if (alloc_near_device([&](void **out) { return md.alloc_shared(p->bytes_, out); }, p->bytes_, near,
                          layout.topo_file, &mem, &p->placement_) == GDX_OK) {
        if (row.host_register(mem, p->bytes_, device) == GDX_OK) {
            p->shared_md_ = &md;
            p->placement_ += "; shared with peers";
        } else {
            GDX_WARN(kComp, "bounce pool %u: the %s copy engines cannot register a shared segment: the pool is "
                            "private, and peers stage into it through the transport", id, row.name);
            md.free_shared(mem);
            mem = nullptr;
        }
    }
    if (mem == nullptr) {
        if (gdx_status_t st = alloc_near_device(row, p->bytes_, near, layout.topo_file, &mem, &p->placement_);
            st != GDX_OK)
            return GDX_FAIL(st, kComp, "bounce pool %u: %s host_alloc of %s for device %d failed", id, row.name,
                            format_size(p->bytes_).c_str(), device);
    }
    p->base_ = static_cast<uint8_t *>(mem);
    mem::MemInfo info;
    info.type = kind == mem::MemKind::Host ? mem::MemType::HostPageable : mem::MemType::HostPinned;
    info.kind = mem::MemKind::Host; // the CPU and every copy engine reach it; transports treat it as host memory
    info.device = device;
    info.base = p->base_addr();
    info.size = p->bytes_;
    if (gdx_status_t st = md.mem_reg(mem, p->bytes_, info, tp::kAccessAll, &p->memh_); st != GDX_OK)
        return GDX_FAIL(st, kComp, "bounce pool %u: registering %s with the %.*s memory domain failed", id,
                        format_size(p->bytes_).c_str(), static_cast<int>(md.name().size()), md.name().data());
    if (!p->memh_->direct(0, p->bytes_))
        return GDX_FAIL(GDX_ERR_UNREACHABLE, kComp,
                        "bounce pool %u: the %.*s transport cannot reach pinned host memory (%s), so it cannot "
                        "stage anything",
                        id, static_cast<int>(md.name().size()), md.name().data(),
                        p->memh_->chunks().empty() ? "no chunks" : p->memh_->chunks().front().reason.c_str());
    p->rkey_.resize(md.rkey_packed_size());
    if (gdx_status_t st = p->memh_->pack_rkey(p->rkey_); st != GDX_OK)
        return GDX_FAIL(st, kComp, "bounce pool %u: packing its rkey failed", id);
    p->used_.assign(n, 0);
    // Popped from the back: the lowest slot of each partition goes first, which keeps a lightly used pool's
    // working set in a few pages.
    for (unsigned s = n; s-- > 0;) p->free_[static_cast<int>(p->role_of(s))].push_back(static_cast<uint16_t>(s));
    GDX_INFO(kComp,
             "bounce pool %u (%s, device %d): %u initiator + %u responder + %u target slots of %s, %s pinned at %p; %s",
             id, mem::kind_name(kind), device, layout.initiator_slots, layout.responder_slots, layout.target_slots,
             format_size(layout.slot_size).c_str(), format_size(p->bytes_).c_str(), mem, p->placement_.c_str());
    *out = std::move(p);
    return GDX_OK;
}

BouncePool::~BouncePool() {
    memh_.reset(); // deregister before the memory goes
    if (base_ == nullptr) return;
    if (shared_md_ != nullptr) {
        mem::ops(kind_).host_unregister(base_);
        shared_md_->free_shared(base_); // peers that mapped it keep their pages until they unmap them
    } else {
        mem::ops(kind_).host_free(base_);
    }
}

int BouncePool::acquire(SlotRole role) {
    std::vector<uint16_t> &list = free_[static_cast<int>(role)];
    if (list.empty()) return -1;
    uint16_t s = list.back();
    list.pop_back();
    used_[s] = 1;
    ++in_use_;
    return s;
}

void BouncePool::release(unsigned slot) {
    if (slot >= nslots() || used_[slot] == 0) {
        GDX_ERROR(kComp, "bounce pool %u: release of slot %u that is not in use (internal error)", id_, slot);
        return;
    }
    used_[slot] = 0;
    --in_use_;
    free_[static_cast<int>(role_of(slot))].push_back(static_cast<uint16_t>(slot));
}

} // namespace gdx::fb
