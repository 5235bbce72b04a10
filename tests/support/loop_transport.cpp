#include "support/loop_transport.h"

#include "core/error.h"
#include "transport/wire.h"

#include <array>
#include <cstring>
#include <deque>
#include <map>
#include <vector>

namespace gdx::test {

namespace {
constexpr const char *kComp = "loop";
constexpr size_t kRkeySize = 8;

class LoopEp;
class LoopIface;

struct RegRecord {
    uintptr_t base = 0;
    size_t len = 0;
    unsigned access = 0;
    mem::MemInfo info;
    std::vector<tp::ChunkReg> chunks;
    bool direct(uintptr_t addr, size_t n) const {
        if (addr < base || addr - base > len || n > len - (addr - base)) return false;
        for (const tp::ChunkReg &c : chunks) {
            uintptr_t cs = base + c.offset, ce = cs + c.length;
            if (ce <= addr || cs >= addr + n) continue;
            if (c.reach == tp::Reach::None) return false;
        }
        return true;
    }
};

struct Item {
    enum Kind { Am, Put, Get, Flush } kind = Am;
    LoopEp *from = nullptr;
    uint8_t am_id = 0;
    std::vector<uint8_t> data;
    const void *src = nullptr; // put: initiator's source
    void *dst = nullptr;       // get: initiator's destination
    size_t len = 0;
    uint64_t raddr = 0, reg = 0;
    const RegRecord *local = nullptr; // initiator's registration (for the copy row)
    tp::Completion *comp = nullptr;
};

} // namespace

class LoopFabric {
  public:
    std::map<uint64_t, RegRecord> regs;
    std::map<uint64_t, LoopEp *> eps;
    uint64_t next_id = 1;
    uint64_t violations = 0;
    gdx_status_t violation(gdx_status_t st, const char *what) {
        ++violations;
        return GDX_FAIL(st, kComp, "%s", what);
    }
};

namespace {

class LoopMemHandle final : public tp::MemHandle {
  public:
    LoopMemHandle(LoopFabric &f, void *addr, size_t len, const mem::MemInfo &info, unsigned access,
                  const LoopOptions &opt)
        : MemHandle(addr, len, info, access), fabric_(f), id_(f.next_id++) {
        size_t step = opt.chunk == 0 ? len : opt.chunk;
        bool reachable = (opt.direct_types & tp::type_bit(info.type)) != 0;
        for (size_t off = 0; off < len; off += step) {
            tp::ChunkReg c;
            c.offset = off;
            c.length = std::min(step, len - off);
            bool refused = opt.refuse && opt.refuse(reinterpret_cast<uintptr_t>(addr) + off, c.length);
            c.reach = reachable && !refused ? tp::Reach::Host : tp::Reach::None;
            c.reason = !reachable ? "loop: memory type not reachable" : refused ? "loop: refused by the test" : "";
            chunks_.push_back(c);
        }
        RegRecord &r = fabric_.regs[id_];
        r.base = reinterpret_cast<uintptr_t>(addr);
        r.len = len;
        r.access = access;
        r.info = info;
        r.chunks = chunks_;
    }
    ~LoopMemHandle() override { fabric_.regs.erase(id_); }
    gdx_status_t pack_rkey(std::span<uint8_t> out) const override {
        if (out.size() != kRkeySize) return GDX_ERR_INVALID_PARAM;
        tp::wire::store_le64(out.data(), id_);
        return GDX_OK;
    }

