// Text codecs the multi-process tests and benches share to pass binary blobs (addresses, remote keys) on
// one-line commands: lowercase hex and whitespace-separated words. Header-only (gdx_test_support).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace gdx::test {

// Two lowercase hex digits per byte.
inline std::string hex(const void *p, size_t n) {
    static const char *d = "0123456789abcdef";
    const auto *b = static_cast<const uint8_t *>(p);
    std::string s;
    s.reserve(2 * n);
    for (size_t i = 0; i < n; ++i) {
        s += d[b[i] >> 4];
        s += d[b[i] & 15];
    }
    return s;
}
inline std::string hex(std::span<const uint8_t> b) { return hex(b.data(), b.size()); }

// The bytes of hex(); a trailing odd digit is ignored, a character that is not a hex digit throws
// std::invalid_argument.
inline std::vector<uint8_t> unhex(const std::string &s) {
    auto nib = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        throw std::invalid_argument("unhex: not a hex digit");
    };
    std::vector<uint8_t> b;
    b.reserve(s.size() / 2);
    for (size_t i = 0; i + 1 < s.size(); i += 2) b.push_back(static_cast<uint8_t>(nib(s[i]) << 4 | nib(s[i + 1])));
    return b;
}

// The whitespace-separated words of a line.
inline std::vector<std::string> words(const std::string &s) {
    std::istringstream is(s);
    std::vector<std::string> v;
    std::string w;
    while (is >> w) v.push_back(w);
    return v;
}

} // namespace gdx::test
