// gdx::Context: what one gdx_context_t owns. It parses the configuration once and ties the layers together
// (memory detection, transports, staging); each layer's issue adds its member here.
#pragma once

#include "core/config.h"

#include <memory>

namespace gdx {

class Context {
  public:
    // Loads the configuration (defaults, environment, overrides) and applies logging.
    static gdx_status_t create(const Config::Overrides &overrides, std::unique_ptr<Context> *out);

    const Config &config() const { return config_; }

  private:
    Context() = default;
    Config config_;
};

} // namespace gdx
