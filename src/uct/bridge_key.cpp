// Remote keys as UCT carries them. UCP stores each MD's key length in one byte, so a key has at most 255 bytes;
// the engine's own key (region.h: a 56-byte header and 17 bytes per chunk, then the transport's key) does not fit
// with rc's 108-byte or cuda_ipc's 160-byte transport keys. So an engine MD packs it compactly (version 2):
//
//   off size field
//    0   4   magic        "GDXK"
//    4   1   version      2
//    5   1   flags        bit 0: the chunk list did not fit and was replaced by one chunk the peer stages
//    6   2   used         bytes used (the rest up to rkey_packed_size is zero)
//    8   8   region id, 16 8 base, 24 8 length (the engine's fields)
//   32   …   frag_size (LEB128), access u8, kind u8, type u8, device i16, nchunks u8,
//            nchunks × {reach u8, length LEB128} (offsets follow: the chunks tile the region),
//            rkey_len u16, the transport's key
//
// and rkey_unpack expands it back to the engine's format, which Engine::unpack_key validates field by field.
// Pass-through MDs (no engine) keep version 1: magic(4) version(1) reserved(1) length(2) + the transport's key.
#include "core/error.h"
#include "core/log.h"
#include "fallback/byte_codec.h"
#include "uct/bridge_engine.h"

#include <cstring>
#include <new>

using namespace gdx;
using namespace gdx::uct;

namespace {

constexpr uint32_t kMagic = 0x4b584447; // "GDXK", little-endian
constexpr size_t kV1Header = 8;
constexpr size_t kMaxTransportKey = 1024; // more than any transport packs; bounds what a peer can make us copy
constexpr size_t kV2Fixed = 32 + 10 + 3 + 2 + 1 + 2; // header, ids, frag (LEB128 at most 10), fields, rkey_len
constexpr size_t kChunkBudget = 8 * (1 + 10);         // eight chunks of any length fit: more are compacted away

// The engine's key layout (fallback/region.h): fb::encode_key/decode_key write and read it here too; only the
// transport key's offset (rkey_unpack below) reads the layout itself.
static_assert(fb::kKeyHeaderSize == 56 && fb::kKeyChunkSize == 17 && fb::kKeyVersion == 1,
              "the staging engine's key format changed: update bridge_key.cpp (gdx_uct_rkey_unpack)");

void put_leb(std::vector<uint8_t> *out, uint64_t v) {
    do {
        uint8_t b = v & 0x7f;
        v >>= 7;
        out->push_back(static_cast<uint8_t>(b | (v != 0 ? 0x80 : 0)));
    } while (v != 0);
}

bool get_leb(fb::ByteReader &r, uint64_t *v) {
    *v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        uint8_t b = r.u8();
        if (!r.ok()) return false;
        *v |= static_cast<uint64_t>(b & 0x7f) << shift;
        if ((b & 0x80) == 0) return true;
    }
    return false;
}

using Chunk = fb::KeyFields::Chunk;

// The engine's key, read through the engine's own decoder; the fields compact_key carries must also fit its
// narrower encoding (access in a byte, a bounded transport key).
gdx_status_t read_fb_key(std::span<const uint8_t> in, fb::KeyFields *k) {
    const char *why = "";
    uint64_t value = 0;
    if (!fb::decode_key(in, k, &why, &value) || k->access > 0xff || k->rkey.size() > kMaxTransportKey)
        return GDX_FAIL(GDX_ERR_INTERNAL, kComp, "mkey_pack: the engine's key (%zu bytes) is not in the format this "
                        "module knows: %s (%#llx)", in.size(), *why ? why : "access or rkey size",
                        static_cast<unsigned long long>(value));
    return GDX_OK;
}

void write_compact(const fb::KeyFields &k, const std::vector<Chunk> &chunks, bool degraded,
                   std::vector<uint8_t> *out) {
    out->clear();
    fb::ByteWriter w(out);
    w.u32(kMagic);
    w.u8(kKeyV2);
    w.u8(degraded ? 1 : 0);
    w.u16(0); // used: set below
    w.u64(k.id);
    w.u64(k.base);
    w.u64(k.length);
    put_leb(out, k.frag_size);
    w.u8(static_cast<uint8_t>(k.access));
    w.u8(k.kind);
    w.u8(k.type);
    w.u16(static_cast<uint16_t>(k.device));
    w.u8(static_cast<uint8_t>(chunks.size()));
    for (const Chunk &c : chunks) {
        w.u8(c.reach);
        put_leb(out, c.length);
    }
    w.u16(static_cast<uint16_t>(k.rkey.size()));
    w.bytes(k.rkey);
    tp::wire::store_le16(out->data() + 6, static_cast<uint16_t>(out->size()));
}

} // namespace

