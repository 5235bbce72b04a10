#include "fake_cuda_ops.h"

namespace gdx::mem::test {

namespace {
bool fake_available() { return true; }
gdx_status_t fake_unsupported() { return GDX_ERR_UNSUPPORTED; }
gdx_status_t fake_copy(void *, const void *, size_t, int) { return fake_unsupported(); }
gdx_status_t fake_copy_pinned(void *, const void *, size_t, int, CopyDir, MemType) { return fake_unsupported(); }
gdx_status_t fake_copy_async(void *, const void *, size_t, int, CopyDir, CopyHandle *) { return fake_unsupported(); }
gdx_status_t fake_copy_test(CopyHandle *) { return fake_unsupported(); }
gdx_status_t fake_host_alloc(size_t, int, void **) { return fake_unsupported(); }
void fake_host_free(void *) {}
gdx_status_t fake_host_register(void *, size_t, int) { return fake_unsupported(); }
void fake_host_unregister(void *) {}
gdx_status_t fake_dmabuf_fd(const void *, size_t, int *, uint64_t *) { return fake_unsupported(); }
} // namespace

FakeCudaOpsForTest &FakeCudaOpsForTest::get() {
    static FakeCudaOpsForTest f;
    return f;
}

const Ops *FakeCudaOpsForTest::row() const {
    static const Ops r = {
        .name = "fake-cuda",
        .available = fake_available,
        .query = &FakeCudaOpsForTest::query,
        .copy = fake_copy,
        .copy_pinned = fake_copy_pinned,
        .copy_async = fake_copy_async,
        .copy_test = fake_copy_test,
        .host_alloc = fake_host_alloc,
        .host_free = fake_host_free,
        .host_register = fake_host_register,
        .host_unregister = fake_host_unregister,
        .dmabuf_fd = fake_dmabuf_fd,
        .revalidate = &FakeCudaOpsForTest::revalidate,
    };
    return &r;
}

uint64_t FakeCudaOpsForTest::alloc(uintptr_t base, size_t size, MemType type, int device, bool known_bounds,
                                   uint64_t block_id) {
    std::lock_guard<std::mutex> g(mu_);
    uint64_t id = next_id_++;
    allocs_[base] = Alloc{base, size, type, device, known_bounds, id, block_id};
    return id;
}

void FakeCudaOpsForTest::free(uintptr_t base) {
    std::lock_guard<std::mutex> g(mu_);
    allocs_.erase(base);
}

void FakeCudaOpsForTest::reset() {
    std::lock_guard<std::mutex> g(mu_);
    allocs_.clear();
    queries = 0;
    revalidations = 0;
    fail_next_queries = 0;
    trust_revalidate = false;
}

bool FakeCudaOpsForTest::find(uintptr_t p, Alloc *out) {
    std::lock_guard<std::mutex> g(mu_);
    auto it = allocs_.upper_bound(p);
    if (it == allocs_.begin()) return false;
    --it;
    if (p - it->second.base >= it->second.size) return false;
    *out = it->second;
    return true;
}

gdx_status_t FakeCudaOpsForTest::query(const void *ptr, MemInfo *out) {
    FakeCudaOpsForTest &f = get();
    f.queries.fetch_add(1);
    if (f.fail_next_queries.load() > 0 && f.fail_next_queries.fetch_sub(1) > 0) return GDX_ERR_DRIVER;
    Alloc a;
    if (!f.find(reinterpret_cast<uintptr_t>(ptr), &a)) return GDX_ERR_NOT_FOUND; // the host row answers
    MemInfo info;
    info.type = a.type;
    info.kind = is_host_type(a.type) ? MemKind::Host : MemKind::Cuda;
    info.device = a.device;
    if (a.known_bounds) {
        info.base = a.base;
        info.size = a.size;
    }
    info.buffer_id = a.buffer_id;
    info.block_id = a.block_id;
    info.dmabuf_allowed = a.type == MemType::CudaDevice || a.type == MemType::CudaVmm;
    info.host_accessible = is_host_type(a.type) || a.type == MemType::CudaManaged || a.type == MemType::CudaVmmHost;
    *out = info;
    return GDX_OK;
}

gdx_status_t FakeCudaOpsForTest::revalidate(const void *ptr, const MemInfo &cached) {
    FakeCudaOpsForTest &f = get();
    f.revalidations.fetch_add(1);
    if (f.trust_revalidate.load()) return GDX_OK;
    Alloc a;
    if (!f.find(reinterpret_cast<uintptr_t>(ptr), &a)) return GDX_ERR_NOT_FOUND;
    if (cached.block_id != 0) return a.block_id == cached.block_id ? GDX_OK : GDX_ERR_NOT_FOUND;
    return a.buffer_id == cached.buffer_id ? GDX_OK : GDX_ERR_NOT_FOUND;
}

} // namespace gdx::mem::test
