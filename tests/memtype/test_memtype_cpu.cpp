// CPU set (label cpu): names, the host row, the detector without a GPU, bad input, and the host memory kinds
// (pinned and registered skip without a CUDA driver). Runs anywhere.
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"
#include "memtype/free_hooks.h"
#include "memtype/host_mapping.h"
#include "memtype/memtype.h"
#include "memtype/typed_alloc.h"
#include "support/log_capture.h"
#include "test_alloc.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

using namespace gdx;
using namespace gdx::mem;
using namespace gdx::mem::test;

namespace {

DetectorOptions host_only() {
    DetectorOptions o;
    o.use_cuda = false;
    return o;
}

size_t page_size() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

} // namespace

TEST(MemtypeNames, EveryKindAndTypeHasAName) {
    EXPECT_STREQ(kind_name(MemKind::Host), "host");
    EXPECT_STREQ(kind_name(MemKind::Cuda), "cuda");
    const MemType all[] = {MemType::HostPageable,    MemType::HostPinned, MemType::HostRegistered, MemType::CudaDevice,
                           MemType::CudaManaged,     MemType::CudaVmm,    MemType::CudaVmmHost,    MemType::CudaPool,
                           MemType::CudaIpcImported, MemType::Unmapped};
    for (MemType t : all)
        EXPECT_STRNE(type_name(t), "unknown") << static_cast<int>(t);
    EXPECT_STREQ(type_name(MemType::CudaVmmHost), "cuda-vmm-host");
    EXPECT_TRUE(is_host_type(MemType::HostRegistered));
    EXPECT_FALSE(is_host_type(MemType::CudaManaged));
    EXPECT_STREQ(ops(MemKind::Host).name, "host");
    EXPECT_STREQ(ops(MemKind::Cuda).name, "cuda");
}

TEST(HostRow, CopiesCompleteAtOnce) {
    const Ops &h = ops(MemKind::Host);
    char src[64], dst[64] = {};
    for (int i = 0; i < 64; ++i)
        src[i] = static_cast<char>(i);
    EXPECT_EQ(h.copy(dst, src, sizeof(src), -1), GDX_OK);
    EXPECT_EQ(std::memcmp(src, dst, sizeof(src)), 0);
    std::memset(dst, 0, sizeof(dst));
    CopyHandle ch;
    EXPECT_EQ(h.copy_async(dst, src, sizeof(src), -1, CopyDir::Unknown, &ch), GDX_OK); // finished already
    EXPECT_EQ(std::memcmp(src, dst, sizeof(src)), 0);
    EXPECT_EQ(ch.event, nullptr);
    EXPECT_EQ(h.copy_test(&ch), GDX_OK);
    EXPECT_EQ(h.copy(dst, src, 0, -1), GDX_OK);
    EXPECT_EQ(h.copy(nullptr, src, 8, -1), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(h.copy_async(dst, src, 8, -1, CopyDir::Unknown, nullptr), GDX_ERR_INVALID_PARAM);
}

TEST(HostRow, HostAllocIsPageAlignedAndDmabufIsUnsupported) {
    const Ops &h = ops(MemKind::Host);
    void *p = nullptr;
    ASSERT_EQ(h.host_alloc(10000, -1, &p), GDX_OK);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % page_size(), 0u);
    std::memset(p, 1, 10000);
    int fd = 7;
    uint64_t off = 0;
    EXPECT_EQ(h.dmabuf_fd(p, 4096, &fd, &off), GDX_ERR_UNSUPPORTED);
    EXPECT_EQ(fd, -1);
    MemInfo info;
    EXPECT_EQ(h.query(p, &info), GDX_OK);
    EXPECT_EQ(info.type, MemType::HostPageable);
    EXPECT_EQ(h.revalidate(p, info), GDX_ERR_NOT_FOUND); // host answers are never confirmed from a cache
    h.host_free(p);
    EXPECT_EQ(h.host_alloc(0, -1, &p), GDX_ERR_INVALID_PARAM);
}

