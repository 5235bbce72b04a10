#include "core/error.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace gdx {

namespace {
thread_local std::string t_last_error;
}

const std::string &last_error() { return t_last_error; }
void set_last_error(std::string message) { t_last_error = std::move(message); }

gdx_status_t fail(gdx_status_t status, log::Level level, const char *component, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    t_last_error = buf;
    if (log::enabled(level)) log::write(level, component, "%s", buf);
    return status;
}

gdx_status_t fail_errno(gdx_status_t status, int err, const char *component, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = std::vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (n >= 0 && static_cast<size_t>(n) < sizeof(buf))
        std::snprintf(buf + n, sizeof(buf) - n, ": %s (errno %d)", std::strerror(err), err);
    t_last_error = buf;
    GDX_ERROR(component, "%s", buf);
    return status;
}

} // namespace gdx
