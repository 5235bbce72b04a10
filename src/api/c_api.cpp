// The C API: argument checks, then a call into the C++ layers; no exception crosses this boundary.
#include "gdx/gdx.h"

#include "api/context.h"
#include "core/error.h"

#include <new>

struct gdx_config {
    gdx::Config::Overrides overrides;
};

struct gdx_context {
    std::unique_ptr<gdx::Context> impl;
};

namespace {

template <typename F> gdx_status_t guarded(const char *what, F &&f) noexcept {
    try {
        return f();
    } catch (const std::bad_alloc &) {
        return GDX_FAIL(GDX_ERR_NO_MEMORY, "api", "%s: out of memory", what);
    } catch (const std::exception &e) {
        return GDX_FAIL(GDX_ERR_INTERNAL, "api", "%s: internal error: %s", what, e.what());
    } catch (...) {
        return GDX_FAIL(GDX_ERR_INTERNAL, "api", "%s: internal error", what);
    }
}

} // namespace

extern "C" {

void gdx_version(unsigned *major, unsigned *minor) {
    if (major) *major = GDX_VERSION_MAJOR;
    if (minor) *minor = GDX_VERSION_MINOR;
}

const char *gdx_version_string(void) {
#define GDX_STR2(x) #x
#define GDX_STR(x) GDX_STR2(x)
    return GDX_STR(GDX_VERSION_MAJOR) "." GDX_STR(GDX_VERSION_MINOR);
}

const char *gdx_last_error(void) { return gdx::last_error().c_str(); }

gdx_status_t gdx_config_create(gdx_config_t **config_p) {
    return guarded("gdx_config_create", [&] {
        if (config_p == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, "api", "gdx_config_create: config_p is NULL");
        *config_p = new gdx_config;
        return GDX_OK;
    });
}

gdx_status_t gdx_config_set(gdx_config_t *config, const char *name, const char *value) {
    return guarded("gdx_config_set", [&] {
        if (config == nullptr || name == nullptr || value == nullptr)
            return GDX_FAIL(GDX_ERR_INVALID_PARAM, "api", "gdx_config_set: NULL %s",
                            config == nullptr ? "config" : name == nullptr ? "name" : "value");
        const gdx::ConfigVarDesc *d = gdx::config_find(name);
        if (d == nullptr) {
            std::string hint = gdx::config_suggest(name);
            return GDX_FAIL(GDX_ERR_INVALID_CONFIG, "api", "gdx_config_set: unknown variable '%s'%s%s%s", name,
                            hint.empty() ? "" : " (did you mean ", hint.c_str(), hint.empty() ? "" : "?)");
        }
        gdx::ConfigValue v;
        std::string error;
        if (gdx_status_t st = gdx::config_parse_value(*d, value, &v, &error); st != GDX_OK)
            return GDX_FAIL(st, "api", "%s", error.c_str());
        config->overrides[name] = value;
        return GDX_OK;
    });
}

void gdx_config_destroy(gdx_config_t *config) { delete config; }

gdx_status_t gdx_context_create(const gdx_config_t *config, gdx_context_t **context_p) {
    return guarded("gdx_context_create", [&] {
        if (context_p == nullptr)
            return GDX_FAIL(GDX_ERR_INVALID_PARAM, "api", "gdx_context_create: context_p is NULL");
        static const gdx::Config::Overrides kNone;
        auto ctx = std::make_unique<gdx_context>();
        if (gdx_status_t st = gdx::Context::create(config ? config->overrides : kNone, &ctx->impl); st != GDX_OK)
            return st;
        *context_p = ctx.release();
        return GDX_OK;
    });
}

void gdx_context_destroy(gdx_context_t *context) { delete context; }

const char *gdx_context_config_get(const gdx_context_t *context, const char *name) {
    if (context == nullptr || name == nullptr) return nullptr;
    const gdx::ConfigVarDesc *d = gdx::config_find(name);
    if (d == nullptr) return nullptr;
    return context->impl->config().text(d->id).c_str();
}

} // extern "C"
