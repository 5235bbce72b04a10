// DataPath on gdx: one transport interface and endpoint, with the staging engine (fallback/engine.h) moving
// every put and get. The engine decides, per fragment, direct or staged, and reports it per request
// (fb::PathReport); this file only sums those reports per row. Active messages go through the transport
// itself (the engine stages puts and gets only): from host memory, or from memory the transport reaches.
#include "datapath.h"

#include "fallback/engine.h"
#include "transport/transport.h"

#include <algorithm>
#include <cstring>

namespace gdx::perf {

namespace {

class EngineDataPath;

struct Req : fb::Request {
    EngineDataPath *self = nullptr;
    Pending *pending = nullptr;
    Req *next_free = nullptr;
};

struct AmTrampoline {
    EngineDataPath *self = nullptr;
    uint8_t id = 0;
};

std::string to_bytes(const std::vector<uint8_t> &v) { return std::string(v.begin(), v.end()); }
std::span<const uint8_t> as_span(const std::string &s) {
    return {reinterpret_cast<const uint8_t *>(s.data()), s.size()};
}

// "host", "dma-buf+host": the reaches in a fb::reach_bit() mask.
std::string reach_text(uint8_t mask) {
    std::string s;
    for (unsigned r = 0; r <= static_cast<unsigned>(tp::Reach::Ipc); ++r)
        if (mask & (1u << r)) s += (s.empty() ? "" : "+") + std::string(tp::reach_name(static_cast<tp::Reach>(r)));
    return s.empty() ? "?" : s;
}

class EngineDataPath final : public DataPath {
  public:
    explicit EngineDataPath(std::unique_ptr<tp::Interface> iface) : iface_(std::move(iface)) {}
    ~EngineDataPath() override {
        // Requests in flight complete (canceled) inside the engine's destructor; their Req objects outlive it,
        // but the Pending counters they name may not: from here completions touch nothing of the caller's.
        closing_ = true;
        if (engine_ && region_) engine_->mem_dereg(region_);
        if (engine_ && ep_) engine_->ep_close(*ep_);
        engine_.reset();
        ep_.reset();
        iface_.reset();
        for (Req *r : all_reqs_) delete r;
    }

    gdx_status_t init(const Config &cfg, std::string *why) {
        gdx_status_t st = fb::Engine::create(*iface_, cfg, &engine_);
        if (st != GDX_OK) {
            *why = "cannot start gdx's staging engine on " + transport() + ": " + gdx::last_error();
            return st;
        }
        st = iface_->ep_create(&ep_);
        if (st != GDX_OK) {
            *why = transport() + ": cannot create an endpoint: " + gdx::last_error();
            return st;
        }
        static const uint8_t ids[] = {kAmData, kAmAck, kAmPing, kAmPong};
        for (size_t i = 0; i < std::size(ids); ++i) {
            tramp_[i] = {this, ids[i]};
            st = iface_->set_am_handler(ids[i], &EngineDataPath::on_am, &tramp_[i]);
            if (st != GDX_OK) {
                *why = transport() + ": cannot set an active-message handler: " + gdx::last_error();
                return st;
            }
        }
        return GDX_OK;
    }

    std::string transport() const override { return std::string(iface_->transport_name()); }
    std::string device() const override { return std::string(iface_->device_name()); }
    size_t max_am() const override {
        const auto &c = iface_->caps();
        size_t zc = (c.flags & tp::kCapAmZcopy) ? c.max_am_zcopy : 0;
        size_t bc = (c.flags & tp::kCapAmBcopy) ? c.max_am_bcopy : 0;
        return std::max(zc, bc);
    }
    std::string am_unreachable(size_t len) const override {
        if (buf_->host_accessible() && len <= bcopy_limit()) return "";
        if (region_->memh().direct(0, len) && (iface_->caps().flags & tp::kCapAmZcopy)) return "";
        return transport() + " does not reach " + buf_->spec().text() +
               " memory directly, and gdx stages puts and gets, not active messages";
    }