// The slots the layers above use instead of a GPU runtime: the host row has no devices, IPC handles, peer access
// or copy queues, and says UNSUPPORTED rather than pretending.
TEST(HostRow, AnswersUnsupportedWhereItHasNothing) {
    const Ops &h = ops(MemKind::Host);
    std::vector<DeviceInfo> devs(1);
    EXPECT_EQ(h.devices(&devs), GDX_ERR_UNSUPPORTED);
    EXPECT_TRUE(devs.empty());
    EXPECT_EQ(h.device_count(), 0);
    EXPECT_EQ(h.current_device(), -1);
    EXPECT_EQ(h.driver_version(), 0);
    EXPECT_EQ(h.why_unavailable(), "");
    EXPECT_EQ(device_bus_id(MemKind::Host, 0), "");
    int x = 0;
    uint64_t id = 1;
    EXPECT_EQ(h.buffer_id(&x, &id), GDX_ERR_UNSUPPORTED);
    MemInfo info;
    IpcHandle ih;
    ih.kind = IpcKind::Legacy;
    int fd = 7;
    std::string why;
    EXPECT_EQ(h.ipc_export(info, &ih, &fd, &why), GDX_ERR_UNSUPPORTED);
    EXPECT_EQ(ih.kind, IpcKind::None);
    EXPECT_EQ(fd, -1);
    EXPECT_FALSE(why.empty());
    IpcMapping m;
    EXPECT_EQ(h.ipc_import(ih, 4096, -1, nullptr, 0, &m), GDX_ERR_UNSUPPORTED);
    EXPECT_EQ(h.ipc_close(&m), GDX_ERR_UNSUPPORTED);
    void *pool = nullptr;
    EXPECT_EQ(h.ipc_import_pool(-1, 0, &pool), GDX_ERR_UNSUPPORTED);
    h.ipc_release_pool(nullptr, 0);
    why.clear();
    EXPECT_EQ(h.peer_access(0, 1, &why), GDX_ERR_UNSUPPORTED);
    EXPECT_FALSE(why.empty());
    std::unique_ptr<CopyQueue> q;
    EXPECT_EQ(h.copy_queue(0, CopyQueueOptions{}, &q), GDX_ERR_UNSUPPORTED);
    EXPECT_EQ(q, nullptr);
}

// Without a driver the CUDA row is absent, with the reason, and nothing in it pretends to work.
TEST(CudaRowNoGpu, DevicesIpcAndQueuesSayWhy) {
    if (gpu_skip_reason().empty()) GTEST_SKIP() << "a CUDA driver is present: covered by the gpu set";
    const Ops &c = ops(MemKind::Cuda);
    EXPECT_FALSE(c.available());
    EXPECT_FALSE(c.why_unavailable().empty());
    EXPECT_EQ(c.device_count(), 0);
    std::vector<DeviceInfo> devs(1);
    EXPECT_EQ(c.devices(&devs), GDX_OK);
    EXPECT_TRUE(devs.empty());
    EXPECT_EQ(c.current_device(), -1);
    EXPECT_EQ(device_bus_id(MemKind::Cuda, 0), "");
    MemInfo info;
    info.type = MemType::CudaDevice;
    IpcHandle ih;
    int fd = 7;
    std::string why;
    EXPECT_EQ(c.ipc_export(info, &ih, &fd, &why), GDX_OK); // not exportable is an answer, not an error
    EXPECT_EQ(ih.kind, IpcKind::None);
    EXPECT_EQ(fd, -1);
    EXPECT_EQ(why, c.why_unavailable());
    why.clear();
    EXPECT_EQ(c.peer_access(0, 1, &why), GDX_ERR_UNREACHABLE);
    EXPECT_FALSE(why.empty());
    std::unique_ptr<CopyQueue> q;
    EXPECT_NE(c.copy_queue(0, CopyQueueOptions{}, &q), GDX_OK);
    EXPECT_EQ(q, nullptr);
    ih.kind = IpcKind::Legacy;
    IpcMapping m;
    EXPECT_NE(c.ipc_import(ih, 4096, -1, nullptr, 0, &m), GDX_OK);
    EXPECT_EQ(m.ptr, nullptr);
    TypedAlloc a;
    EXPECT_NE(typed_alloc(MemType::CudaDevice, 0, 4096, &a), GDX_OK);
    EXPECT_EQ(a.ptr, nullptr);
    typed_free(&a); // nothing to release: no crash
}

