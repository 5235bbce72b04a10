// gdx_ext.h's configuration side: the GDX_* table for gdx_info -c/-m (core's table, as C strings), where a
// context's value came from, sizes written and read as GDX_* values write them, and gdx_info's build section.
#include "api/ext_util.h"
#include "api/handles.h"
#include "core/config.h"
#include "gdx/gdx_ext.h"

#include <vector>

#ifndef GDX_BUILD_TYPE // set for this file by src/api/CMakeLists.txt
#define GDX_BUILD_TYPE "unknown"
#define GDX_UCX_VERSION_STR "unknown"
#define GDX_SANITIZE_STR ""
#endif

namespace {

struct VarText {
    std::string name, type, default_value, values, accepted, doc;
};

// The table as NUL-terminated strings, made once (the table's string_views need not end in NUL).
const std::vector<VarText> &var_texts() {
    static const std::vector<VarText> texts = [] {
        std::vector<VarText> v;
        for (const gdx::ConfigVarDesc &d : gdx::config_table()) {
            const bool choices = d.type == gdx::ConfigType::Enum || d.type == gdx::ConfigType::List;
            v.push_back({std::string(d.name), gdx::config_type_name(d.type), std::string(d.default_value),
                         choices ? std::string(d.accepted) : std::string(), gdx::config_accepted_text(d),
                         std::string(d.doc)});
        }
        return v;
    }();
    return texts;
}

} // namespace

extern "C" {

size_t gdx_ext_config_count(void) { return gdx::config_table().size(); }

gdx_status_t gdx_ext_config_var(size_t index, gdx_ext_config_var_t *var) {
    return gdx::api::guarded("gdx_ext_config_var", [&] {
        if (var == nullptr) return GDX_EXT_FAIL(GDX_ERR_INVALID_PARAM, "gdx_ext_config_var: NULL var");
        const std::vector<VarText> &t = var_texts();
        if (index >= t.size())
            return GDX_EXT_FAIL(GDX_ERR_INVALID_PARAM, "gdx_ext_config_var: index %zu of %zu variables", index,
                                t.size());
        const VarText &x = t[index];
        *var = {x.name.c_str(), x.type.c_str(), x.default_value.c_str(), x.values.c_str(), x.accepted.c_str(),
                x.doc.c_str()};
        return GDX_OK;
    });
}

const char *gdx_ext_config_source(const gdx_context_t *context, const char *name) {
    if (context == nullptr || name == nullptr) return nullptr;
    const gdx::ConfigVarDesc *d = gdx::config_find(name);
    return d == nullptr ? nullptr : gdx::config_source_name(context->impl->config().source(*d));
}

gdx_status_t gdx_ext_size_parse(const char *text, uint64_t *bytes) {
    return gdx::api::guarded("gdx_ext_size_parse", [&] {
        if (text == nullptr || bytes == nullptr)
            return GDX_EXT_FAIL(GDX_ERR_INVALID_PARAM, "gdx_ext_size_parse: NULL %s", text ? "bytes" : "text");
        std::string why;
        if (!gdx::parse_size(text, bytes, &why)) return GDX_EXT_FAIL(GDX_ERR_INVALID_PARAM, "%s", why.c_str());
        return GDX_OK;
    });
}

const char *gdx_ext_size_text(uint64_t bytes) {
    thread_local std::string slot;
    try {
        return gdx::api::hand_out(&slot, gdx::format_size(bytes));
    } catch (...) { // out of memory for a few bytes: say nothing rather than throw across the boundary
        return "";
    }
}

const char *gdx_ext_build_text(void) {
    thread_local std::string slot;
    return gdx::api::text_section(&slot, "# gdx\n", [](gdx::api::TextOut &o) {
        o.printf("# gdx %s\n", gdx_version_string());
        o.printf("#   build: %s, C++%ld\n", GDX_BUILD_TYPE, __cplusplus / 100 % 100);
        o.printf("#   CUDA support: %s (libcuda.so.1 opened at run time)\n",
                 GDX_HAVE_CUDA_H ? "compiled in" : "not compiled in (no cuda.h at build time)");
        o.printf("#   UCX built against: %s\n", GDX_UCX_VERSION_STR);
        o.printf("#   sanitizers: %s\n", GDX_SANITIZE_STR[0] ? GDX_SANITIZE_STR : "none");
    });
}

} // extern "C"
