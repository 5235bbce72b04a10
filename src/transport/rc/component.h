// Entry point of the rc transport for the registry (src/transport/registry.cpp).
#pragma once

#include "transport/transport.h"

namespace gdx::tp::rc {
Component *component(); // process-lifetime singleton
} // namespace gdx::tp::rc
