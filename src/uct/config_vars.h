// The UCX glue's GDX_* rows (uct/config_vars.inc) as typed ids: gdx::uct::UctVar.
#pragma once

#include "core/config.h"

#define GDX_CONFIG_ROWS "uct/config_vars.inc"
#include "core/config_layer.inc"
