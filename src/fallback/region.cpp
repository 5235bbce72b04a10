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
    KeyFields k;
    k.id = region.id();
    k.base = reinterpret_cast<uintptr_t>(region.ptr());
    k.length = region.length();
    k.frag_size = frag_size;
    k.access = region.access() & (tp::kAccessRemoteRead | tp::kAccessRemoteWrite);
    k.kind = static_cast<uint8_t>(region.info().kind);
    k.type = static_cast<uint8_t>(region.info().type);
    k.device = static_cast<int16_t>(region.info().device);
    for (const RemoteRegion::Chunk &c : chunks)
        k.chunks.push_back({c.offset, c.length, static_cast<uint8_t>(c.reach)});
    k.rkey = rkey;
    encode_key(k, out);
    return GDX_OK;
}

void encode_key(const KeyFields &k, std::vector<uint8_t> *out) {
    out->clear();
    out->reserve(kKeyHeaderSize + k.chunks.size() * kKeyChunkSize + k.rkey.size());
    ByteWriter w(out);
    w.u32(kKeyMagic);
    w.u16(kKeyVersion);
    w.u16(0);
    w.u64(k.id);
    w.u64(k.base);
    w.u64(k.length);
    w.u64(k.frag_size);
    w.u32(k.access);
    w.u8(k.kind);
    w.u8(k.type);
    w.u16(static_cast<uint16_t>(k.device));
    w.u32(static_cast<uint32_t>(k.chunks.size()));
    w.u32(static_cast<uint32_t>(k.rkey.size()));
    for (const KeyFields::Chunk &c : k.chunks) {
        w.u64(c.offset);
        w.u64(c.length);
        w.u8(c.reach);
    }
    w.bytes(k.rkey);
}

bool decode_key(std::span<const uint8_t> in, KeyFields *k, const char **why, uint64_t *value) {
    auto bad = [&](const char *what, uint64_t v) {
        *why = what;
        *value = v;
        return false;
    };
    if (in.size() < kKeyHeaderSize) return bad("shorter than the key header", in.size());
    ByteReader r(in);
    uint32_t magic = r.u32();
    uint16_t version = r.u16();
    uint16_t reserved = r.u16();
    k->id = r.u64();
    k->base = r.u64();
    k->length = r.u64();
    k->frag_size = r.u64();
    k->access = r.u32();
    k->kind = r.u8();
    k->type = r.u8();
    k->device = static_cast<int16_t>(r.u16());
    uint32_t nchunks = r.u32();
    uint32_t rkey_len = r.u32();
    if (magic != kKeyMagic) return bad("not a gdx fallback key (magic)", magic);
    if (version != kKeyVersion) return bad("unsupported key version", version);
    if (reserved != 0) return bad("reserved field not zero", reserved);
    if (nchunks == 0 || nchunks > kMaxKeyChunks) return bad("chunk count out of range", nchunks);
    if (in.size() != kKeyHeaderSize + uint64_t(nchunks) * kKeyChunkSize + rkey_len)
        return bad("size does not match its chunk count and rkey length", in.size());
    k->chunks.resize(nchunks);
    for (KeyFields::Chunk &c : k->chunks) {
        c.offset = r.u64();
        c.length = r.u64();
        c.reach = r.u8();
    }
    k->rkey = r.bytes(rkey_len);
    if (!r.ok() || r.remaining() != 0) return bad("truncated", in.size());
    return true;
}

gdx_status_t RemoteRegion::unpack(std::span<const uint8_t> packed, tp::MemoryDomain &md,
                                  std::unique_ptr<RemoteRegion> *out) {
    auto bad = [&](const char *what, uint64_t value) {
        return GDX_FAIL(GDX_ERR_PROTOCOL, kComp, "unpack remote key (%zu bytes): %s (%#llx)", packed.size(), what,
                        static_cast<unsigned long long>(value));
    };
    if (out == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "unpack remote key: null output");
    KeyFields k;
    const char *why = "";
    uint64_t value = 0;
    if (!decode_key(packed, &k, &why, &value)) return bad(why, value);
    auto rr = std::unique_ptr<RemoteRegion>(new RemoteRegion);
    rr->id_ = k.id;
    rr->base_ = k.base;
    rr->length_ = k.length;
    rr->frag_size_ = k.frag_size;
    if (rr->id_ == 0) return bad("region id 0", 0);
    if (rr->length_ == 0 || rr->base_ + rr->length_ < rr->base_) return bad("empty or wrapping range", rr->length_);
    if (rr->frag_size_ < kMinFrag || rr->frag_size_ > kMaxFrag) return bad("fragment size out of range", rr->frag_size_);
    if ((k.access & ~static_cast<uint32_t>(tp::kAccessRemoteRead | tp::kAccessRemoteWrite)) != 0)
        return bad("access bits beyond remote read/write", k.access);
    if (k.kind >= static_cast<uint8_t>(mem::MemKind::kCount)) return bad("unknown memory kind", k.kind);
    if (k.type > static_cast<uint8_t>(mem::MemType::Unmapped)) return bad("unknown memory type", k.type);
    if (k.device < -1) return bad("negative device", static_cast<uint64_t>(static_cast<int64_t>(k.device)));
    if (k.rkey.size() != md.rkey_packed_size())
        return bad("transport rkey size differs from this transport's", k.rkey.size());
    rr->access_ = k.access;
    rr->kind_ = static_cast<mem::MemKind>(k.kind);
    rr->type_ = static_cast<mem::MemType>(k.type);
    rr->device_ = k.device;
    uint64_t expect = 0;
    for (const KeyFields::Chunk &c : k.chunks) {
        if (c.offset != expect || c.length == 0 || c.length > rr->length_ - c.offset)
            return bad("chunks do not tile the region", c.offset);
        if (c.reach > static_cast<uint8_t>(tp::Reach::Ipc)) return bad("unknown chunk reach", c.reach);
        rr->chunks_.push_back({c.offset, c.length, static_cast<tp::Reach>(c.reach)});
        expect = c.offset + c.length;
    }
    if (expect != rr->length_) return bad("chunks end before the region does", expect);
    std::span<const uint8_t> rkey = k.rkey;
    if (gdx_status_t st = md.rkey_unpack(rkey, &rr->rkey_); st != GDX_OK)
        return GDX_FAIL(st, kComp, "unpack remote key of region %#llx: the %.*s transport refused its rkey",
                        static_cast<unsigned long long>(rr->id_), static_cast<int>(md.name().size()),
                        md.name().data());
    *out = std::move(rr);
    return GDX_OK;
}

} // namespace gdx::fb
