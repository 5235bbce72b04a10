#include "datapath.h"

#include <gdx/gdx_ext.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

namespace gdx::perf {

namespace {

std::string api_error(const std::string &what, gdx_status_t st) {
    return what + ": " + gdx_status_string(st) + " (" + gdx_last_error() + ")";
}

// A blob under the *len contract of gdx_ep_address / gdx_mem_pack.
template <typename Obj> std::string blob(gdx_status_t (*fn)(const Obj *, void *, size_t *), const Obj *obj) {
    size_t n = 0;
    if (fn(obj, nullptr, &n) != GDX_OK) return "";
    std::string b(n, '\0');
    if (fn(obj, b.data(), &n) != GDX_OK) return "";
    return b;
}

// "direct[host->host] 100.0%" -> "host": how this side's bytes were reached on the direct path, "" when none.
std::string via_of(const std::string &text) {
    size_t at = text.find("direct[");
    if (at == std::string::npos) return "";
    at += 7;
    size_t end = text.find("->", at);
    return end == std::string::npos ? "" : text.substr(at, end - at);
}

} // namespace

gdx_status_t DataPath::open(const std::string &transport, PathMode path, Buffer &buf, std::unique_ptr<DataPath> *out,
                            std::string *why) {
    std::unique_ptr<DataPath> d(new DataPath);
    gdx_config_t *cfg = nullptr;
    gdx_status_t st = gdx_config_create(&cfg);
    std::vector<std::pair<const char *, const char *>> set;
    if (transport != "auto") set.emplace_back("GDX_TLS", transport.c_str());
    if (path == PathMode::Staged) set.emplace_back("GDX_FAULT_P2P_EVERY", "1");
    if (path == PathMode::Direct) set.insert(set.end(), {{"GDX_GDR", "yes"}, {"GDX_P2P", "yes"}});
    for (size_t i = 0; st == GDX_OK && i < set.size(); ++i) st = gdx_config_set(cfg, set[i].first, set[i].second);
    if (st == GDX_OK) st = gdx_context_create(cfg, &d->ctx_);
    gdx_config_destroy(cfg);
    if (st != GDX_OK) {
        *why = api_error("cannot create a gdx context", st);
        return st;
    }
    if ((st = gdx_ep_create(d->ctx_, &d->ep_)) != GDX_OK) {
        // With -x the transport named is the one that failed to open: say it so.
        *why = transport != "auto" ? "transport '" + transport + "' cannot be used here: " + gdx_last_error()
                                   : api_error("cannot create an endpoint", st);
        return st;
    }
    if ((st = gdx_mem_reg(d->ctx_, buf.data(), buf.size(), GDX_ACCESS_ALL, &d->mem_)) != GDX_OK) {
        *why = "gdx cannot register " + buf.spec().text() + " memory: " + gdx_last_error();
        return st;
    }
    *out = std::move(d);
    return GDX_OK;
}

DataPath::~DataPath() {
    // Requests still in flight (a failed phase) are released when they complete; until then they hold the key,
    // the registration and the endpoint, so those go once the endpoint may (bounded: a request that never ends
    // is the context's to cancel, and its objects are then left to the process's exit).
    for (const InFlight &f : inflight_) gdx_request_free(f.req);
    inflight_.clear();
    gdx_status_t st = GDX_ERR_BUSY;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (ep_ != nullptr && (st = gdx_ep_destroy(ep_)) == GDX_ERR_BUSY && std::chrono::steady_clock::now() < deadline)
        gdx_progress(ctx_);
    if (st == GDX_OK || ep_ == nullptr) {
        gdx_rkey_destroy(rkey_);
        if (mem_ != nullptr && gdx_mem_dereg(mem_) != GDX_OK)
            std::fprintf(stderr, "gdx_perftest: the buffer stayed registered at teardown: %s\n", gdx_last_error());
    }
    gdx_context_destroy(ctx_);
}

void DataPath::forget(const Pending *p) {
    for (InFlight &f : inflight_)
        if (f.pending == p) f.pending = nullptr;
}

Pending::~Pending() {
    if (outstanding > 0) dp_.forget(this);
}

std::string DataPath::address() const { return blob(gdx_ep_address, ep_); }
std::string DataPath::key() const { return blob(gdx_mem_pack, mem_); }

gdx_status_t DataPath::connect(const std::string &peer_address, const std::string &peer_key, std::string *why) {
    gdx_status_t st = gdx_ep_connect(ep_, peer_address.data(), peer_address.size());
    if (st != GDX_OK) {
        *why = "cannot connect to the peer's endpoint: " + std::string(gdx_last_error());
        return st;
    }
    if ((st = gdx_rkey_unpack(ep_, peer_key.data(), peer_key.size(), &rkey_)) != GDX_OK) {
        *why = "the peer's key is not valid here: " + std::string(gdx_last_error());
        return st;
    }
    return GDX_OK;
}

gdx_status_t DataPath::connected(std::string *why) {
    gdx_progress(ctx_);
    gdx_status_t st = gdx_ep_state(ep_);
    if (st != GDX_OK && st != GDX_INPROGRESS)
        *why = transport() + ": the endpoint connection failed: " + gdx_status_string(st) + " (" + gdx_last_error() +
               ")";
    return st;
}

std::string DataPath::transport() const { return gdx_ep_transports(ep_); }
std::string DataPath::device() const { return gdx_ext_ep_devices(ep_); }
std::string DataPath::reach() const {
    const char *r = gdx_ext_mem_reach(mem_, ep_);
    return r != nullptr ? r : "unknown";
}

gdx_status_t DataPath::submit(const char *what, gdx_status_t st, gdx_request_t *req, Pending *p, std::string *why) {
    if (st != GDX_OK) {
        *why = api_error(what, st);
        return st;
    }
    inflight_.push_back({req, p});
    ++p->outstanding;
    return GDX_OK;
}

gdx_status_t DataPath::put(size_t local_off, size_t len, size_t remote_off, Pending *p, std::string *why) {
    gdx_request_t *r = nullptr;
    gdx_status_t st = gdx_put(ep_, mem_, local_off, rkey_, remote_off, len, &r);
    return submit("gdx_put", st, r, p, why);
}

gdx_status_t DataPath::get(size_t local_off, size_t len, size_t remote_off, Pending *p, std::string *why) {
    gdx_request_t *r = nullptr;
    gdx_status_t st = gdx_get(ep_, mem_, local_off, rkey_, remote_off, len, &r);
    return submit("gdx_get", st, r, p, why);
}

gdx_status_t DataPath::put_notify(size_t local_off, size_t len, size_t remote_off, uint64_t value, Pending *p,
                                  std::string *why) {
    gdx_request_t *r = nullptr;
    gdx_status_t st = gdx_put_notify(ep_, mem_, local_off, rkey_, remote_off, len, value, &r);
    return submit("gdx_put_notify", st, r, p, why); // r is set only once the call returned
}

size_t DataPath::notifications(uint64_t *values, size_t max) { return gdx_ep_notify_poll(ep_, values, max); }

unsigned DataPath::progress() {
    unsigned n = gdx_progress(ctx_);
    size_t keep = 0;
    for (size_t i = 0; i < inflight_.size(); ++i) {
        InFlight f = inflight_[i];
        gdx_status_t st = gdx_request_test(f.req);
        if (st == GDX_INPROGRESS) {
            inflight_[keep++] = f;
            continue;
        }
        if (f.pending == nullptr) { // its phase is over (failed): nothing counts it
            gdx_request_free(f.req);
            continue;
        }
        if (st != GDX_OK && f.pending->first_error == GDX_OK) {
            f.pending->first_error = st;
            f.pending->first_why = gdx_request_error(f.req);
        }
        gdx_path_info_t info;
        if (st == GDX_OK && gdx_request_path(f.req, &info) == GDX_OK) tally(info);
        gdx_request_free(f.req);
        --f.pending->outstanding;
        ++n;
    }
    inflight_.resize(keep);
    return n;
}

void DataPath::tally(const gdx_path_info_t &info) {
    bytes_direct_ += info.bytes_direct;
    bytes_staged_ += info.bytes_staged;
    frag_size_ = std::max(frag_size_, info.frag_size);
    depth_ = std::max(depth_, info.depth);
    // The text without its "transport: " prefix: the transport goes in its own column.
    std::string text = info.text;
    const std::string prefix = std::string(info.transport) + ": ";
    if (text.rfind(prefix, 0) == 0) text.erase(0, prefix.size());
    auto it = std::find_if(texts_.begin(), texts_.end(), [&](const auto &t) { return t.first == text; });
    if (it == texts_.end()) texts_.emplace_back(text, 1);
    else ++it->second;
    if (std::find(transports_.begin(), transports_.end(), info.transport) == transports_.end())
        transports_.emplace_back(info.transport);
}

PathUsed DataPath::take_path_report() {
    PathUsed u;
    const uint64_t total = bytes_direct_ + bytes_staged_;
    if (total > 0) {
        u.kind = bytes_staged_ == 0 ? "direct" : bytes_direct_ == 0 ? "staged" : "mixed";
        u.staged_share = static_cast<double>(bytes_staged_) / static_cast<double>(total);
        u.frag_size = frag_size_;
        u.depth = depth_;
        // One text when every request took the same path (the usual case); otherwise each distinct one with how
        // many requests took it (e.g. GDX_FAULT_P2P_EVERY=2 on one-fragment messages: half direct, half staged).
        for (size_t i = 0; i < texts_.size() && i < 3; ++i) {
            if (!u.detail.empty()) u.detail += " | ";
            u.detail += texts_[i].first;
            if (texts_.size() > 1) u.detail += " (x" + std::to_string(texts_[i].second) + ")";
        }
        if (texts_.size() > 3) u.detail += " | +" + std::to_string(texts_.size() - 3) + " more";
        for (const auto &t : texts_)
            if (u.via.empty()) u.via = via_of(t.first);
        for (const std::string &t : transports_) u.transport += (u.transport.empty() ? "" : "+") + t;
    }
    bytes_direct_ = bytes_staged_ = 0;
    frag_size_ = depth_ = 0;
    texts_.clear();
    transports_.clear();
    return u;
}

gdx_status_t wait_pending(DataPath &dp, Pending *p, double timeout_s, const char *what, std::string *why) {
    auto last = std::chrono::steady_clock::now();
    while (p->outstanding > 0) {
        if (dp.progress() != 0) last = std::chrono::steady_clock::now();
        else if (std::chrono::steady_clock::now() - last > std::chrono::duration<double>(timeout_s)) {
            *why = std::string("timed out after ") + std::to_string(static_cast<int>(timeout_s)) + " s waiting for " +
                   what + " (" + std::to_string(p->outstanding) + " outstanding; no progress)";
            return GDX_ERR_TIMEOUT;
        }
    }
    if (p->first_error != GDX_OK) {
        *why = std::string(what) + ": a request failed: " + p->first_why;
        return p->first_error;
    }
    return GDX_OK;
}

} // namespace gdx::perf
