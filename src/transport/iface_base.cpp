#include "transport/iface_base.h"

#include "core/error.h"
#include "core/log.h"

#include <string>

namespace gdx::tp {

gdx_status_t InterfaceBase::set_am_handler(uint8_t id, AmHandler fn, void *arg) {
    if (id >= kMaxAmId)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, transport_, "set_am_handler: active-message id %u out of range (< %u)",
                        id, kMaxAmId);
    am_[id] = {fn, arg};
    return GDX_OK;
}

// Cold: once per (transport, id) at WARN, then silently (log.h's once-keys are per process).
void InterfaceBase::drop_am(unsigned id, size_t len) const {
    std::string key = std::string("am-unhandled:") + transport_ + ":" + std::to_string(id);
    GDX_LOG_ONCE(log::Level::Warn, transport_, key,
                 "%s: active message id %u (%zu bytes) arrived with no handler set for it: dropped (said once per "
                 "transport and id)",
                 std::string(device_name()).c_str(), id, len);
}

} // namespace gdx::tp
