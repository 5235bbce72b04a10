// DataPath on one gdx transport (transport/transport.h) for builds without the staging engine (src/fallback/
// engine.h; perftest/CMakeLists.txt picks datapath.cpp when it exists): every byte goes direct, so the path
// report is the registrations' reach on both sides. Memory the transport cannot reach is refused at
// registration with the transport's reason.
#include "datapath.h"

#include "transport/transport.h"

#include <algorithm>
#include <cstring>

namespace gdx::perf {

namespace {

mem::MemInfo info_for(const Buffer &b) {
    mem::MemInfo i;
    const MemSpec &s = b.spec();
    i.base = reinterpret_cast<uintptr_t>(b.data());
    i.size = b.size();
    switch (s.kind) {
    case MemKindOpt::Host: i.type = mem::MemType::HostPageable; break;
    case MemKindOpt::HostPinned: i.type = mem::MemType::HostPinned; i.device = s.gpu; break;
    case MemKindOpt::Cuda: i.type = mem::MemType::CudaDevice; break;
    case MemKindOpt::CudaManaged: i.type = mem::MemType::CudaManaged; break;
    case MemKindOpt::CudaVmm: i.type = mem::MemType::CudaVmm; break;
    }
    if (!mem::is_host_type(i.type)) {
        i.kind = mem::MemKind::Cuda;
        i.device = s.gpu;
        i.host_accessible = i.type == mem::MemType::CudaManaged;
        i.dmabuf_allowed = i.type == mem::MemType::CudaDevice || i.type == mem::MemType::CudaVmm;
    }
    return i;
}

void put_u64(std::string *s, uint64_t v) {
    for (int i = 0; i < 8; ++i) s->push_back(static_cast<char>(v >> (8 * i)));
}
uint64_t get_u64(const std::string &s, size_t off) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(s[off + i]);
    return v;
}

class TpDataPath;

struct Op : tp::Completion {
    TpDataPath *self = nullptr;
    Pending *pending = nullptr;
    Op *next_free = nullptr;
};

struct AmTrampoline {
    TpDataPath *self = nullptr;
    uint8_t id = 0;
};

class TpDataPath final : public DataPath {
  public:
    TpDataPath(tp::Component *comp, std::unique_ptr<tp::Interface> iface) : comp_(comp), iface_(std::move(iface)) {}
    ~TpDataPath() override {
        ep_.reset();
        memh_.reset();
        iface_.reset();
        for (Op *o : all_ops_) delete o;
    }

