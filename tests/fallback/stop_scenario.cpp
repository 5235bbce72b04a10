#include "stop_scenario.h"

#include "staging_scenario.h"
#include "transport/bootstrap.h"

#include <cstdlib>

namespace gdx::test {

namespace {
std::string api_failure(const char *what, gdx_status_t st) {
    return std::string(what) + ": " + gdx_status_string(st) + " (" + gdx_last_error() + ")";
}

template <typename Fn> std::vector<uint8_t> blob(Fn fn) {
    size_t n = 0;
    fn(nullptr, &n);
    std::vector<uint8_t> b(n);
    if (fn(b.data(), &n) != GDX_OK) b.clear();
    return b;
}

// Calls `fn` until it is not GDX_ERR_BUSY or `seconds` pass, progressing between tries.
template <typename Fn> gdx_status_t retry_busy(gdx_context_t *ctx, Fn fn, double seconds) {
    gdx_status_t st = fn();
    for (auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
         st == GDX_ERR_BUSY && std::chrono::steady_clock::now() < end; st = fn())
        gdx_progress(ctx);
    return st;
}
} // namespace

ApiSide::ApiSide() = default;

ApiSide::~ApiSide() {
    close(0); // one try each: the test already reported what stayed BUSY
    destroy_context();
}

std::string ApiSide::open(void *bootstrap, int rank, size_t size, const ConfigList &config, double timeout_s) {
    auto &boot = *static_cast<tp::Bootstrap *>(bootstrap);
    gdx_config_t *cfg = nullptr;
    gdx_status_t st = gdx_config_create(&cfg);
    if (st != GDX_OK) return api_failure("gdx_config_create", st);
    std::string kind = "host";
    for (const auto &[k, v] : config) {
        if (k == "kind") {
            kind = v;
            continue;
        }
        if (k == "bytes") {
            size = std::strtoull(v.c_str(), nullptr, 0);
            continue;
        }
        if ((st = gdx_config_set(cfg, k.c_str(), v.c_str())) != GDX_OK) {
            gdx_config_destroy(cfg);
            return api_failure(k.c_str(), st);
        }
    }
    st = gdx_context_create(cfg, &ctx);
    gdx_config_destroy(cfg);
    if (st != GDX_OK) return api_failure("gdx_context_create", st);
    this->size = size;
    void *data = nullptr;
    if (kind == "host") {
        buf.assign(size, static_cast<uint8_t>(rank + 1));
        data = buf.data();
    } else {
        other = std::make_unique<KindBuffer>();
        std::string why;
        if (!other->allocate(kind, size, &why)) return kind + " buffer: " + why;
        if ((st = other->write(std::vector<uint8_t>(size, static_cast<uint8_t>(rank + 1)))) != GDX_OK)
            return api_failure("filling the buffer", st);
        data = other->data();
    }
    if ((st = gdx_mem_reg(ctx, data, size, GDX_ACCESS_ALL, &mem)) != GDX_OK) return api_failure("gdx_mem_reg", st);
    if ((st = gdx_ep_create(ctx, &ep)) != GDX_OK) return api_failure("gdx_ep_create", st);
    auto addr = blob([&](void *b, size_t *n) { return gdx_ep_address(ep, b, n); });
    auto key = blob([&](void *b, size_t *n) { return gdx_mem_pack(mem, b, n); });
    std::vector<std::vector<uint8_t>> all, peer;
    if (boot.allgather(join_blobs({addr, key}), &all) != GDX_OK) return "allgather: " + std::string(gdx_last_error());
    if (!split_blobs(all[1 - rank], &peer) || peer.size() != 2) return "the other side's blob is malformed";
    if ((st = gdx_ep_connect(ep, peer[0].data(), peer[0].size())) != GDX_OK) return api_failure("gdx_ep_connect", st);
    if (!progress_until(ctx, [&] { return gdx_ep_state(ep) != GDX_INPROGRESS; }, timeout_s))
        return "connecting timed out";
    if ((st = gdx_ep_state(ep)) != GDX_OK) return api_failure("connection", st);
    if ((st = gdx_rkey_unpack(ep, peer[1].data(), peer[1].size(), &rkey)) != GDX_OK)
        return api_failure("gdx_rkey_unpack", st);
    return "";
}

std::string ApiSide::post(unsigned count, size_t len, bool puts_only) {
    for (unsigned i = 0; i < count; ++i) {
        size_t off = (size_t(i) * len) % (size - len + 1);
        bool put = puts_only || i % 2 == 0;
        gdx_request_t *r = nullptr;
        gdx_status_t st = put ? gdx_put(ep, mem, off, rkey, off, len, &r) : gdx_get(ep, mem, off, rkey, off, len, &r);
        if (st != GDX_OK) return api_failure(put ? "gdx_put" : "gdx_get", st);
        reqs.push_back(r);
    }
    return "";
}

size_t ApiSide::outstanding() const {
    size_t n = 0;
    for (const gdx_request_t *r : reqs) n += gdx_request_test(r) == GDX_INPROGRESS;
    return n;
}

std::string ApiSide::close(double seconds) {
    for (gdx_request_t *r : reqs) gdx_request_free(r); // one still running is released when it completes
    reqs.clear();
    gdx_rkey_destroy(rkey);
    rkey = nullptr;
    std::string busy;
    if (ep != nullptr) {
        gdx_status_t st = retry_busy(ctx, [&] { return gdx_ep_destroy(ep); }, seconds);
        if (st == GDX_OK) ep = nullptr;
        else busy += api_failure("gdx_ep_destroy", st);
    }
    if (mem != nullptr) {
        gdx_status_t st = retry_busy(ctx, [&] { return gdx_mem_dereg(mem); }, seconds);
        if (st == GDX_OK) mem = nullptr;
        else busy += (busy.empty() ? "" : "; ") + api_failure("gdx_mem_dereg", st);
    }
    return busy;
}

void ApiSide::destroy_context() {
    if (ctx != nullptr) gdx_context_destroy(ctx);
    ctx = nullptr;
}

} // namespace gdx::test
