// The GDX_* registry: every layer's rows, assembled once into the one table that gdx_config_set, the environment,
// gdx_info -c/-m (and so the README's reference), gdx_ext_config_* and the UCX module's UCX_GDX_* table all read.
#pragma once

#include "core/config.h"

#include <span>
#include <string>
#include <vector>

namespace gdx {

// The layers whose rows follow core's, in their documented order. Core declares it and never defines it: the
// program's layer list does (src/config/layers.cpp), so that core names no other layer and none of its variables.
std::span<ConfigLayer *const> config_layers();

struct ConfigRegistry {
    struct Relation {
        size_t lhs, rhs; // indices into table: table[lhs] <= table[rhs]
    };
    std::vector<ConfigVarDesc> table;       // every row, layer after layer, each layer in its file's order
    std::vector<const ConfigLayer *> owner; // owner[i] declared table[i]
    std::vector<unsigned> first;            // first[k]: index in table of the k-th layer's first row
    std::vector<Relation> relations;
};

// Joins `layers` in order. False, with *error naming the layer, when a row's name lacks the GDX_ prefix, a name is
// declared twice (in one layer or two), or a relation names an unknown variable, one that is not Size or UInt, a
// left variable of another layer or a right one of a layer listed later. Writes nothing but *out (and only on
// success): the layers' `first` is config_registry()'s to set.
bool config_assemble(std::span<const ConfigLayer *const> layers, ConfigRegistry *out, std::string *error);

// Core's layer, then config_layers(), assembled on first use (thread-safe); each layer's `first` is set then. A
// registry that does not assemble is a programming error: said on stderr and aborted, before any value is read.
const ConfigRegistry &config_registry();

} // namespace gdx
