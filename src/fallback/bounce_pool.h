// BouncePool: pinned host buffers ("slots", one fragment each) that staged fragments are copied through, for one
// memory kind on one device (pool_id_for()). One allocation, registered once with the transport's memory domain
// (so one rkey covers every slot), placed on the device's NUMA node.
//
// The slots are split into three partitions, and the split is what makes staging deadlock-free (README.md):
//   Target slots are only ever granted to peers (credits) to put into; each is freed by this process's own
//     copy-out (or returned idle when recalled), which waits on nothing remote.
//   Initiator slots serve operations this process started: the copy of a put's source (it then waits for a
//     peer's target slot) and the landing slot of a get (it waits for the peer's stage-out).
//   Responder slots serve a peer's get from memory we cannot expose: copy into the slot, put it into the peer's
//     landing slot; freed when that put completes. They wait on nothing but the copy engine and the transport.
// Every wait points from initiator slots to a peer's target or responder slots, which wait on nothing remote:
// no cycle, however the slots are spread over peers and directions.
#pragma once

#include "memtype/memory_ops.h"
#include "transport/transport.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace gdx::fb {

enum class SlotRole : uint8_t { Initiator, Responder, Target };

inline constexpr unsigned kMaxPoolSlots = 4096; // slot ids travel as u16; 0xFFFF means "no slot"

class BouncePool {
  public:
    struct Layout {
        size_t slot_size = 0;
        unsigned initiator_slots = 0; // ≥ 1 each
        unsigned responder_slots = 0;
        unsigned target_slots = 0;
        std::string topo_file; // GDX_TOPO_FILE: the topology its NUMA placement comes from ("" = this machine)
    };

    // Allocates with the ops row of `kind` near `device`, registers with `md` for every access. GDX_ERR_UNREACHABLE
    // when the transport cannot reach the pinned memory itself (then nothing can be staged over it).
    static gdx_status_t create(tp::MemoryDomain &md, mem::MemKind kind, int device, uint16_t id, const Layout &layout,
                               std::unique_ptr<BouncePool> *out);
    ~BouncePool();
    BouncePool(const BouncePool &) = delete;
    BouncePool &operator=(const BouncePool &) = delete;

    uint16_t id() const { return id_; }
    mem::MemKind kind() const { return kind_; }
    int device() const { return device_; }
    size_t slot_size() const { return layout_.slot_size; }
    unsigned nslots() const { return layout_.initiator_slots + layout_.responder_slots + layout_.target_slots; }
    unsigned slots(SlotRole role) const {
        return role == SlotRole::Initiator ? layout_.initiator_slots
               : role == SlotRole::Responder ? layout_.responder_slots
                                             : layout_.target_slots;
    }
    unsigned target_slots() const { return layout_.target_slots; }
    bool is_target_slot(unsigned slot) const { return slot >= first(SlotRole::Target) && slot < nslots(); }

    // A free slot of that partition, or -1 (exhausted: the caller waits; that is the back-pressure).
    int acquire(SlotRole role);
    void release(unsigned slot);
    unsigned in_use() const { return in_use_; }
    unsigned free_count(SlotRole role) const { return static_cast<unsigned>(free_[static_cast<int>(role)].size()); }

    uint8_t *slot_ptr(unsigned slot) const { return base_ + size_t(slot) * layout_.slot_size; }
    uint64_t slot_addr(unsigned slot) const { return reinterpret_cast<uintptr_t>(slot_ptr(slot)); }
    uint64_t base_addr() const { return reinterpret_cast<uintptr_t>(base_); }
    const tp::MemHandle &memh() const { return *memh_; }
    std::span<const uint8_t> packed_rkey() const { return rkey_; }
    const std::string &placement() const { return placement_; }
    // The pool lives in a segment its peers can map (MemoryDomain::alloc_shared).
    bool shared() const { return shared_md_ != nullptr; }

  private:
    BouncePool() = default;
    unsigned first(SlotRole role) const {
        return role == SlotRole::Initiator ? 0
               : role == SlotRole::Responder ? layout_.initiator_slots
                                             : layout_.initiator_slots + layout_.responder_slots;
    }
    SlotRole role_of(unsigned slot) const {
        return slot < first(SlotRole::Responder) ? SlotRole::Initiator
               : slot < first(SlotRole::Target)  ? SlotRole::Responder
                                                 : SlotRole::Target;
    }
    uint16_t id_ = 0;
    mem::MemKind kind_ = mem::MemKind::Host;
    int device_ = -1;
    Layout layout_;
    uint8_t *base_ = nullptr;
    size_t bytes_ = 0;
    tp::MemoryDomain *shared_md_ = nullptr; // the domain whose alloc_shared made base_, or null (row.host_alloc)
    std::unique_ptr<tp::MemHandle> memh_;
    std::vector<uint8_t> rkey_;
    std::vector<uint16_t> free_[3]; // by SlotRole
    std::vector<uint8_t> used_; // per slot: guards double release
    unsigned in_use_ = 0;
    std::string placement_;
};

} // namespace gdx::fb
