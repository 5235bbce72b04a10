// The shm transport's GDX_* rows (transport/shm/config_vars.inc) as typed ids: gdx::tp::ShmVar.
#pragma once

#include "core/config.h"

#define GDX_CONFIG_ROWS "transport/shm/config_vars.inc"
#include "core/config_layer.inc"
