// The registry: core's rows and every layer's from config_layers(), joined once in order; lookup by name, the
// owner of a row, the typo suggestion. Core knows layers only as ConfigLayer data handed to it at link time.
#include "core/config_registry.h"
#include "core/config_vars.h"
#include "core/log.h"

#include <algorithm>
#include <cstdlib>
#include <unordered_map>

namespace gdx {

namespace {

size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j)
        prev[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
        cur[0] = i;
        for (size_t j = 1; j <= b.size(); ++j)
            cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
        std::swap(prev, cur);
    }
    return prev[b.size()];
}

bool numeric(ConfigType t) { return t == ConfigType::Size || t == ConfigType::UInt; }

// The relations of `layer`, whose rows are table[begin, begin + rows). The left variable is the layer's own (the
// layer that owns a relation declares it); the right one is its own or a lower layer's: a layer never depends on
// one listed after it.
bool resolve_relations(const ConfigLayer &layer, size_t begin,
                       const std::unordered_map<std::string_view, size_t> &index, ConfigRegistry *reg,
                       std::string *error) {
    const size_t end = begin + layer.rows.size();
    for (const ConfigRelation &rel : layer.relations) {
        const std::string what =
            "layer '" + std::string(layer.name) + "': relation " + std::string(rel.lhs) + " <= " + std::string(rel.rhs);
        auto l = index.find(rel.lhs), r = index.find(rel.rhs);
        if (l == index.end() || r == index.end()) {
            *error = what + " names an unknown variable";
            return false;
        }
        if (l->second < begin || l->second >= end || r->second >= end) {
            *error = what + ": the left variable must be the layer's own, the right one its own or a lower layer's";
            return false;
        }
        if (!numeric(reg->table[l->second].type) || !numeric(reg->table[r->second].type)) {
            *error = what + " needs Size or UInt variables";
            return false;
        }
        reg->relations.push_back({l->second, r->second});
    }
    return true;
}

} // namespace

bool config_assemble(std::span<const ConfigLayer *const> layers, ConfigRegistry *out, std::string *error) {
    ConfigRegistry reg;
    std::unordered_map<std::string_view, size_t> index;
    for (const ConfigLayer *layer : layers) {
        reg.first.push_back(static_cast<unsigned>(reg.table.size()));
        for (const ConfigVarDesc &d : layer->rows) {
            if (!d.name.starts_with("GDX_")) {
                *error = "layer '" + std::string(layer->name) + "': " + std::string(d.name) + " lacks the GDX_ prefix";
                return false;
            }
            if (auto [it, fresh] = index.emplace(d.name, reg.table.size()); !fresh) {
                *error = std::string(d.name) + " is declared by layer '" + std::string(reg.owner[it->second]->name) +
                         "' and again by layer '" + std::string(layer->name) + "'";
                return false;
            }
            reg.table.push_back(d);
            reg.owner.push_back(layer);
        }
    }
    for (size_t k = 0; k < layers.size(); ++k)
        if (!resolve_relations(*layers[k], reg.first[k], index, &reg, error)) return false;
    *out = std::move(reg);
    return true;
}

const ConfigRegistry &config_registry() {
    static const ConfigRegistry reg = [] {
        std::vector<ConfigLayer *> layers{&core_config::kLayer};
        for (ConfigLayer *l : config_layers())
            layers.push_back(l);
        const std::vector<const ConfigLayer *> view(layers.begin(), layers.end());
        ConfigRegistry r;
        std::string error;
        if (!config_assemble(view, &r, &error)) {
            // Before any value is read: a typed getter would otherwise read another layer's row.
            GDX_ERROR("config", "the GDX_* registry does not assemble: %s", error.c_str());
            std::abort();
        }
        for (size_t k = 0; k < layers.size(); ++k)
            layers[k]->first = r.first[k];
        return r;
    }();
    return reg;
}

std::span<const ConfigVarDesc> config_table() { return config_registry().table; }

const ConfigVarDesc *config_find(std::string_view name) {
    for (const ConfigVarDesc &d : config_registry().table)
        if (d.name == name) return &d;
    return nullptr;
}

size_t config_index(const ConfigVarDesc &d) {
    const std::vector<ConfigVarDesc> &t = config_registry().table;
    // Rows of config_table() are found by address; a copy (a layer's own kRows) by name.
    if (&d >= t.data() && &d < t.data() + t.size()) return static_cast<size_t>(&d - t.data());
    if (const ConfigVarDesc *found = config_find(d.name)) return static_cast<size_t>(found - t.data());
    GDX_ERROR("config", "%.*s is not in the GDX_* registry", static_cast<int>(d.name.size()), d.name.data());
    std::abort();
}

const ConfigLayer &config_layer_of(const ConfigVarDesc &d) { return *config_registry().owner[config_index(d)]; }

void config_layer_unplaced(const ConfigLayer &layer) {
    GDX_ERROR("config",
              "layer '%.*s' declares GDX_* rows but is not listed by config_layers() "
              "(src/config/layers.cpp)",
              static_cast<int>(layer.name.size()), layer.name.data());
    std::abort();
}

std::string config_suggest(std::string_view name) {
    std::string best;
    size_t best_d = 4; // farther than 3 edits is no typo
    for (const ConfigVarDesc &d : config_registry().table) {
        size_t dist = edit_distance(name, d.name);
        if (dist < best_d) {
            best_d = dist;
            best = d.name;
        }
    }
    return best;
}

} // namespace gdx
