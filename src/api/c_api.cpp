// The C API: argument checks, then a call into the C++ layers; no exception crosses this boundary.
#include "gdx/gdx.h"

#include "api/handles.h"
#include "core/error.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <new>

using gdx::api::copy_blob;
using gdx::api::guarded;

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
    return context->impl->config().text(*d).c_str();
}

gdx_status_t gdx_ep_create(gdx_context_t *context, gdx_ep_t **ep_p) {
    return guarded("gdx_ep_create", [&] {
        if (context == nullptr || ep_p == nullptr)
            return GDX_FAIL(GDX_ERR_INVALID_PARAM, "api", "gdx_ep_create: NULL %s", context ? "ep_p" : "context");
        auto ep = std::make_unique<gdx_ep>();
        ep->ctx = context;
        if (gdx_status_t st = gdx::Endpoint::create(*context->impl, &ep->impl); st != GDX_OK) return st;
        *ep_p = ep.release();
        return GDX_OK;
    });
}

gdx_status_t gdx_ep_address(const gdx_ep_t *ep, void *buf, size_t *len) {
    return guarded("gdx_ep_address", [&] {
        if (ep == nullptr || len == nullptr)
            return GDX_FAIL(GDX_ERR_INVALID_PARAM, "api", "gdx_ep_address: NULL %s", ep ? "len" : "ep");
        return copy_blob(ep->impl->address(), buf, len, "gdx_ep_address");
    });
}

gdx_status_t gdx_ep_connect(gdx_ep_t *ep, const void *peer_address, size_t len) {
    return guarded("gdx_ep_connect", [&] {
        if (ep == nullptr || peer_address == nullptr || len == 0)
            return GDX_FAIL(GDX_ERR_INVALID_PARAM, "api", "gdx_ep_connect: NULL endpoint or empty address");
        return ep->impl->connect({static_cast<const uint8_t *>(peer_address), len});
    });
}

gdx_status_t gdx_ep_state(const gdx_ep_t *ep) {
    if (ep == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, "api", "gdx_ep_state: NULL endpoint");
    return ep->impl->state();
}

const char *gdx_ep_transports(const gdx_ep_t *ep) { return ep == nullptr ? "" : ep->impl->transports().c_str(); }

gdx_status_t gdx_ep_destroy(gdx_ep_t *ep) {
    return guarded("gdx_ep_destroy", [&] {
        if (ep == nullptr) return GDX_OK;
        if (gdx_status_t st = ep->impl->close(); st != GDX_OK) return st;
        delete ep;
        return GDX_OK;
    });
}

gdx_status_t gdx_mem_reg(gdx_context_t *context, void *addr, size_t len, unsigned access, gdx_mem_t **mem_p) {
    return guarded("gdx_mem_reg", [&] {
        if (context == nullptr || mem_p == nullptr)
            return GDX_FAIL(GDX_ERR_INVALID_PARAM, "api", "gdx_mem_reg: NULL %s", context ? "mem_p" : "context");
        auto m = std::make_unique<gdx_mem>();
        m->ctx = context;
        if (gdx_status_t st = gdx::Memory::create(*context->impl, addr, len, access, &m->impl); st != GDX_OK)
            return st;
        *mem_p = m.release();
        return GDX_OK;
    });
}

gdx_status_t gdx_mem_pack(const gdx_mem_t *mem, void *buf, size_t *len) {
    return guarded("gdx_mem_pack", [&] {
        if (mem == nullptr || len == nullptr)
            return GDX_FAIL(GDX_ERR_INVALID_PARAM, "api", "gdx_mem_pack: NULL %s", mem ? "len" : "mem");
        std::vector<uint8_t> blob;
        if (gdx_status_t st = mem->impl->pack(&blob); st != GDX_OK) return st;
        return copy_blob(blob, buf, len, "gdx_mem_pack");
    });
}

