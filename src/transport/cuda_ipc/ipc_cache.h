// The importer's cache of peer GPU allocations mapped into this process, keyed by (exporter interface, buffer
// id). The buffer id changes whenever the exporter frees an allocation and gets the same address again, so a
// new allocation never hits an old mapping; the old one is closed (once no copy uses it) as soon as a key shows
// that its range was reused, when the exporter revokes it, when the exporter goes away, or when the cache is
// over capacity (least recently used first). Nothing is ever opened twice, so no "already mapped" errors.
//
// The driver work (open, map, close) is the memory ops table's (memory_ops.h: ipc_import, ipc_close, pool imports);
// what is here is the policy: which mapping a key gets, when it is closed, which keys are refused.
#pragma once

#include "transport/cuda_ipc/ipc_key.h"

#include <deque>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <utility>

namespace gdx::tp::cuda_ipc {

struct Mapping {
    enum class State : uint8_t { WaitFd, Ready, Failed };
    uint64_t exporter = 0, buffer_id = 0;
    ExportKind kind = ExportKind::None;
    uint64_t alloc_base = 0, alloc_size = 0;
    uint64_t token = 0, pool_id = 0;
    uint64_t epoch = 0; // newest export epoch of the keys that used it (an older REVOKE leaves it open)
    uint8_t handle[kHandleSize] = {};
    uint8_t *ptr = nullptr; // where the exporter's alloc_base is mapped here
    State state = State::WaitFd;
    gdx_status_t error = GDX_OK;
    uint32_t inflight = 0; // copies using it: it is closed only at 0
    bool stale = false;
    uint64_t last_use = 0;
};

class ImportCache {
  public:
    ImportCache(int device, size_t capacity) : device_(device), capacity_(capacity ? capacity : 1) {}
    ~ImportCache(); // closes every mapping; the owner synchronized its streams first
    ImportCache(const ImportCache &) = delete;
    ImportCache &operator=(const ImportCache &) = delete;

    // The mapping for key `k`. GDX_OK: *m is ready. GDX_ERR_NO_RESOURCE: waiting for the exporter's descriptor
    // (*need_fd is set the first time: the caller asks for it, quoting k.token) or for a stale mapping of the
    // same range to drain. Errors: revoked key (GDX_ERR_ACCESS_DENIED), driver failures (GDX_ERR_DRIVER).
    gdx_status_t acquire(const PackedKey &k, Mapping **m, bool *need_fd);
    // The exporter's answer to a descriptor request; `fd` (-1 on error) is consumed.
    void on_fd(uint64_t exporter, uint64_t token, gdx_status_t status, int fd);
    // Closes the mapping of (exporter, buffer id) once unused and refuses keys of that export epoch from now on;
    // a later registration of the same allocation (a higher epoch) maps it afresh.
    void revoke(uint64_t exporter, uint64_t buffer_id, uint64_t epoch);
    void exporter_gone(uint64_t exporter);
    // Closes stale mappings nobody uses and trims to capacity.
    void collect();
    bool waiting() const;
    size_t size() const { return map_.size(); }

  private:
    using Key = std::pair<uint64_t, uint64_t>;
    // Maps m through the ops table (fd: VMM; pool: an imported pool) and marks it Ready or Failed.
    gdx_status_t open(Mapping &m, int fd, void *pool);
    // The exporter's pool for m, imported from `fd` on first use (one import per exporter and pool).
    gdx_status_t pool_for(Mapping &m, int fd, void **pool);
    void close(Mapping &m);
    // True when nothing overlapping stands in the way: older mappings of the range are closed (or closing); false
    // when one is still in use, or when the key itself is older than the mapping there (stale: wait for REVOKE).
    bool drop_overlapping(const PackedKey &k);

    int device_;
    size_t capacity_;
    uint64_t clock_ = 0;
    std::map<Key, std::unique_ptr<Mapping>> map_;
    std::map<Key, void *> pools_; // (exporter, pool id) -> imported pool (the ops table's handle)
    using RevokedKey = std::tuple<uint64_t, uint64_t, uint64_t>; // exporter, buffer id, epoch
    std::set<RevokedKey> revoked_;
    std::deque<RevokedKey> revoked_order_; // bounded memory of revocations
};

} // namespace gdx::tp::cuda_ipc
