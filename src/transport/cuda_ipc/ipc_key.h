// The cuda_ipc remote key: what an importer needs to map an exporter's GPU allocation, and the range and rights
// the exporter granted. 160 bytes, little-endian (wire codecs), validated field by field on unpack.
//
//   off size field
//    0   1   version (1)
//    1   1   transport (wire::TransportId::CudaIpc)
//    2   1   kind (ExportKind)
//    3   1   reserved 0
//    4   4   access (remote rights)
//    8   8   exporter interface nonce (which peer interface to ask for descriptors)
//   16   4   exporter pid
//   20   4   exporter device ordinal (its own numbering; for messages only)
//   24   8   buffer id (CU_POINTER_ATTRIBUTE_BUFFER_ID: unique per allocation, changes on free + reuse)
//   32   8   allocation base   40 8 allocation size   (exporter virtual addresses)
//   48   8   registered base   56 8 registered length
//   64   8   export token (VMM/pool: the id the importer quotes to get the descriptor; shared segment: its key
//              id in the exporter's key table, which the importer quotes in MAP_REQ)
//   72   8   pool id (pool: the exporter's pool handle value, so one pool is imported once)
//   80  64   handle (legacy: CUipcMemHandle; pool: CUmemPoolPtrExportData; VMM: zero)
//  144   8   export epoch (which lifetime of the allocation's export: REVOKE names it, so a later
//              registration of the same allocation is not refused as revoked)
//  152   8   reserved 0
#pragma once

#include "gdx/status.h"
#include "memtype/memory_ops.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace gdx::tp::cuda_ipc {

// Shared: host memory the exporter made with alloc_shared (the staging engine's bounce pools), which a peer maps
// (Endpoint::map_remote, src/transport/shm/peer_map.h); allocation range = the registered one, buffer id 0.
enum class ExportKind : uint8_t { None = 0, Legacy = 1, Vmm = 2, Pool = 3, Shared = 4 };
const char *export_kind_name(ExportKind k);

// The GPU exports are the memory ops table's IPC kinds (memory_ops.h), with the same values.
inline mem::IpcKind ipc_kind(ExportKind k) {
    static_assert(static_cast<int>(ExportKind::Legacy) == static_cast<int>(mem::IpcKind::Legacy) &&
                  static_cast<int>(ExportKind::Vmm) == static_cast<int>(mem::IpcKind::Vmm) &&
                  static_cast<int>(ExportKind::Pool) == static_cast<int>(mem::IpcKind::Pool));
    return k == ExportKind::Legacy || k == ExportKind::Vmm || k == ExportKind::Pool ? static_cast<mem::IpcKind>(k)
                                                                                     : mem::IpcKind::None;
}
inline ExportKind export_kind(mem::IpcKind k) { return static_cast<ExportKind>(k); }

inline constexpr size_t kKeySize = 160;
inline constexpr size_t kHandleSize = mem::kIpcHandleSize;

struct PackedKey {
    ExportKind kind = ExportKind::None;
    uint32_t access = 0;
    uint64_t exporter_nonce = 0;
    uint32_t exporter_pid = 0;
    int32_t exporter_device = -1;
    uint64_t buffer_id = 0;
    uint64_t alloc_base = 0, alloc_size = 0;
    uint64_t reg_base = 0, reg_len = 0;
    uint64_t token = 0, pool_id = 0;
    uint64_t epoch = 0;
    uint8_t handle[kHandleSize] = {};
};

void encode_key(const PackedKey &k, uint8_t out[kKeySize]);
// GDX_ERR_INVALID_PARAM with *why when the bytes are not a sane key: size, version, transport, kind, access
// bits, ranges that wrap or a registered range outside the allocation.
gdx_status_t decode_key(std::span<const uint8_t> in, PackedKey *out, std::string *why);

} // namespace gdx::tp::cuda_ipc
