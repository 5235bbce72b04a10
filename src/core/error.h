// Error reporting: every failure returns a gdx_status_t and leaves one log line that names what failed and
// why. The message is also kept per thread so the C API can hand it out (gdx_last_error()).
#pragma once

#include "core/log.h"
#include "gdx/status.h"

#include <string>

namespace gdx {

// Records `message` as this thread's last error, logs it at `level` under `component`, returns `status`.
gdx_status_t fail(gdx_status_t status, log::Level level, const char *component, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

// As fail(), for a system call that set errno: appends ": <strerror> (errno N)" and returns `status`.
gdx_status_t fail_errno(gdx_status_t status, int err, const char *component, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

const std::string &last_error();
void set_last_error(std::string message);

} // namespace gdx

#define GDX_FAIL(status, comp, ...) ::gdx::fail(status, ::gdx::log::Level::Error, comp, __VA_ARGS__)
