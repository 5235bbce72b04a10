// Typed configuration: the mechanism behind the GDX_* variables (types, parsers, ranges, relations, sources) and
// the parsed values of one context. The rows themselves are declared by the layer that reads them, each in a
// config_vars.inc next to its code (core's own: core/config_vars.inc); core/config_layer.inc turns a rows file
// into that layer's ids, and the registry (config_registry.h) assembles every layer's rows into the one table.
// Parsed once at context creation: defaults, then the environment, then values set through the API.
#pragma once

#include "gdx/status.h"

#include <chrono>
#include <concepts>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace gdx {

enum class ConfigType : uint8_t { Size, Ternary, Bool, Enum, List, PerKindSize, Duration, UInt, String };

// try|yes|no: 'try' uses a feature when possible; 'yes' fails with a clear error when it is not; 'no' never.
enum class Ternary : uint8_t { No, Try, Yes };
const char *ternary_name(Ternary t);

enum class ConfigSource : uint8_t { Default, Environment, Api };
const char *config_source_name(ConfigSource s);

inline constexpr uint64_t kSizeInfinite = UINT64_MAX;

// host:512K,cuda:4M. A bare size sets every kind.
struct PerKindSize {
    std::vector<std::pair<std::string, uint64_t>> entries;
    uint64_t get(std::string_view kind, uint64_t fallback) const;
};

using ConfigValue = std::variant<uint64_t, bool, Ternary, std::string, std::vector<std::string>, PerKindSize,
                                 std::chrono::nanoseconds>;

struct ConfigVarDesc {
    std::string_view name;           // "GDX_LOG_LEVEL"
    ConfigType type;
    std::string_view default_value;
    std::string_view accepted;       // comma-separated choices/keys, "" = free-form
    std::string_view doc;
    std::string_view range;          // its GDX_CONFIG_RANGE row ("1..4096", "pow2 64K..1G"), "" = none
};

// GDX_CONFIG_AT_MOST(ID, OTHER) rows: GDX_<ID> <= GDX_<OTHER> once every value is known (Config::load). Both are
// Size or UInt variables; OTHER may belong to a layer below the one declaring the relation.
struct ConfigRelation {
    std::string_view lhs, rhs; // full names
};

// One layer's rows, as core/config_layer.inc makes them from the layer's config_vars.inc. The registry lists the
// layers (core's first, then config_layers()) and records where each layer's rows start in the table.
struct ConfigLayer {
    static constexpr unsigned kUnplaced = ~0u;
    std::string_view name;      // "core": the layer that declares the rows and reads them
    std::span<const ConfigVarDesc> rows;
    std::span<const ConfigRelation> relations;
    unsigned first = kUnplaced; // index of rows[0] in config_table(); written once by the registry
};

// A layer's row id (core_config::Var, ...): an enum whose layer config_layer(id) finds by argument-dependent lookup.
template <class Id>
concept ConfigVarId = std::is_enum_v<Id> && requires(Id id) {
    { config_layer(id) } -> std::same_as<const ConfigLayer &>;
};

// Every layer's rows in registry order (config_registry.cpp). Names and docs are string literals (NUL-terminated).
std::span<const ConfigVarDesc> config_table();
const ConfigVarDesc *config_find(std::string_view name);  // by full name; nullptr when unknown
// Where a row is in config_table(): by address for the table's own rows, else by name (a layer's kRows); a row the
// registry does not hold is a programming error (aborts, naming it).
size_t config_index(const ConfigVarDesc &d);
// The layer that declared a row.
const ConfigLayer &config_layer_of(const ConfigVarDesc &d);
const char *config_type_name(ConfigType t);
std::string config_accepted_text(const ConfigVarDesc &d); // "one of: error, warn, ..." etc.

// Single-value parsers; on failure they return false and say why (without the variable name).
bool parse_size(std::string_view s, uint64_t *out, std::string *why);
bool parse_duration(std::string_view s, std::chrono::nanoseconds *out, std::string *why);
bool parse_bool(std::string_view s, bool *out, std::string *why);
bool parse_ternary(std::string_view s, Ternary *out, std::string *why);
bool parse_uint(std::string_view s, uint64_t *out, std::string *why);
std::string format_size(uint64_t bytes);                  // 4194304 -> "4M"
std::string format_duration(std::chrono::nanoseconds d);   // 10s, 250us, inf

