#include "transport/shm/shared_slots.h"

#include "core/error.h"
#include "memtype/cuda_driver.h"

#include <algorithm>
#include <cinttypes>
#include <unistd.h>

namespace gdx::tp::shm {

namespace {
constexpr const char *kComp = "shm";
constexpr uint32_t kMaxSlots = 1024;

ShmEp *shm_ep(Endpoint *ep, const char *what) {
    auto *s = dynamic_cast<ShmEp *>(ep);
    if (s == nullptr) GDX_FAIL(GDX_ERR_UNSUPPORTED, kComp, "%s: shared slots ride on shm endpoints only", what);
    return s;
}
} // namespace

gdx_status_t SharedSlots::register_gpu(int device, bool require) {
    if (device < 0) {
        why_not_gpu_ = "host-only slots requested (device -1)";
        return GDX_OK;
    }
#if GDX_HAVE_CUDA_H
    const cuda::DriverApi *api = cuda::driver();
    if (api == nullptr) {
        why_not_gpu_ = cuda::why_unavailable();
    } else {
        cuda::DeviceScope scope(device);
        if (!scope.ok()) {
            why_not_gpu_ = "binding GPU " + std::to_string(device) + ": " + cuda::error_text(scope.status());
        } else {
            // PORTABLE: every context of this process may DMA the slots; DEVICEMAP: kernels may address them too.
            CUresult r = api->cuMemHostRegister(seg_.base(), seg_.size(),
                                                CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
            if (r == CUDA_SUCCESS) {
                registered_ = true;
                reg_device_ = device;
                return GDX_OK;
            }
            why_not_gpu_ = "cuMemHostRegister(" + std::to_string(seg_.size()) + " bytes): " + cuda::error_text(r);
        }
    }
#else
    why_not_gpu_ = "built without cuda.h";
#endif
    if (require)
        return GDX_FAIL(GDX_ERR_UNSUPPORTED, kComp, "shared slots for GPU %d: %s", device, why_not_gpu_.c_str());
    GDX_LOG_ONCE(log::Level::Info, kComp, "shm:slots-unregistered",
                 "shared slots are not registered for GPU DMA (%s): GPU copies to them are staged by the driver",
                 why_not_gpu_.c_str());
    return GDX_OK;
}

gdx_status_t SharedSlots::create(Endpoint *ep, const SlotsParams &p, std::unique_ptr<SharedSlots> *out) {
    ShmEp *s = shm_ep(ep, "SharedSlots::create");
    if (s == nullptr) return GDX_ERR_UNSUPPORTED;
    if (out == nullptr || p.nslots == 0 || p.nslots > kMaxSlots || p.slot_size == 0 || p.slot_size > (1ull << 32))
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "SharedSlots::create: %u slots of %zu bytes (1..%u, <= 4G)",
                        p.nslots, p.slot_size, kMaxSlots);
    gdx_status_t st = s->state();
    if (st != GDX_OK)
        return st == GDX_INPROGRESS ? GDX_ERR_NO_RESOURCE : st; // not connected yet / failed
    std::unique_ptr<SharedSlots> r(new SharedSlots);
    r->producer_ = true;
    r->nslots_ = p.nslots;
    r->slot_size_ = round_up(p.slot_size, page_size());
    if ((st = secure_random_u64(&r->id_)) != GDX_OK) return st;
    if ((st = Segment::create(r->slot_size_ * p.nslots, "gdx-shm-slots", &r->seg_)) != GDX_OK) return st;
    if ((st = r->register_gpu(p.device, p.require_gpu)) != GDX_OK) return st;
    SlotOfferBody o{r->id_, r->seg_.size(), r->slot_size_, r->nslots_, 0};
    int fd = r->seg_.fd();
    if ((st = s->channel().send_ctrl(kCtrlSlotOffer, &o, sizeof(o), &fd, 1)) != GDX_OK) return st;
    r->seg_.close_fd();
    r->state_.assign(p.nslots, SlotState::Producer);
    for (uint32_t i = p.nslots; i-- > 0;) r->free_.push_back(i);
    r->ep_ = s;
    s->attach_region(r.get());
    *out = std::move(r);
    return GDX_OK;
}

gdx_status_t SharedSlots::accept(Endpoint *ep, int device, bool require_gpu, std::unique_ptr<SharedSlots> *out) {
    ShmEp *s = shm_ep(ep, "SharedSlots::accept");
    if (s == nullptr) return GDX_ERR_UNSUPPORTED;
    if (out == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "SharedSlots::accept: null output");
    gdx_status_t st = s->state();
    if (st != GDX_OK) return st == GDX_INPROGRESS ? GDX_ERR_NO_RESOURCE : st;
    auto &offers = s->offers();
    if (offers.empty()) return GDX_ERR_NO_RESOURCE;
    if (!s->channel().can_push(sizeof(RecHdr) + sizeof(SlotBody))) return GDX_ERR_NO_RESOURCE;
    ShmEp::Offer o = offers.front();
    offers.erase(offers.begin());
    std::unique_ptr<SharedSlots> r(new SharedSlots);
    r->id_ = o.id;
    if (o.nslots == 0 || o.nslots > kMaxSlots || o.slot_size == 0 || o.slot_size % page_size() != 0 ||
        o.slot_size > (1ull << 32) || o.seg_size != o.slot_size * o.nslots) {
        close(o.fd);
        return GDX_FAIL(GDX_ERR_PROTOCOL, kComp, "slot offer from pid %d: %u slots of %" PRIu64 " in %" PRIu64 " bytes",
                        static_cast<int>(s->channel().peer_pid()), o.nslots, o.slot_size, o.seg_size);
    }
    if ((st = Segment::attach(o.fd, o.seg_size, "shared slots", &r->seg_)) != GDX_OK) return st;
    r->nslots_ = o.nslots;
    r->slot_size_ = o.slot_size;
    if ((st = r->register_gpu(device, require_gpu)) != GDX_OK) return st;
    r->state_.assign(o.nslots, SlotState::Producer);
    r->accepted_ = true;
    SlotBody b{r->id_, 0, 0, 0};
    s->channel().push(kRecSlotAccept, 0, 0, &b, sizeof(b), nullptr, 0); // room was checked above
    r->ep_ = s;
    s->attach_region(r.get());
    *out = std::move(r);
    return GDX_OK;
}

SharedSlots::~SharedSlots() {
    if (ep_ != nullptr) ep_->detach_region(this);
#if GDX_HAVE_CUDA_H
    if (registered_) {
        const cuda::DriverApi *api = cuda::driver();
        cuda::DeviceScope scope(reg_device_);
        CUresult r = api->cuMemHostUnregister(seg_.base());
        if (r != CUDA_SUCCESS) GDX_WARN(kComp, "cuMemHostUnregister(shared slots): %s", cuda::error_text(r).c_str());
    }
#endif
}

gdx_status_t SharedSlots::state() const {
    if (error_ != GDX_OK) return error_;
    return accepted_ ? GDX_OK : GDX_INPROGRESS;
}

gdx_status_t SharedSlots::usable() const {
    if (error_ != GDX_OK) return error_;
    if (ep_ == nullptr) return GDX_ERR_CONNECTION_RESET;
    return accepted_ ? GDX_OK : GDX_ERR_NO_RESOURCE; // producer: the consumer has not mapped it yet
}

void SharedSlots::bad(const char *what) {
    ep_->channel().fail(GDX_FAIL(GDX_ERR_PROTOCOL, kComp, "shared slots %016" PRIx64 ": peer %s", id_, what), what);
}

gdx_status_t SharedSlots::acquire(uint32_t *slot) {
    gdx_status_t st = usable();
    if (st != GDX_OK) return st;
    if (!producer_ || slot == nullptr)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "acquire: only the producer side acquires slots");
    if (free_.empty()) return GDX_ERR_NO_RESOURCE;
    *slot = free_.back();
    free_.pop_back();
    return GDX_OK;
}

