// The UCX glue's GDX_* rows (transport/uct/config_vars.inc) as typed ids: gdx::uct::UctVar.
#pragma once

#include "core/config.h"

#define GDX_CONFIG_ROWS "transport/uct/config_vars.inc"
#include "core/config_layer.inc"
