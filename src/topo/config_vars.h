// The topology layer's GDX_* rows (topo/config_vars.inc) as typed ids: gdx::topo::TopoVar.
#pragma once

#include "core/config.h"

#define GDX_CONFIG_ROWS "topo/config_vars.inc"
#include "core/config_layer.inc"
