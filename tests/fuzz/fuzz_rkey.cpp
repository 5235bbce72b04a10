// libFuzzer target: the rkey blobs a peer hands over — the staging engine's fallback key (src/fallback/region.*,
// RemoteRegion::unpack) with the transport's packed rkey inside it, and the packed rkeys of the tcp and shm
// transports alone (wire::decode_rkey). Whatever is accepted must describe a region the engine can trust: chunks
// that tile [0, length) in order, known kinds, types and reaches, remote rights only, a range that does not wrap.
// Refusals must say why. A violated invariant traps.
#include "core/log.h"
#include "fallback/region.h"
#include "transport/wire.h"

#include <string>

using namespace gdx;
using namespace gdx::tp;

// region.cpp's local-region half (Region::fully_direct, pack_region_key) refers to this transport-layer function,
// which would pull transport.cpp and the memtype layer into the target; nothing here calls it.
bool gdx::tp::MemHandle::direct(size_t, size_t) const { __builtin_trap(); }

namespace {

void require(bool ok) {
    if (!ok) __builtin_trap();
}

struct FuzzKey final : RemoteKey {
    explicit FuzzKey(const wire::PackedRkey &k) {
        base_ = k.base;
        length_ = k.length;
        access_ = k.access;
    }
};

// A memory domain whose rkeys are the tcp transport's packed keys (what the fallback key wraps over tcp).
class FuzzMd final : public MemoryDomain {
  public:
    std::string_view name() const override { return "fuzz"; }
    gdx_status_t mem_reg(void *, size_t, const mem::MemInfo &, unsigned, std::unique_ptr<MemHandle> *) override {
        return GDX_ERR_UNSUPPORTED;
    }
    size_t rkey_packed_size() const override { return wire::kPackedRkeySize; }
    gdx_status_t rkey_unpack(std::span<const uint8_t> packed, std::unique_ptr<RemoteKey> *out) override {
        wire::PackedRkey k;
        std::string why;
        if (wire::decode_rkey(packed, wire::TransportId::Tcp, &k, &why) != GDX_OK) {
            require(!why.empty());
            return GDX_ERR_PROTOCOL;
        }
        require(k.base <= UINT64_MAX - k.length);
        *out = std::make_unique<FuzzKey>(k);
        return GDX_OK;
    }
};

void check_transport_keys(const uint8_t *data, size_t size) {
    for (wire::TransportId t : {wire::TransportId::Tcp, wire::TransportId::Shm}) {
        wire::PackedRkey k;
        std::string why;
        if (wire::decode_rkey({data, size}, t, &k, &why) != GDX_OK) {
            require(!why.empty());
            continue;
        }
        require(k.base <= UINT64_MAX - k.length);
        require((k.access & ~(kAccessRemoteRead | kAccessRemoteWrite)) == 0);
    }
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    std::string why;
    log::configure(log::Level::Error, "/dev/null", &why); // refusals log a line each: keep the fuzzer's output
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    check_transport_keys(data, size);
    static FuzzMd md;
    std::unique_ptr<fb::RemoteRegion> rr;
    if (fb::RemoteRegion::unpack({data, size}, md, &rr) != GDX_OK) {
        require(rr == nullptr);
        return 0;
    }
    require(rr != nullptr && rr->id() != 0);
    require(rr->base() <= UINT64_MAX - rr->length());
    require((rr->access() & ~(kAccessRemoteRead | kAccessRemoteWrite)) == 0);
    require(static_cast<uint8_t>(rr->kind()) < static_cast<uint8_t>(mem::MemKind::kCount));
    uint64_t next = 0;
    for (const fb::RemoteRegion::Chunk &c : rr->chunks()) {
        require(c.offset == next && c.length > 0 && c.length <= rr->length() - c.offset);
        require(static_cast<uint8_t>(c.reach) <= static_cast<uint8_t>(Reach::Ipc));
        next = c.offset + c.length;
    }
    require(next == rr->length());
    // What the pipeline asks of an accepted key must not trip over it.
    if (rr->length() > 0) {
        (void)rr->direct(0, rr->length());
        (void)rr->reach_at(rr->length() - 1);
    }
    return 0;
}
