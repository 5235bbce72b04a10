#include "transport/tcp/tcp_md.h"

#include "core/error.h"
#include "transport/wire.h"
#include "transport/reg_check.h"

#include <cinttypes>

namespace gdx::tp::tcp {

TcpMemHandle::TcpMemHandle(void *addr, size_t length, const mem::MemInfo &info, unsigned access,
                           std::shared_ptr<RkeyTable> table)
    : MemHandle(addr, length, info, access), table_(std::move(table)) {}

TcpMemHandle::~TcpMemHandle() {
    if (key_id_ != 0) table_->revoke(key_id_);
}

gdx_status_t TcpMemHandle::init() {
    ChunkReg c;
    c.length = length_;
    if (mem::is_host_type(info_.type)) {
        c.reach = Reach::Host;
        c.reason = "host memory: the kernel's socket calls read and write it in place";
    } else {
        c.reach = Reach::None;
        c.reason = std::string("tcp reaches host memory only; ") + mem::type_name(info_.type) +
                   " memory must be staged through host buffers";
    }
    chunks_.push_back(std::move(c));
    unsigned remote = access_ & (kAccessRemoteRead | kAccessRemoteWrite);
    // A key opens only directly reachable memory: a GPU registration gets no key (id 0 opens nothing).
    if (remote != 0 && chunks_[0].reach != Reach::None)
        return table_->add(reinterpret_cast<uintptr_t>(addr_), length_, remote, &key_id_);
    return GDX_OK;
}

gdx_status_t TcpMemHandle::pack_rkey(std::span<uint8_t> out) const {
    if (out.size() < wire::kPackedRkeySize)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, "tcp", "pack_rkey: buffer of %zu bytes, need %zu", out.size(),
                        wire::kPackedRkeySize);
    wire::PackedRkey k;
    k.transport = wire::TransportId::Tcp;
    k.key_id = key_id_;
    k.access = key_id_ != 0 ? (access_ & (kAccessRemoteRead | kAccessRemoteWrite)) : 0;
    k.base = reinterpret_cast<uintptr_t>(addr_);
    k.length = length_;
    wire::encode_rkey(k, out.data());
    return GDX_OK;
}

gdx_status_t TcpMd::mem_reg(void *addr, size_t len, const mem::MemInfo &info, unsigned access,
                            std::unique_ptr<MemHandle> *out) {
    if (gdx_status_t st = check_mem_reg("tcp", {}, addr, len, info, access, out); st != GDX_OK) return st;
    std::unique_ptr<TcpMemHandle> h;
    try {
        h = std::make_unique<TcpMemHandle>(addr, len, info, access, table_);
    } catch (const std::bad_alloc &) {
        return GDX_FAIL(GDX_ERR_NO_MEMORY, "tcp", "mem_reg: out of memory for a handle");
    }
    gdx_status_t st = h->init();
    if (st != GDX_OK) return st;
    GDX_DEBUG("tcp", "registered %p+%zu (%s) access 0x%x key 0x%016" PRIx64 ": %s", addr, len,
              mem::type_name(info.type), access, h->key_id(), h->chunks()[0].reason.c_str());
    *out = std::move(h);
    return GDX_OK;
}

size_t TcpMd::rkey_packed_size() const { return wire::kPackedRkeySize; }

gdx_status_t TcpMd::rkey_unpack(std::span<const uint8_t> packed, std::unique_ptr<RemoteKey> *out) {
    if (out == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, "tcp", "rkey_unpack: null output");
    wire::PackedRkey k;
    std::string why;
    if (wire::decode_rkey(packed, wire::TransportId::Tcp, &k, &why) != GDX_OK)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, "tcp", "rkey_unpack: %s", why.c_str());
    try {
        *out = std::make_unique<TcpRemoteKey>(k.key_id, k.base, k.length, k.access);
    } catch (const std::bad_alloc &) {
        return GDX_FAIL(GDX_ERR_NO_MEMORY, "tcp", "rkey_unpack: out of memory");
    }
    return GDX_OK;
}

} // namespace gdx::tp::tcp
