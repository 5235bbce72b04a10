// The memory domain of a transport whose target side is a CPU (tcp, shm): written once here because the two
// were the same code. The CPU reads and writes host memory in place, so host memory needs no registration
// beyond a remote-key record, and nothing else is reachable: other memory comes back Reach::None (the staging
// layer moves it through host buffers). Remote keys are ids in a software table (RkeyTable) that the TARGET
// checks every request against; what a packed key claims is never trusted there.
//
// A transport derives its domain from SoftKeyMd, giving its name, wire id and the words that say why host memory
// is reached; one that must do more before a key is revoked (shm waits for copies a peer was granted) makes its
// own handle, derived from SoftKeyMemHandle, in make_handle().
#pragma once

#include "transport/rkey_table.h"
#include "transport/transport.h"
#include "transport/wire.h"

#include <memory>

namespace gdx::tp {

class SoftKeyMemHandle : public MemHandle {
  public:
    SoftKeyMemHandle(void *addr, size_t len, const mem::MemInfo &info, unsigned access, wire::TransportId transport,
                     std::shared_ptr<RkeyTable> table);
    ~SoftKeyMemHandle() override; // revokes the key: later requests with it are refused by the target
    gdx_status_t pack_rkey(std::span<uint8_t> out) const final;
    uint64_t key_id() const { return key_id_; } // 0: opens nothing (no remote rights, or memory not reached)
    wire::TransportId transport() const { return transport_; }

    // `memh` as a registration of `transport`'s domain, or null (another transport's, or none).
    static const SoftKeyMemHandle *of(const MemHandle *memh, wire::TransportId transport);

  protected:
    // Revokes the key now (idempotent), for a derived destructor that must revoke before it returns.
    void revoke_key();

  private:
    friend class SoftKeyMd;
    std::shared_ptr<RkeyTable> table_; // shared: a handle may outlive its interface without dangling
    wire::TransportId transport_;
    uint64_t key_id_ = 0;
};

class SoftRemoteKey final : public RemoteKey {
  public:
    SoftRemoteKey(wire::TransportId transport, uint64_t key_id, uint64_t base, uint64_t length, unsigned access);
    uint64_t key_id() const { return key_id_; }

    // `rkey` as a key unpacked by `transport`'s domain, or null (another transport's key).
    static const SoftRemoteKey *of(const RemoteKey &rkey, wire::TransportId transport);

  private:
    wire::TransportId transport_;
    uint64_t key_id_;
};

class SoftKeyMd : public MemoryDomain {
  public:
    std::string_view name() const final { return name_; }
    // The base's argument checks (reg_check.h); host memory: Reach::Host and, for remote rights, a fresh key.
    gdx_status_t mem_reg(void *addr, size_t len, const mem::MemInfo &info, unsigned access,
                         std::unique_ptr<MemHandle> *out) final;
    size_t rkey_packed_size() const final { return wire::kPackedRkeySize; }
    // Refuses (GDX_ERR_INVALID_PARAM) bytes that are not a well-formed key of this transport.
    gdx_status_t rkey_unpack(std::span<const uint8_t> packed, std::unique_ptr<RemoteKey> *out) final;
    RkeyTable &table() { return *table_; }
    const RkeyTable &table() const { return *table_; }
    wire::TransportId transport() const { return transport_; }

  protected:
    // `name`: the transport ("tcp"), also the log component; `host_reason`: why host memory is reached directly;
    // `staging_hint`: what becomes of memory it does not reach. All three must outlive the domain (literals).
    SoftKeyMd(const char *name, wire::TransportId transport, const char *host_reason, const char *staging_hint);
    // The handle of one registration, before its chunk is classified and its key issued.
    virtual std::unique_ptr<SoftKeyMemHandle> make_handle(void *addr, size_t len, const mem::MemInfo &info,
                                                          unsigned access);
    std::shared_ptr<RkeyTable> shared_table() const { return table_; } // for a handle of make_handle()'s

  private:
    const char *name_;
    wire::TransportId transport_;
    const char *host_reason_, *staging_hint_;
    std::shared_ptr<RkeyTable> table_;
};

} // namespace gdx::tp