  private:
    LoopFabric &fabric_;
    uint64_t id_;
};

class LoopRemoteKey final : public tp::RemoteKey {
  public:
    explicit LoopRemoteKey(uint64_t id) : id(id) {}
    uint64_t id;
};

class LoopMd final : public tp::MemoryDomain {
  public:
    LoopMd(LoopFabric &f, const LoopOptions &o) : fabric_(f), opt_(o) {}
    std::string_view name() const override { return "loop"; }
    gdx_status_t mem_reg(void *addr, size_t len, const mem::MemInfo &info, unsigned access,
                         std::unique_ptr<tp::MemHandle> *out) override {
        if (addr == nullptr || len == 0) return GDX_ERR_INVALID_PARAM;
        *out = std::make_unique<LoopMemHandle>(fabric_, addr, len, info, access, opt_);
        return GDX_OK;
    }
    size_t rkey_packed_size() const override { return kRkeySize; }
    gdx_status_t rkey_unpack(std::span<const uint8_t> packed, std::unique_ptr<tp::RemoteKey> *out) override {
        if (packed.size() != kRkeySize) return GDX_ERR_PROTOCOL;
        *out = std::make_unique<LoopRemoteKey>(tp::wire::load_le64(packed.data()));
        return GDX_OK;
    }

  private:
    LoopFabric &fabric_;
    const LoopOptions &opt_;
};

class LoopIface final : public tp::Interface {
  public:
    LoopIface(std::shared_ptr<LoopFabric> f, const LoopOptions &o) : fabric_(std::move(f)), opt_(o), md_(*fabric_, opt_) {
        caps_.flags = tp::kCapPut | tp::kCapAmShort | tp::kCapAmBcopy | tp::kCapFlush | tp::kCapFence |
                      tp::kCapErrHandling | (o.no_get ? uint64_t(0) : uint64_t(tp::kCapGet)) |
                      (o.advertise_peer_map ? uint64_t(tp::kCapPeerMap) : uint64_t(0));
        caps_.direct_types = o.direct_types;
        caps_.max_am_short = 64;
        caps_.max_am_bcopy = o.max_am_bcopy;
    }
    std::string_view transport_name() const override { return "loop"; }
    std::string_view device_name() const override { return "loop0"; }
    const tp::Capabilities &caps() const override { return caps_; }
    tp::MemoryDomain &md() override { return md_; }
    gdx_status_t ep_create(std::unique_ptr<tp::Endpoint> *out) override;
    gdx_status_t set_am_handler(uint8_t id, tp::AmHandler fn, void *arg) override {
        if (id >= tp::kMaxAmId) return GDX_ERR_INVALID_PARAM;
        handlers_[id] = {fn, arg};
        return GDX_OK;
    }
    unsigned progress() override;
    bool quiet() override { return inbox.empty() && completed.empty(); } // progress() would do nothing

    LoopFabric &fabric() { return *fabric_; }
    const LoopOptions &opt() const { return opt_; }
    std::deque<Item> inbox;                                          // performed here, in order
    std::deque<std::pair<tp::Completion *, gdx_status_t>> completed; // reported to our initiators

