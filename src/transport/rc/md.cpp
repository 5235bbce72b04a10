#include "transport/rc/md.h"

#include "core/error.h"
#include "core/log.h"
#include "transport/rc/config_vars.h"
#include "transport/reg_check.h"

#include <cerrno>
#include <cstring>

namespace gdx::tp::rc {

namespace {
constexpr uint32_t kRkeyMagic = 0x4b524447; // "GDRK"
constexpr uint8_t kRkeyVersion = 1;
constexpr unsigned kRemoteBits = kAccessRemoteRead | kAccessRemoteWrite;

void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t get_u32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}
uint64_t get_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}

// Memory the NIC reaches through the CPU's page tables with a plain ibv_reg_mr.
bool host_reachable(const mem::MemInfo &info) {
    return mem::is_host_type(info.type) || info.type == mem::MemType::CudaVmmHost;
}
} // namespace

int ibv_access_of(unsigned a) {
    int f = 0;
    if (a & kAccessLocalWrite) f |= IBV_ACCESS_LOCAL_WRITE;
    // Verbs requires local write with remote write (the NIC writes the pages on the peer's behalf).
    if (a & kAccessRemoteWrite) f |= IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
    if (a & kAccessRemoteRead) f |= IBV_ACCESS_REMOTE_READ;
    return f;
}

// ---- region and handle ----------------------------------------------------------------------------------

RcRegion::~RcRegion() {
    for (Chunk &c : chunks)
        if (c.mr != nullptr && c.mr != shared_mr.get()) registrar->dereg(c.mr);
}

RcMemHandle::RcMemHandle(void *addr, size_t len, const mem::MemInfo &info, unsigned access,
                         std::shared_ptr<RcRegion> r)
    : MemHandle(addr, len, info, access), region_(std::move(r)) {
    // This handle's view of the region's chunks, with offsets from addr.
    uintptr_t a = reinterpret_cast<uintptr_t>(addr);
    for (const Chunk &c : region_->chunks) {
        uintptr_t cs = region_->addr + c.reg.offset, ce = cs + c.reg.length;
        uintptr_t s = std::max(cs, a), e = std::min(ce, a + len);
        if (s >= e) continue;
        chunks_.push_back({s - a, e - s, c.reg.reach, c.reg.reason});
    }
}

bool RcMemHandle::lkey_at(const void *p, size_t n, uint32_t *lkey, size_t *contig) const {
    uintptr_t a = reinterpret_cast<uintptr_t>(p), base = reinterpret_cast<uintptr_t>(addr_);
    if (a < base || n > length_ || a - base > length_ - n) return false;
    const RcRegion &r = *region_;
    size_t idx = r.chunk_size ? (a - r.addr) / r.chunk_size : 0;
    if (idx >= r.chunks.size() || r.chunks[idx].mr == nullptr) return false;
    *lkey = r.chunks[idx].mr->lkey;
    uintptr_t chunk_end = r.addr + r.chunks[idx].reg.offset + r.chunks[idx].reg.length;
    *contig = chunk_end - a;
    return true;
}

gdx_status_t RcMemHandle::pack_rkey(std::span<uint8_t> out) const {
    if (out.size() < kRkeyPackedSize)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "pack_rkey: %zu bytes given, %zu needed", out.size(),
                        kRkeyPackedSize);
    uint8_t *p = out.data();
    std::memset(p, 0, kRkeyPackedSize);
    const RcRegion &r = *region_;
    uintptr_t base = reinterpret_cast<uintptr_t>(addr_);
    unsigned first = 0, n = 1;
    if (length_ > 0 && r.chunk_size > 0) {
        first = static_cast<unsigned>((base - r.addr) / r.chunk_size);
        unsigned last = static_cast<unsigned>((base + length_ - 1 - r.addr) / r.chunk_size);
        n = last - first + 1;
    }
    unsigned access = access_ & kRemoteBits;
    uint32_t opened = 0;
    for (unsigned i = 0; access != 0 && i < n && first + i < r.chunks.size(); ++i) {
        const Chunk &c = r.chunks[first + i];
        if (c.mr == nullptr) continue;
        opened |= 1u << i;
        put_u32(p + 44 + 4 * i, c.mr->rkey);
    }
    put_u32(p, kRkeyMagic);
    p[4] = kRkeyVersion;
    p[5] = static_cast<uint8_t>(access);
    p[6] = static_cast<uint8_t>(n);
    p[7] = static_cast<uint8_t>(first);
    put_u64(p + 8, base);
    put_u64(p + 16, length_);
    put_u64(p + 24, r.chunk_size ? r.addr : base);
    put_u64(p + 32, r.chunk_size ? r.chunk_size : 1);
    put_u32(p + 40, opened);
    return GDX_OK;
}

