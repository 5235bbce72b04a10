// The tcp transport's GDX_* rows (transport/tcp/config_vars.inc) as typed ids: gdx::tp::TcpVar.
#pragma once

#include "core/config.h"

#define GDX_CONFIG_ROWS "transport/tcp/config_vars.inc"
#include "core/config_layer.inc"
