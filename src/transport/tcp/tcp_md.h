// The tcp memory domain. The kernel's socket calls read and write host memory, so host memory needs no
// registration beyond a remote-key record, and nothing else is reachable: GPU chunks come back Reach::None
// (the fallback layer stages them). Remote keys are enforced in software by the target (RkeyTable).
#pragma once

#include "transport/rkey_table.h"
#include "transport/transport.h"

#include <memory>

namespace gdx::tp::tcp {

class TcpMemHandle final : public MemHandle {
  public:
    TcpMemHandle(void *addr, size_t length, const mem::MemInfo &info, unsigned access,
                 std::shared_ptr<RkeyTable> table);
    ~TcpMemHandle() override; // revokes the remote key
    gdx_status_t pack_rkey(std::span<uint8_t> out) const override;
    uint64_t key_id() const { return key_id_; }
    gdx_status_t init(); // classifies the chunks and, for reachable memory with remote access, issues the key

  private:
    std::shared_ptr<RkeyTable> table_; // shared: a handle may outlive its interface without dangling
    uint64_t key_id_ = 0;              // 0: no remote access through this registration
};

class TcpRemoteKey final : public RemoteKey {
  public:
    TcpRemoteKey(uint64_t key_id, uint64_t base, uint64_t length, unsigned access) : key_id_(key_id) {
        base_ = base;
        length_ = length;
        access_ = access;
    }
    uint64_t key_id() const { return key_id_; }

  private:
    uint64_t key_id_;
};

class TcpMd final : public MemoryDomain {
  public:
    TcpMd() : table_(std::make_shared<RkeyTable>()) {}
    std::string_view name() const override { return "tcp"; }
    gdx_status_t mem_reg(void *addr, size_t len, const mem::MemInfo &info, unsigned access,
                         std::unique_ptr<MemHandle> *out) override;
    size_t rkey_packed_size() const override;
    gdx_status_t rkey_unpack(std::span<const uint8_t> packed, std::unique_ptr<RemoteKey> *out) override;
    RkeyTable &table() { return *table_; }

  private:
    std::shared_ptr<RkeyTable> table_;
};

} // namespace gdx::tp::tcp
