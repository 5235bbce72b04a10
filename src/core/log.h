// Logging: one line per event, "[time] [host:pid:tid] component LEVEL message".
// The level check is one relaxed atomic load, so disabled debug lines cost nothing on the data path.
#pragma once

#include <atomic>
#include <cstdarg>
#include <string>
#include <string_view>

namespace gdx::log {

enum class Level : int { Error = 0, Warn = 1, Info = 2, Debug = 3, Trace = 4 };

inline constexpr std::string_view kLevelNames[] = {"error", "warn", "info", "debug", "trace"};

namespace detail {
extern std::atomic<int> g_level;
}

inline bool enabled(Level level) {
    return static_cast<int>(level) <= detail::g_level.load(std::memory_order_relaxed);
}

// Sets the threshold and the sink. `file` is "stderr", "stdout" or a path in which %p becomes the pid and
// %h the host name. Returns false (and keeps the old sink) when the file cannot be opened; *why says why.
bool configure(Level level, const std::string &file, std::string *why);
Level level();

void write(Level level, const char *component, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void vwrite(Level level, const char *component, const char *fmt, va_list ap);

// True the first time `key` is seen in this process: for decisions that are logged once (e.g. "GPUDirect
// unavailable for GPU 0 / mlx5_0 ... staging").
bool first_time(std::string_view key);

// Test aid: forget the keys seen by first_time().
void reset_once_keys();

} // namespace gdx::log

#define GDX_LOG(lvl, comp, ...)                                                                             \
    do {                                                                                                    \
        if (::gdx::log::enabled(lvl)) ::gdx::log::write(lvl, comp, __VA_ARGS__);                            \
    } while (0)
#define GDX_ERROR(comp, ...) GDX_LOG(::gdx::log::Level::Error, comp, __VA_ARGS__)
#define GDX_WARN(comp, ...) GDX_LOG(::gdx::log::Level::Warn, comp, __VA_ARGS__)
#define GDX_INFO(comp, ...) GDX_LOG(::gdx::log::Level::Info, comp, __VA_ARGS__)
#define GDX_DEBUG(comp, ...) GDX_LOG(::gdx::log::Level::Debug, comp, __VA_ARGS__)
#define GDX_TRACE(comp, ...) GDX_LOG(::gdx::log::Level::Trace, comp, __VA_ARGS__)

// Logs once per process per key (the key is usually the formatted subject, e.g. "gdr:GPU0:mlx5_0").
#define GDX_LOG_ONCE(lvl, comp, key, ...)                                                                   \
    do {                                                                                                    \
        if (::gdx::log::enabled(lvl) && ::gdx::log::first_time(key)) ::gdx::log::write(lvl, comp, __VA_ARGS__); \
    } while (0)