gdx_status_t RcRemoteKey::unpack(std::span<const uint8_t> in, std::unique_ptr<RemoteKey> *out) {
    const uint8_t *p = in.data();
    if (in.size() != kRkeyPackedSize)
        return GDX_FAIL(GDX_ERR_PROTOCOL, kComp, "remote key of %zu bytes (rc keys have %zu)", in.size(),
                        kRkeyPackedSize);
    if (get_u32(p) != kRkeyMagic || p[4] != kRkeyVersion)
        return GDX_FAIL(GDX_ERR_PROTOCOL, kComp, "remote key: bad magic 0x%08x or version %u (not an rc key?)",
                        get_u32(p), p[4]);
    auto k = std::make_unique<RcRemoteKey>();
    k->access_ = p[5];
    k->nchunks_ = p[6];
    k->first_ = p[7];
    k->base_ = get_u64(p + 8);
    k->length_ = get_u64(p + 16);
    k->origin_ = get_u64(p + 24);
    k->chunk_ = get_u64(p + 32);
    k->opened_ = get_u32(p + 40);
    for (unsigned i = 0; i < kMaxChunks; ++i) k->rkeys_[i] = get_u32(p + 44 + 4 * i);
    const char *bad = nullptr;
    if (k->access_ & ~kRemoteBits) bad = "unknown access bits";
    else if (k->nchunks_ < 1 || k->first_ + k->nchunks_ > kMaxChunks) bad = "chunk count out of range";
    else if (k->opened_ >> k->nchunks_) bad = "opened chunks beyond the count";
    else if (k->chunk_ == 0) bad = "zero chunk size";
    else if (k->base_ + k->length_ < k->base_) bad = "range wraps around";
    else if (k->origin_ > k->base_ || (k->base_ - k->origin_) / k->chunk_ < k->first_ ||
             (k->length_ > 0 && (k->base_ + k->length_ - 1 - k->origin_) / k->chunk_ >= k->first_ + k->nchunks_))
        bad = "chunks do not cover the claimed range";
    if (bad != nullptr) return GDX_FAIL(GDX_ERR_PROTOCOL, kComp, "remote key rejected: %s", bad);
    *out = std::move(k);
    return GDX_OK;
}

gdx_status_t RcRemoteKey::lookup(uint64_t raddr, size_t n, unsigned need, uint32_t *rkey, size_t *contig,
                                 std::string *why) const {
    if ((access_ & need) != need) {
        *why = std::string("the key does not grant remote ") + (need & kAccessRemoteWrite ? "write" : "read");
        return GDX_ERR_ACCESS_DENIED;
    }
    if (raddr < base_ || n > length_ || raddr - base_ > length_ - n) {
        *why = "range outside the key";
        return GDX_ERR_ACCESS_DENIED;
    }
    uint64_t idx = (raddr - origin_) / chunk_ - first_;
    if (idx >= nchunks_ || !(opened_ & (1u << idx))) {
        *why = "that part of the remote buffer is not registered with the NIC (staged memory)";
        return GDX_ERR_ACCESS_DENIED;
    }
    *rkey = rkeys_[idx];
    *contig = origin_ + (first_ + idx + 1) * chunk_ - raddr;
    return GDX_OK;
}

// ---- memory domain --------------------------------------------------------------------------------------

namespace {
gdx_status_t cuda_dmabuf_export(const void *ptr, size_t len, int *fd, uint64_t *offset) {
    return mem::ops(mem::MemKind::Cuda).dmabuf_fd(ptr, len, fd, offset);
}
} // namespace

RcMemoryDomain::RcMemoryDomain(std::shared_ptr<DeviceCtx> dev, const Config &cfg)
    : RcMemoryDomain(dev, cfg, std::make_shared<VerbsRegistrar>(dev), cuda_dmabuf_export) {}

RcMemoryDomain::RcMemoryDomain(std::shared_ptr<DeviceCtx> dev, const Config &cfg,
                               std::shared_ptr<Registrar> registrar, DmabufExport exporter)
    : dev_(std::move(dev)), registrar_(std::move(registrar)), exporter_(exporter), ladder_(LadderConfig::from(cfg)),
      policy_(topo::GdrPolicy::from(cfg)), cfg_(cfg), name_(registrar_->device_name()),
      rcache_(cfg.size(RcVar::RCACHE_MAX_SIZE)) {}

RcMemoryDomain::~RcMemoryDomain() {
    const RcacheStats &s = rcache_.stats();
    if (s.hits + s.misses > 0)
        GDX_DEBUG(kComp, "%s: rcache %llu hits, %llu misses, %llu evictions, %llu invalidations", name_.c_str(),
                  (unsigned long long)s.hits, (unsigned long long)s.misses, (unsigned long long)s.evictions,
                  (unsigned long long)s.invalidations);
}

