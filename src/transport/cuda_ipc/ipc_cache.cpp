#include "transport/cuda_ipc/ipc_cache.h"

#if GDX_HAVE_CUDA_H
#include "core/error.h"
#include "memtype/cuda_driver.h"
#include "memtype/memory_ops.h"

#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <unistd.h>

namespace gdx::tp::cuda_ipc {

namespace {
constexpr const char *kComp = "cuda_ipc";
constexpr size_t kMaxRevoked = 4096;

gdx_status_t drv_fail(CUresult r, const char *what, const Mapping &m) {
    return GDX_FAIL(GDX_ERR_DRIVER, kComp, "%s (exporter %016" PRIx64 ", buffer %" PRIu64 ", %" PRIu64 " bytes): %s",
                    what, m.exporter, m.buffer_id, m.alloc_size, cuda::error_text(r).c_str());
}

bool overlaps(const Mapping &m, uint64_t base, uint64_t size) {
    return m.alloc_base < base + size && base < m.alloc_base + m.alloc_size;
}
} // namespace

ImportCache::~ImportCache() {
    for (auto &e : map_) close(*e.second);
    const cuda::DriverApi *api = cuda::driver();
    if (api && api->cuMemPoolDestroy) {
        cuda::DeviceScope scope(device_);
        for (auto &p : pools_) api->cuMemPoolDestroy(p.second);
    }
}

bool ImportCache::waiting() const {
    for (auto &e : map_)
        if (e.second->state == Mapping::State::WaitFd) return true;
    return false;
}

gdx_status_t ImportCache::open_legacy(Mapping &m) {
    const cuda::DriverApi *api = cuda::driver();
    CUipcMemHandle h;
    std::memcpy(&h, m.handle, sizeof(h));
    CUdeviceptr p = 0;
    CUresult r = api->cuIpcOpenMemHandle(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    if (r != CUDA_SUCCESS) return drv_fail(r, "cuIpcOpenMemHandle", m);
    m.ptr = reinterpret_cast<uint8_t *>(p);
    return GDX_OK;
}

gdx_status_t ImportCache::open_vmm(Mapping &m, int fd) {
    const cuda::DriverApi *api = cuda::driver();
    if (!api->cuMemImportFromShareableHandle || !api->cuMemMap)
        return GDX_FAIL(GDX_ERR_UNSUPPORTED, kComp, "driver has no VMM import entry points");
    CUmemGenericAllocationHandle h;
    CUresult r = api->cuMemImportFromShareableHandle(&h, reinterpret_cast<void *>(static_cast<intptr_t>(fd)),
                                                     CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    if (r != CUDA_SUCCESS) return drv_fail(r, "cuMemImportFromShareableHandle", m);
    CUdeviceptr p = 0;
    r = api->cuMemAddressReserve(&p, m.alloc_size, 0, 0, 0);
    if (r == CUDA_SUCCESS) {
        r = api->cuMemMap(p, m.alloc_size, 0, h, 0);
        if (r == CUDA_SUCCESS) {
            CUmemAccessDesc acc{};
            acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
            acc.location.id = device_;
            acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
            r = api->cuMemSetAccess(p, m.alloc_size, &acc, 1);
            if (r != CUDA_SUCCESS) api->cuMemUnmap(p, m.alloc_size);
        }
        if (r != CUDA_SUCCESS) api->cuMemAddressFree(p, m.alloc_size);
    }
    api->cuMemRelease(h); // the mapping holds its own reference
    if (r != CUDA_SUCCESS) return drv_fail(r, "mapping an imported VMM allocation (reserve/map/set access)", m);
    m.ptr = reinterpret_cast<uint8_t *>(p);
    return GDX_OK;
}

gdx_status_t ImportCache::open_pool_ptr(Mapping &m, CUmemoryPool pool) {
    const cuda::DriverApi *api = cuda::driver();
    CUmemPoolPtrExportData d;
    std::memcpy(&d, m.handle, sizeof(d));
    CUdeviceptr p = 0;
    CUresult r = api->cuMemPoolImportPointer(&p, pool, &d);
    if (r != CUDA_SUCCESS) return drv_fail(r, "cuMemPoolImportPointer", m);
    m.ptr = reinterpret_cast<uint8_t *>(p);
    return GDX_OK;
}

void ImportCache::close(Mapping &m) {
    if (m.ptr == nullptr) return;
    const cuda::DriverApi *api = cuda::driver();
    cuda::DeviceScope scope(device_);
    CUdeviceptr p = reinterpret_cast<CUdeviceptr>(m.ptr);
    CUresult r = CUDA_SUCCESS;
    if (m.kind == ExportKind::Legacy) {
        r = api->cuIpcCloseMemHandle(p);
    } else if (m.kind == ExportKind::Vmm) {
        r = api->cuMemUnmap(p, m.alloc_size);
        if (r == CUDA_SUCCESS) r = api->cuMemAddressFree(p, m.alloc_size);
    } else if (m.kind == ExportKind::Pool) {
        r = api->cuMemFree(p); // releases this process's import of the pool allocation
    }
    if (r != CUDA_SUCCESS)
        GDX_WARN(kComp, "closing the mapping of buffer %" PRIu64 " from %016" PRIx64 ": %s", m.buffer_id, m.exporter,
                 cuda::error_text(r).c_str());
    mem::note_ipc_close(m.ptr);
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
    cuda::DeviceScope scope(device_);
    gdx_status_t st = GDX_ERR_NO_RESOURCE;
    if (k.kind == ExportKind::Legacy) {
        st = open_legacy(*m);
    } else if (k.kind == ExportKind::Pool && pools_.count({k.exporter_nonce, k.pool_id})) {
        st = open_pool_ptr(*m, pools_[{k.exporter_nonce, k.pool_id}]);
    } else if (k.kind == ExportKind::Vmm || k.kind == ExportKind::Pool) {
        *need_fd = true; // the descriptor comes from the exporter over the control socket
    } else {
        st = GDX_FAIL(GDX_ERR_UNSUPPORTED, kComp, "remote key of kind %s cannot be imported",
                      export_kind_name(k.kind));
    }
    if (st == GDX_OK) {
        m->state = Mapping::State::Ready;
        mem::note_ipc_import(m->ptr, m->alloc_size, device_);
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
    const cuda::DriverApi *api = cuda::driver();
    cuda::DeviceScope scope(device_);
    for (auto &e : map_) {
        Mapping &m = *e.second;
        if (m.exporter != exporter || m.token != token || m.state != Mapping::State::WaitFd) continue;
        gdx_status_t st = status;
        if (st == GDX_OK && fd < 0) st = GDX_ERR_PROTOCOL;
        if (st == GDX_OK && m.kind == ExportKind::Vmm) {
            st = open_vmm(m, fd);
        } else if (st == GDX_OK && m.kind == ExportKind::Pool) {
            Key pk{exporter, m.pool_id};
            if (!pools_.count(pk)) {
                CUmemoryPool pool = nullptr;
                CUresult r = api->cuMemPoolImportFromShareableHandle(
                    &pool, reinterpret_cast<void *>(static_cast<intptr_t>(fd)), CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                    0);
                if (r == CUDA_SUCCESS) {
                    CUmemAccessDesc acc{};
                    acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
                    acc.location.id = device_;
                    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
                    r = api->cuMemPoolSetAccess(pool, &acc, 1);
                    if (r != CUDA_SUCCESS) api->cuMemPoolDestroy(pool);
                }
                if (r != CUDA_SUCCESS) st = drv_fail(r, "importing the exporter's memory pool", m);
                else pools_[pk] = pool;
            }
            if (st == GDX_OK) st = open_pool_ptr(m, pools_[pk]);
        }
        if (st == GDX_OK) {
            m.state = Mapping::State::Ready;
            mem::note_ipc_import(m.ptr, m.alloc_size, device_);
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
    const cuda::DriverApi *api = cuda::driver();
    for (auto it = pools_.begin(); it != pools_.end();) {
        if (it->first.first == exporter) {
            bool used = false;
            for (auto &e : map_) used |= e.second->exporter == exporter && e.second->ptr != nullptr;
            if (used) {
                ++it;
                continue; // destroyed with the cache; its pointers are closed first
            }
            cuda::DeviceScope scope(device_);
            api->cuMemPoolDestroy(it->second);
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
#endif