    gdx_status_t register_buffer(Buffer &buf, std::string *packed_key, std::string *reach, std::string *why) override {
        buf_ = &buf;
        gdx_status_t st = engine_->mem_reg(buf.data(), buf.size(), tp::kAccessAll, &region_);
        if (st != GDX_OK) {
            *why = "gdx cannot register " + buf.spec().text() + " memory for " + transport() + ": " + gdx::last_error();
            return st;
        }
        // How the transport reaches it, chunk by chunk, with the transport's reasons.
        reach->clear();
        for (const tp::ChunkReg &c : region_->memh().chunks()) {
            std::string line = tp::reach_name(c.reach);
            if (c.reach == tp::Reach::None) line = "staged";
            if (!c.reason.empty()) line += " (" + c.reason + ")";
            if (reach->find(line) == std::string::npos) *reach += (reach->empty() ? "" : "; ") + line;
        }
        if (reach->empty()) *reach = "host";
        std::vector<uint8_t> key;
        st = engine_->pack_key(*region_, &key);
        if (st != GDX_OK) {
            *why = "cannot pack the key of the " + buf.spec().text() + " buffer: " + gdx::last_error();
            return st;
        }
        *packed_key = to_bytes(key);
        return GDX_OK;
    }

    std::string address() const override { return to_bytes(ep_->address()); }

    gdx_status_t connect(const std::string &peer_address, const std::string &peer_key, std::string *why) override {
        gdx_status_t st = engine_->unpack_key(as_span(peer_key), &remote_);
        if (st != GDX_OK) {
            *why = "the peer's key is not valid: " + gdx::last_error();
            return st;
        }
        st = ep_->connect(as_span(peer_address));
        if (st != GDX_OK && st != GDX_INPROGRESS) {
            *why = transport() + ": cannot connect to the peer's endpoint: " + gdx::last_error();
            return st;
        }
        return GDX_OK;
    }

    gdx_status_t connected(std::string *why) override {
        engine_->progress();
        gdx_status_t st = ep_->state();
        if (st != GDX_OK && st != GDX_INPROGRESS)
            *why = transport() + ": the endpoint connection failed: " + gdx_status_string(st) + " (" +
                   gdx::last_error() + ")";
        return st;
    }

    void set_am_callback(AmCallback cb, void *arg) override {
        cb_ = cb;
        cb_arg_ = arg;
    }

    gdx_status_t put(size_t local_off, size_t len, size_t remote_off, Pending *p) override {
        Req *r = take(p);
        return submit(r, engine_->put(*ep_, *region_, local_off, *remote_, remote_off, len, r));
    }
    gdx_status_t get(size_t local_off, size_t len, size_t remote_off, Pending *p) override {
        Req *r = take(p);
        return submit(r, engine_->get(*ep_, *region_, local_off, *remote_, remote_off, len, r));
    }
    gdx_status_t am(uint8_t id, size_t local_off, size_t len, Pending *p) override {
        const auto &c = iface_->caps();
        void *src = static_cast<uint8_t *>(buf_->data()) + local_off;
        gdx_status_t st;
        const char *how;
        if (buf_->host_accessible() && (c.flags & tp::kCapAmShort) && len <= c.max_am_short) {
            st = ep_->am_short(id, src, len);
            how = "am-short";
        } else if (buf_->host_accessible() && len <= bcopy_limit()) {
            st = ep_->am_bcopy(id, src, len);
            how = "am-bcopy";
        } else {
            Op *op = take_op(p);
            st = ep_->am_zcopy(id, nullptr, 0, src, len, &region_->memh(), op);
            if (st == GDX_INPROGRESS) ++p->outstanding;
            else give_op(op);
            how = "am-zcopy";
        }
        if (st == GDX_OK || st == GDX_INPROGRESS) {
            am_bytes_ += len;
            am_how_ = how;
            return GDX_OK;
        }
        return st;
    }
    gdx_status_t am_signal(uint8_t id, uint64_t value) override { return ep_->am_short(id, &value, sizeof(value)); }
    gdx_status_t flush(Pending *p) override {
        Op *op = take_op(p);
        gdx_status_t st = ep_->flush(op);
        if (st == GDX_INPROGRESS) {
            ++p->outstanding;
            return GDX_OK;
        }
        give_op(op);
        return st;
    }
    unsigned progress() override { return engine_->progress(); }

