#include "core/log.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>
#include <set>
#include <sys/syscall.h>
#include <unistd.h>

namespace gdx::log {

namespace detail {
std::atomic<int> g_level{static_cast<int>(Level::Warn)};
}

namespace {

struct Sink {
    std::mutex mutex;
    FILE *file = stderr;
    bool owned = false;
    std::set<std::string, std::less<>> once_keys;
};

Sink &sink() {
    static Sink *s = new Sink; // never destroyed: log lines may come from static destructors
    return *s;
}

const char *host_name() {
    static const std::string name = [] {
        char buf[256] = {};
        if (gethostname(buf, sizeof(buf) - 1) != 0) return std::string("?");
        return std::string(buf);
    }();
    return name.c_str();
}

long thread_id() {
    thread_local long tid = syscall(SYS_gettid);
    return tid;
}

std::string expand_path(const std::string &pattern) {
    std::string out;
    for (size_t i = 0; i < pattern.size(); ++i) {
        if (pattern[i] == '%' && i + 1 < pattern.size()) {
            char c = pattern[i + 1];
            if (c == 'p') { out += std::to_string(getpid()); ++i; continue; }
            if (c == 'h') { out += host_name(); ++i; continue; }
            if (c == '%') { out += '%'; ++i; continue; }
        }
        out += pattern[i];
    }
    return out;
}

const char *level_tag(Level l) {
    static const char *tags[] = {"ERROR", "WARN ", "INFO ", "DEBUG", "TRACE"};
    return tags[static_cast<int>(l)];
}

} // namespace

Level level() { return static_cast<Level>(detail::g_level.load(std::memory_order_relaxed)); }

bool configure(Level lvl, const std::string &file, std::string *why) {
    FILE *f = nullptr;
    bool owned = false;
    if (file.empty() || file == "stderr") {
        f = stderr;
    } else if (file == "stdout") {
        f = stdout;
    } else {
        std::string path = expand_path(file);
        f = std::fopen(path.c_str(), "a");
        if (f == nullptr) {
            if (why) *why = "cannot open log file '" + path + "': " + std::strerror(errno);
            return false;
        }
        setvbuf(f, nullptr, _IOLBF, 0);
        owned = true;
    }
    Sink &s = sink();
    {
        std::lock_guard<std::mutex> g(s.mutex);
        if (s.owned && s.file != f) std::fclose(s.file);
        s.file = f;
        s.owned = owned;
    }
    detail::g_level.store(static_cast<int>(lvl), std::memory_order_relaxed);
    return true;
}

void vwrite(Level lvl, const char *component, const char *fmt, va_list ap) {
    char msg[2048];
    int n = std::vsnprintf(msg, sizeof(msg), fmt, ap);
    if (n < 0) std::snprintf(msg, sizeof(msg), "(unformattable log message: %s)", fmt);

    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    tm t{};
    gmtime_r(&ts.tv_sec, &t);
    char line[2400];
    int len = std::snprintf(line, sizeof(line), "[%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ] [%s:%d:%ld] %-8s %s %s\n",
                            t.tm_year + 1900, t.tm_mon + 1, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec,
                            ts.tv_nsec / 1000, host_name(), static_cast<int>(getpid()), thread_id(), component,
                            level_tag(lvl), msg);
    if (len < 0) return;
    size_t out = std::min(static_cast<size_t>(len), sizeof(line) - 1);
    if (out == sizeof(line) - 1) line[out - 1] = '\n';
    Sink &s = sink();
    std::lock_guard<std::mutex> g(s.mutex);
    std::fwrite(line, 1, out, s.file);
    std::fflush(s.file);
}

void write(Level lvl, const char *component, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vwrite(lvl, component, fmt, ap);
    va_end(ap);
}

bool first_time(std::string_view key) {
    Sink &s = sink();
    std::lock_guard<std::mutex> g(s.mutex);
    return s.once_keys.emplace(key).second;
}

void reset_once_keys() {
    Sink &s = sink();
    std::lock_guard<std::mutex> g(s.mutex);
    s.once_keys.clear();
}

} // namespace gdx::log
