// The shm memory domain: host memory needs no registration for CPU copies, so mem_reg only decides reach and,
// when remote rights are asked for, records the range in the software key table the target checks.
#include "core/error.h"
#include "transport/shm/shm_iface.h"
#include "transport/reg_check.h"

namespace gdx::tp::shm {

namespace {
constexpr const char *kComp = "shm";
}

ShmMemHandle::ShmMemHandle(void *addr, size_t len, const mem::MemInfo &info, unsigned access,
                           std::shared_ptr<RkeyTable> t, std::shared_ptr<GrantQuiescer> q)
    : MemHandle(addr, len, info, access), table_(std::move(t)), quiescer_(std::move(q)) {}

ShmMemHandle::~ShmMemHandle() {
    if (key_id_ == 0) return;
    // No peer may still be writing a granted part of this range when the caller gets its memory back.
    if (quiescer_->iface != nullptr) quiescer_->iface->quiesce_key(key_id_);
    // Revoked before the memory can go away: a later request with this key is refused by the target.
    table_->revoke(key_id_);
}

gdx_status_t ShmMemHandle::pack_rkey(std::span<uint8_t> out) const {
    if (out.size() < wire::kPackedRkeySize)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "pack_rkey: %zu-byte buffer, need %zu", out.size(),
                        wire::kPackedRkeySize);
    wire::PackedRkey k;
    k.transport = wire::TransportId::Shm;
    k.access = key_id_ != 0 ? (access_ & (kAccessRemoteRead | kAccessRemoteWrite)) : 0;
    k.key_id = key_id_;
    k.base = reinterpret_cast<uintptr_t>(addr_);
    k.length = length_;
    wire::encode_rkey(k, out.data());
    return GDX_OK;
}

gdx_status_t ShmMd::mem_reg(void *addr, size_t len, const mem::MemInfo &info, unsigned access,
                            std::unique_ptr<MemHandle> *out) {
    if (gdx_status_t st = check_mem_reg(kComp, {}, addr, len, info, access, out); st != GDX_OK) return st;
    uintptr_t a = reinterpret_cast<uintptr_t>(addr);
    auto h = std::make_unique<ShmMemHandle>(addr, len, info, access, table_, quiescer_);
    ChunkReg c;
    c.offset = 0;
    c.length = len;
    // Only memory the CPU copies with plain loads and stores (and the kernel pins for CMA) is reached directly.
    // Managed memory is host-accessible but lives in GPU-driver mappings that process_vm_* cannot pin reliably.
    if (mem::is_host_type(info.type)) {
        c.reach = Reach::Host;
        c.reason = "host memory: CPU copies / cross-memory attach";
    } else {
        c.reach = Reach::None;
        c.reason = std::string(mem::type_name(info.type)) +
                   ": shm moves host memory only (GPU memory: cuda_ipc, or staging through shared slots)";
    }
    h->chunks_.push_back(c);
    unsigned remote = access & (kAccessRemoteRead | kAccessRemoteWrite);
    if (remote != 0 && c.reach == Reach::Host) {
        gdx_status_t st = table_->add(a, len, remote, &h->key_id_);
        if (st != GDX_OK) return st;
    }
    *out = std::move(h);
    return GDX_OK;
}

size_t ShmMd::rkey_packed_size() const { return wire::kPackedRkeySize; }

gdx_status_t ShmMd::rkey_unpack(std::span<const uint8_t> packed, std::unique_ptr<RemoteKey> *out) {
    wire::PackedRkey k;
    std::string why;
    if (wire::decode_rkey(packed, wire::TransportId::Shm, &k, &why) != GDX_OK)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "rkey_unpack: %s", why.c_str());
    *out = std::make_unique<ShmRemoteKey>(k.key_id, k.base, k.length, k.access);
    return GDX_OK;
}

} // namespace gdx::tp::shm
