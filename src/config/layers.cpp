// The GDX_* registry's layer list: which layers' rows make the table, and in which order. Core places its own rows
// first and joins these after them (core/config_registry.cpp); gdx_info -c/-m, the README's reference,
// gdx_ext_config_*, gdx_config_set's checks and the UCX module's UCX_GDX_* table all show this order.
//
// The order is bottom-up: a layer comes after every layer whose rows it reads (rc after topology, cuda_ipc after
// shm, staging after the transports), then top-level layers. A layer's rows keep its config_vars.inc's order.
// A new layer or transport adds its config_vars.inc and config_vars.h next to its code, and here its include and
// one line in kLayers; nothing in core.
#include "core/config_registry.h"
#include "fallback/config_vars.h"
#include "memtype/config_vars.h"
#include "transport/config_vars.h"
#include "transport/cuda_ipc/config_vars.h"
#include "transport/rc/config_vars.h"
#include "transport/shm/config_vars.h"
#include "transport/tcp/config_vars.h"
#include "topo/config_vars.h"
#include "uct/config_vars.h"

namespace gdx {

std::span<ConfigLayer *const> config_layers() {
    static ConfigLayer *const kLayers[] = {
        &mem::memtype_config::kLayer,  // src/memtype
        &topo::topo_config::kLayer,    // src/topo
        &tp::transport_config::kLayer, // src/transport (what every transport shares)
        &tp::tcp_config::kLayer,       // src/transport/tcp
        &tp::shm_config::kLayer,       // src/transport/shm
        &tp::cuda_ipc_config::kLayer,  // src/transport/cuda_ipc
        &tp::rc_config::kLayer,        // src/transport/rc
        &fb::staging_config::kLayer,   // src/fallback
        &uct::uct_config::kLayer,      // src/uct (the UCX module; the api declares no rows)
    };
    return kLayers;
}

} // namespace gdx
