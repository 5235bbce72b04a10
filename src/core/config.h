// Typed configuration: the GDX_* table (config_vars.inc), its parsers and the parsed values of one context.
// Parsed once at context creation: defaults, then the environment, then values set through the API.
#pragma once

#include "gdx/status.h"

#include <chrono>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace gdx {

enum class ConfigType : uint8_t { Size, Ternary, Bool, Enum, List, PerKindSize, Duration, UInt, String };

enum class ConfigId : unsigned {
#define GDX_CONFIG_VAR(id, type, def, accepted, doc) id,
#include "core/config_vars.inc"
#undef GDX_CONFIG_VAR
    kCount
};

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
    ConfigId id;
    std::string_view name;           // "GDX_LOG_LEVEL"
    ConfigType type;
    std::string_view default_value;
    std::string_view accepted;       // comma-separated choices/keys, "" = free-form
    std::string_view doc;
};

std::span<const ConfigVarDesc> config_table();
const ConfigVarDesc *config_find(std::string_view name);  // by full name; nullptr when unknown
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

// The GDX_CONFIG_RANGE row of a variable ("1..4096", "pow2 64K..1G", "auto|0..32"), "" when it has none.
std::string_view config_range(ConfigId id);
// Checks one parsed value against its range row (config_range.cpp); config_parse_value calls it.
gdx_status_t config_check_range(const ConfigVarDesc &desc, std::string_view text, const ConfigValue &value,
                                std::string *error);
class Config;
// Relations between variables (e.g. GDX_RC_MAX_INLINE <= GDX_RC_SEG_SIZE), checked by Config::load.
gdx_status_t config_check_relations(const Config &cfg, std::string *error);

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

    uint64_t size(ConfigId id) const { return std::get<uint64_t>(entry(id).value); }
    uint64_t uint(ConfigId id) const { return std::get<uint64_t>(entry(id).value); }
    bool boolean(ConfigId id) const { return std::get<bool>(entry(id).value); }
    Ternary ternary(ConfigId id) const { return std::get<Ternary>(entry(id).value); }
    const std::string &str(ConfigId id) const { return std::get<std::string>(entry(id).value); }
    const std::vector<std::string> &list(ConfigId id) const {
        return std::get<std::vector<std::string>>(entry(id).value);
    }
    const PerKindSize &per_kind(ConfigId id) const { return std::get<PerKindSize>(entry(id).value); }
    std::chrono::nanoseconds duration(ConfigId id) const {
        return std::get<std::chrono::nanoseconds>(entry(id).value);
    }

    // True when a list variable names `item` or is "all".
    bool list_allows(ConfigId id, std::string_view item) const;

    ConfigSource source(ConfigId id) const { return entry(id).source; }
    const std::string &text(ConfigId id) const { return entry(id).text; } // the value as given

  private:
    struct Entry {
        ConfigValue value;
        ConfigSource source = ConfigSource::Default;
        std::string text;
    };
    const Entry &entry(ConfigId id) const { return entries_[static_cast<unsigned>(id)]; }
    std::vector<Entry> entries_;
};

// Applies LOG_LEVEL and LOG_FILE of `cfg` to the logger.
gdx_status_t config_apply_logging(const Config &cfg, std::string *error);

// Closest known variable name to `name` (edit distance), for the typo warning; "" when nothing is close.
std::string config_suggest(std::string_view name);

} // namespace gdx
