// cuda_ipc: GPU memory between processes of one host. The exporter's registration packs an IPC handle (legacy
// cuIpcGetMemHandle, or a POSIX fd for VMM and exportable pools, passed over the control socket on request);
// the importer maps it once (ImportCache) and moves bytes with cuMemcpyAsync on its own non-blocking streams:
// put = the importer writes the exporter's memory, get = it reads it. Control, active messages and revocations
// ride on the shm channel layer (src/transport/shm/channel.h). README.md has the design.
#pragma once

#include "core/config.h"
#include "transport/cuda_ipc/ipc_key.h"
#include "transport/rkey_table.h"
#include "transport/shm/peer_map.h"
#include "transport/transport.h"

#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace gdx::tp::cuda_ipc {

// What the exporter side of an interface has handed out: descriptors peers may ask for, and registrations whose
// revocation must be announced. Shared by the interface and its memory handles (which may be destroyed later).
struct ExportState {
    struct Export {
        int fd = -1;
        uint64_t buffer_id = 0;
        ExportKind kind = ExportKind::None;
    };
    std::mutex mutex;
    std::unordered_map<uint64_t, Export> by_token;
    struct Live {
        unsigned count = 0; // registrations with remote rights
        uint64_t epoch = 0; // this export lifetime's number (keys carry it; REVOKE names it)
    };
    std::unordered_map<uint64_t, Live> live;                 // buffer id -> its live export
    uint64_t next_epoch = 0;
    std::vector<std::pair<uint64_t, uint64_t>> to_revoke; // (buffer id, epoch) to announce at the next progress()
    ~ExportState();
};

class IpcMemHandle final : public MemHandle {
  public:
    IpcMemHandle(void *addr, size_t len, const mem::MemInfo &info, unsigned access, std::shared_ptr<ExportState> s)
        : MemHandle(addr, len, info, access), state_(std::move(s)) {}
    ~IpcMemHandle() override;
    gdx_status_t pack_rkey(std::span<uint8_t> out) const override;

  private:
    friend class IpcMd;
    std::shared_ptr<ExportState> state_;
    PackedKey key_;
    bool exported_ = false;
    std::shared_ptr<RkeyTable> shared_keys_; // a shared segment's key: revoked (key_.token) on deregistration
};

class IpcRemoteKey final : public RemoteKey {
  public:
    explicit IpcRemoteKey(const PackedKey &k) : key_(k) {
        base_ = k.reg_base;
        length_ = k.reg_len;
        access_ = k.access;
    }
    const PackedKey &key() const { return key_; }

  private:
    PackedKey key_;
};

class IpcMd final : public MemoryDomain {
  public:
    IpcMd(int device, uint64_t nonce, Ternary p2p, std::shared_ptr<ExportState> s)
        : device_(device), nonce_(nonce), p2p_(p2p), state_(std::move(s)), shared_keys_(std::make_shared<RkeyTable>()) {}
    std::string_view name() const override { return "cuda_ipc"; }
    gdx_status_t mem_reg(void *addr, size_t len, const mem::MemInfo &info, unsigned access,
                         std::unique_ptr<MemHandle> *out) override;
    size_t rkey_packed_size() const override { return kKeySize; }
    gdx_status_t rkey_unpack(std::span<const uint8_t> packed, std::unique_ptr<RemoteKey> *out) override;

    // Shared segments peers map (kCapPeerMap, the channel layer's service: shm/peer_map.h), with GDX_P2P on or off:
    // the staging engine's bounce pools, so that with no peer-to-peer path its staged fragments still cross with
    // no CPU copy. Their keys live in a table of their own (what MAP_REQ is checked against).
    gdx_status_t alloc_shared(size_t len, void **out) override { return shared_.alloc(len, out); }
    void free_shared(void *p) override { shared_.free(p); }
    const shm::SharedSegments &shared() const { return shared_; }
    const RkeyTable &shared_keys() const { return *shared_keys_; }

  private:
    // Fills key->kind/handle/token for the allocation behind `info`; GDX_OK with kind None and *why when it
    // cannot be exported (then the chunk is Reach::None).
    gdx_status_t export_allocation(const mem::MemInfo &info, PackedKey *key, int *fd, std::string *why);
    // mem_reg of exactly one shared segment: host memory the CPU and every copy engine reach; with remote rights
    // a key a peer may map it with.
    gdx_status_t reg_shared(IpcMemHandle &h, unsigned access);
    int device_;
    uint64_t nonce_;
    Ternary p2p_;
    std::shared_ptr<ExportState> state_;
    shm::SharedSegments shared_{"cuda_ipc"};
    std::shared_ptr<RkeyTable> shared_keys_;
};

// Process-wide: the export state of every open cuda_ipc interface, by nonce, for keys used inside their own
// process (CUDA cannot IPC-open a handle in the process that exported it; the pointer is used directly).
std::shared_ptr<ExportState> local_exporter(uint64_t nonce);

Component *cuda_ipc_component();

} // namespace gdx::tp::cuda_ipc
