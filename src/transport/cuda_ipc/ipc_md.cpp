// cuda_ipc memory domain: decides reach per chunk and, for remote rights, exports the allocation (legacy IPC
// handle, VMM or pool POSIX fd) into a remote key.
#include "transport/cuda_ipc/ipc_iface.h"

#include "core/error.h"
#include "transport/reg_check.h"

#include <cstring>
#include <map>
#include <unistd.h>

namespace gdx::tp::cuda_ipc {

namespace {
constexpr const char *kComp = "cuda_ipc";
std::mutex g_local_mutex;
std::map<uint64_t, std::weak_ptr<ExportState>> g_local;
} // namespace

void register_local_exporter(uint64_t nonce, const std::shared_ptr<ExportState> &s) {
    std::lock_guard<std::mutex> g(g_local_mutex);
    for (auto it = g_local.begin(); it != g_local.end();) // drop closed interfaces
        it = it->second.expired() ? g_local.erase(it) : std::next(it);
    g_local[nonce] = s;
}

std::shared_ptr<ExportState> local_exporter(uint64_t nonce) {
    std::lock_guard<std::mutex> g(g_local_mutex);
    auto it = g_local.find(nonce);
    return it == g_local.end() ? nullptr : it->second.lock();
}

ExportState::~ExportState() {
    for (auto &e : by_token)
        if (e.second.fd >= 0) close(e.second.fd);
}

IpcMemHandle::~IpcMemHandle() {
    // A shared segment's key opens nothing from here on; peers that mapped the segment keep their mapping (they
    // hold bounce slots the owner lent them, not user memory), as over shm.
    if (shared_keys_) shared_keys_->revoke(key_.token);
    if (!exported_) return;
    std::lock_guard<std::mutex> g(state_->mutex);
    auto t = state_->by_token.find(key_.token);
    if (t != state_->by_token.end()) {
        if (t->second.fd >= 0) close(t->second.fd);
        state_->by_token.erase(t);
    }
    auto l = state_->live.find(key_.buffer_id);
    if (l != state_->live.end() && --l->second.count == 0) {
        state_->to_revoke.emplace_back(key_.buffer_id, l->second.epoch); // importers close their mapping
        state_->live.erase(l);
    }
}

gdx_status_t IpcMemHandle::pack_rkey(std::span<uint8_t> out) const {
    if (out.size() < kKeySize)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "pack_rkey: %zu-byte buffer, need %zu", out.size(), kKeySize);
    encode_key(key_, out.data());
    return GDX_OK;
}

gdx_status_t IpcMd::rkey_unpack(std::span<const uint8_t> packed, std::unique_ptr<RemoteKey> *out) {
    PackedKey k;
    std::string why;
    if (decode_key(packed, &k, &why) != GDX_OK)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "rkey_unpack: %s", why.c_str());
    *out = std::make_unique<IpcRemoteKey>(k);
    return GDX_OK;
}

gdx_status_t IpcMd::export_allocation(const mem::MemInfo &info, PackedKey *key, int *fd, std::string *why) {
    mem::IpcHandle h;
    gdx_status_t st = mem::ops(mem::MemKind::Cuda).ipc_export(info, &h, fd, why);
    if (st != GDX_OK) return st;
    static_assert(sizeof(h.bytes) == kHandleSize);
    std::memcpy(key->handle, h.bytes, kHandleSize);
    key->pool_id = h.pool_id;
    key->kind = export_kind(h.kind);
    return GDX_OK;
}

gdx_status_t IpcMd::reg_shared(IpcMemHandle &h, unsigned access) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(h.addr());
    ChunkReg c{0, h.length(), Reach::Host, "shared segment: the CPU and copy engines reach it, peers map it"};
    h.chunks_.push_back(c);
    unsigned remote = access & (kAccessRemoteRead | kAccessRemoteWrite);
    if (remote == 0) return GDX_OK;
    PackedKey &k = h.key_;
    if (gdx_status_t st = shared_keys_->add(a, h.length(), remote, &k.token); st != GDX_OK) return st;
    h.shared_keys_ = shared_keys_;
    k.kind = ExportKind::Shared;
    k.access = remote;
    k.exporter_nonce = nonce_;
    k.exporter_pid = static_cast<uint32_t>(getpid());
    k.exporter_device = device_;
    k.alloc_base = k.reg_base = a;
    k.alloc_size = k.reg_len = h.length();
    return GDX_OK;
}