  private:
    void perform(Item &it);
    std::shared_ptr<LoopFabric> fabric_;
    LoopOptions opt_;
    LoopMd md_;
    tp::Capabilities caps_;
    std::array<std::pair<tp::AmHandler, void *>, tp::kMaxAmId> handlers_{};
};

class LoopEp final : public tp::Endpoint {
  public:
    LoopEp(LoopIface &i) : iface_(i), id_(i.fabric().next_id++) { iface_.fabric().eps[id_] = this; }
    ~LoopEp() override {
        iface_.fabric().eps.erase(id_);
        if (peer_ != nullptr) peer_->peer_ = nullptr;
    }
    std::vector<uint8_t> address() const override {
        std::vector<uint8_t> a(8);
        tp::wire::store_le64(a.data(), id_);
        return a;
    }
    gdx_status_t connect(std::span<const uint8_t> remote) override {
        if (remote.size() != 8) return GDX_ERR_INVALID_PARAM;
        auto it = iface_.fabric().eps.find(tp::wire::load_le64(remote.data()));
        if (it == iface_.fabric().eps.end()) return GDX_ERR_UNREACHABLE;
        peer_ = it->second;
        return GDX_OK;
    }
    gdx_status_t state() const override {
        if (broken_) return GDX_ERR_CONNECTION_RESET;
        return peer_ != nullptr ? GDX_OK : GDX_INPROGRESS;
    }
    gdx_status_t put(const void *buf, size_t len, const tp::MemHandle *lmemh, uint64_t raddr, const tp::RemoteKey &rkey,
                     tp::Completion *comp) override {
        return post(Item::Put, buf, nullptr, len, lmemh, raddr, rkey, comp);
    }
    gdx_status_t get(void *buf, size_t len, const tp::MemHandle *lmemh, uint64_t raddr, const tp::RemoteKey &rkey,
                     tp::Completion *comp) override {
        if (iface_.opt().no_get) return iface_.fabric().violation(GDX_ERR_UNSUPPORTED, "get without kCapGet");
        return post(Item::Get, nullptr, buf, len, lmemh, raddr, rkey, comp);
    }
    gdx_status_t am_short(uint8_t id, const void *data, size_t len) override { return am_bcopy(id, data, len); }
    gdx_status_t am_bcopy(uint8_t id, const void *data, size_t len) override {
        if (gdx_status_t st = ready(); st != GDX_OK) return st;
        if (len > iface_.opt().max_am_bcopy) return iface_.fabric().violation(GDX_ERR_INVALID_PARAM, "am too long");
        Item it;
        it.kind = Item::Am;
        it.am_id = id;
        it.data.assign(static_cast<const uint8_t *>(data), static_cast<const uint8_t *>(data) + len);
        enqueue(std::move(it));
        return GDX_OK;
    }
    gdx_status_t am_zcopy(uint8_t, const void *, size_t, const void *, size_t, const tp::MemHandle *,
                          tp::Completion *) override {
        return GDX_ERR_UNSUPPORTED;
    }
    gdx_status_t flush(tp::Completion *comp) override {
        if (gdx_status_t st = ready(); st != GDX_OK) return st;
        Item it;
        it.kind = Item::Flush;
        it.comp = comp;
        enqueue(std::move(it));
        return GDX_INPROGRESS;
    }
    gdx_status_t fence() override { return state() == GDX_OK ? GDX_OK : state(); } // one FIFO: always ordered
    bool direct_possible() const override { return !iface_.opt().no_direct; }
    gdx_status_t pending_add(tp::PendingRequest *) override { return GDX_ERR_BUSY; }

    LoopIface &iface_;
    LoopEp *peer_ = nullptr;
    uint64_t id_;
    unsigned inflight = 0;
    bool broken_ = false;