std::string RcMemoryDomain::gpu_bus_id(int device) {
    if (!gpu_bus_known_) {
        gpu_bus_known_ = true;
        std::vector<mem::DeviceInfo> gpus;
        mem::ops(mem::MemKind::Cuda).devices(&gpus);
        for (const mem::DeviceInfo &d : gpus) {
            if (d.ordinal >= static_cast<int>(gpu_bus_.size())) gpu_bus_.resize(d.ordinal + 1);
            gpu_bus_[d.ordinal] = topo::normalize_bus_id(d.pci_bus_id);
        }
    }
    return device >= 0 && device < static_cast<int>(gpu_bus_.size()) ? gpu_bus_[device] : "";
}

topo::GdrDecision RcMemoryDomain::gate_for_gpu(int device) {
    topo::PathClass path = topo::PathClass::Unknown;
    std::string gpu = gpu_bus_id(device);
    if (!gpu.empty() && dev_ != nullptr && !dev_->bus_id().empty()) {
        std::shared_ptr<const topo::Topology> t;
        if (topo::Topology::shared(cfg_, &t) == GDX_OK && !t->from_file()) path = t->path(gpu, dev_->bus_id());
    }
    // Capabilities are the ladder's business (it names each rung's refusal); the gate is policy and path.
    return topo::decide_gdr(policy_, path, topo::NicGdrCaps{});
}

gdx_status_t RcMemoryDomain::register_region(void *addr, size_t len, const mem::MemInfo &info, unsigned access,
                                             std::shared_ptr<RcRegion> *out) {
    auto r = std::make_shared<RcRegion>();
    r->addr = reinterpret_cast<uintptr_t>(addr);
    r->length = len;
    r->access = access;
    r->buffer_id = info.buffer_id;
    r->block_id = info.block_id;
    r->registrar = registrar_;
    r->dev = dev_;
    int flags = ibv_access_of(access);
    if (host_reachable(info)) {
        HostReg h;
        if (gdx_status_t st = register_host(*registrar_, ladder_, addr, len, info, flags, &h); st != GDX_OK) return st;
        r->chunk_size = len;
        r->shared_mr = std::move(h.shared);
        r->chunks.push_back({{0, len, h.reach, std::move(h.reason)}, h.mr});
    } else {
        std::string gpu = "GPU" + std::to_string(info.device);
        gdx_status_t st = register_gpu(*registrar_, exporter_, ladder_, addr, len, info, flags,
                                       gate_for_gpu(info.device), gpu, &r->chunks);
        if (st != GDX_OK) return st;
        r->chunk_size = chunk_size_for(len, ladder_.chunk);
        for (const Chunk &c : r->chunks)
            GDX_DEBUG(kComp, "%s: %s [%p+%zu, +%zu): %s (%s)", name_.c_str(), gpu.c_str(), addr, c.reg.offset,
                      c.reg.length, reach_name(c.reg.reach), c.reg.reason.c_str());
    }
    *out = std::move(r);
    return GDX_OK;
}

gdx_status_t RcMemoryDomain::mem_reg(void *addr, size_t len, const mem::MemInfo &info, unsigned access,
                                     std::unique_ptr<MemHandle> *out) {
    // A zero-length registration is allowed here: its handle opens nothing (UCT registers empty ranges).
    if (gdx_status_t st = check_mem_reg(kComp, name_, addr, len, info, access, out, true); st != GDX_OK) return st;
    std::shared_ptr<RcRegion> region;
    if (len == 0) {
        region = std::make_shared<RcRegion>(); // nothing to register; the handle opens nothing
        region->addr = reinterpret_cast<uintptr_t>(addr);
        region->registrar = registrar_;
    } else {
        // VMM memory can be unmapped and remapped under the same buffer id: the block id tells them apart.
        region = std::static_pointer_cast<RcRegion>(
            rcache_.lookup(reinterpret_cast<uintptr_t>(addr), len, access, info.buffer_id, info.block_id));
        if (region == nullptr) {
            gdx_status_t st = register_region(addr, len, info, access, &region);
            if (st != GDX_OK) return st;
            if (info.buffer_id != 0) rcache_.insert(region);
        }
    }
    auto h = std::make_unique<RcMemHandle>(addr, len, info, access, std::move(region));
    h->md_tag = this;
    *out = std::move(h);
    return GDX_OK;
}

gdx_status_t RcMemoryDomain::rkey_unpack(std::span<const uint8_t> packed, std::unique_ptr<RemoteKey> *out) {
    if (out == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "rkey_unpack: null output");
    return RcRemoteKey::unpack(packed, out);
}

} // namespace gdx::tp::rc
