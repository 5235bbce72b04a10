// What the gdx_ext.h files (ext_*.cpp) share: failures recorded for the calling tool, and the thread-local text
// the *_text functions hand out.
#pragma once

#include "core/error.h"

#include <cstdarg>
#include <cstdio>
#include <string>

// The tool says the error: here it is only recorded (gdx_last_error) and logged at debug.
#define GDX_EXT_FAIL(st, ...) ::gdx::fail(st, ::gdx::log::Level::Debug, "api", __VA_ARGS__)

namespace gdx::api {

// printf-style lines appended to one string (the sections gdx_info printed with printf before they moved here).
class TextOut {
  public:
    void printf(const char *fmt, ...) __attribute__((format(printf, 2, 3))) {
        va_list ap, ap2;
        va_start(ap, fmt);
        va_copy(ap2, ap);
        int n = std::vsnprintf(nullptr, 0, fmt, ap);
        va_end(ap);
        if (n > 0) {
            size_t at = text_.size();
            text_.resize(at + static_cast<size_t>(n) + 1);
            std::vsnprintf(text_.data() + at, static_cast<size_t>(n) + 1, fmt, ap2);
            text_.resize(at + static_cast<size_t>(n));
        }
        va_end(ap2);
    }
    std::string &str() { return text_; }

  private:
    std::string text_;
};

// Hands `text` out as gdx_ext.h promises: valid until the next call of the same function on this thread (`slot` is
// that function's own thread_local string).
inline const char *hand_out(std::string *slot, std::string text) {
    *slot = std::move(text);
    return slot->c_str();
}

// A *_text function's body: fill(out) writes the section; nothing crosses the C boundary, and when something
// throws (out of memory, a probe's internal error) the section is `fallback`, which says it is missing.
template <typename F> const char *text_section(std::string *slot, const char *fallback, F &&fill) noexcept {
    try {
        TextOut out;
        fill(out);
        return hand_out(slot, std::move(out.str()));
    } catch (...) {
        return fallback;
    }
}

} // namespace gdx::api