namespace gdx::uct {

size_t engine_key_size(size_t transport_rkey) {
    size_t want = kV2Fixed + kChunkBudget + transport_rkey;
    return want < kUcpMaxKey ? want : kUcpMaxKey;
}

gdx_status_t compact_key(std::span<const uint8_t> fb_key, std::span<uint8_t> out, bool *degraded) {
    fb::KeyFields k;
    if (gdx_status_t st = read_fb_key(fb_key, &k); st != GDX_OK) return st;
    std::vector<uint8_t> bytes;
    *degraded = false;
    if (k.chunks.size() <= 255) write_compact(k, k.chunks, false, &bytes);
    if (bytes.empty() || bytes.size() > out.size()) {
        // Too many chunks for UCP's key: the peer sees one chunk it must stage. Its bytes still move, through our
        // bounce buffers; which chunks this side reaches directly stays known here.
        *degraded = true;
        write_compact(k, {{0, k.length, static_cast<uint8_t>(tp::Reach::None)}}, true, &bytes);
    }
    if (bytes.size() > out.size())
        return GDX_FAIL(GDX_ERR_INTERNAL, kComp, "mkey_pack: a key of %zu bytes does not fit the %zu UCT allows",
                        bytes.size(), out.size());
    std::memset(out.data(), 0, out.size());
    std::memcpy(out.data(), bytes.data(), bytes.size());
    return GDX_OK;
}

gdx_status_t expand_key(std::span<const uint8_t> packed, std::vector<uint8_t> *fb_key) {
    auto bad = [&](const char *what, uint64_t v) {
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "rkey_unpack: not a valid gdx engine key: %s (%#llx)", what,
                        static_cast<unsigned long long>(v));
    };
    fb::ByteReader r(packed);
    uint32_t magic = r.u32();
    uint8_t version = r.u8();
    uint8_t flags = r.u8();
    uint16_t used = r.u16();
    if (!r.ok() || magic != kMagic || version != kKeyV2) return bad("magic or version", magic);
    if (used > packed.size() || used < 32 || (flags & ~1u) != 0) return bad("length or flags", used);
    fb::ByteReader b(packed.first(used));
    b.bytes(8);
    fb::KeyFields k;
    k.id = b.u64();
    k.base = b.u64();
    k.length = b.u64();
    uint8_t n = 0;
    if (!get_leb(b, &k.frag_size)) return bad("fragment size", 0);
    k.access = b.u8();
    k.kind = b.u8();
    k.type = b.u8();
    k.device = static_cast<int16_t>(b.u16());
    n = b.u8();
    uint64_t sum = 0;
    for (unsigned i = 0; i < n && b.ok(); ++i) {
        Chunk c{sum, 0, b.u8()};
        if (!get_leb(b, &c.length) || c.length == 0 || c.length > k.length - sum) return bad("chunk length", c.length);
        sum += c.length;
        k.chunks.push_back(c);
    }
    uint16_t rkey_len = b.u16();
    k.rkey = b.bytes(rkey_len);
    if (!b.ok() || b.remaining() != 0) return bad("truncated or trailing bytes", used);
    if (n == 0 || sum != k.length) return bad("chunks do not cover the region", sum);
    fb::encode_key(k, fb_key); // Engine::unpack_key validates every field
    return GDX_OK;
}

} // namespace gdx::uct

// ---- UCT's key entry points ------------------------------------------------------------------------------------

extern "C" gdx_status_t gdx_uct_mkey_pack(gdx_uct_md_t *md, gdx_uct_memh_t *memh, void *buffer) {
    if (memh == nullptr || buffer == nullptr)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "mkey_pack: null %s", memh == nullptr ? "memh" : "buffer");
    if (memh->region != nullptr)
        return md->ue->pack_key(*memh->region, {static_cast<uint8_t *>(buffer), md->ue->key_size()});
    size_t n = md->md->rkey_packed_size();
    if (n > kMaxTransportKey)
        return GDX_FAIL(GDX_ERR_INTERNAL, kComp, "mkey_pack: transport key of %zu bytes exceeds %zu", n,
                        kMaxTransportKey);
    auto *p = static_cast<uint8_t *>(buffer);
    tp::wire::store_le32(p, kMagic);
    p[4] = kKeyV1;
    p[5] = 0;
    tp::wire::store_le16(p + 6, static_cast<uint16_t>(n));
    return memh->h->pack_rkey(std::span<uint8_t>(p + kV1Header, n));
}

