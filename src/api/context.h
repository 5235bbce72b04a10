// gdx::Context: what one gdx_context_t owns. It parses the configuration once and ties the layers together:
// memory detection, the transports GDX_TLS allows (opened on first use: tools that only read the configuration
// open nothing) and one staging engine per transport interface.
#pragma once

#include "core/config.h"
#include "fallback/engine.h"
#include "memtype/memtype.h"
#include "transport/transport.h"

#include <memory>
#include <string>
#include <vector>

namespace gdx {

// One opened transport: its interface and the staging engine over it.
struct TransportSlot {
    tp::Component *component = nullptr;
    tp::DeviceDesc device;
    std::unique_ptr<tp::Interface> iface;
    std::unique_ptr<fb::Engine> engine;
    std::string name() const { return std::string(component->name()); }
    bool intra_node() const { return (iface->caps().flags & tp::kCapIntraNode) != 0; }
};

class Context {
  public:
    // Loads the configuration (defaults, environment, overrides) and applies logging.
    static gdx_status_t create(const Config::Overrides &overrides, std::unique_ptr<Context> *out);
    ~Context();

    const Config &config() const { return config_; }

    // Opens, once, every transport in the registry's preference order that GDX_TLS allows and that has a usable
    // device here (the first one it lists), each with its staging engine. GDX_ERR_UNREACHABLE when none opens.
    gdx_status_t open_transports();
    std::vector<TransportSlot> &transports() { return transports_; }
    TransportSlot *transport(std::string_view name);
    mem::Detector *detector() { return detector_.get(); }

    // Drives every engine (and through it every transport); returns the events processed.
    unsigned progress();

    // Identifies this host for "is the peer on the same host" (host name and boot id).
    static uint64_t host_id();

  private:
    Context() = default;
    Config config_;
    std::unique_ptr<mem::Detector> detector_;
    std::vector<TransportSlot> transports_;
    bool opened_ = false;
};

} // namespace gdx