gdx_status_t IpcMd::mem_reg(void *addr, size_t len, const mem::MemInfo &info, unsigned access,
                            std::unique_ptr<MemHandle> *out) {
    if (gdx_status_t st = check_mem_reg(kComp, {}, addr, len, info, access, out); st != GDX_OK) return st;
    uintptr_t a = reinterpret_cast<uintptr_t>(addr);
    auto h = std::make_unique<IpcMemHandle>(addr, len, info, access, state_);
    if (shared_.find(a, len) != nullptr) { // one of our shared segments (from its first byte): before GDX_P2P, which
                                           // concerns GPU memory only
        if (gdx_status_t st = reg_shared(*h, access); st != GDX_OK) return st;
        *out = std::move(h);
        return GDX_OK;
    }
    // The part inside the allocation memtype found; anything past its end is a second, unreachable chunk.
    size_t inside = len;
    if (info.size != 0 && a >= info.base && a - info.base < info.size) inside = std::min(len, info.size - (a - info.base));
    ChunkReg c{0, inside, Reach::None, ""};
    unsigned remote = access & (kAccessRemoteRead | kAccessRemoteWrite);
    bool gpu = info.type == mem::MemType::CudaDevice || info.type == mem::MemType::CudaVmm ||
               info.type == mem::MemType::CudaPool;
    if (p2p_ == Ternary::No) {
        c.reason = "GDX_P2P=no: GPU memory is staged through shared host memory";
    } else if (remote != 0) {
        PackedKey &k = h->key_;
        int fd = -1;
        std::string why;
        gdx_status_t st = export_allocation(info, &k, &fd, &why);
        if (st != GDX_OK) return st;
        if (k.kind == ExportKind::None) {
            c.reason = why;
        } else {
            uint64_t buffer_id = info.buffer_id;
            // VMM: a reservation's buffer id may survive unmap + remap of another physical allocation; the block
            // id is the allocation's own (bit 63 keeps the two id spaces apart).
            if (info.type == mem::MemType::CudaVmm && info.block_id != 0) buffer_id = info.block_id | (1ull << 63);
            if (buffer_id == 0) { // memtype did not say: ask the driver (the import cache is keyed by it)
                uint64_t id = 0;
                if (mem::ops(mem::MemKind::Cuda).buffer_id(addr, &id) == GDX_OK) buffer_id = id;
            }
            k.access = remote;
            k.exporter_nonce = nonce_;
            k.exporter_pid = static_cast<uint32_t>(getpid());
            k.exporter_device = info.device;
            k.buffer_id = buffer_id;
            k.alloc_base = info.base;
            k.alloc_size = info.size;
            k.reg_base = a;
            k.reg_len = inside;
            if (fd >= 0 && (st = secure_random_u64(&k.token)) != GDX_OK) {
                close(fd);
                return st;
            }
            {
                std::lock_guard<std::mutex> g(state_->mutex);
                if (fd >= 0) state_->by_token[k.token] = {fd, buffer_id, k.kind};
                ExportState::Live &l = state_->live[buffer_id];
                if (l.count++ == 0) l.epoch = ++state_->next_epoch; // a new export lifetime
                k.epoch = l.epoch;
            }
            h->exported_ = true;
            c.reach = Reach::Ipc;
            c.reason = std::string("CUDA IPC (") + export_kind_name(k.kind) + ")";
        }
    } else if (gpu || info.type == mem::MemType::CudaManaged || info.type == mem::MemType::HostPinned ||
               info.type == mem::MemType::HostRegistered) {
        c.reach = Reach::Ipc;
        c.reason = "local side of a CUDA copy";
    } else {
        c.reason = std::string(mem::type_name(info.type)) + ": not reachable by asynchronous CUDA copies (stage it)";
    }
    if (c.reach == Reach::Ipc && (gpu || info.type == mem::MemType::CudaManaged) && info.device != device_) {
        // Copies run on this interface's GPU and importers reach exports through its peer path: one GPU each.
        c.reach = Reach::None;
        c.reason = "memory of GPU " + std::to_string(info.device) + " registered on the GPU " +
                   std::to_string(device_) + " interface (open the interface of that GPU)";
    }
    h->chunks_.push_back(c);
    if (inside < len) h->chunks_.push_back({inside, len - inside, Reach::None, "beyond the end of the allocation"});
    if (c.reach == Reach::None)
        GDX_DEBUG(kComp, "mem_reg(%p, %zu, %s): not direct: %s", addr, len, mem::type_name(info.type),
                  c.reason.c_str());
    *out = std::move(h);
    return GDX_OK;
}

} // namespace gdx::tp::cuda_ipc
