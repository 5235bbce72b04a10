// Parsers for single configuration values: sizes, durations, booleans, try|yes|no, unsigned integers.
#include "core/config.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace gdx {

namespace {

std::string lower(std::string_view s) {
    std::string out(s);
    for (char &c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
    return s;
}

// Splits a leading decimal number (integer or fraction) from its unit suffix.
bool split_number(std::string_view s, double *num, std::string_view *unit) {
    size_t i = 0;
    while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
    if (i == 0) return false;
    std::string digits(s.substr(0, i));
    char *end = nullptr;
    *num = std::strtod(digits.c_str(), &end);
    if (end != digits.c_str() + digits.size()) return false;
    *unit = s.substr(i);
    return true;
}

} // namespace

bool parse_uint(std::string_view s, uint64_t *out, std::string *why) {
    s = trim(s);
    uint64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || p != s.data() + s.size()) {
        if (why) *why = ec == std::errc::result_out_of_range ? "out of range" : "not an unsigned integer";
        return false;
    }
    *out = v;
    return true;
}

bool parse_size(std::string_view s, uint64_t *out, std::string *why) {
    std::string t = lower(trim(s));
    if (t == "inf" || t == "unlimited") { *out = kSizeInfinite; return true; }
    double num = 0;
    std::string_view unit;
    if (!split_number(t, &num, &unit)) {
        if (why) *why = "not a size";
        return false;
    }
    // Accept k, kb, kib (all binary, as UCX and NCCL do).
    if (unit.ends_with("ib")) unit.remove_suffix(2);
    else if (unit.size() == 2 && unit.back() == 'b') unit.remove_suffix(1);
    else if (unit == "b") unit = "";
    int shift = 0;
    if (unit.empty()) shift = 0;
    else if (unit == "k") shift = 10;
    else if (unit == "m") shift = 20;
    else if (unit == "g") shift = 30;
    else if (unit == "t") shift = 40;
    else {
        if (why) *why = "unknown size unit '" + std::string(unit) + "'";
        return false;
    }
    double bytes = std::ldexp(num, shift);
    if (bytes >= 18446744073709551615.0) {
        if (why) *why = "out of range";
        return false;
    }
    if (bytes != std::floor(bytes)) {
        if (why) *why = "not a whole number of bytes";
        return false;
    }
    *out = static_cast<uint64_t>(bytes);
    return true;
}

bool parse_duration(std::string_view s, std::chrono::nanoseconds *out, std::string *why) {
    std::string t = lower(trim(s));
    if (t == "inf") { *out = std::chrono::nanoseconds::max(); return true; }
    double num = 0;
    std::string_view unit;
    if (!split_number(t, &num, &unit)) {
        if (why) *why = "not a duration";
        return false;
    }
    double ns = 0;
    if (unit == "ns") ns = num;
    else if (unit == "us") ns = num * 1e3;
    else if (unit == "ms") ns = num * 1e6;
    else if (unit == "s" || unit.empty()) ns = num * 1e9; // a bare number is seconds, as in UCX
    else if (unit == "m") ns = num * 60e9;
    else if (unit == "h") ns = num * 3600e9;
    else {
        if (why) *why = "unknown duration unit '" + std::string(unit) + "'";
        return false;
    }
    if (ns >= 9.2e18) {
        if (why) *why = "out of range";
        return false;
    }
    *out = std::chrono::nanoseconds(static_cast<int64_t>(ns));
    return true;
}

bool parse_bool(std::string_view s, bool *out, std::string *why) {
    std::string t = lower(trim(s));
    if (t == "y" || t == "yes" || t == "1" || t == "on" || t == "true") { *out = true; return true; }
    if (t == "n" || t == "no" || t == "0" || t == "off" || t == "false") { *out = false; return true; }
    if (why) *why = "not a boolean";
    return false;
}

bool parse_ternary(std::string_view s, Ternary *out, std::string *why) {
    std::string t = lower(trim(s));
    if (t == "try" || t == "auto") { *out = Ternary::Try; return true; }
    bool b = false;
    if (parse_bool(t, &b, nullptr)) { *out = b ? Ternary::Yes : Ternary::No; return true; }
    if (why) *why = "not one of try, yes, no";
    return false;
}

std::string format_size(uint64_t bytes) {
    if (bytes == kSizeInfinite) return "inf";
    static const char *units[] = {"", "K", "M", "G", "T"};
    int u = 0;
    while (u < 4 && bytes != 0 && bytes % 1024 == 0) { bytes /= 1024; ++u; }
    return std::to_string(bytes) + units[u];
}

std::string format_duration(std::chrono::nanoseconds d) {
    if (d == std::chrono::nanoseconds::max()) return "inf";
    int64_t ns = d.count();
    struct { int64_t div; const char *unit; } steps[] = {{3600'000'000'000, "h"}, {60'000'000'000, "m"},
        {1'000'000'000, "s"}, {1'000'000, "ms"}, {1000, "us"}, {1, "ns"}};
    for (auto &st : steps) {
        if (ns != 0 && ns % st.div == 0) return std::to_string(ns / st.div) + st.unit;
    }
    return "0s";
}

const char *ternary_name(Ternary t) {
    switch (t) {
    case Ternary::No: return "no";
    case Ternary::Try: return "try";
    case Ternary::Yes: return "yes";
    }
    return "?";
}

const char *config_source_name(ConfigSource s) {
    switch (s) {
    case ConfigSource::Default: return "default";
    case ConfigSource::Environment: return "environment";
    case ConfigSource::Api: return "api";
    }
    return "?";
}

uint64_t PerKindSize::get(std::string_view kind, uint64_t fallback) const {
    for (auto &[k, v] : entries)
        if (k == kind) return v;
    for (auto &[k, v] : entries)
        if (k == "*") return v;
    return fallback;
}

} // namespace gdx
