#include "fallback/region.h"

#include "core/error.h"
#include "fallback/byte_codec.h"

namespace gdx::fb {

namespace {
constexpr const char *kComp = "fallback";
constexpr uint64_t kMinFrag = 4096;
constexpr uint64_t kMaxFrag = uint64_t(1) << 30;
} // namespace

const tp::ChunkReg *Region::chunk_at(size_t offset) const {
    for (const tp::ChunkReg &c : memh_->chunks())
        if (offset >= c.offset && offset - c.offset < c.length) return &c;
    return nullptr;
}

bool RemoteRegion::direct(uint64_t offset, uint64_t len) const {
    if (offset > length_ || len > length_ - offset) return false;
    uint64_t end = offset + len;
    for (const Chunk &c : chunks_) {
        if (c.offset + c.length <= offset || c.offset >= end) continue;
        if (c.reach == tp::Reach::None) return false;
    }
    return true; // the chunks tile the region (checked at unpack), so no gap hides an unreachable byte
}

tp::Reach RemoteRegion::reach_at(uint64_t offset) const {
    for (const Chunk &c : chunks_)
        if (offset >= c.offset && offset - c.offset < c.length) return c.reach;
    return tp::Reach::None;
}

gdx_status_t pack_region_key(const Region &region, uint64_t frag_size, size_t rkey_size, std::vector<uint8_t> *out) {
    // Adjacent chunks with the same reach are one chunk to the peer: it only asks "direct or not, and how".
    std::vector<RemoteRegion::Chunk> chunks;
    for (const tp::ChunkReg &c : region.memh().chunks()) {
        if (c.length == 0) continue;
        if (!chunks.empty() && chunks.back().reach == c.reach && chunks.back().offset + chunks.back().length == c.offset)
            chunks.back().length += c.length;
        else
            chunks.push_back({c.offset, c.length, c.reach});
    }
    if (chunks.empty()) // a transport that reports no chunks: MemHandle::direct() is then the whole answer
        chunks.push_back({0, region.length(), region.fully_direct() ? tp::Reach::Host : tp::Reach::None});
    if (chunks.size() > kMaxKeyChunks)
        return GDX_FAIL(GDX_ERR_UNSUPPORTED, kComp, "pack key of region %#lx: %zu registration chunks (at most %u)",
                        static_cast<unsigned long>(region.id()), chunks.size(), kMaxKeyChunks);
    std::vector<uint8_t> rkey(rkey_size);
    if (gdx_status_t st = region.memh().pack_rkey(rkey); st != GDX_OK)
        return GDX_FAIL(st, kComp, "pack key of region %#lx: the transport could not pack its rkey",
                        static_cast<unsigned long>(region.id()));
    out->clear();
    out->reserve(kKeyHeaderSize + chunks.size() * kKeyChunkSize + rkey.size());
    ByteWriter w(out);
    w.u32(kKeyMagic);
    w.u16(kKeyVersion);
    w.u16(0);
    w.u64(region.id());
    w.u64(reinterpret_cast<uintptr_t>(region.ptr()));
    w.u64(region.length());
    w.u64(frag_size);
    w.u32(region.access() & (tp::kAccessRemoteRead | tp::kAccessRemoteWrite));
    w.u8(static_cast<uint8_t>(region.info().kind));
    w.u8(static_cast<uint8_t>(region.info().type));
    w.u16(static_cast<uint16_t>(static_cast<int16_t>(region.info().device)));
    w.u32(static_cast<uint32_t>(chunks.size()));
    w.u32(static_cast<uint32_t>(rkey.size()));
    for (const RemoteRegion::Chunk &c : chunks) {
        w.u64(c.offset);
        w.u64(c.length);
        w.u8(static_cast<uint8_t>(c.reach));
    }
    w.bytes(rkey);
    return GDX_OK;
}

gdx_status_t RemoteRegion::unpack(std::span<const uint8_t> packed, tp::MemoryDomain &md,
                                  std::unique_ptr<RemoteRegion> *out) {
    auto bad = [&](const char *what, uint64_t value) {
        return GDX_FAIL(GDX_ERR_PROTOCOL, kComp, "unpack remote key (%zu bytes): %s (%#llx)", packed.size(), what,
                        static_cast<unsigned long long>(value));
    };
    if (out == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "unpack remote key: null output");
    if (packed.size() < kKeyHeaderSize) return bad("shorter than the key header", packed.size());
    ByteReader r(packed);
    auto rr = std::unique_ptr<RemoteRegion>(new RemoteRegion);
    uint32_t magic = r.u32();
    uint16_t version = r.u16();
    uint16_t reserved = r.u16();
    rr->id_ = r.u64();
    rr->base_ = r.u64();
    rr->length_ = r.u64();
    rr->frag_size_ = r.u64();
    uint32_t access = r.u32();
    uint8_t kind = r.u8();
    uint8_t type = r.u8();
    int16_t device = static_cast<int16_t>(r.u16());
    uint32_t nchunks = r.u32();
    uint32_t rkey_len = r.u32();
    if (magic != kKeyMagic) return bad("not a gdx fallback key (magic)", magic);
    if (version != kKeyVersion) return bad("unsupported key version", version);
    if (reserved != 0) return bad("reserved field not zero", reserved);
    if (rr->id_ == 0) return bad("region id 0", 0);
    if (rr->length_ == 0 || rr->base_ + rr->length_ < rr->base_) return bad("empty or wrapping range", rr->length_);
    if (rr->frag_size_ < kMinFrag || rr->frag_size_ > kMaxFrag) return bad("fragment size out of range", rr->frag_size_);
    if ((access & ~static_cast<uint32_t>(tp::kAccessRemoteRead | tp::kAccessRemoteWrite)) != 0)
        return bad("access bits beyond remote read/write", access);
    if (kind >= static_cast<uint8_t>(mem::MemKind::kCount)) return bad("unknown memory kind", kind);
    if (type > static_cast<uint8_t>(mem::MemType::Unmapped)) return bad("unknown memory type", type);
    if (device < -1) return bad("negative device", static_cast<uint64_t>(static_cast<int64_t>(device)));
    if (nchunks == 0 || nchunks > kMaxKeyChunks) return bad("chunk count out of range", nchunks);
    if (rkey_len != md.rkey_packed_size()) return bad("transport rkey size differs from this transport's", rkey_len);
    if (packed.size() != kKeyHeaderSize + uint64_t(nchunks) * kKeyChunkSize + rkey_len)
        return bad("size does not match its chunk count and rkey length", packed.size());
    rr->access_ = access;
    rr->kind_ = static_cast<mem::MemKind>(kind);
    rr->type_ = static_cast<mem::MemType>(type);
    rr->device_ = device;
    rr->chunks_.resize(nchunks);
    uint64_t expect = 0;
    for (Chunk &c : rr->chunks_) {
        c.offset = r.u64();
        c.length = r.u64();
        uint8_t reach = r.u8();
        if (c.offset != expect || c.length == 0 || c.length > rr->length_ - c.offset)
            return bad("chunks do not tile the region", c.offset);
        if (reach > static_cast<uint8_t>(tp::Reach::Ipc)) return bad("unknown chunk reach", reach);
        c.reach = static_cast<tp::Reach>(reach);
        expect = c.offset + c.length;
    }
    if (expect != rr->length_) return bad("chunks end before the region does", expect);
    std::span<const uint8_t> rkey = r.bytes(rkey_len);
    if (!r.ok() || r.remaining() != 0) return bad("truncated", packed.size());
    if (gdx_status_t st = md.rkey_unpack(rkey, &rr->rkey_); st != GDX_OK)
        return GDX_FAIL(st, kComp, "unpack remote key of region %#llx: the %.*s transport refused its rkey",
                        static_cast<unsigned long long>(rr->id_), static_cast<int>(md.name().size()),
                        md.name().data());
    *out = std::move(rr);
    return GDX_OK;
}

} // namespace gdx::fb