// UCT unpacks per component, without an MD: the bytes are checked and kept here, and unpacked by the MD (or engine)
// of the interface that uses them, on first use.
extern "C" gdx_status_t gdx_uct_rkey_unpack(unsigned tl, const void *buffer, gdx_uct_rkey_t **out) {
    if (buffer == nullptr || out == nullptr)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "rkey_unpack: null %s", buffer == nullptr ? "key" : "output");
    const auto *p = static_cast<const uint8_t *>(buffer);
    auto rkey = std::unique_ptr<gdx_uct_rkey>(new (std::nothrow) gdx_uct_rkey);
    if (!rkey) return GDX_FAIL(GDX_ERR_NO_MEMORY, kComp, "rkey_unpack: out of memory");
    rkey->tl = tl;
    rkey->version = p[4];
    uint32_t magic = tp::wire::load_le32(p);
    try {
        if (magic == kMagic && p[4] == kKeyV2) {
            // At most kUcpMaxKey bytes were packed; `used` bounds what is read.
            size_t used = tp::wire::load_le16(p + 6);
            if (used > kUcpMaxKey)
                return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "rkey_unpack (gdx_%s): engine key claims %zu bytes (at "
                                "most %zu)", gdx_uct_tl_name(tl), used, kUcpMaxKey);
            if (gdx_status_t st = expand_key({p, used}, &rkey->packed); st != GDX_OK) return st;
            rkey->transport_at = fb::kKeyHeaderSize + tp::wire::load_le32(rkey->packed.data() + 48) * fb::kKeyChunkSize;
        } else {
            size_t n = tp::wire::load_le16(p + 6);
            if (magic != kMagic || p[4] != kKeyV1 || n == 0 || n > kMaxTransportKey)
                return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp,
                                "rkey_unpack (gdx_%s): not a gdx key (magic 0x%08x, version %u, length %zu; expected "
                                "0x%08x, version %u or %u, 1..%zu)",
                                gdx_uct_tl_name(tl), magic, p[4], n, kMagic, kKeyV1, kKeyV2, kMaxTransportKey);
            rkey->packed.assign(p + kV1Header, p + kV1Header + n);
        }
    } catch (const std::bad_alloc &) {
        return GDX_FAIL(GDX_ERR_NO_MEMORY, kComp, "rkey_unpack: out of memory");
    }
    *out = rkey.release();
    return GDX_OK;
}

extern "C" void gdx_uct_rkey_release(gdx_uct_rkey_t *rkey) { delete rkey; }

gdx_status_t gdx_uct_rkey::resolve(tp::MemoryDomain &md, const tp::RemoteKey **out) {
    if (unpacked_by != &md) {
        std::span<const uint8_t> bytes(packed.data() + transport_at, packed.size() - transport_at);
        if (bytes.size() != md.rkey_packed_size())
            return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "remote key of %zu bytes, gdx_%s expects %zu", bytes.size(),
                            gdx_uct_tl_name(tl), md.rkey_packed_size());
        std::unique_ptr<tp::RemoteKey> k;
        if (gdx_status_t st = md.rkey_unpack(bytes, &k); st != GDX_OK) return st;
        key = std::move(k);
        unpacked_by = &md;
    }
    *out = key.get();
    return GDX_OK;
}

gdx_status_t gdx_uct_rkey::resolve(fb::Engine &eng, const fb::RemoteRegion **out) {
    for (const auto &[e, r] : remotes) {
        if (e == &eng) {
            *out = r.get();
            return GDX_OK;
        }
    }
    if (version != kKeyV2)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "gdx_%s: the peer packed this key without the staging engine "
                        "(GDX_UCT_ENGINE=no there, yes here): both sides must use the same setting",
                        gdx_uct_tl_name(tl));
    std::unique_ptr<fb::RemoteRegion> r;
    if (gdx_status_t st = eng.unpack_key(packed, &r); st != GDX_OK)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "gdx_%s: remote key refused (%s): %s", gdx_uct_tl_name(tl),
                        gdx_status_string(st), last_error().c_str());
    *out = r.get();
    remotes.emplace_back(&eng, std::move(r));
    return GDX_OK;
}
