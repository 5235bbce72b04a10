// The rc transport's GDX_* rows (transport/rc/config_vars.inc) as typed ids: gdx::tp::RcVar.
#pragma once

#include "core/config.h"

#define GDX_CONFIG_ROWS "transport/rc/config_vars.inc"
#include "core/config_layer.inc"
