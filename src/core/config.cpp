// Whole-value parsing of a GDX_* row with error messages that name variable, value and accepted values, and
// loading of one context's configuration from defaults, environment and API overrides (the rows: the registry).
#include "core/config.h"
#include "core/config_vars.h"
#include "core/log.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

extern char **environ;

namespace gdx {

namespace {

std::vector<std::string> split(std::string_view s, char sep) {
    std::vector<std::string> out;
    size_t start = 0;
    while (start <= s.size()) {
        size_t end = s.find(sep, start);
        if (end == std::string_view::npos) end = s.size();
        std::string_view item = s.substr(start, end - start);
        while (!item.empty() && std::isspace(static_cast<unsigned char>(item.front()))) item.remove_prefix(1);
        while (!item.empty() && std::isspace(static_cast<unsigned char>(item.back()))) item.remove_suffix(1);
        out.emplace_back(item);
        start = end + 1;
    }
    return out;
}

bool in_accepted(std::string_view accepted, std::string_view item) {
    for (auto &a : split(accepted, ','))
        if (a == item) return true;
    return false;
}

} // namespace

// The accepted values by type, without the range row (config_accepted_text adds it).
std::string config_accepted_base(const ConfigVarDesc &d);

const char *config_type_name(ConfigType t) {
    switch (t) {
    case ConfigType::Size: return "size";
    case ConfigType::Ternary: return "try|yes|no";
    case ConfigType::Bool: return "bool";
    case ConfigType::Enum: return "enum";
    case ConfigType::List: return "list";
    case ConfigType::PerKindSize: return "per-kind size";
    case ConfigType::Duration: return "duration";
    case ConfigType::UInt: return "unsigned";
    case ConfigType::String: return "string";
    }
    return "?";
}

std::string config_accepted_text(const ConfigVarDesc &d) {
    std::string text = config_accepted_base(d);
    if (!d.range.empty()) text += " (range " + std::string(d.range) + ")";
    return text;
}

std::string config_accepted_base(const ConfigVarDesc &d) {
    auto joined = [&] {
        std::string s;
        for (auto &a : split(d.accepted, ',')) s += (s.empty() ? "" : ", ") + a;
        return s;
    };
    switch (d.type) {
    case ConfigType::Size: return "a size in bytes with optional unit k, M, G, T (e.g. 4k, 512K, 4M, 1G) or inf";
    case ConfigType::Ternary: return "one of: try, yes, no";
    case ConfigType::Bool: return "one of: yes, no (also y, n, 1, 0, on, off, true, false)";
    case ConfigType::Enum: return "one of: " + joined();
    case ConfigType::List:
        return d.accepted.empty() ? "a comma-separated list" : "a comma-separated list of: " + joined();
    case ConfigType::PerKindSize:
        return "a size, or comma-separated kind:size pairs with kinds " + joined() + " (e.g. host:512K,cuda:4M)";
    case ConfigType::Duration: return "a duration with unit ns, us, ms, s, m, h (e.g. 250us, 10s) or inf";
    case ConfigType::UInt: return "an unsigned integer";
    case ConfigType::String: return "any string";
    }
    return "?";
}

// One case per row type, then the row's range and choices: longer than the ~80-line rule, kept whole so a value's
// whole way from text to typed value is one read.
gdx_status_t config_parse_value(const ConfigVarDesc &d, std::string_view text, ConfigValue *out,
                                std::string *error) {
    std::string why;
    bool ok = true;
    switch (d.type) {
    case ConfigType::Size:
    case ConfigType::UInt: {
        uint64_t v = 0;
        ok = d.type == ConfigType::Size ? parse_size(text, &v, &why) : parse_uint(text, &v, &why);
        if (ok) *out = v;
        break;
    }
    case ConfigType::Duration: {
        std::chrono::nanoseconds v{};
        ok = parse_duration(text, &v, &why);
        if (ok) *out = v;
        break;
    }
    case ConfigType::Bool: {
        bool v = false;
        ok = parse_bool(text, &v, &why);
        if (ok) *out = v;
        break;
    }
    case ConfigType::Ternary: {
        Ternary v = Ternary::Try;
        ok = parse_ternary(text, &v, &why);
        if (ok) *out = v;
        break;
    }
    case ConfigType::Enum: {
        // Enums compare case-insensitively but are stored as spelled in the table.
        ok = false;
        for (auto &a : split(d.accepted, ',')) {
            if (a.size() == text.size() && strncasecmp(a.c_str(), text.data(), a.size()) == 0) {
                *out = a;
                ok = true;
            }
        }
        if (!ok) why = "not an accepted value";
        break;
    }
    case ConfigType::String: *out = std::string(text); break;
    case ConfigType::List: {
        std::vector<std::string> items;
        for (auto &item : split(text, ',')) {
            if (item.empty()) {
                ok = false;
                why = "empty list item";
                break;
            }
            if (!d.accepted.empty() && !in_accepted(d.accepted, item)) {
                ok = false;
                why = "unknown item '" + item + "'";
                break;
            }
            items.push_back(item);
        }
        if (ok) *out = std::move(items);
        break;
    }
    case ConfigType::PerKindSize: {
        PerKindSize pk;
        for (auto &item : split(text, ',')) {
            size_t colon = item.find(':');
            std::string key = colon == std::string::npos ? "*" : item.substr(0, colon);
            std::string val = colon == std::string::npos ? item : item.substr(colon + 1);
            if (key != "*" && !in_accepted(d.accepted, key)) {
                ok = false;
                why = "unknown memory kind '" + key + "'";
                break;
            }
            uint64_t v = 0;
            if (!parse_size(val, &v, &why)) {
                ok = false;
                why = "'" + val + "': " + why;
                break;
            }
            if (v == 0) {
                ok = false;
                why = "'" + item + "': a fragment size must be at least 1 byte";
                break;
            }
            pk.entries.emplace_back(key, v);
        }
        if (ok) *out = std::move(pk);
        break;
    }
    }
    if (ok) return config_check_range(d, text, *out, error);
    if (error) {
        *error = std::string(d.name) + "=" + std::string(text) + " is invalid (" + why + "); accepted: " +
                 config_accepted_text(d);
    }
    return GDX_ERR_INVALID_CONFIG;
}

Config Config::defaults() {
    Config c;
    const std::span<const ConfigVarDesc> table = config_table();
    c.entries_.resize(table.size());
    for (size_t i = 0; i < table.size(); ++i) {
        const ConfigVarDesc &d = table[i];
        Entry &e = c.entries_[i];
        std::string err;
        gdx_status_t st = config_parse_value(d, d.default_value, &e.value, &err);
        if (st != GDX_OK) {
            // A bad default is a programming error caught by the config unit test.
            GDX_ERROR("config", "bad built-in default: %s", err.c_str());
            std::abort();
        }
        e.text = std::string(d.default_value);
    }
    return c;
}

gdx_status_t Config::load(const Overrides &overrides, Config *out, std::string *error) {
    Config c = defaults();
    auto set = [&](const ConfigVarDesc &d, std::string_view text, ConfigSource src) {
        Entry &e = c.entries_[config_index(d)];
        gdx_status_t st = config_parse_value(d, text, &e.value, error);
        if (st != GDX_OK) return st;
        e.source = src;
        e.text = std::string(text);
        return GDX_OK;
    };
    for (char **env = environ; env != nullptr && *env != nullptr; ++env) {
        std::string_view kv(*env);
        if (!kv.starts_with("GDX_")) continue;
        size_t eq = kv.find('=');
        if (eq == std::string_view::npos) continue;
        std::string_view name = kv.substr(0, eq), value = kv.substr(eq + 1);
        const ConfigVarDesc *d = config_find(name);
        if (d == nullptr) {
            std::string hint = config_suggest(name);
            std::string key = "config-unknown:" + std::string(name);
            GDX_LOG_ONCE(log::Level::Warn, "config", key, "unknown variable %.*s ignored%s%s%s",
                         static_cast<int>(name.size()), name.data(), hint.empty() ? "" : " (did you mean ",
                         hint.c_str(), hint.empty() ? "" : "?)");
            continue;
        }
        if (gdx_status_t st = set(*d, value, ConfigSource::Environment); st != GDX_OK) return st;
    }
    for (auto &[name, value] : overrides) {
        const ConfigVarDesc *d = config_find(name);
        if (d == nullptr) {
            if (error) *error = "unknown configuration variable '" + name + "'";
            return GDX_ERR_INVALID_CONFIG;
        }
        if (gdx_status_t st = set(*d, value, ConfigSource::Api); st != GDX_OK) return st;
    }
    if (gdx_status_t st = config_check_relations(c, error); st != GDX_OK) return st;
    *out = std::move(c);
    return GDX_OK;
}

gdx_status_t config_apply_logging(const Config &cfg, std::string *error) {
    const std::string &name = cfg.str(CoreVar::LOG_LEVEL);
    log::Level lvl = log::Level::Warn;
    for (size_t i = 0; i < std::size(log::kLevelNames); ++i)
        if (log::kLevelNames[i] == name) lvl = static_cast<log::Level>(i);
    std::string why;
    if (!log::configure(lvl, cfg.str(CoreVar::LOG_FILE), &why)) {
        if (error) *error = "GDX_LOG_FILE=" + cfg.str(CoreVar::LOG_FILE) + ": " + why;
        return GDX_ERR_INVALID_CONFIG;
    }
    return GDX_OK;
}

} // namespace gdx