    gdx_status_t init(std::string *why) {
        gdx_status_t st = iface_->ep_create(&ep_);
        if (st != GDX_OK) {
            *why = std::string(iface_->transport_name()) + ": cannot create an endpoint: " + gdx::last_error();
            return st;
        }
        static const uint8_t ids[] = {kAmData, kAmAck, kAmPing, kAmPong};
        for (size_t i = 0; i < std::size(ids); ++i) {
            tramp_[i] = {this, ids[i]};
            st = iface_->set_am_handler(ids[i], &TpDataPath::on_am, &tramp_[i]);
            if (st != GDX_OK) {
                *why = std::string(iface_->transport_name()) + ": cannot set an active-message handler: " +
                       gdx::last_error();
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
        const auto &c = iface_->caps();
        if (buf_->host_accessible() && (c.flags & tp::kCapAmBcopy) && len <= c.max_am_bcopy) return "";
        if (memh_->direct(0, len) && (c.flags & tp::kCapAmZcopy)) return "";
        return transport() + " does not reach " + buf_->spec().text() + " memory directly";
    }

    gdx_status_t register_buffer(Buffer &buf, std::string *packed_key, std::string *reach, std::string *why) override {
        buf_ = &buf;
        gdx_status_t st = iface_->md().mem_reg(buf.data(), buf.size(), info_for(buf), tp::kAccessAll, &memh_);
        if (st != GDX_OK) {
            *why = transport() + ": cannot register " + buf.spec().text() + " memory: " + gdx::last_error();
            return st;
        }
        for (const tp::ChunkReg &c : memh_->chunks()) {
            if (c.reach == tp::Reach::None) {
                *why = transport() + " cannot reach " + buf.spec().text() + " memory directly (" + c.reason +
                       "), and this build's gdx_perftest has no staging engine to carry it";
                return GDX_ERR_UNSUPPORTED;
            }
        }
        local_via_ = memh_->chunks().empty() ? "host" : tp::reach_name(memh_->chunks().front().reach);
        *reach = local_via_;
        std::vector<uint8_t> rk(iface_->md().rkey_packed_size());
        st = memh_->pack_rkey(rk);
        if (st != GDX_OK) {
            *why = transport() + ": cannot pack the remote key: " + gdx::last_error();
            return st;
        }
        packed_key->clear();
        put_u64(packed_key, reinterpret_cast<uint64_t>(buf.data()));
        put_u64(packed_key, local_via_.size());
        *packed_key += local_via_;
        packed_key->append(rk.begin(), rk.end());
        return GDX_OK;
    }

    std::string address() const override {
        auto a = ep_->address();
        return std::string(a.begin(), a.end());
    }

    gdx_status_t connect(const std::string &peer_address, const std::string &peer_key, std::string *why) override {
        if (peer_key.size() < 16 || get_u64(peer_key, 8) > 64 || peer_key.size() < 16 + get_u64(peer_key, 8)) {
            *why = "malformed key from the peer";
            return GDX_ERR_PROTOCOL;
        }
        remote_base_ = get_u64(peer_key, 0);
        size_t vl = get_u64(peer_key, 8);
        remote_via_ = peer_key.substr(16, vl);
        std::string rk = peer_key.substr(16 + vl);
        gdx_status_t st = iface_->md().rkey_unpack(
            std::span<const uint8_t>(reinterpret_cast<const uint8_t *>(rk.data()), rk.size()), &rkey_);
        if (st != GDX_OK) {
            *why = transport() + ": the peer's remote key is not valid: " + gdx::last_error();
            return st;
        }
        st = ep_->connect(std::span<const uint8_t>(reinterpret_cast<const uint8_t *>(peer_address.data()),
                                                   peer_address.size()));
        if (st != GDX_OK && st != GDX_INPROGRESS) {
            *why = transport() + ": cannot connect to the peer's endpoint: " + gdx::last_error();
            return st;
        }
        return GDX_OK;
    }

    gdx_status_t connected(std::string *why) override {
        iface_->progress();
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
        Op *op = take(p);
        gdx_status_t st = ep_->put(ptr(local_off), len, memh_.get(), remote_base_ + remote_off, *rkey_, op);
        return finish(op, st, len);
    }
    gdx_status_t get(size_t local_off, size_t len, size_t remote_off, Pending *p) override {
        Op *op = take(p);
        gdx_status_t st = ep_->get(ptr(local_off), len, memh_.get(), remote_base_ + remote_off, *rkey_, op);
        return finish(op, st, len);
    }
    gdx_status_t am(uint8_t id, size_t local_off, size_t len, Pending *p) override {
        const auto &c = iface_->caps();
        if (buf_->host_accessible() && (c.flags & tp::kCapAmShort) && len <= c.max_am_short)
            return count(ep_->am_short(id, ptr(local_off), len), len);
        if (buf_->host_accessible() && (c.flags & tp::kCapAmBcopy) && len <= c.max_am_bcopy)
            return count(ep_->am_bcopy(id, ptr(local_off), len), len);
        Op *op = take(p);
        gdx_status_t st = ep_->am_zcopy(id, nullptr, 0, ptr(local_off), len, memh_.get(), op);
        return finish(op, st, len);
    }
    gdx_status_t am_signal(uint8_t id, uint64_t value) override { return ep_->am_short(id, &value, sizeof(value)); }
    gdx_status_t flush(Pending *p) override {
        Op *op = take(p);
        return finish(op, ep_->flush(op), 0);
    }
    unsigned progress() override { return iface_->progress(); }

    PathUsed take_path_report() override {
        PathUsed u;
        if (bytes_ == 0) return u;
        u.kind = "direct";
        u.via = local_via_ == remote_via_ ? local_via_ : local_via_ + "->" + remote_via_;
        u.detail = "direct[" + local_via_ + "->" + remote_via_ + "] 100.0% (no staging engine in this build)";
        bytes_ = 0;
        return u;
    }

  private:
    void *ptr(size_t off) const { return static_cast<uint8_t *>(buf_->data()) + off; }

    Op *take(Pending *p) {
        Op *op = free_;
        if (op != nullptr) {
            free_ = op->next_free;
        } else {
            op = new Op;
            all_ops_.push_back(op);
        }
        op->self = this;
        op->pending = p;
        op->cb = &TpDataPath::on_done;
        op->count = 1;
        op->status = GDX_OK;
        return op;
    }
    void give(Op *op) {
        op->next_free = free_;
        free_ = op;
    }
    gdx_status_t count(gdx_status_t st, size_t len) {
        if (st == GDX_OK) bytes_ += len;
        return st;
    }
    gdx_status_t finish(Op *op, gdx_status_t st, size_t len) {
        if (st == GDX_INPROGRESS) {
            ++op->pending->outstanding;
            bytes_ += len;
            return GDX_OK;
        }
        give(op);
        return count(st, len);
    }
    static void on_done(tp::Completion *c) {
        Op *op = static_cast<Op *>(c);
        if (op->status != GDX_OK && op->pending->first_error == GDX_OK) op->pending->first_error = op->status;
        --op->pending->outstanding;
        op->self->give(op);
    }
    static void on_am(void *arg, tp::Endpoint *, const void *data, size_t length) {
        auto *t = static_cast<AmTrampoline *>(arg);
        if (t->self->cb_ != nullptr) t->self->cb_(t->self->cb_arg_, t->id, data, length);
    }

    tp::Component *comp_;
    std::unique_ptr<tp::Interface> iface_;
    std::unique_ptr<tp::Endpoint> ep_;
    std::unique_ptr<tp::MemHandle> memh_;
    std::unique_ptr<tp::RemoteKey> rkey_;
    Buffer *buf_ = nullptr;
    uint64_t remote_base_ = 0;
    std::string local_via_, remote_via_;
    uint64_t bytes_ = 0;
    AmCallback cb_ = nullptr;
    void *cb_arg_ = nullptr;
    AmTrampoline tramp_[4];
    Op *free_ = nullptr;
    std::vector<Op *> all_ops_;
};

} // namespace

std::vector<std::string> available_transports() {
    std::vector<std::string> v;
    for (tp::Component *c : tp::components()) v.emplace_back(c->name());
    return v;
}

gdx_status_t open_datapath(const Config &cfg, const std::string &transport, const MemSpec &local,
                           const MemSpec &remote, bool peer_same_host, PathMode path,
                           std::unique_ptr<DataPath> *out, std::string *why) {
    (void)local;
    (void)remote;
    std::string names;
    for (const std::string &n : available_transports()) names += (names.empty() ? "" : ", ") + n;
    if (names.empty()) names = "none";
    if (path == PathMode::Staged) {
        *why = "--path staged needs gdx's staging engine, which this build of gdx_perftest does not use yet";
        return GDX_ERR_UNSUPPORTED;
    }
    for (tp::Component *comp : tp::components()) {
        std::string name(comp->name());
        if (transport != "auto" && transport != name) continue;
        if (transport == "auto" && !cfg.list_allows(ConfigId::TLS, name)) continue;
        std::vector<tp::DeviceDesc> devs;
        if (comp->query_devices(&devs) != GDX_OK || devs.empty()) {
            if (transport == name) {
                *why = "transport '" + name + "' has no usable device here: " + gdx::last_error();
                return GDX_ERR_NO_DEVICE;
            }
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
        gdx_status_t st = comp->open(*dev, cfg, &iface);
        if (st != GDX_OK) {
            *why = "cannot open transport '" + name + "' on " + dev->name + ": " + gdx::last_error();
            return st;
        }
        auto dp = std::make_unique<TpDataPath>(comp, std::move(iface));
        st = dp->init(why);
        if (st != GDX_OK) return st;
        *out = std::move(dp);
        return GDX_OK;
    }
    if (transport == "auto") *why = "no transport can carry this run (transports in this build: " + names + ")";
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
