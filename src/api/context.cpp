#include "api/context.h"

#include "core/error.h"

namespace gdx {

gdx_status_t Context::create(const Config::Overrides &overrides, std::unique_ptr<Context> *out) {
    std::unique_ptr<Context> ctx(new Context);
    std::string error;
    if (gdx_status_t st = Config::load(overrides, &ctx->config_, &error); st != GDX_OK)
        return GDX_FAIL(st, "config", "%s", error.c_str());
    if (gdx_status_t st = config_apply_logging(ctx->config_, &error); st != GDX_OK)
        return GDX_FAIL(st, "config", "%s", error.c_str());
    *out = std::move(ctx);
    return GDX_OK;
}

} // namespace gdx