TEST(DetectorNoGpu, EveryPointerIsHost) {
    Detector det(host_only());
    EXPECT_FALSE(det.gpu_enabled());
    EXPECT_EQ(det.cache(), nullptr); // nothing cacheable without a GPU row
    static int in_data = 1;
    int on_stack = 2;
    std::vector<char> heap(1 << 20);
    void *mapped = mmap(nullptr, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(mapped, MAP_FAILED);
    for (const void *p : {static_cast<const void *>(&in_data), static_cast<const void *>(&on_stack),
                          static_cast<const void *>(heap.data() + 12345), static_cast<const void *>(mapped)}) {
        MemInfo info;
        info.type = MemType::CudaDevice;
        ASSERT_EQ(det.detect_one(p, &info), GDX_OK);
        EXPECT_EQ(info.type, MemType::HostPageable) << describe(info);
        EXPECT_EQ(info.kind, MemKind::Host);
        EXPECT_EQ(info.device, -1);
        EXPECT_TRUE(info.host_accessible);
        EXPECT_FALSE(info.dmabuf_allowed);
    }
    munmap(mapped, 1 << 20);
    MemInfo info; // freed memory: whatever the rows say now (host), never a crash
    EXPECT_EQ(det.detect_one(mapped, &info), GDX_OK);
    EXPECT_EQ(info.type, MemType::HostPageable);
}

TEST(DetectorNoGpu, RangeIsOneHostSegment) {
    Detector det(host_only());
    std::vector<char> buf(9 << 20); // crosses several probe points
    std::vector<MemSegment> segs;
    ASSERT_EQ(det.detect(buf.data() + 3, buf.size() - 5, &segs), GDX_OK);
    ASSERT_EQ(segs.size(), 1u);
    EXPECT_EQ(segs[0].addr, reinterpret_cast<uintptr_t>(buf.data() + 3));
    EXPECT_EQ(segs[0].length, buf.size() - 5);
    EXPECT_EQ(segs[0].info.type, MemType::HostPageable);
    ASSERT_EQ(det.detect(buf.data(), 1, &segs), GDX_OK);
    ASSERT_EQ(segs.size(), 1u);
    EXPECT_EQ(segs[0].length, 1u);
}

TEST(DetectorNoGpu, CudaOffIsStatedOnceAtInfo) {
    gdx::test::LogCapture log;
    {
        Detector a(host_only()), b(host_only());
        MemInfo info;
        int x = 0;
        EXPECT_EQ(a.detect_one(&x, &info), GDX_OK);
        EXPECT_EQ(b.detect_one(&x, &info), GDX_OK);
    }
    EXPECT_EQ(log.count("every pointer is host memory"), 1u) << log.text();
    EXPECT_NE(log.text().find("GDX_CUDA=no"), std::string::npos) << log.text();
}

TEST(DetectorNoGpu, WithoutADriverEveryPointerIsHost) {
    if (gpu_skip_reason().empty()) GTEST_SKIP() << "a CUDA driver is present: covered by the gpu set";
    Detector det; // GDX_CUDA=try: the CUDA row is asked for, but there is no driver
    EXPECT_FALSE(det.gpu_enabled());
    int x = 0;
    MemInfo info;
    ASSERT_EQ(det.detect_one(&x, &info), GDX_OK);
    EXPECT_EQ(info.type, MemType::HostPageable);
    CopyHandle h;
    char a[8] = {}, b[8] = {};
    EXPECT_NE(ops(MemKind::Cuda).copy_async(a, b, 8, 0, CopyDir::ToDevice, &h), GDX_OK); // the row reports, never crashes
    EXPECT_FALSE(ops(MemKind::Cuda).available());
}

TEST(DetectorNoGpu, ConfigDrivesTheOptions) {
    Config cfg;
    std::string err;
    ASSERT_EQ(
        Config::load({{"GDX_MEMTYPE_CACHE", "no"}, {"GDX_MEMTYPE_CACHE_ENTRIES", "7"}, {"GDX_CUDA", "no"}}, &cfg, &err),
        GDX_OK)
        << err;
    DetectorOptions o = Detector::options(cfg);
    EXPECT_FALSE(o.cache);
    EXPECT_EQ(o.cache_entries, 7u);
    EXPECT_FALSE(o.use_cuda);
    std::unique_ptr<Detector> det;
    ASSERT_EQ(Detector::create(cfg, &det), GDX_OK);
    EXPECT_FALSE(det->gpu_enabled());

    Config defaults = Config::defaults();
    o = Detector::options(defaults);
    EXPECT_TRUE(o.cache);
    EXPECT_EQ(o.cache_entries, 4096u);
    EXPECT_TRUE(o.use_cuda);

    if (!gpu_skip_reason().empty()) { // GDX_CUDA=yes must fail loudly where there is no driver
        ASSERT_EQ(Config::load({{"GDX_CUDA", "yes"}}, &cfg, &err), GDX_OK) << err;
        EXPECT_EQ(Detector::create(cfg, &det), GDX_ERR_NO_DEVICE);
        EXPECT_NE(last_error().find("GDX_CUDA=yes"), std::string::npos) << last_error();
    }
}

TEST(DetectorNoGpu, FreeHooksAreOffWithAReasonAndHitsValidated) {
    if (gpu_skip_reason().empty()) GTEST_SKIP() << "a CUDA driver is present: covered by the gpu set";
    const FreeHookState &h = install_free_hooks();
    EXPECT_FALSE(h.installed);
    EXPECT_EQ(h.patched, 0u);
    EXPECT_FALSE(h.why.empty());
    EXPECT_EQ(free_hook_calls(), 0u);
    Config cfg;
    std::string err;
    for (const char *v : {"try", "yes", "no"}) {
        // Without a GPU there is nothing to hook and nothing to cache: 'yes' does not fail here.
        ASSERT_EQ(Config::load({{"GDX_MEMTYPE_HOOKS", v}}, &cfg, &err), GDX_OK) << err;
        EXPECT_EQ(Detector::options(cfg).hooks, v[0] == 't' ? Ternary::Try : v[0] == 'y' ? Ternary::Yes : Ternary::No);
        std::unique_ptr<Detector> det;
        EXPECT_EQ(Detector::create(cfg, &det), GDX_OK) << v << ": " << last_error();
        if (det) {
            EXPECT_EQ(det->options().validation, CacheValidation::PerHit) << v;
        }
    }
    EXPECT_EQ(Config::load({{"GDX_MEMTYPE_HOOKS", "sometimes"}}, &cfg, &err), GDX_ERR_INVALID_CONFIG);
    EXPECT_NE(err.find("GDX_MEMTYPE_HOOKS"), std::string::npos) << err;
}

TEST(DetectorBadInput, NullZeroLengthAndWrapAreRejected) {
    Detector det(host_only());
    std::vector<MemSegment> segs{MemSegment{}};
    int x = 0;
    EXPECT_EQ(det.detect(nullptr, 8, &segs), GDX_ERR_INVALID_PARAM);
    EXPECT_TRUE(segs.empty());
    EXPECT_NE(last_error().find("null pointer"), std::string::npos) << last_error();
    EXPECT_EQ(det.detect(&x, 0, &segs), GDX_ERR_INVALID_PARAM);
    EXPECT_NE(last_error().find("zero length"), std::string::npos) << last_error();
    EXPECT_EQ(det.detect(&x, SIZE_MAX, &segs), GDX_ERR_INVALID_PARAM);
    EXPECT_NE(last_error().find("wraps"), std::string::npos) << last_error();
    const void *top = reinterpret_cast<const void *>(UINTPTR_MAX - 15);
    EXPECT_EQ(det.detect(top, 16, &segs), GDX_ERR_INVALID_PARAM); // would end at 2^64
    EXPECT_EQ(det.detect(&x, sizeof(x), nullptr), GDX_ERR_INVALID_PARAM);
    MemInfo info;
    EXPECT_EQ(det.detect_one(nullptr, &info), GDX_ERR_INVALID_PARAM);
    EXPECT_EQ(det.detect_one(&x, nullptr), GDX_ERR_INVALID_PARAM);
    // The largest range that fits is accepted (no GPU row: one host segment, no dereference).
    EXPECT_EQ(det.detect(top, 15, &segs), GDX_OK);
    ASSERT_EQ(segs.size(), 1u);
}

// Host kinds, parametrized as the GPU set is: pinned and registered need the CUDA driver to allocate.
class HostKinds : public ::testing::TestWithParam<AllocKind> {};

TEST_P(HostKinds, DetectedAtEveryOffsetAndCopied) {
    TestBuffer buf;
    std::string why;
    if (!buf.allocate(GetParam(), 3 << 20, 0, &why)) {
        if (needs_cuda(GetParam()) && !gpu_skip_reason().empty()) GTEST_SKIP() << why;
        FAIL() << "allocating " << alloc_kind_name(GetParam()) << ": " << why;
    }
    Detector det;
    const MemType want = expected_type(GetParam());
    for (size_t off : {size_t(0), size_t(1), buf.size() / 2, buf.size() - 1}) {
        MemInfo info;
        ASSERT_EQ(det.detect_one(static_cast<char *>(buf.ptr()) + off, &info), GDX_OK);
        EXPECT_EQ(info.type, want) << "offset " << off << ": " << describe(info);
        EXPECT_EQ(info.kind, MemKind::Host);
        EXPECT_TRUE(info.host_accessible);
        EXPECT_FALSE(info.dmabuf_allowed);
    }
    std::vector<MemSegment> segs;
    ASSERT_EQ(det.detect(buf.ptr(), buf.size(), &segs), GDX_OK);
    ASSERT_GE(segs.size(), 1u);
    EXPECT_EQ(segs.front().addr, buf.addr());
    EXPECT_EQ(segs.back().addr + segs.back().length, buf.addr() + buf.size());
    for (const MemSegment &s : segs)
        EXPECT_EQ(s.info.type, want) << describe(s.info);
    std::vector<char> src(buf.size(), 'g'), back(buf.size());
    const Ops &row = ops(segs[0].info.kind);
    ASSERT_EQ(row.copy(buf.ptr(), src.data(), src.size(), segs[0].info.device), GDX_OK);
    ASSERT_EQ(row.copy(back.data(), buf.ptr(), back.size(), segs[0].info.device), GDX_OK);
    EXPECT_EQ(src, back);
}

INSTANTIATE_TEST_SUITE_P(Host, HostKinds,
                         ::testing::Values(AllocKind::HostMalloc, AllocKind::HostPinned, AllocKind::HostRegistered),
                         [](const ::testing::TestParamInfo<AllocKind> &i) { return alloc_kind_name(i.param); });

// host_mapping_origin separates driver-made pinned memory from application memory the user registered (the
// driver reports identical attributes for both). Checked here on mappings whose origin the test knows.
TEST(HostMappingOrigin, HeapAndFileMappingsAreTheApplications) {
    std::string why;
    std::vector<char> heap(1 << 20);
    EXPECT_EQ(host_mapping_origin(heap.data() + 4096, &why), HostMappingOrigin::Application) << why;
    void *priv = mmap(nullptr, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(priv, MAP_FAILED);
    EXPECT_EQ(host_mapping_origin(static_cast<char *>(priv) + 100, &why), HostMappingOrigin::Application) << why;
    munmap(priv, 1 << 20);
    FILE *f = std::tmpfile();
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(ftruncate(fileno(f), 1 << 16), 0);
    void *file = mmap(nullptr, 1 << 16, PROT_READ | PROT_WRITE, MAP_SHARED, fileno(f), 0);
    ASSERT_NE(file, MAP_FAILED);
    EXPECT_EQ(host_mapping_origin(file, &why), HostMappingOrigin::Application) << why;
    munmap(file, 1 << 16);
    std::fclose(f);
}

TEST(HostMappingOrigin, SharedAnonymousLooksLikeTheDrivers) {
    // How cuMemHostAlloc maps its memory (read off driver 580: "rw-s ... /dev/zero (deleted)"). An application's
    // own MAP_SHARED|MAP_ANONYMOUS memory, registered, is therefore reported as pinned: src/memtype/README.md.
    std::string why;
    void *shared = mmap(nullptr, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(shared, MAP_FAILED);
    EXPECT_EQ(host_mapping_origin(static_cast<char *>(shared) + (1 << 19), &why), HostMappingOrigin::Driver) << why;
    munmap(shared, 1 << 20);
}

TEST(HostMappingOrigin, UnmappedAddressIsUnknownWithAReason) {
    std::string why;
    void *gone = mmap(nullptr, 1 << 16, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(gone, MAP_FAILED);
    munmap(gone, 1 << 16);
    EXPECT_EQ(host_mapping_origin(gone, &why), HostMappingOrigin::Unknown);
    EXPECT_NE(why.find("not in /proc/self/maps"), std::string::npos) << why;
}
