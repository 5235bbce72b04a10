#include "transport/soft_key_md.h"

#include "core/error.h"
#include "transport/reg_check.h"

#include <cinttypes>
#include <new>

namespace gdx::tp {

namespace {
constexpr unsigned kRemoteRights = kAccessRemoteRead | kAccessRemoteWrite;
}

SoftKeyMemHandle::SoftKeyMemHandle(void *addr, size_t len, const mem::MemInfo &info, unsigned access,
                                   wire::TransportId transport, std::shared_ptr<RkeyTable> table)
    : MemHandle(addr, len, info, access), table_(std::move(table)), transport_(transport) {}

SoftKeyMemHandle::~SoftKeyMemHandle() { revoke_key(); }

void SoftKeyMemHandle::revoke_key() {
    if (key_id_ == 0) return;
    table_->revoke(key_id_);
    key_id_ = 0;
}

const SoftKeyMemHandle *SoftKeyMemHandle::of(const MemHandle *memh, wire::TransportId transport) {
    const auto *h = dynamic_cast<const SoftKeyMemHandle *>(memh);
    return h != nullptr && h->transport_ == transport ? h : nullptr;
}

gdx_status_t SoftKeyMemHandle::pack_rkey(std::span<uint8_t> out) const {
    if (out.size() < wire::kPackedRkeySize)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, "transport", "pack_rkey: %zu-byte buffer, need %zu", out.size(),
                        wire::kPackedRkeySize);
    wire::PackedRkey k;
    k.transport = transport_;
    k.key_id = key_id_;
    k.access = key_id_ != 0 ? (access_ & kRemoteRights) : 0; // a key that opens nothing claims nothing
    k.base = reinterpret_cast<uintptr_t>(addr_);
    k.length = length_;
    wire::encode_rkey(k, out.data());
    return GDX_OK;
}

SoftRemoteKey::SoftRemoteKey(wire::TransportId transport, uint64_t key_id, uint64_t base, uint64_t length,
                             unsigned access)
    : transport_(transport), key_id_(key_id) {
    base_ = base;
    length_ = length;
    access_ = access;
}

const SoftRemoteKey *SoftRemoteKey::of(const RemoteKey &rkey, wire::TransportId transport) {
    const auto *k = dynamic_cast<const SoftRemoteKey *>(&rkey);
    return k != nullptr && k->transport_ == transport ? k : nullptr;
}

SoftKeyMd::SoftKeyMd(const char *name, wire::TransportId transport, const char *host_reason, const char *staging_hint)
    : name_(name), transport_(transport), host_reason_(host_reason), staging_hint_(staging_hint),
      table_(std::make_shared<RkeyTable>()) {}

std::unique_ptr<SoftKeyMemHandle> SoftKeyMd::make_handle(void *addr, size_t len, const mem::MemInfo &info,
                                                         unsigned access) {
    return std::make_unique<SoftKeyMemHandle>(addr, len, info, access, transport_, table_);
}

gdx_status_t SoftKeyMd::mem_reg(void *addr, size_t len, const mem::MemInfo &info, unsigned access,
                                std::unique_ptr<MemHandle> *out) {
    if (gdx_status_t st = check_mem_reg(name_, {}, addr, len, info, access, out); st != GDX_OK) return st;
    std::unique_ptr<SoftKeyMemHandle> h;
    ChunkReg c;
    c.length = len;
    try {
        h = make_handle(addr, len, info, access);
        // Only memory the CPU copies with plain loads and stores (and the kernel reaches for the transport's
        // system calls) is reached directly. Managed memory is host-accessible but lives in GPU-driver mappings.
        if (mem::is_host_type(info.type)) {
            c.reach = Reach::Host;
            c.reason = host_reason_;
        } else {
            c.reach = Reach::None;
            c.reason = std::string(mem::type_name(info.type)) + " memory: " + name_ + " reaches host memory only; " +
                       staging_hint_;
        }
        h->chunks_.push_back(c);
    } catch (const std::bad_alloc &) {
        return GDX_FAIL(GDX_ERR_NO_MEMORY, name_, "mem_reg: out of memory for a handle");
    }
    // A key opens only directly reachable memory: a GPU registration gets none (id 0 opens nothing).
    const unsigned remote = access & kRemoteRights;
    if (remote != 0 && c.reach == Reach::Host)
        if (gdx_status_t st = table_->add(reinterpret_cast<uintptr_t>(addr), len, remote, &h->key_id_); st != GDX_OK)
            return st;
    GDX_DEBUG(name_, "registered %p+%zu (%s) access 0x%x key 0x%016" PRIx64 ": %s", addr, len,
              mem::type_name(info.type), access, h->key_id_, c.reason.c_str());
    *out = std::move(h);
    return GDX_OK;
}

gdx_status_t SoftKeyMd::rkey_unpack(std::span<const uint8_t> packed, std::unique_ptr<RemoteKey> *out) {
    if (out == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, name_, "rkey_unpack: null output");
    wire::PackedRkey k;
    std::string why;
    if (wire::decode_rkey(packed, transport_, &k, &why) != GDX_OK)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, name_, "rkey_unpack: %s", why.c_str());
    try {
        *out = std::make_unique<SoftRemoteKey>(transport_, k.key_id, k.base, k.length, k.access);
    } catch (const std::bad_alloc &) {
        return GDX_FAIL(GDX_ERR_NO_MEMORY, name_, "rkey_unpack: out of memory");
    }
    return GDX_OK;
}

} // namespace gdx::tp