    PathUsed take_path_report() override {
        PathUsed u;
        const fb::PathReport &a = agg_;
        if (a.bytes_direct + a.bytes_staged > 0) {
            double share = a.staged_share();
            u.kind = a.bytes_staged == 0 ? "direct" : a.bytes_direct == 0 ? "staged" : "mixed";
            u.via = a.bytes_direct > 0 ? reach_text(a.local_reach) + "->" + reach_text(a.remote_reach) : "";
            u.frag_size = a.frag_size;
            u.depth = a.depth;
            u.staged_share = share;
            u.detail = a.describe();
        } else if (am_bytes_ > 0) {
            u.kind = "direct";
            u.via = am_how_;
            u.detail = std::string("direct[") + am_how_ + "] 100.0%";
        }
        agg_ = fb::PathReport{};
        am_bytes_ = 0;
        return u;
    }

  private:
    struct Op : tp::Completion {
        Pending *pending = nullptr;
        EngineDataPath *self = nullptr;
        Op *next_free = nullptr;
    };

    size_t bcopy_limit() const {
        const auto &c = iface_->caps();
        return (c.flags & tp::kCapAmBcopy) ? c.max_am_bcopy : 0;
    }

    Req *take(Pending *p) {
        Req *r = free_reqs_;
        if (r != nullptr) free_reqs_ = r->next_free;
        else all_reqs_.push_back(r = new Req);
        r->self = this;
        r->pending = p;
        r->cb = &EngineDataPath::on_request_done;
        r->status = GDX_OK;
        r->path = fb::PathReport{};
        return r;
    }
    void give(Req *r) {
        r->next_free = free_reqs_;
        free_reqs_ = r;
    }
    gdx_status_t submit(Req *r, gdx_status_t st) {
        if (st == GDX_INPROGRESS) {
            ++r->pending->outstanding;
            return GDX_OK;
        }
        if (st == GDX_OK) add_report(r->path);
        give(r);
        return st;
    }
    void add_report(const fb::PathReport &p) { agg_.merge(p); }
    static void on_request_done(fb::Request *base) {
        Req *r = static_cast<Req *>(base);
        if (r->self->closing_) return;
        if (r->status != GDX_OK && r->pending->first_error == GDX_OK) r->pending->first_error = r->status;
        if (r->status == GDX_OK) r->self->add_report(r->path);
        --r->pending->outstanding;
        r->self->give(r);
    }

    Op *take_op(Pending *p) {
        Op *op = free_ops_;
        if (op != nullptr) free_ops_ = op->next_free;
        else all_ops_.emplace_back(op = new Op);
        op->pending = p;
        op->self = this;
        op->cb = &EngineDataPath::on_op_done;
        op->count = 1;
        op->status = GDX_OK;
        return op;
    }
    void give_op(Op *op) {
        op->next_free = free_ops_;
        free_ops_ = op;
    }
    static void on_op_done(tp::Completion *c) {
        Op *op = static_cast<Op *>(c);
        if (op->self->closing_) return;
        if (op->status != GDX_OK && op->pending->first_error == GDX_OK) op->pending->first_error = op->status;
        --op->pending->outstanding;
        op->self->give_op(op);
    }
    static void on_am(void *arg, tp::Endpoint *, const void *data, size_t length) {
        auto *t = static_cast<AmTrampoline *>(arg);
        if (t->self->cb_ != nullptr) t->self->cb_(t->self->cb_arg_, t->id, data, length);
    }

