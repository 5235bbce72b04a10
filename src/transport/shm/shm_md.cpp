// The shm memory domain is the transport base's software-key domain (soft_key_md.h); what is shm's own is the
// wait, at deregistration, for copies a peer was granted under the key (README: the CMA grants).
#include "transport/shm/shm_iface.h"

namespace gdx::tp::shm {

ShmMemHandle::~ShmMemHandle() {
    if (key_id() == 0) return;
    // No peer may still be writing a granted part of this range when the caller gets its memory back.
    if (quiescer_->iface != nullptr) quiescer_->iface->quiesce_key(key_id());
    // Revoked before the memory can go away: a later request with this key is refused by the target.
    revoke_key();
}

std::unique_ptr<SoftKeyMemHandle> ShmMd::make_handle(void *addr, size_t len, const mem::MemInfo &info,
                                                     unsigned access) {
    return std::make_unique<ShmMemHandle>(addr, len, info, access, shared_table(), quiescer_);
}

} // namespace gdx::tp::shm
