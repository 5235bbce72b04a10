// The memory-type layer's GDX_* rows (memtype/config_vars.inc) as typed ids: gdx::mem::MemtypeVar.
#pragma once

#include "core/config.h"

#define GDX_CONFIG_ROWS "memtype/config_vars.inc"
#include "core/config_layer.inc"