    bool closing_ = false;
    std::unique_ptr<tp::Interface> iface_;
    std::unique_ptr<fb::Engine> engine_;
    std::unique_ptr<tp::Endpoint> ep_;
    fb::Region *region_ = nullptr;
    std::unique_ptr<fb::RemoteRegion> remote_;
    Buffer *buf_ = nullptr;
    fb::PathReport agg_;
    uint64_t am_bytes_ = 0;
    const char *am_how_ = "";
    AmCallback cb_ = nullptr;
    void *cb_arg_ = nullptr;
    AmTrampoline tramp_[4];
    Req *free_reqs_ = nullptr;
    std::vector<Req *> all_reqs_;
    Op *free_ops_ = nullptr;
    std::vector<std::unique_ptr<Op>> all_ops_;
};

bool is_gpu(const MemSpec &m) { return m.kind != MemKindOpt::Host && m.kind != MemKindOpt::HostPinned; }

} // namespace

std::vector<std::string> available_transports() {
    std::vector<std::string> v;
    for (tp::Component *c : tp::components()) v.emplace_back(c->name());
    return v;
}

gdx_status_t open_datapath(const Config &cfg, const std::string &transport, const MemSpec &local,
                           const MemSpec &remote, bool peer_same_host, PathMode path,
                           std::unique_ptr<DataPath> *out, std::string *why) {
    (void)path; // the configuration carries it (session.cpp: config_for)
    std::string names;
    for (const std::string &n : available_transports()) names += (names.empty() ? "" : ", ") + n;
    if (names.empty()) names = "none";
    std::string skipped;
    for (tp::Component *comp : tp::components()) {
        const std::string name(comp->name());
        if (transport != "auto" && transport != name) continue;
        if (transport == "auto") {
            // auto: the first transport in gdx's preference order that can serve this pair; CUDA IPC only
            // between GPU buffers (it moves GPU memory), and GDX_TLS is respected.
            if (!cfg.list_allows(ConfigId::TLS, name)) continue;
            if (name == "cuda_ipc" && !(is_gpu(local) && is_gpu(remote))) continue;
        }
        std::vector<tp::DeviceDesc> devs;
        gdx_status_t st = comp->query_devices(&devs);
        if (st != GDX_OK || devs.empty()) {
            std::string reason = st != GDX_OK ? gdx::last_error() : "no device";
            if (transport == name) {
                *why = "transport '" + name + "' has no usable device here: " + reason;
                return GDX_ERR_NO_DEVICE;
            }
            skipped += "; " + name + ": " + reason;
            continue;
        }
        const tp::DeviceDesc *dev = nullptr;
        for (const auto &d : devs)
            if (peer_same_host || !d.intra_node) {
                dev = &d;
                break;
            }
        if (dev == nullptr) {
            if (transport == name) {
                *why = "transport '" + name + "' reaches only peers on this host, and the server is on another";
                return GDX_ERR_UNREACHABLE;
            }
            continue;
        }
        std::unique_ptr<tp::Interface> iface;
        st = comp->open(*dev, cfg, &iface);
        if (st != GDX_OK) {
            if (transport == name) {
                *why = "cannot open transport '" + name + "' on " + dev->name + ": " + gdx::last_error();
                return st;
            }
            skipped += "; " + name + ": " + gdx::last_error();
            continue;
        }
        auto dp = std::make_unique<EngineDataPath>(std::move(iface));
        st = dp->init(cfg, why);
        if (st != GDX_OK) return st;
        *out = std::move(dp);
        return GDX_OK;
    }
    if (transport == "auto") *why = "no transport can carry this run (transports in this build: " + names + skipped + ")";
    else *why = "transport '" + transport + "' is not in this build (available: " + names + ")";
    return GDX_ERR_UNREACHABLE;
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
    return GDX_OK;
}

} // namespace gdx::perf
