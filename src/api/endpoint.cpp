#include "api/endpoint.h"

#include "core/error.h"
#include "fallback/byte_codec.h"

#include <algorithm>

namespace gdx {

namespace {

constexpr const char *kComp = "api";
constexpr uint32_t kAddressMagic = 0x41584447; // "GDXA"
constexpr uint32_t kMemMagic = 0x4D584447;     // "GDXM"
constexpr uint16_t kBlobVersion = 1;
constexpr size_t kMaxEntries = 16;
constexpr size_t kMaxEntryBytes = 1 << 20;

struct Entry {
    std::string name;
    std::span<const uint8_t> bytes;
};

void write_entry(fb::ByteWriter &w, const std::string &name, std::span<const uint8_t> bytes) {
    w.u8(static_cast<uint8_t>(name.size()));
    w.bytes({reinterpret_cast<const uint8_t *>(name.data()), name.size()});
    w.u32(static_cast<uint32_t>(bytes.size()));
    w.bytes(bytes);
}

// Validates the framing of a blob and splits it into entries (what each entry holds is checked by its user).
gdx_status_t read_blob(std::span<const uint8_t> blob, uint32_t magic, const char *what, uint64_t *host,
                       std::vector<Entry> *out) {
    fb::ByteReader r(blob);
    uint32_t m = r.u32();
    uint16_t version = r.u16();
    uint16_t count = r.u16();
    if (host != nullptr) *host = r.u64();
    if (!r.ok() || m != magic || version != kBlobVersion || count == 0 || count > kMaxEntries)
        return GDX_FAIL(GDX_ERR_PROTOCOL, kComp, "%s (%zu bytes): not a gdx %s blob of version %u (magic %#x, "
                        "version %u, %u entries)", what, blob.size(), what, kBlobVersion, m, version, count);
    for (unsigned i = 0; i < count; ++i) {
        Entry e;
        uint8_t nlen = r.u8();
        std::span<const uint8_t> name = r.bytes(nlen);
        uint32_t blen = r.u32();
        if (!r.ok() || nlen == 0 || blen > kMaxEntryBytes) break;
        e.name.assign(name.begin(), name.end());
        e.bytes = r.bytes(blen);
        if (!r.ok()) break;
        out->push_back(std::move(e));
    }
    if (!r.ok() || r.remaining() != 0 || out->size() != count)
        return GDX_FAIL(GDX_ERR_PROTOCOL, kComp, "%s (%zu bytes): truncated or malformed entry %zu", what,
                        blob.size(), out->size());
    return GDX_OK;
}

const Entry *find_entry(const std::vector<Entry> &entries, std::string_view name) {
    for (const Entry &e : entries)
        if (e.name == name) return &e;
    return nullptr;
}

} // namespace

// ---- Memory --------------------------------------------------------------------------------------------------

gdx_status_t Memory::create(Context &ctx, void *addr, size_t len, unsigned access, std::unique_ptr<Memory> *out) {
    if (gdx_status_t st = ctx.open_transports(); st != GDX_OK) return st;
    auto m = std::make_unique<Memory>();
    gdx_status_t first_error = GDX_OK;
    std::string first_reason;
    for (TransportSlot &t : ctx.transports()) {
        fb::Region *r = nullptr;
        gdx_status_t st = t.engine->mem_reg(addr, len, access, &r);
        if (st == GDX_OK) {
            m->regs_.push_back({&t, r});
        } else if (st == GDX_ERR_INVALID_ADDR) {
            // Memory this process cannot access with these rights: no transport may take it (the check is the
            // same in each, transport/reg_check.h), and the cause is what the caller needs to read.
            // Logged once already where the probe failed: here only the caller's message is completed.
            return fail(st, log::Level::Debug, kComp, "gdx_mem_reg: %s", last_error().c_str());
        } else {
            // Registered with the others; this transport will not be used for this memory.
            GDX_DEBUG(kComp, "gdx_mem_reg(%p, %zu): %s refused it: %s", addr, len, t.name().c_str(),
                      gdx_status_string(st));
            if (first_error == GDX_OK) {
                first_error = st;
                first_reason = t.name() + ": " + last_error();
            }
        }
    }
    if (m->regs_.empty())
        return GDX_FAIL(first_error, kComp, "gdx_mem_reg(%p, %zu): no transport could register it (%s)", addr, len,
                        first_reason.c_str());
    *out = std::move(m);
    return GDX_OK;
}

Memory::~Memory() {
    for (PerTransport &p : regs_) p.slot->engine->mem_dereg(p.region);
}

bool Memory::busy() const {
    return std::any_of(regs_.begin(), regs_.end(), [](const PerTransport &p) { return p.region->busy != 0; });
}

fb::Region *Memory::region(const TransportSlot *slot) const {
    for (const PerTransport &p : regs_)
        if (p.slot == slot) return p.region;
    return nullptr;
}

gdx_status_t Memory::pack(std::vector<uint8_t> *out) const {
    out->clear();
    fb::ByteWriter w(out);
    w.u32(kMemMagic);
    w.u16(kBlobVersion);
    w.u16(static_cast<uint16_t>(regs_.size()));
    std::vector<uint8_t> key;
    for (const PerTransport &p : regs_) {
        if (gdx_status_t st = p.slot->engine->pack_key(*p.region, &key); st != GDX_OK) return st;
        write_entry(w, p.slot->name(), key);
    }
    return GDX_OK;
}

// ---- Endpoint ------------------------------------------------------------------------------------------------

gdx_status_t Endpoint::create(Context &ctx, std::unique_ptr<Endpoint> *out) {
    if (gdx_status_t st = ctx.open_transports(); st != GDX_OK) return st;
    auto e = std::make_unique<Endpoint>();
    e->ctx_ = &ctx;
    fb::ByteWriter w(&e->address_);
    w.u32(kAddressMagic);
    w.u16(kBlobVersion);
    size_t count_at = e->address_.size();
    w.u16(0);
    w.u64(Context::host_id());
    for (TransportSlot &t : ctx.transports()) {
        Lane lane;
        lane.slot = &t;
        if (gdx_status_t st = t.iface->ep_create(&lane.ep); st != GDX_OK) {
            GDX_DEBUG(kComp, "gdx_ep_create: %s could not make an endpoint (%s)", t.name().c_str(),
                      gdx_status_string(st));
            continue;
        }
        write_entry(w, t.name(), lane.ep->address());
        e->lanes_.push_back(std::move(lane));
    }
    if (e->lanes_.empty()) return GDX_FAIL(GDX_ERR_UNREACHABLE, kComp, "gdx_ep_create: no transport made an endpoint");
    tp::wire::store_le16(e->address_.data() + count_at, static_cast<uint16_t>(e->lanes_.size()));
    *out = std::move(e);
    return GDX_OK;
}

Endpoint::~Endpoint() {
    for (Lane &l : lanes_) l.slot->engine->ep_close(*l.ep);
}

gdx_status_t Endpoint::connect(std::span<const uint8_t> peer_blob) {
    if (connect_called_) return GDX_FAIL(GDX_ERR_BUSY, kComp, "gdx_ep_connect: the endpoint is already connected");
    uint64_t peer_host = 0;
    std::vector<Entry> peer;
    if (gdx_status_t st = read_blob(peer_blob, kAddressMagic, "endpoint address", &peer_host, &peer); st != GDX_OK)
        return st;
    bool same_host = peer_host == Context::host_id();
    // Both sides evaluate this on the same two blobs with the same registry order, so they keep the same lanes.
    // A later intra-node transport is kept only if it reaches memory the earlier ones do not (cuda_ipc: GPU memory,
    // shm: host memory); tcp on loopback, say, adds nothing to shm.
    std::vector<size_t> keep;
    uint32_t covered = 0;
    for (size_t i = 0; i < lanes_.size() && same_host; ++i) {
        const TransportSlot &t = *lanes_[i].slot;
        uint32_t types = t.iface->caps().direct_types;
        if (find_entry(peer, t.name()) == nullptr || !t.intra_node() || (types & ~covered) == 0) continue;
        keep.push_back(i);
        covered |= types;
    }
    const char *why = "intra-node transports for a peer on this host";
    if (keep.empty()) {
        for (size_t i = 0; i < lanes_.size(); ++i) {
            if (find_entry(peer, lanes_[i].slot->name()) == nullptr || lanes_[i].slot->intra_node()) continue;
            keep.push_back(i);
            why = lanes_[i].slot->name() == "rc" ? "RDMA device on both sides"
                  : same_host                      ? "no intra-node transport in common"
                                                   : "peer on another host and no RDMA transport in common";
            break;
        }
    }
    if (keep.empty())
        return GDX_FAIL(GDX_ERR_UNREACHABLE, kComp, "gdx_ep_connect: no transport in common with the peer (%s host)",
                        same_host ? "same" : "another");
    std::vector<Lane> chosen;
    for (size_t i : keep) chosen.push_back(std::move(lanes_[i]));
    lanes_ = std::move(chosen); // the transport endpoints not chosen are destroyed unconnected
    connect_called_ = true;
    lane_names_.clear();
    for (Lane &l : lanes_) {
        lane_names_ += (lane_names_.empty() ? "" : "+") + l.slot->name();
        const Entry *e = find_entry(peer, l.slot->name());
        if (gdx_status_t st = l.ep->connect(e->bytes); st != GDX_OK && st != GDX_INPROGRESS)
            return GDX_FAIL(st, kComp, "gdx_ep_connect: %s connect failed", l.slot->name().c_str());
    }
    GDX_INFO(kComp, "endpoint to a peer on %s host: %s (%s)", same_host ? "this" : "another", lane_names_.c_str(), why);
    return GDX_OK;
}

gdx_status_t Endpoint::state() const {
    if (!connect_called_) return GDX_INPROGRESS;
    gdx_status_t worst = GDX_OK;
    for (const Lane &l : lanes_) {
        gdx_status_t st = l.ep->state();
        if (st != GDX_OK && st != GDX_INPROGRESS) return st;
        // The transport may still be up while staging declared the peer dead (silent with staged work waiting).
        if (st == GDX_OK && (st = l.slot->engine->peer_state(*l.ep)) != GDX_OK) return st;
        if (st == GDX_INPROGRESS) worst = GDX_INPROGRESS;
    }
    return worst;
}

gdx_status_t Endpoint::close() {
    for (Lane &l : lanes_)
        if (gdx_status_t st = l.slot->engine->ep_close(*l.ep); st != GDX_OK) return st;
    return GDX_OK;
}

size_t Endpoint::notify_poll(uint64_t *values, size_t max) {
    size_t n = 0;
    while (n < max) {
        // The oldest front among the lanes (an endpoint has a handful at most).
        Lane *oldest = nullptr;
        fb::Notification best, front;
        for (Lane &l : lanes_) {
            if (l.slot->engine->notify_peek(*l.ep, &front) && (oldest == nullptr || front.seq < best.seq)) {
                oldest = &l;
                best = front;
            }
        }
        if (oldest == nullptr) break;
        oldest->slot->engine->notify_pop(*oldest->ep);
        values[n++] = best.value;
    }
    return n;
}

// ---- RemoteKey -----------------------------------------------------------------------------------------------

gdx_status_t RemoteKey::unpack(Endpoint &ep, std::span<const uint8_t> blob, std::unique_ptr<RemoteKey> *out) {
    std::vector<Entry> entries;
    if (gdx_status_t st = read_blob(blob, kMemMagic, "registration", nullptr, &entries); st != GDX_OK) return st;
    auto k = std::make_unique<RemoteKey>();
    k->ep_ = &ep;
    k->keys_.resize(ep.lanes().size());
    bool any = false;
    for (size_t i = 0; i < ep.lanes().size(); ++i) {
        const Entry *e = find_entry(entries, ep.lanes()[i].slot->name());
        if (e == nullptr) continue;
        if (gdx_status_t st = ep.lanes()[i].slot->engine->unpack_key(e->bytes, &k->keys_[i]); st != GDX_OK) return st;
        any = true;
    }
    if (!any)
        return GDX_FAIL(GDX_ERR_UNREACHABLE, kComp, "gdx_rkey_unpack: the key has no entry for the endpoint's "
                        "transports (%s)", ep.transports().c_str());
    *out = std::move(k);
    return GDX_OK;
}

size_t Endpoint::staging_lanes(const Memory &mem, const RemoteKey &rkey, std::span<fb::Lane> out) {
    size_t n = std::min(lanes_.size(), out.size());
    for (size_t i = 0; i < n; ++i)
        out[i] = {lanes_[i].slot->engine.get(), lanes_[i].ep.get(), mem.region(lanes_[i].slot), rkey.remote(i)};
    return n;
}

} // namespace gdx