gdx_status_t SharedSlots::post(uint32_t slot, size_t len, uint64_t tag) {
    gdx_status_t st = usable();
    if (st != GDX_OK) return st;
    if (!producer_ || slot >= nslots_ || len > slot_size_ || state_[slot] != SlotState::Producer ||
        std::find(free_.begin(), free_.end(), slot) != free_.end())
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "post(slot %u, %zu bytes): not an acquired slot of this "
                        "producer, or longer than %zu", slot, len, slot_size_);
    SlotBody b{id_, slot, static_cast<uint32_t>(len), tag};
    if (!ep_->channel().push(kRecSlotReady, 0, 0, &b, sizeof(b), nullptr, 0)) return GDX_ERR_NO_RESOURCE;
    state_[slot] = SlotState::Consumer;
    return GDX_OK;
}

gdx_status_t SharedSlots::poll(SlotInfo *out) {
    if (error_ != GDX_OK) return error_;
    if (producer_ || out == nullptr)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "poll: only the consumer side polls for filled slots");
    if (ready_.empty()) return ep_ == nullptr ? GDX_ERR_CONNECTION_RESET : GDX_ERR_NO_RESOURCE;
    *out = ready_.front();
    ready_.pop_front();
    return GDX_OK;
}

gdx_status_t SharedSlots::release(uint32_t slot) {
    gdx_status_t st = usable();
    if (st != GDX_OK) return st;
    bool queued = false;
    for (const SlotInfo &i : ready_) queued |= i.slot == slot;
    if (producer_ || slot >= nslots_ || state_[slot] != SlotState::Consumer || queued)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "release(slot %u): not a slot this consumer polled", slot);
    SlotBody b{id_, slot, 0, 0};
    if (!ep_->channel().push(kRecSlotFree, 0, 0, &b, sizeof(b), nullptr, 0)) return GDX_ERR_NO_RESOURCE;
    state_[slot] = SlotState::Producer;
    return GDX_OK;
}

void SharedSlots::on_slot_record(uint8_t type, const SlotBody &b) {
    if (type == kRecSlotAccept) {
        if (!producer_ || accepted_) return bad("accepted a region twice (or the consumer's own)");
        accepted_ = true;
    } else if (type == kRecSlotReady) {
        if (producer_ || b.slot >= nslots_ || b.len > slot_size_ || state_[b.slot] != SlotState::Producer)
            return bad("posted a slot it does not hold, or an over-long fill");
        state_[b.slot] = SlotState::Consumer;
        ready_.push_back({b.slot, b.len, b.tag});
    } else if (type == kRecSlotFree) {
        if (!producer_ || b.slot >= nslots_ || state_[b.slot] != SlotState::Consumer)
            return bad("released a slot it was not given");
        state_[b.slot] = SlotState::Producer;
        free_.push_back(b.slot);
    }
}

void SharedSlots::on_ep_failed(gdx_status_t status, bool gone) {
    if (error_ == GDX_OK) error_ = status;
    if (gone) ep_ = nullptr;
}

} // namespace gdx::tp::shm