// Parses `text` as the value of `desc` and checks it against its GDX_CONFIG_RANGE row. On failure *error names
// the variable, the value and what is accepted.
gdx_status_t config_parse_value(const ConfigVarDesc &desc, std::string_view text, ConfigValue *out,
                                std::string *error);

// Checks one parsed value against its range row (config_range.cpp); config_parse_value calls it.
gdx_status_t config_check_range(const ConfigVarDesc &desc, std::string_view text, const ConfigValue &value,
                                std::string *error);
class Config;
// The GDX_CONFIG_AT_MOST relations of every layer, checked by Config::load once every value is known.
gdx_status_t config_check_relations(const Config &cfg, std::string *error);
// A typed getter used with the id of a layer the registry does not list: a programming error, said and aborted.
[[noreturn]] void config_layer_unplaced(const ConfigLayer &layer);

class Config {
  public:
    // Overrides set through the API (or UCX_GDX_* by the UCX glue), by full GDX_ name.
    using Overrides = std::map<std::string, std::string, std::less<>>;

    // Defaults, then `environ`, then overrides. Unknown GDX_* variables in the environment draw one warning each
    // (with the closest known name). On the first invalid value returns GDX_ERR_INVALID_CONFIG and *error says
    // which variable, which value and what is accepted.
    static gdx_status_t load(const Overrides &overrides, Config *out, std::string *error);
    // Defaults only (tests, tools before a context exists).
    static Config defaults();

    // Typed getters: `cfg.str(CoreVar::LOG_FILE)`. The id says which layer's row; the getter must match the
    // row's type (Size and UInt: size/uint; a mismatch throws std::bad_variant_access, as a wrong id would).
    template <ConfigVarId Id> uint64_t size(Id id) const { return std::get<uint64_t>(entry(id).value); }
    template <ConfigVarId Id> uint64_t uint(Id id) const { return std::get<uint64_t>(entry(id).value); }
    template <ConfigVarId Id> bool boolean(Id id) const { return std::get<bool>(entry(id).value); }
    template <ConfigVarId Id> Ternary ternary(Id id) const { return std::get<Ternary>(entry(id).value); }
    template <ConfigVarId Id> const std::string &str(Id id) const { return std::get<std::string>(entry(id).value); }
    template <ConfigVarId Id> const std::vector<std::string> &list(Id id) const {
        return std::get<std::vector<std::string>>(entry(id).value);
    }
    template <ConfigVarId Id> const PerKindSize &per_kind(Id id) const {
        return std::get<PerKindSize>(entry(id).value);
    }
    template <ConfigVarId Id> std::chrono::nanoseconds duration(Id id) const {
        return std::get<std::chrono::nanoseconds>(entry(id).value);
    }

    // True when a list variable names `item` or is "all".
    template <ConfigVarId Id> bool list_allows(Id id, std::string_view item) const {
        for (auto &s : list(id))
            if (s == "all" || s == item) return true;
        return false;
    }

    template <ConfigVarId Id> ConfigSource source(Id id) const { return entry(id).source; }
    template <ConfigVarId Id> const std::string &text(Id id) const { return entry(id).text; } // the value as given
    // The same by a row of config_table() (a name looked up with config_find).
    ConfigSource source(const ConfigVarDesc &d) const { return entries_[config_index(d)].source; }
    const std::string &text(const ConfigVarDesc &d) const { return entries_[config_index(d)].text; }
    const ConfigValue &value(const ConfigVarDesc &d) const { return entries_[config_index(d)].value; }

  private:
    struct Entry {
        ConfigValue value;
        ConfigSource source = ConfigSource::Default;
        std::string text;
    };
    // One vector for every layer: a layer's rows start at its `first` (set when the registry was assembled).
    template <ConfigVarId Id> const Entry &entry(Id id) const {
        const ConfigLayer &layer = config_layer(id);
        if (layer.first == ConfigLayer::kUnplaced) [[unlikely]]
            config_layer_unplaced(layer);
        return entries_[layer.first + static_cast<unsigned>(id)];
    }
    std::vector<Entry> entries_;
};

// Applies LOG_LEVEL and LOG_FILE of `cfg` to the logger.
gdx_status_t config_apply_logging(const Config &cfg, std::string *error);

// Closest known variable name to `name` (edit distance), for the typo warning; "" when nothing is close.
std::string config_suggest(std::string_view name);

} // namespace gdx
