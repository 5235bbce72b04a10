// Shared bounce slots: N slots of S bytes in a memfd segment mapped by two processes and registered for GPU DMA
// (cuMemHostRegister, PORTABLE | DEVICEMAP) in each, so a staged GPU -> GPU move across processes costs no CPU
// copy: the producer's GPU writes a slot (device -> host DMA), the consumer's GPU reads it (host -> device).
// The staging engine (src/fallback) drives it; the transport only owns the memory and the credit protocol.
//
// Protocol (records in the endpoint's ring, so ordering and wakeups come with it):
//   producer create()      -> SLOT_OFFER over the control socket, with the memfd
//   consumer accept()      -> maps + registers, SLOT_ACCEPT           (producer's state() becomes GDX_OK)
//   producer acquire(&i)   <- a free slot (all N are credits at start)
//   producer post(i,len,tag) -> SLOT_READY                            (after ITS copy into slot i completed)
//   consumer poll(&info)   <- filled slots in post order
//   consumer release(i)    -> SLOT_FREE                               (after ITS copy out of slot i completed)
// Each side checks every slot index, length and state transition the other side reports; a violation fails
// the endpoint with GDX_ERR_PROTOCOL. A region is one-directional; make two for both directions.
//
// Threading and lifetime: as the endpoint's (one thread at a time; records arrive in the interface's
// progress()). Destroy regions before their endpoint. When the endpoint fails, every call returns its error.
#pragma once

#include "transport/shm/segment.h"
#include "transport/shm/shm_iface.h"

#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace gdx::tp::shm {

struct SlotsParams {
    uint32_t nslots = 8;          // 1..1024
    size_t slot_size = 4u << 20;  // bytes per slot (rounded up to the page size)
    int device = -1;              // CUDA ordinal whose context registers the region; -1: host-only slots
    bool require_gpu = false;     // fail instead of handing out unregistered slots when registration fails
};

struct SlotInfo {
    uint32_t slot = 0;
    size_t len = 0;   // bytes the producer filled
    uint64_t tag = 0; // the producer's word (e.g. message id and fragment offset)
};

class SharedSlots final : public SlotRegion {
  public:
    // Producer: creates a region on shm endpoint `ep` (connected) and offers it to the peer.
    static gdx_status_t create(Endpoint *ep, const SlotsParams &params, std::unique_ptr<SharedSlots> *out);
    // Consumer: maps the oldest region the peer offered on `ep`. GDX_ERR_NO_RESOURCE: none has arrived yet
    // (drive the interface's progress() and retry). `device`/`require_gpu` as in SlotsParams.
    static gdx_status_t accept(Endpoint *ep, int device, bool require_gpu, std::unique_ptr<SharedSlots> *out);
    ~SharedSlots();
    SharedSlots(const SharedSlots &) = delete;
    SharedSlots &operator=(const SharedSlots &) = delete;

    bool producer() const { return producer_; }
    uint64_t id() const { return id_; }
    // GDX_OK when both sides have the region mapped, GDX_INPROGRESS (producer, before SLOT_ACCEPT), or the
    // endpoint's error.
    gdx_status_t state() const;
    uint32_t nslots() const { return nslots_; }
    size_t slot_size() const { return slot_size_; }
    uint8_t *slot(uint32_t i) const { return i < nslots_ ? seg_.base() + static_cast<size_t>(i) * slot_size_ : nullptr; }
    // True when this process registered the region for GPU DMA; otherwise why_not_gpu() says why.
    bool gpu_registered() const { return registered_; }
    const std::string &why_not_gpu() const { return why_not_gpu_; }

    // Producer. acquire: GDX_ERR_NO_RESOURCE when every slot is with the consumer. post: len <= slot_size();
    // GDX_ERR_NO_RESOURCE when the ring is full (the slot stays acquired: retry).
    gdx_status_t acquire(uint32_t *slot);
    gdx_status_t post(uint32_t slot, size_t len, uint64_t tag);
    // Consumer. poll: GDX_ERR_NO_RESOURCE when nothing is filled. release: GDX_ERR_NO_RESOURCE when the ring is
    // full (retry).
    gdx_status_t poll(SlotInfo *out);
    gdx_status_t release(uint32_t slot);

    // SlotRegion
    uint64_t region_id() const override { return id_; }
    void on_slot_record(uint8_t type, const SlotBody &body) override;
    void on_ep_failed(gdx_status_t status, bool gone) override;

  private:
    SharedSlots() = default;
    gdx_status_t register_gpu(int device, bool require);
    gdx_status_t usable() const;
    void bad(const char *what);

    enum class SlotState : uint8_t { Producer, Consumer }; // who holds it now (from this side's point of view)
    ShmEp *ep_ = nullptr;
    bool producer_ = false, accepted_ = false, registered_ = false;
    gdx_status_t error_ = GDX_OK;
    uint64_t id_ = 0;
    uint32_t nslots_ = 0;
    size_t slot_size_ = 0;
    Segment seg_;
    int reg_device_ = -1;
    std::string why_not_gpu_;
    std::vector<SlotState> state_;
    std::vector<uint32_t> free_;  // producer: slots it may fill
    std::deque<SlotInfo> ready_;  // consumer: filled slots in post order
};

} // namespace gdx::tp::shm