gdx_status_t gdx_mem_dereg(gdx_mem_t *mem) {
    return guarded("gdx_mem_dereg", [&] {
        if (mem == nullptr) return GDX_OK;
        if (mem->impl->busy())
            // Retryable: logged at debug, or a caller's retry loop would fill the log (issue 16).
            return gdx::fail(GDX_ERR_BUSY, gdx::log::Level::Debug, "api",
                             "gdx_mem_dereg: a request or a peer's transfer still uses it");
        delete mem;
        return GDX_OK;
    });
}

gdx_status_t gdx_rkey_unpack(gdx_ep_t *ep, const void *packed, size_t len, gdx_rkey_t **rkey_p) {
    return guarded("gdx_rkey_unpack", [&] {
        if (ep == nullptr || packed == nullptr || len == 0 || rkey_p == nullptr)
            return GDX_FAIL(GDX_ERR_INVALID_PARAM, "api", "gdx_rkey_unpack: NULL argument or empty key");
        if (!ep->impl->connected_called())
            return gdx::fail(GDX_ERR_BUSY, gdx::log::Level::Debug, "api", "gdx_rkey_unpack: call gdx_ep_connect first");
        auto k = std::make_unique<gdx_rkey>();
        if (gdx_status_t st = gdx::RemoteKey::unpack(*ep->impl, {static_cast<const uint8_t *>(packed), len}, &k->impl);
            st != GDX_OK)
            return st;
        *rkey_p = k.release();
        return GDX_OK;
    });
}

void gdx_rkey_destroy(gdx_rkey_t *rkey) { delete rkey; }

namespace {

// `notify`: gdx_put_notify's value, else nullptr.
gdx_status_t one_sided(bool is_put, gdx_ep_t *ep, gdx_mem_t *mem, size_t offset, gdx_rkey_t *rkey,
                       size_t remote_offset, size_t len, gdx_request_t **req_p, const uint64_t *notify = nullptr) {
    const char *what = !is_put ? "gdx_get" : notify != nullptr ? "gdx_put_notify" : "gdx_put";
    return guarded(what, [&] {
        if (ep == nullptr || mem == nullptr || rkey == nullptr || req_p == nullptr)
            return GDX_FAIL(GDX_ERR_INVALID_PARAM, "api", "%s: NULL argument", what);
        if (rkey->impl->endpoint() != ep->impl.get())
            return GDX_FAIL(GDX_ERR_INVALID_PARAM, "api", "%s: the key was unpacked for another endpoint", what);
        if (mem->ctx != ep->ctx)
            return GDX_FAIL(GDX_ERR_INVALID_PARAM, "api", "%s: memory and endpoint belong to different contexts", what);
        if (gdx_status_t st = ep->impl->state(); st != GDX_OK)
            return gdx::fail(st == GDX_INPROGRESS ? GDX_ERR_BUSY : st,
                             st == GDX_INPROGRESS ? gdx::log::Level::Debug : gdx::log::Level::Error, "api",
                             "%s: the endpoint is not connected (%s)",
                            what, gdx_status_string(st));
        // The staging layer picks the lane (fallback/lanes.h) and checks the request's range and rights, once.
        gdx::fb::Lane lanes[gdx::fb::kMaxLanes];
        const size_t nlanes = ep->impl->staging_lanes(*mem->impl, *rkey->impl, lanes);
        auto req = std::make_unique<gdx_request>();
        req->req.cb = gdx_request::on_complete;
        req->req.user = req.get();
        size_t lane = 0;
        gdx_status_t st = gdx::fb::submit({lanes, nlanes}, {is_put, offset, remote_offset, len, notify}, &req->req,
                                          &lane);
        if (st != GDX_OK && st != GDX_INPROGRESS) return st;
        req->transport = ep->impl->lanes()[lane].slot->name(); // read by gdx_request_path only, never by completion
        *req_p = req.release();
        return GDX_OK;
    });
}

} // namespace

gdx_status_t gdx_put(gdx_ep_t *ep, gdx_mem_t *mem, size_t offset, gdx_rkey_t *rkey, size_t remote_offset,
                     size_t len, gdx_request_t **req_p) {
    return one_sided(true, ep, mem, offset, rkey, remote_offset, len, req_p);
}

