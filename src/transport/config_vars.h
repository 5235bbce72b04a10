// The transports' shared GDX_* rows (transport/config_vars.inc) as typed ids: gdx::tp::TransportVar.
#pragma once

#include "core/config.h"

#define GDX_CONFIG_ROWS "transport/config_vars.inc"
#include "core/config_layer.inc"
