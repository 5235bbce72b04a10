#include "transport/cuda_ipc/ipc_key.h"

#include "transport/transport.h"
#include "transport/wire.h"

#include <cstring>

namespace gdx::tp::cuda_ipc {

using wire::load_le32;
using wire::load_le64;
using wire::store_le32;
using wire::store_le64;

namespace {
constexpr uint8_t kVersion = 1;

gdx_status_t bad(std::string *why, const char *what) {
    *why = what;
    return GDX_ERR_INVALID_PARAM;
}
} // namespace

const char *export_kind_name(ExportKind k) {
    switch (k) {
    case ExportKind::None: return "none";
    case ExportKind::Legacy: return "legacy-ipc";
    case ExportKind::Vmm: return "vmm-fd";
    case ExportKind::Pool: return "pool-fd";
    case ExportKind::Shared: return "shared-segment";
    }
    return "?";
}

void encode_key(const PackedKey &k, uint8_t out[kKeySize]) {
    std::memset(out, 0, kKeySize);
    out[0] = kVersion;
    out[1] = static_cast<uint8_t>(wire::TransportId::CudaIpc);
    out[2] = static_cast<uint8_t>(k.kind);
    store_le32(out + 4, k.access);
    store_le64(out + 8, k.exporter_nonce);
    store_le32(out + 16, k.exporter_pid);
    store_le32(out + 20, static_cast<uint32_t>(k.exporter_device));
    store_le64(out + 24, k.buffer_id);
    store_le64(out + 32, k.alloc_base);
    store_le64(out + 40, k.alloc_size);
    store_le64(out + 48, k.reg_base);
    store_le64(out + 56, k.reg_len);
    store_le64(out + 64, k.token);
    store_le64(out + 72, k.pool_id);
    std::memcpy(out + 80, k.handle, kHandleSize);
    store_le64(out + 144, k.epoch);
}

gdx_status_t decode_key(std::span<const uint8_t> in, PackedKey *out, std::string *why) {
    if (in.size() != kKeySize) return bad(why, "cuda_ipc remote key has the wrong size");
    const uint8_t *p = in.data();
    if (p[0] != kVersion) return bad(why, "cuda_ipc remote key version mismatch");
    if (p[1] != static_cast<uint8_t>(wire::TransportId::CudaIpc)) return bad(why, "remote key not issued by cuda_ipc");
    if (p[2] > static_cast<uint8_t>(ExportKind::Shared)) return bad(why, "unknown export kind");
    if (p[3] != 0) return bad(why, "reserved byte is not zero");
    for (size_t i = 152; i < kKeySize; ++i)
        if (p[i] != 0) return bad(why, "reserved tail is not zero");
    PackedKey k;
    k.kind = static_cast<ExportKind>(p[2]);
    k.access = load_le32(p + 4);
    if ((k.access & ~static_cast<uint32_t>(kAccessRemoteRead | kAccessRemoteWrite)) != 0)
        return bad(why, "remote key grants unknown or local access bits");
    k.exporter_nonce = load_le64(p + 8);
    k.exporter_pid = load_le32(p + 16);
    k.exporter_device = static_cast<int32_t>(load_le32(p + 20));
    k.buffer_id = load_le64(p + 24);
    k.alloc_base = load_le64(p + 32);
    k.alloc_size = load_le64(p + 40);
    k.reg_base = load_le64(p + 48);
    k.reg_len = load_le64(p + 56);
    k.token = load_le64(p + 64);
    k.pool_id = load_le64(p + 72);
    std::memcpy(k.handle, p + 80, kHandleSize);
    k.epoch = load_le64(p + 144);
    if (k.alloc_base > UINT64_MAX - k.alloc_size || k.reg_base > UINT64_MAX - k.reg_len)
        return bad(why, "remote key range wraps around");
    if (k.kind != ExportKind::None && !wire::range_inside(k.reg_base, k.reg_len, k.alloc_base, k.alloc_size))
        return bad(why, "registered range lies outside the exported allocation");
    if (k.kind == ExportKind::None && k.access != 0) return bad(why, "unexported key grants access");
    if (k.kind == ExportKind::Shared && k.token == 0) return bad(why, "shared-segment key without a key id");
    *out = k;
    return GDX_OK;
}

} // namespace gdx::tp::cuda_ipc
