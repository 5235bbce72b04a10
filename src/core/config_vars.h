// Core's GDX_* rows (core/config_vars.inc) as typed ids: gdx::CoreVar.
#pragma once

#include "core/config.h"

#define GDX_CONFIG_ROWS "core/config_vars.inc"
#include "core/config_layer.inc"
