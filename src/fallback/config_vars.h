// The staging engine's GDX_* rows (fallback/config_vars.inc) as typed ids: gdx::fb::StagingVar.
#pragma once

#include "core/config.h"

#define GDX_CONFIG_ROWS "fallback/config_vars.inc"
#include "core/config_layer.inc"
