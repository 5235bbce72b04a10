// Ranges and relations of the GDX_* rows (the GDX_CONFIG_RANGE and GDX_CONFIG_AT_MOST rows of each layer's
// config_vars.inc), checked where a value enters: config_parse_value (gdx_config_set, the environment, UCX_GDX_*
// overrides) checks one value against its row; Config::load checks the relations once every value is known.
// Before this, out-of-range values were accepted here and refused only when a transport opened, as "no transport
// could be opened" without the variable's name (issue 16).
#include "core/config.h"
#include "core/config_registry.h"

#include <bit>
#include <cstring>

namespace gdx {

namespace {

// A parsed "[word|][pow2 ]lo..hi" row. Bounds are parsed with the variable's own parser (sizes take units,
// durations their suffixes), so the table reads like the values a user types.
struct Range {
    std::string_view word; // accepted literally besides the numbers ("auto"), "" = none
    bool pow2 = false;
    std::string_view lo_text, hi_text;
};

Range split_range(std::string_view r) {
    Range out;
    if (size_t bar = r.find('|'); bar != std::string_view::npos) {
        out.word = r.substr(0, bar);
        r.remove_prefix(bar + 1);
    }
    if (r.starts_with("pow2 ")) {
        out.pow2 = true;
        r.remove_prefix(5);
    }
    size_t dots = r.find("..");
    out.lo_text = r.substr(0, dots);
    out.hi_text = dots == std::string_view::npos ? r : r.substr(dots + 2);
    return out;
}

// Numbers of the variable's type, in the unit its value is stored in (bytes, nanoseconds, a count).
bool parse_bound(ConfigType t, std::string_view s, uint64_t *out) {
    std::string why;
    switch (t) {
    case ConfigType::Size:
    case ConfigType::PerKindSize: return parse_size(s, out, &why);
    case ConfigType::Duration: {
        std::chrono::nanoseconds d{};
        if (!parse_duration(s, &d, &why)) return false;
        *out = d.count() < 0 ? 0 : static_cast<uint64_t>(d.count());
        return true;
    }
    default: return parse_uint(s, out, &why);
    }
}

bool in_range(const Range &r, ConfigType t, uint64_t v) {
    uint64_t lo = 0, hi = 0;
    if (!parse_bound(t, r.lo_text, &lo) || !parse_bound(t, r.hi_text, &hi)) return false;
    if (v < lo || v > hi) return false;
    return !r.pow2 || std::has_single_bit(v);
}

} // namespace

gdx_status_t config_check_range(const ConfigVarDesc &d, std::string_view text, const ConfigValue &value,
                                std::string *error) {
    if (d.range.empty()) return GDX_OK;
    const Range r = split_range(d.range);
    bool ok = true;
    if (std::holds_alternative<uint64_t>(value)) {
        ok = in_range(r, d.type, std::get<uint64_t>(value));
    } else if (std::holds_alternative<std::chrono::nanoseconds>(value)) {
        auto ns = std::get<std::chrono::nanoseconds>(value).count();
        ok = ns > 0 && in_range(r, d.type, static_cast<uint64_t>(ns));
    } else if (std::holds_alternative<PerKindSize>(value)) {
        for (auto &[kind, size] : std::get<PerKindSize>(value).entries) ok = ok && in_range(r, d.type, size);
    } else if (std::holds_alternative<std::string>(value)) {
        // A String with a numeric range ("auto|0..32"): the word, or an unsigned integer in range.
        const std::string &s = std::get<std::string>(value);
        uint64_t n = 0;
        std::string why;
        ok = (!r.word.empty() && s == r.word) || (parse_uint(s, &n, &why) && in_range(r, ConfigType::UInt, n));
    }
    if (ok) return GDX_OK;
    if (error) {
        *error = std::string(d.name) + "=" + std::string(text) + " is out of range; accepted: " +
                 (r.word.empty() ? "" : std::string(r.word) + " or ") + (r.pow2 ? "a power of two in " : "") +
                 std::string(r.lo_text) + ".." + std::string(r.hi_text) +
                 (d.type == ConfigType::PerKindSize ? " for each kind" : "");
    }
    return GDX_ERR_INVALID_CONFIG;
}

gdx_status_t config_check_relations(const Config &cfg, std::string *error) {
    // Declared by the layer that owns the left variable (its GDX_CONFIG_AT_MOST rows, each with its reason);
    // gdx_config_set sees one value at a time, so relations wait for the whole configuration.
    const ConfigRegistry &reg = config_registry();
    for (const ConfigRegistry::Relation &rel : reg.relations) {
        const ConfigVarDesc &l = reg.table[rel.lhs], &r = reg.table[rel.rhs];
        if (std::get<uint64_t>(cfg.value(l)) <= std::get<uint64_t>(cfg.value(r))) continue;
        if (error)
            *error = std::string(l.name) + "=" + cfg.text(l) + " exceeds " + std::string(r.name) + "=" + cfg.text(r) +
                     "; accepted: " + std::string(l.name) + " <= " + std::string(r.name);
        return GDX_ERR_INVALID_CONFIG;
    }
    return GDX_OK;
}

} // namespace gdx