  private:
    gdx_status_t ready() {
        if (gdx_status_t st = state(); st != GDX_OK) return st == GDX_INPROGRESS ? GDX_ERR_NO_RESOURCE : st;
        if (iface_.opt().max_inflight != 0 && inflight >= iface_.opt().max_inflight) return GDX_ERR_NO_RESOURCE;
        return GDX_OK;
    }
    void enqueue(Item it) {
        it.from = this;
        ++inflight;
        peer_->iface_.inbox.push_back(std::move(it));
    }
    gdx_status_t post(Item::Kind kind, const void *src, void *dst, size_t len, const tp::MemHandle *lmemh,
                      uint64_t raddr, const tp::RemoteKey &rkey, tp::Completion *comp) {
        if (gdx_status_t st = ready(); st != GDX_OK) return st;
        LoopFabric &f = iface_.fabric();
        const void *lbuf = kind == Item::Put ? src : dst;
        if (lmemh == nullptr || len == 0) return f.violation(GDX_ERR_INVALID_PARAM, "put/get without a local handle");
        auto lr = f.regs.end();
        for (auto it = f.regs.begin(); it != f.regs.end(); ++it)
            if (it->second.base == reinterpret_cast<uintptr_t>(lmemh->addr()) && it->second.len == lmemh->length())
                lr = it;
        if (lr == f.regs.end() || !lr->second.direct(reinterpret_cast<uintptr_t>(lbuf), len))
            return f.violation(GDX_ERR_INVALID_PARAM, "local buffer not directly reachable through its handle");
        Item it;
        it.kind = kind;
        it.src = src;
        it.dst = dst;
        it.len = len;
        it.raddr = raddr;
        it.reg = static_cast<const LoopRemoteKey &>(rkey).id;
        it.local = &lr->second;
        it.comp = comp;
        enqueue(std::move(it));
        return GDX_INPROGRESS;
    }
};

gdx_status_t LoopIface::ep_create(std::unique_ptr<tp::Endpoint> *out) {
    *out = std::make_unique<LoopEp>(*this);
    return GDX_OK;
}

void copy_bytes(void *dst, const RegRecord &d, const void *src, const RegRecord &s, size_t len) {
    const mem::MemInfo &gpu = d.info.kind == mem::MemKind::Cuda ? d.info : s.info;
    if (gpu.kind == mem::MemKind::Cuda)
        mem::ops(mem::MemKind::Cuda).copy(dst, src, len, gpu.device);
    else
        std::memcpy(dst, src, len);
}

void LoopIface::perform(Item &it) {
    LoopEp *from = it.from;
    gdx_status_t st = GDX_OK;
    if (it.kind == Item::Am) {
        auto [fn, arg] = handlers_[it.am_id];
        if (fn != nullptr && from->peer_ != nullptr) fn(arg, from->peer_, it.data.data(), it.data.size());
    } else if (it.kind == Item::Put || it.kind == Item::Get) {
        auto r = fabric_->regs.find(it.reg);
        unsigned need = it.kind == Item::Put ? tp::kAccessRemoteWrite : tp::kAccessRemoteRead;
        if (r == fabric_->regs.end() || (r->second.access & need) == 0 || !r->second.direct(it.raddr, it.len)) {
            st = fabric_->violation(GDX_ERR_ACCESS_DENIED, "remote range not directly reachable through its key");
        } else if (opt_.move_bytes) {
            void *remote = reinterpret_cast<void *>(it.raddr);
            if (it.kind == Item::Put)
                copy_bytes(remote, r->second, it.src, *it.local, it.len);
            else
                copy_bytes(it.dst, *it.local, remote, r->second, it.len);
        }
    }
    if (it.comp != nullptr) from->iface_.completed.emplace_back(it.comp, st);
    --from->inflight;
}

unsigned LoopIface::progress() {
    unsigned n = 0;
    // Only what is queued now: handlers may post more, which waits for the next call (like a real wire).
    for (size_t k = inbox.size(); k > 0 && !inbox.empty(); --k, ++n) {
        Item it = std::move(inbox.front());
        inbox.pop_front();
        perform(it);
    }
    for (size_t k = completed.size(); k > 0 && !completed.empty(); --k, ++n) {
        auto [comp, st] = completed.front();
        completed.pop_front();
        comp->complete(st);
    }
    return n;
}

} // namespace

std::shared_ptr<LoopFabric> make_loop_fabric() { return std::make_shared<LoopFabric>(); }

gdx_status_t open_loop_iface(const std::shared_ptr<LoopFabric> &fabric, const LoopOptions &opt,
                             std::unique_ptr<tp::Interface> *out) {
    *out = std::make_unique<LoopIface>(fabric, opt);
    return GDX_OK;
}

void break_link(tp::Endpoint &ep) {
    auto &e = static_cast<LoopEp &>(ep);
    for (LoopEp *x : {&e, e.peer_}) {
        if (x == nullptr) continue;
        x->broken_ = true;
        // What the peer had not performed yet is lost: complete it with the error, like a reset connection.
        auto &inbox = x->iface_.inbox;
        for (auto it = inbox.begin(); it != inbox.end();) {
            if (it->from == e.peer_ || it->from == &e) {
                if (it->comp != nullptr) it->from->iface_.completed.emplace_back(it->comp, GDX_ERR_CONNECTION_RESET);
                --it->from->inflight;
                it = inbox.erase(it);
            } else {
                ++it;
            }
        }
    }
}

uint64_t loop_violations(const LoopFabric &fabric) { return fabric.violations; }

} // namespace gdx::test