gdx_status_t gdx_get(gdx_ep_t *ep, gdx_mem_t *mem, size_t offset, gdx_rkey_t *rkey, size_t remote_offset,
                     size_t len, gdx_request_t **req_p) {
    return one_sided(false, ep, mem, offset, rkey, remote_offset, len, req_p);
}

gdx_status_t gdx_put_notify(gdx_ep_t *ep, gdx_mem_t *mem, size_t offset, gdx_rkey_t *rkey, size_t remote_offset,
                            size_t len, uint64_t value, gdx_request_t **req_p) {
    return one_sided(true, ep, mem, offset, rkey, remote_offset, len, req_p, &value);
}

size_t gdx_ep_notify_poll(gdx_ep_t *ep, uint64_t *values, size_t max) {
    if (ep == nullptr || (values == nullptr && max != 0)) return 0;
    return ep->impl->notify_poll(values, max); // no allocation, nothing that throws
}

unsigned gdx_progress(gdx_context_t *context) {
    if (context == nullptr) return 0;
    try {
        return context->impl->progress();
    } catch (...) {
        GDX_FAIL(GDX_ERR_INTERNAL, "api", "gdx_progress: internal error");
        return 0;
    }
}

namespace {

// An asynchronous failure's reason becomes the thread's last error when the caller learns of it. Logged at debug:
// the cause was logged once where it happened, and a caller that polls must not repeat it.
gdx_status_t report(const gdx_request_t *req) {
    gdx_status_t st = req->req.status;
    if (st != GDX_OK && st != GDX_INPROGRESS) gdx::fail(st, gdx::log::Level::Debug, "api", "%s", gdx_request_error(req));
    return st;
}

} // namespace

gdx_status_t gdx_request_test(const gdx_request_t *req) {
    if (req == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, "api", "gdx_request_test: NULL request");
    return report(req);
}

const char *gdx_request_error(const gdx_request_t *req) {
    if (req == nullptr) return "NULL request";
    gdx_status_t st = req->req.status;
    if (st == GDX_OK || st == GDX_INPROGRESS) return "";
    // The pipeline describes every failure it completes; a status set elsewhere still gets its name.
    return req->req.error.empty() ? gdx_status_string(st) : req->req.error.c_str();
}

gdx_status_t gdx_request_wait(gdx_context_t *context, gdx_request_t *req, int timeout_ms) {
    if (context == nullptr || req == nullptr)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, "api", "gdx_request_wait: NULL %s", context ? "request" : "context");
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms);
    while (req->req.status == GDX_INPROGRESS) {
        gdx_progress(context);
        if (req->req.status == GDX_INPROGRESS && std::chrono::steady_clock::now() > deadline)
            return gdx::fail(GDX_ERR_TIMEOUT, gdx::log::Level::Debug, "api",
                             "gdx_request_wait: not complete after %d ms (the request goes on)", timeout_ms);
    }
    return report(req);
}

gdx_status_t gdx_request_path(const gdx_request_t *req, gdx_path_info_t *info) {
    return guarded("gdx_request_path", [&] {
        if (req == nullptr || info == nullptr)
            return GDX_FAIL(GDX_ERR_INVALID_PARAM, "api", "gdx_request_path: NULL %s", req ? "info" : "request");
        const gdx::fb::PathReport &p = req->req.path;
        *info = gdx_path_info_t{};
        std::snprintf(info->transport, sizeof(info->transport), "%s", req->transport.c_str());
        info->bytes_direct = p.bytes_direct;
        info->bytes_staged = p.bytes_staged;
        info->frags_direct = p.frags_direct;
        info->frags_staged = p.frags_staged;
        info->frag_size = p.frag_size;
        info->depth = p.depth;
        info->small = p.small ? 1 : 0;
        info->staged_share = p.staged_share();
        std::snprintf(info->text, sizeof(info->text), "%s: %s", req->transport.c_str(), p.describe().c_str());
        return GDX_OK;
    });
}

void gdx_request_free(gdx_request_t *req) {
    if (req == nullptr) return;
    if (req->req.status == GDX_INPROGRESS)
        req->free_when_done = true;
    else
        delete req;
}

} // extern "C"
