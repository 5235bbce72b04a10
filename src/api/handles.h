// What the C API's opaque handles are (gdx.h, gdx_ext.h), and the guard every entry point runs its body in. Shared
// by c_api.cpp and the gdx_ext.h files (ext_*.cpp); nothing outside src/api/ sees it.
#pragma once

#include "api/context.h"
#include "api/endpoint.h"
#include "core/error.h"
#include "gdx/gdx.h"

#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

struct gdx_config {
    gdx::Config::Overrides overrides;
};

struct gdx_context {
    std::unique_ptr<gdx::Context> impl;
};

struct gdx_ep {
    gdx_context *ctx = nullptr;
    std::unique_ptr<gdx::Endpoint> impl;
};

struct gdx_mem {
    gdx_context *ctx = nullptr;
    std::unique_ptr<gdx::Memory> impl;
};

struct gdx_rkey {
    std::unique_ptr<gdx::RemoteKey> impl;
};

struct gdx_request {
    gdx::fb::Request req;
    std::string transport;
    bool free_when_done = false;
    static void on_complete(gdx::fb::Request *r) {
        auto *self = static_cast<gdx_request *>(r->user);
        if (self->free_when_done) delete self;
    }
};

namespace gdx::api {

// Copies a blob out under the *len contract of gdx_ep_address / gdx_mem_pack.
inline gdx_status_t copy_blob(const std::vector<uint8_t> &blob, void *buf, size_t *len, const char *what) {
    size_t room = *len;
    *len = blob.size();
    if (buf == nullptr) return GDX_OK;
    if (room < blob.size())
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, "api", "%s: %zu bytes of room for a %zu-byte blob", what, room,
                        blob.size());
    std::memcpy(buf, blob.data(), blob.size());
    return GDX_OK;
}

// Runs the body of a C entry point: no exception crosses the C boundary, each becomes a status with its reason.
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

} // namespace gdx::api
