// The cuda_ipc transport's GDX_* rows (transport/cuda_ipc/config_vars.inc) as typed ids: gdx::tp::CudaIpcVar.
#pragma once

#include "core/config.h"

#define GDX_CONFIG_ROWS "transport/cuda_ipc/config_vars.inc"
#include "core/config_layer.inc"
