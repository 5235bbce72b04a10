// What every transport's interface shares, written once (like UCX's uct_base_iface_t): its transport name, its
// capabilities, the table of active-message handlers with set_am_handler's id check, and dispatch_am(), the one
// way a transport's receive path hands an active message to the user. A transport derives its interface from
// InterfaceBase, fills caps_ when it opens, calls dispatch_am() for every active message it receives, and
// implements the rest of Interface (device_name, md, ep_create, progress, wakeup).
#pragma once

#include "transport/transport.h"

namespace gdx::tp {

class InterfaceBase : public Interface {
  public:
    std::string_view transport_name() const final { return transport_; }
    const char *log_component() const { return transport_; } // transport_name(), NUL-terminated
    const Capabilities &caps() const final { return caps_; }
    // GDX_ERR_INVALID_PARAM for id >= kMaxAmId; a null fn unregisters (later messages for id are dropped).
    gdx_status_t set_am_handler(uint8_t id, AmHandler fn, void *arg) final;

    // Runs the handler registered for `id` with (ep, data, len); `data` is valid only during the call. A message
    // for an id without a handler (or out of range: a peer's bug, since senders check ids) is dropped, and said
    // once per transport and id at WARN: a peer that keeps sending it must not write a line per message.
    void dispatch_am(unsigned id, Endpoint *ep, const void *data, size_t len) {
        if (id < kMaxAmId && am_[id].fn != nullptr) [[likely]] {
            am_[id].fn(am_[id].arg, ep, data, len);
            return;
        }
        drop_am(id, len);
    }

  protected:
    // `transport` names the transport ("tcp"): transport_name() and the component of the base's log lines.
    explicit InterfaceBase(const char *transport) : transport_(transport) {}
    Capabilities caps_; // filled by the transport when it opens; the endpoint checks (ep_checks.h) read it

  private:
    void drop_am(unsigned id, size_t len) const;

    struct AmSlot {
        AmHandler fn = nullptr;
        void *arg = nullptr;
    };
    const char *transport_;
    AmSlot am_[kMaxAmId];
};

} // namespace gdx::tp
