#include "transport/cuda_ipc/ipc_cache.h"

#include "core/error.h"
#include "memtype/memory_ops.h"

#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <unistd.h>

namespace gdx::tp::cuda_ipc {

namespace {
constexpr const char *kComp = "cuda_ipc";
constexpr size_t kMaxRevoked = 4096;

const mem::Ops &gpu() { return mem::ops(mem::MemKind::Cuda); }

bool overlaps(const Mapping &m, uint64_t base, uint64_t size) {
    return m.alloc_base < base + size && base < m.alloc_base + m.alloc_size;
}
} // namespace

ImportCache::~ImportCache() {
    for (auto &e : map_) close(*e.second);
    for (auto &p : pools_) gpu().ipc_release_pool(p.second, device_);
}

bool ImportCache::waiting() const {
    for (auto &e : map_)
        if (e.second->state == Mapping::State::WaitFd) return true;
    return false;
}

gdx_status_t ImportCache::open(Mapping &m, int fd, void *pool) {
    mem::IpcHandle h;
    h.kind = ipc_kind(m.kind);
    std::memcpy(h.bytes, m.handle, kHandleSize);
    h.pool_id = m.pool_id;
    mem::IpcMapping mapped;
    if (gdx_status_t st = gpu().ipc_import(h, m.alloc_size, fd, pool, device_, &mapped); st != GDX_OK)
        return GDX_FAIL(st, kComp, "importing buffer %" PRIu64 " of exporter %016" PRIx64 " (%s, %" PRIu64 " bytes): %s",
                        m.buffer_id, m.exporter, export_kind_name(m.kind), m.alloc_size, last_error().c_str());
    m.ptr = mapped.ptr; // the ops table told the memtype layer (note_ipc_import)
    return GDX_OK;
}

gdx_status_t ImportCache::pool_for(Mapping &m, int fd, void **pool) {
    Key pk{m.exporter, m.pool_id};
    auto it = pools_.find(pk);
    if (it == pools_.end()) {
        void *p = nullptr;
        if (gdx_status_t st = gpu().ipc_import_pool(fd, device_, &p); st != GDX_OK)
            return GDX_FAIL(st, kComp, "importing the memory pool of exporter %016" PRIx64 " (for buffer %" PRIu64
                            "): %s", m.exporter, m.buffer_id, last_error().c_str());
        it = pools_.emplace(pk, p).first;
    }
    *pool = it->second;
    return GDX_OK;
}

void ImportCache::close(Mapping &m) {
    if (m.ptr == nullptr) return;
    mem::IpcMapping mapped{ipc_kind(m.kind), m.ptr, m.alloc_size, device_};
    if (gpu().ipc_close(&mapped) != GDX_OK) // the memtype layer was told either way (note_ipc_close)
        GDX_WARN(kComp, "closing the mapping of buffer %" PRIu64 " from %016" PRIx64 ": %s", m.buffer_id, m.exporter,
                 last_error().c_str());
    m.ptr = nullptr;
}

bool ImportCache::drop_overlapping(const PackedKey &k) {
    bool clear = true;
    for (auto &e : map_) {
        Mapping &m = *e.second;
        if (m.exporter != k.exporter_nonce || m.buffer_id == k.buffer_id || !overlaps(m, k.alloc_base, k.alloc_size))
            continue;
        if (!m.stale && m.buffer_id > k.buffer_id) {
            // The key is older than the allocation we have mapped there (the driver hands out increasing ids): a
            // stale key whose revocation is on its way. Never open its handle (the memory may be reused); wait.
            clear = false;
            continue;
        }
        // The exporter freed that allocation and reused its addresses: the old mapping is dead.
        m.stale = true;
        if (m.inflight > 0) clear = false;
    }
    collect();
    return clear;
}

gdx_status_t ImportCache::acquire(const PackedKey &k, Mapping **out, bool *need_fd) {
    *need_fd = false;
    Key key{k.exporter_nonce, k.buffer_id};
    if (revoked_.count(RevokedKey{k.exporter_nonce, k.buffer_id, k.epoch}))
        return GDX_FAIL(GDX_ERR_ACCESS_DENIED, kComp, "remote key for buffer %" PRIu64 " was revoked by its exporter "
                        "(deregistered)", k.buffer_id);
    auto it = map_.find(key);
    if (it != map_.end() && !it->second->stale) {
        Mapping &m = *it->second;
        m.last_use = ++clock_;
        m.epoch = std::max(m.epoch, k.epoch); // the allocation was exported again: still the same memory
        *out = &m;
        if (m.state == Mapping::State::Ready) return GDX_OK;
        return m.state == Mapping::State::WaitFd ? GDX_ERR_NO_RESOURCE : m.error;
    }
    if (it != map_.end()) return GDX_ERR_NO_RESOURCE; // a stale twin still drains: retry after progress
    if (!drop_overlapping(k)) return GDX_ERR_NO_RESOURCE;
    auto m = std::make_unique<Mapping>();
    m->exporter = k.exporter_nonce;
    m->buffer_id = k.buffer_id;
    m->kind = k.kind;
    m->alloc_base = k.alloc_base;
    m->alloc_size = k.alloc_size;
    m->token = k.token;
    m->pool_id = k.pool_id;
    m->epoch = k.epoch;
    std::memcpy(m->handle, k.handle, kHandleSize);
    m->last_use = ++clock_;
    gdx_status_t st = GDX_ERR_NO_RESOURCE;
    if (k.kind == ExportKind::Legacy) {
        st = open(*m, -1, nullptr);
    } else if (k.kind == ExportKind::Pool && pools_.count({k.exporter_nonce, k.pool_id})) {
        st = open(*m, -1, pools_[{k.exporter_nonce, k.pool_id}]);
    } else if (k.kind == ExportKind::Vmm || k.kind == ExportKind::Pool) {
        *need_fd = true; // the descriptor comes from the exporter over the control socket
    } else {
        st = GDX_FAIL(GDX_ERR_UNSUPPORTED, kComp, "remote key of kind %s cannot be imported",
                      export_kind_name(k.kind));
    }
    if (st == GDX_OK) {
        m->state = Mapping::State::Ready;
    } else if (st != GDX_ERR_NO_RESOURCE) {
        m->state = Mapping::State::Failed;
        m->error = st;
    }
    *out = m.get();
    map_[key] = std::move(m);
    collect();
    return st;
}

void ImportCache::on_fd(uint64_t exporter, uint64_t token, gdx_status_t status, int fd) {
    for (auto &e : map_) {
        Mapping &m = *e.second;
        if (m.exporter != exporter || m.token != token || m.state != Mapping::State::WaitFd) continue;
        gdx_status_t st = status;
        if (st == GDX_OK && fd < 0) st = GDX_ERR_PROTOCOL;
        if (st == GDX_OK && m.kind == ExportKind::Vmm) {
            st = open(m, fd, nullptr);
        } else if (st == GDX_OK && m.kind == ExportKind::Pool) {
            void *pool = nullptr;
            st = pool_for(m, fd, &pool);
            if (st == GDX_OK) st = open(m, -1, pool);
        }
        if (st == GDX_OK) {
            m.state = Mapping::State::Ready;
        } else {
            m.state = Mapping::State::Failed;
            m.error = st;
        }
        break; // one token, one allocation
    }
    if (fd >= 0) ::close(fd);
}

void ImportCache::revoke(uint64_t exporter, uint64_t buffer_id, uint64_t epoch) {
    auto it = map_.find(Key{exporter, buffer_id});
    if (it != map_.end() && it->second->epoch <= epoch) it->second->stale = true;
    RevokedKey key{exporter, buffer_id, epoch};
    if (revoked_.insert(key).second) {
        revoked_order_.push_back(key);
        if (revoked_order_.size() > kMaxRevoked) {
            revoked_.erase(revoked_order_.front());
            revoked_order_.pop_front();
        }
    }
    collect();
}

void ImportCache::exporter_gone(uint64_t exporter) {
    for (auto &e : map_) {
        Mapping &m = *e.second;
        if (m.exporter != exporter) continue;
        m.stale = true;
        if (m.state == Mapping::State::WaitFd) {
            m.state = Mapping::State::Failed;
            m.error = GDX_ERR_CONNECTION_RESET;
        }
    }
    for (auto it = pools_.begin(); it != pools_.end();) {
        if (it->first.first == exporter) {
            bool used = false;
            for (auto &e : map_) used |= e.second->exporter == exporter && e.second->ptr != nullptr;
            if (used) {
                ++it;
                continue; // destroyed with the cache; its pointers are closed first
            }
            gpu().ipc_release_pool(it->second, device_);
            it = pools_.erase(it);
        } else {
            ++it;
        }
    }
    collect();
}

void ImportCache::collect() {
    for (auto it = map_.begin(); it != map_.end();) {
        Mapping &m = *it->second;
        if ((m.stale || m.state == Mapping::State::Failed) && m.inflight == 0 && m.state != Mapping::State::WaitFd &&
            (m.stale || m.last_use + 64 < clock_)) {
            close(m);
            it = map_.erase(it);
        } else {
            ++it;
        }
    }
    while (map_.size() > capacity_) {
        auto victim = map_.end();
        for (auto it = map_.begin(); it != map_.end(); ++it)
            if (it->second->inflight == 0 && it->second->state == Mapping::State::Ready &&
                (victim == map_.end() || it->second->last_use < victim->second->last_use))
                victim = it;
        if (victim == map_.end()) break; // everything is in use: over capacity until copies finish
        close(*victim->second);
        map_.erase(victim);
    }
}

} // namespace gdx::tp::cuda_ipc
