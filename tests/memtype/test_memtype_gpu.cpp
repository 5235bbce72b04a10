// GPU set (label gpu): every memory kind against the real driver: type, bounds and flags at several offsets,
// answers from the cache equal to a fresh query after free, copies, dma-buf export rules, ranges across
// adjacent VMM mappings, unmap + remap at one address, and IPC-imported memory in a second process.
// Without a CUDA driver every case skips, saying why.
#include "core/error.h"
#include "memtype/free_hooks.h"
#include "memtype/memtype.h"
#include "memtype/typed_alloc.h"
#if GDX_HAVE_CUDA_H
#include "memtype/cuda_driver.h"
#endif
#include "test_alloc.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <dlfcn.h>
#include <functional>
#include <memory>
#include <unistd.h>

using namespace gdx;
using namespace gdx::mem;
using namespace gdx::mem::test;

namespace {

constexpr size_t kSize = 4 << 20;

DetectorOptions uncached() {
    DetectorOptions o;
    o.cache = false;
    return o;
}

#if GDX_HAVE_CUDA_H
bool device_dmabuf_supported(int device) {
    const cuda::DriverApi *api = cuda::driver();
    CUdevice dev;
    int v = 0;
    if (api->cuDeviceGet(&dev, device) == CUDA_SUCCESS)
        api->cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, dev);
    return v != 0;
}
#else
bool device_dmabuf_supported(int) { return false; }
#endif

// Kinds a GPU may legitimately lack: their allocation failure is a skip, not a failure.
bool optional_kind(AllocKind k) {
    return k == AllocKind::CudaVmm || k == AllocKind::CudaVmmHost || k == AllocKind::CudaPool;
}

class MemKinds : public ::testing::TestWithParam<AllocKind> {
  protected:
    void SetUp() override {
        const std::string reason = gpu_skip_reason();
        if (!reason.empty()) GTEST_SKIP() << reason;
        std::string why;
        if (!buf_.allocate(GetParam(), kSize, 0, &why)) {
            if (optional_kind(GetParam())) GTEST_SKIP() << alloc_kind_name(GetParam()) << " unavailable: " << why;
            FAIL() << "allocating " << alloc_kind_name(GetParam()) << ": " << why;
        }
    }
    char *at(size_t off) const { return static_cast<char *>(buf_.ptr()) + off; }
    TestBuffer buf_;
};

} // namespace

TEST_P(MemKinds, KindBoundsAndFlagsAtEveryOffset) {
    if (GetParam() == AllocKind::CudaIpcImported) {
        std::string out;
        const int rc = run_ipc_peer(buf_, &out);
        EXPECT_EQ(rc, 0) << out;
        std::printf("%s", out.c_str());
        return;
    }
    Detector det;
    ASSERT_TRUE(det.gpu_enabled());
    const MemType want = expected_type(GetParam());
    const bool gpu_kind = !is_host_type(want);
    for (int round = 0; round < 2; ++round) { // the second round is answered by the cache where cacheable
        for (size_t off : {size_t(0), size_t(1), size_t(4095), buf_.size() / 2, buf_.size() - 1}) {
            MemInfo info;
            ASSERT_EQ(det.detect_one(at(off), &info), GDX_OK);
            SCOPED_TRACE(std::string("offset ") + std::to_string(off) + ": " + describe(info));
            EXPECT_EQ(info.type, want);
            EXPECT_EQ(info.kind, gpu_kind ? MemKind::Cuda : MemKind::Host);
            EXPECT_EQ(info.host_accessible, buf_.cpu_access());
            const bool dmabuf = (want == MemType::CudaDevice || want == MemType::CudaVmm) && device_dmabuf_supported(0);
            EXPECT_EQ(info.dmabuf_allowed, dmabuf); // never managed, pool or host (ucxx#749)
            if (GetParam() == AllocKind::HostMalloc) continue;
            if (gpu_kind) { // host pinned/registered: see the note below
                EXPECT_NE(info.buffer_id, 0u);
            }
            if (want == MemType::CudaVmmHost) { // host-located: the ordinal attribute may name no GPU
                EXPECT_TRUE(info.device == 0 || info.device == -1) << info.device;
            } else {
                EXPECT_EQ(info.device, 0);
            }
            if (info.size == 0) {
                // Device and VMM memory must have bounds (else nothing is cached); for the others the driver's
                // range attributes are the only source: report, the answers are still right.
                EXPECT_FALSE(want == MemType::CudaDevice || want == MemType::CudaVmm || want == MemType::CudaVmmHost);
                if (round == 0 && off == 0) std::printf("[ note ] %s: bounds unknown, not cached\n", type_name(want));
                continue;
            }
            EXPECT_LE(info.base, buf_.addr()); // the whole buffer is inside the reported allocation
            EXPECT_GE(info.base + info.size, buf_.addr() + buf_.size());
            if (want == MemType::CudaVmm || want == MemType::CudaVmmHost) { // the mapping, not the reservation
                EXPECT_EQ(info.base, buf_.addr());
                EXPECT_EQ(info.size, buf_.size());
            }
        }
    }
    MemInfo info;
    ASSERT_EQ(det.detect_one(buf_.ptr(), &info), GDX_OK);
    if (RangeCache::cacheable(info, CacheValidation::PerHit)) {
        EXPECT_GE(det.cache()->stats().hits, 5u) << "cacheable answers were not cached";
    } else if (GetParam() != AllocKind::HostMalloc) {
        std::printf("[ note ] %s is not cached: %s\n", type_name(want), describe(info).c_str());
    }
    if (info.host_accessible) { // proven by touching it from the CPU
        std::memset(at(0), 0x3C, 4096);
        EXPECT_EQ(static_cast<unsigned char>(*at(4095)), 0x3Cu);
    }
}

TEST_P(MemKinds, WholeBufferIsOneSegment) {
    if (GetParam() == AllocKind::CudaIpcImported) {
        GTEST_SKIP() << "checked by memtype_ipc_peer";
    }
    Detector det;
    std::vector<MemSegment> segs;
    ASSERT_EQ(det.detect(buf_.ptr(), buf_.size(), &segs), GDX_OK);
    for (const MemSegment &sg : segs)
        std::printf("  segment +%zu: %s\n", sg.length, describe(sg.info).c_str());
    ASSERT_EQ(segs.size(), 1u);
    EXPECT_EQ(segs[0].addr, buf_.addr());
    EXPECT_EQ(segs[0].length, buf_.size());
    EXPECT_EQ(segs[0].info.type, expected_type(GetParam()));
}

TEST_P(MemKinds, CachedAnswerAfterFreeEqualsAFreshQuery) {
    if (GetParam() == AllocKind::CudaIpcImported) {
        GTEST_SKIP() << "checked by memtype_ipc_peer";
    }
    Detector cached, fresh(uncached());
    const void *p = at(100);
    MemInfo before, after, truth;
    ASSERT_EQ(cached.detect_one(p, &before), GDX_OK);
    ASSERT_EQ(cached.detect_one(p, &before), GDX_OK); // now from the cache
    buf_.release();
    ASSERT_EQ(cached.detect_one(p, &after), GDX_OK);
    ASSERT_EQ(fresh.detect_one(p, &truth), GDX_OK);
    EXPECT_EQ(after.type, truth.type) << "cached " << describe(after) << " vs driver " << describe(truth);
    EXPECT_EQ(after.buffer_id, truth.buffer_id);
    if (GetParam() != AllocKind::CudaPool && GetParam() != AllocKind::HostMalloc) { // pools keep freed blocks mapped
        EXPECT_NE(after.type, before.type) << describe(after);
    }
}

TEST_P(MemKinds, CopiesInAndOut) {
    if (GetParam() == AllocKind::CudaIpcImported) {
        GTEST_SKIP() << "checked by memtype_ipc_peer";
    }
    Detector det;
    MemInfo info;
    ASSERT_EQ(det.detect_one(buf_.ptr(), &info), GDX_OK);
    const size_t n = 1 << 20;
    std::vector<unsigned char> src(n), back(n, 0);
    for (size_t i = 0; i < n; ++i)
        src[i] = static_cast<unsigned char>(i * 7 + 3);
    // The CUDA row copies any kind (unified addressing), synchronously and asynchronously.
    const Ops &cuda = ops(MemKind::Cuda);
    ASSERT_EQ(cuda.copy(at(4096), src.data(), n, 0), GDX_OK) << last_error();
    CopyHandle h;
    gdx_status_t st = cuda.copy_async(back.data(), at(4096), n, 0, CopyDir::ToHost, &h);
    while (st == GDX_INPROGRESS)
        st = cuda.copy_test(&h);
    ASSERT_EQ(st, GDX_OK) << last_error();
    EXPECT_EQ(src, back);
    // The row the detector names (memcpy for host kinds) works as well.
    std::fill(back.begin(), back.end(), 0);
    const Ops &row = ops(info.kind);
    ASSERT_EQ(row.copy(at(8192), src.data(), n, info.device), GDX_OK) << last_error();
    ASSERT_EQ(row.copy(back.data(), at(8192), n, info.device), GDX_OK) << last_error();
    EXPECT_EQ(src, back);
}

// The small-copy lane (copy_pinned, the small-message path): every shape it decides between — stream memory
// operations (device-resident memory, 4-byte aligned, up to GDX_CUDA_SMALL_WRITE) and a copy on its stream — lands
// exactly its bytes: the neighbours of the written range keep theirs (a word write must never spill).
TEST_P(MemKinds, SmallCopiesLandExactlyTheirBytes) {
    if (is_host_type(expected_type(GetParam())) || GetParam() == AllocKind::CudaIpcImported)
        GTEST_SKIP() << "the small-copy lane is for GPU memory (IPC imports: memtype_ipc_peer)";
    Detector det;
    MemInfo info;
    ASSERT_EQ(det.detect_one(buf_.ptr(), &info), GDX_OK);
    const Ops &cuda = ops(MemKind::Cuda);
    void *pinned = nullptr;
    ASSERT_EQ(cuda.host_alloc(3 * 8192, 0, &pinned), GDX_OK) << last_error();
    std::unique_ptr<void, void (*)(void *)> release(pinned, cuda.host_free);
    struct LimitBack { ~LimitBack() { set_small_write_max(256); } } limit_back; // the row's knob is process-wide
    auto *in = static_cast<unsigned char *>(pinned), *out = in + 8192, *fill = in + 16384;
    const size_t kWindow = 8192, kBase = 65536;
    for (size_t limit : {size_t(0), size_t(256), size_t(1016)}) {
        set_small_write_max(limit);
        for (size_t len : {1, 3, 4, 8, 12, 60, 64, 252, 256, 260, 1016, 1020, 4096}) {
            for (size_t off : {0, 1, 2, 4, 8}) {
                SCOPED_TRACE("limit " + std::to_string(limit) + ", " + std::to_string(len) + " bytes at +" +
                             std::to_string(off));
                std::memset(fill, 0xA5, kWindow);
                ASSERT_EQ(cuda.copy(at(kBase), fill, kWindow, 0), GDX_OK) << last_error();
                for (size_t i = 0; i < len; ++i)
                    in[i] = static_cast<unsigned char>(i * 13 + len + off);
                ASSERT_EQ(cuda.copy_pinned(at(kBase + 64 + off), in, len, info.device, CopyDir::ToDevice,
                                           info.type),
                          GDX_OK)
                    << last_error();
                std::memset(out, 0, kWindow);
                ASSERT_EQ(cuda.copy_pinned(out, at(kBase), kWindow, info.device, CopyDir::ToHost,
                                           info.type),
                          GDX_OK)
                    << last_error();
                for (size_t i = 0; i < kWindow; ++i) {
                    const bool inside = i >= 64 + off && i < 64 + off + len;
                    const unsigned char want = inside ? in[i - 64 - off] : 0xA5;
                    ASSERT_EQ(out[i], want) << "byte " << i << (inside ? " (written)" : " (neighbour)");
                }
            }
        }
    }
}

TEST_P(MemKinds, DmabufOnlyForDeviceAndVmm) {
    if (GetParam() == AllocKind::CudaIpcImported) {
        GTEST_SKIP() << "checked by memtype_ipc_peer";
    }
    const MemType want = expected_type(GetParam());
    const Ops &row = ops(MemKind::Cuda);
    int fd = -1;
    uint64_t off = 0;
    const gdx_status_t st = row.dmabuf_fd(at(65536 + 100), 65536, &fd, &off);
    if ((want == MemType::CudaDevice || want == MemType::CudaVmm) && device_dmabuf_supported(0)) {
        ASSERT_EQ(st, GDX_OK) << last_error();
        EXPECT_GE(fd, 0);
        EXPECT_EQ(off, (buf_.addr() + 65536 + 100) % static_cast<size_t>(sysconf(_SC_PAGESIZE)));
        close(fd);
        // A range leaving the allocation is refused before the driver sees it.
        EXPECT_EQ(row.dmabuf_fd(at(buf_.size() - 4096), 8192, &fd, &off), GDX_ERR_INVALID_PARAM);
    } else {
        EXPECT_EQ(st, GDX_ERR_UNSUPPORTED) << type_name(want);
        EXPECT_EQ(fd, -1);
    }
}

INSTANTIATE_TEST_SUITE_P(AllKinds, MemKinds, ::testing::ValuesIn(kAllKinds),
                         [](const ::testing::TestParamInfo<AllocKind> &i) { return alloc_kind_name(i.param); });

class GpuOnly : public ::testing::Test {
  protected:
    void SetUp() override {
        const std::string reason = gpu_skip_reason();
        if (!reason.empty()) GTEST_SKIP() << reason;
    }
};

TEST_F(GpuOnly, RangeAcrossAdjacentVmmMappings) {
    VmmSpace vs;
    std::string why;
    if (!vs.reserve(0, 4, &why)) GTEST_SKIP() << "VMM unavailable: " << why;
    ASSERT_TRUE(vs.map(0, 1, false, &why)) << why;
    ASSERT_TRUE(vs.map(1, 1, false, &why)) << why;  // back to back with the first, one reservation
    const bool host_vmm = vs.map(2, 1, true, &why); // chunk 3 stays unmapped
    const size_t g = vs.granularity();
    Detector det;
    std::vector<MemSegment> segs;
    ASSERT_EQ(det.detect(reinterpret_cast<void *>(vs.chunk(1) - 4096), 8192, &segs), GDX_OK);
    ASSERT_EQ(segs.size(), 2u);
    EXPECT_EQ(segs[0].info.type, MemType::CudaVmm);
    EXPECT_EQ(segs[0].info.base, vs.chunk(0));
    EXPECT_EQ(segs[0].info.size, g);
    EXPECT_EQ(segs[0].length, 4096u);
    EXPECT_EQ(segs[1].info.type, MemType::CudaVmm);
    EXPECT_EQ(segs[1].addr, vs.chunk(1));
    EXPECT_EQ(segs[1].info.base, vs.chunk(1));
    EXPECT_EQ(segs[1].info.size, g);
    // The whole reservation: two device mappings, a host-located one (if this GPU has them), then nothing.
    ASSERT_EQ(det.detect(reinterpret_cast<void *>(vs.base()), 4 * g, &segs), GDX_OK);
    for (const MemSegment &sg : segs)
        std::printf("  segment +%zu: %s\n", sg.length, describe(sg.info).c_str());
    ASSERT_EQ(segs.size(), host_vmm ? 4u : 3u);
    if (host_vmm) {
        EXPECT_EQ(segs[2].info.type, MemType::CudaVmmHost) << describe(segs[2].info);
        EXPECT_EQ(segs[2].addr, vs.chunk(2));
        EXPECT_EQ(segs[2].length, g);
    } else {
        std::printf("[ note ] host-located VMM unavailable (%s)\n", why.c_str());
    }
    const MemSegment &tail = segs.back(); // reserved, never mapped
    EXPECT_EQ(tail.addr, vs.chunk(host_vmm ? 3 : 2));
    EXPECT_EQ(tail.addr + tail.length, vs.chunk(4));
    EXPECT_TRUE(tail.info.type == MemType::Unmapped || tail.info.type == MemType::HostPageable) << describe(tail.info);
}

TEST_F(GpuOnly, HostStretchThenDeviceMapping) {
    VmmSpace vs;
    std::string why;
    if (!vs.reserve(0, 3, &why)) GTEST_SKIP() << "VMM unavailable: " << why;
    ASSERT_TRUE(vs.map(1, 1, false, &why)) << why; // chunks 0 and 2: reserved, unbacked
    const size_t g = vs.granularity();
    Detector det;
    std::vector<MemSegment> segs;
    ASSERT_EQ(det.detect(reinterpret_cast<void *>(vs.chunk(0) + g / 2), 2 * g, &segs), GDX_OK);
    ASSERT_EQ(segs.size(), 3u);
    EXPECT_NE(segs[0].info.type, MemType::CudaVmm) << describe(segs[0].info);
    EXPECT_EQ(segs[1].addr, vs.chunk(1));
    EXPECT_EQ(segs[1].length, g);
    EXPECT_EQ(segs[1].info.type, MemType::CudaVmm);
    EXPECT_NE(segs[2].info.type, MemType::CudaVmm) << describe(segs[2].info);
}

TEST_F(GpuOnly, UnmapAndRemapAtOneAddressIsNeverStale) {
    VmmSpace vs;
    std::string why;
    if (!vs.reserve(0, 2, &why)) GTEST_SKIP() << "VMM unavailable: " << why;
    ASSERT_TRUE(vs.map(0, 2, false, &why)) << why;
    const size_t g = vs.granularity();
    Detector det, fresh(uncached());
    MemInfo info, truth;
    ASSERT_EQ(det.detect_one(reinterpret_cast<void *>(vs.chunk(1) + 10), &info), GDX_OK);
    EXPECT_EQ(info.size, 2 * g);
    for (int cycle = 0; cycle < 6; ++cycle) {
        ASSERT_TRUE(vs.unmap(0, &why)) << why;
        const bool host = cycle % 2 == 0;
        if (!vs.map(0, cycle % 3 == 2 ? 2 : 1, host, &why)) {
            ASSERT_TRUE(host) << why; // only host-located mappings may be unsupported
            ASSERT_TRUE(vs.map(0, 1, false, &why)) << why;
        }
        for (uintptr_t a : {vs.chunk(0) + 10, vs.chunk(1) + 10}) {
            ASSERT_EQ(det.detect_one(reinterpret_cast<void *>(a), &info), GDX_OK);
            ASSERT_EQ(fresh.detect_one(reinterpret_cast<void *>(a), &truth), GDX_OK);
            EXPECT_EQ(info.type, truth.type)
                << "cycle " << cycle << ": cached " << describe(info) << ", driver " << describe(truth);
            EXPECT_EQ(info.size, truth.size) << describe(info);
        }
    }
    std::printf("[ note ] VMM entries revalidated by %s\n", info.block_id ? "block id" : "buffer id");
}

TEST_F(GpuOnly, IpcImportedInASecondProcess) {
    TestBuffer exported;
    std::string why, out;
    ASSERT_TRUE(exported.allocate(AllocKind::CudaIpcImported, 8 << 20, 0, &why)) << why;
    const int rc = run_ipc_peer(exported, &out);
    std::printf("%s", out.c_str());
    EXPECT_EQ(rc, 0) << out;
}

// The ops table's IPC slots end to end, as the cuda_ipc transport uses them: ipc_export here, ipc_import (which
// notes the import) and ipc_close (which notes the close) in a second process.
TEST_F(GpuOnly, IpcThroughTheOpsTableInASecondProcess) {
    TestBuffer exported;
    std::string why, out;
    ASSERT_TRUE(exported.allocate(AllocKind::CudaIpcImported, 8 << 20, 0, &why)) << why;
    const int rc = run_ipc_peer(exported, &out, /*via_ops=*/true);
    std::printf("%s", out.c_str());
    EXPECT_EQ(rc, 0) << out;
}

// What ipc_export answers for each kind: a handle (legacy), an fd (VMM with fd handles), or "not exportable" with
// the reason (managed, the default pool, host memory), never an error.
TEST_P(MemKinds, IpcExportAnswersForEveryKind) {
    MemInfo info;
    ASSERT_EQ(Detector(uncached()).detect_one(buf_.ptr(), &info), GDX_OK);
    IpcHandle h;
    int fd = -1;
    std::string why;
    ASSERT_EQ(ops(MemKind::Cuda).ipc_export(info, &h, &fd, &why), GDX_OK) << last_error();
    std::printf("[ ipc      ] %s: %s%s\n", describe(info).c_str(),
                h.kind == IpcKind::None ? "not exportable: " : "exported", why.c_str());
    switch (info.type) {
    case MemType::CudaDevice:
        EXPECT_EQ(h.kind, IpcKind::Legacy) << why;
        EXPECT_EQ(fd, -1);
        break;
    case MemType::CudaVmm:
        // The tests' VMM allocations ask for POSIX fd handles where the GPU has them.
        if (h.kind == IpcKind::Vmm) {
            EXPECT_GE(fd, 0);
        } else {
            EXPECT_FALSE(why.empty());
        }
        break;
    case MemType::CudaPool: // the device's default pool is never exportable
    case MemType::CudaManaged:
    default:
        EXPECT_EQ(h.kind, IpcKind::None);
        EXPECT_EQ(fd, -1);
        EXPECT_FALSE(why.empty());
        break;
    }
    if (fd >= 0) close(fd);
}

// The devices slots agree with each other and with the detector: every GPU has a bus id, the current device of a
// thread bound to GPU 0 is 0, and buffer_id reads the id the query reported.
TEST_F(GpuOnly, DeviceSlotsAgree) {
    const Ops &c = ops(MemKind::Cuda);
    std::vector<DeviceInfo> devs;
    ASSERT_EQ(c.devices(&devs), GDX_OK);
    ASSERT_EQ(static_cast<int>(devs.size()), c.device_count());
    EXPECT_GT(c.driver_version(), 0);
    EXPECT_EQ(c.why_unavailable(), "");
    for (const DeviceInfo &d : devs) {
        EXPECT_FALSE(d.pci_bus_id.empty()) << d.ordinal;
        EXPECT_EQ(device_bus_id(MemKind::Cuda, d.ordinal), d.pci_bus_id);
    }
    TestBuffer b;
    std::string why;
    ASSERT_TRUE(b.allocate(AllocKind::CudaDevice, 1 << 20, 0, &why)) << why; // binds GPU 0 on this thread
    EXPECT_EQ(c.current_device(), 0);
    MemInfo info;
    ASSERT_EQ(c.query(b.ptr(), &info), GDX_OK);
    uint64_t id = 0;
    ASSERT_EQ(c.buffer_id(static_cast<char *>(b.ptr()) + 100, &id), GDX_OK) << last_error();
    EXPECT_EQ(id, info.buffer_id);
    EXPECT_NE(id, 0u);
    why.clear();
    EXPECT_EQ(c.peer_access(0, c.device_count(), &why), GDX_ERR_UNREACHABLE) << "no such GPU: " << why;
    EXPECT_NE(why.find("cuDeviceCanAccessPeer"), std::string::npos) << why;
}

// typed_alloc.h, the tools' test buffers (gdx_ext_buffer_*, gdx_perftest -m): each kind is what the detector says,
// zero-filled, and bytes written at an odd offset read back exactly; VMM memory asked for POSIX fd handles where the
// GPU has them, so cuda_ipc can export it.
TEST_F(GpuOnly, TypedAllocEveryKindWriteRead) {
    const size_t kLen = (3 << 20) + 5;
    std::vector<DeviceInfo> devs;
    ASSERT_EQ(ops(MemKind::Cuda).devices(&devs), GDX_OK);
    for (MemType type : {MemType::HostPinned, MemType::CudaDevice, MemType::CudaManaged, MemType::CudaVmm}) {
        SCOPED_TRACE(type_name(type));
        TypedAlloc a;
        gdx_status_t st = typed_alloc(type, 0, kLen, &a);
        if (type == MemType::CudaVmm && st == GDX_ERR_UNSUPPORTED) {
            std::printf("[ note     ] no VMM here: %s\n", last_error().c_str());
            continue;
        }
        ASSERT_EQ(st, GDX_OK) << last_error();
        ASSERT_NE(a.ptr, nullptr);
        MemInfo info;
        ASSERT_EQ(Detector(uncached()).detect_one(a.ptr, &info), GDX_OK);
        EXPECT_EQ(info.type, type) << describe(info);
#if GDX_HAVE_CUDA_H
        if (type == MemType::CudaVmm && devs[0].posix_fd_handles) {
            EXPECT_NE(info.handle_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0u) << describe(info);
        }
#endif
        std::vector<uint8_t> in(kLen - 7), out(kLen, 0xee);
        for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i * 13 + 5);
        if (type == MemType::HostPinned) { // host memory: the tool copies it with memcpy
            EXPECT_EQ(static_cast<uint8_t *>(a.ptr)[kLen - 1], 0);
        } else {
            ASSERT_EQ(typed_read(a, 0, out.data(), kLen), GDX_OK) << last_error();
            EXPECT_EQ(std::count(out.begin(), out.end(), 0), static_cast<long>(kLen)) << "not zero-filled";
            ASSERT_EQ(typed_write(a, 7, in.data(), in.size()), GDX_OK) << last_error();
            ASSERT_EQ(typed_read(a, 7, out.data(), in.size()), GDX_OK) << last_error();
            EXPECT_EQ(std::memcmp(in.data(), out.data(), in.size()), 0);
        }
        typed_free(&a);
        EXPECT_EQ(a.ptr, nullptr);
    }
}

// The copy queue (cuda_ipc's data path) in both signal modes: copies complete with their tags, in issue order per
// stream, bytes exact; forget() leaves the owner out of later completions; destroying it with copies queued waits.
class CopyQueueModes : public GpuOnly, public ::testing::WithParamInterface<bool> {};

TEST_P(CopyQueueModes, CopiesCompleteWithTheirTagsAndBytes) {
    const bool flags = GetParam();
    TestBuffer dev, pinned;
    std::string why;
    constexpr size_t kLen = (8 << 20) + 3;
    ASSERT_TRUE(dev.allocate(AllocKind::CudaDevice, kLen, 0, &why)) << why;
    ASSERT_TRUE(pinned.allocate(AllocKind::HostPinned, 2 * kLen, 0, &why)) << why;
    uint8_t *host = static_cast<uint8_t *>(pinned.ptr());
    for (size_t i = 0; i < kLen; ++i) host[i] = static_cast<uint8_t>(i * 7 + 1);
    std::memset(host + kLen, 0, kLen);
    CopyQueueOptions o;
    o.streams = 2;
    o.flags = flags;
    std::unique_ptr<CopyQueue> q;
    ASSERT_EQ(ops(MemKind::Cuda).copy_queue(0, o, &q), GDX_OK) << last_error();
    std::printf("[ queue    ] completion by %s\n", q->signal_name());
    if (flags && std::strcmp(q->signal_name(), "flag") != 0)
        std::printf("[ note     ] this driver has no stream memory operations: events instead\n");
    if (!flags) {
        EXPECT_STREQ(q->signal_name(), "event");
    }
    struct Seen {
        std::vector<uint64_t> ids;
        std::vector<void *> owners;
        gdx_status_t worst = GDX_OK;
    } seen;
    auto done = [](void *arg, const CopyTag &tag, gdx_status_t st) {
        auto *s = static_cast<Seen *>(arg);
        s->ids.push_back(tag.id);
        s->owners.push_back(tag.owner);
        if (st != GDX_OK) s->worst = st;
    };
    int owner = 0;
    // Up, then back: the second copy is on the other stream, so it waits for the first by a sync in between.
    ASSERT_EQ(q->copy(dev.ptr(), host, kLen, CopyTag{&owner, 1, nullptr}), GDX_OK) << last_error();
    q->sync();
    EXPECT_FALSE(q->idle()); // done on the GPU, not yet reported
    while (seen.ids.size() < 1) q->poll(done, &seen);
    ASSERT_EQ(q->copy(host + kLen, dev.ptr(), kLen, CopyTag{&owner, 2, nullptr}), GDX_OK) << last_error();
    q->forget(&owner); // its completion must come without the owner
    while (seen.ids.size() < 2) q->poll(done, &seen);
    EXPECT_TRUE(q->idle());
    EXPECT_EQ(seen.worst, GDX_OK);
    EXPECT_EQ(seen.ids, (std::vector<uint64_t>{1, 2}));
    EXPECT_EQ(seen.owners, (std::vector<void *>{&owner, nullptr}));
    EXPECT_EQ(std::memcmp(host, host + kLen, kLen), 0);
    // Destroyed with a copy queued: the destructor waits for it (the copy writes memory the caller then frees).
    ASSERT_EQ(q->copy(host + kLen, dev.ptr(), kLen, CopyTag{}), GDX_OK);
    q.reset();
    EXPECT_EQ(std::memcmp(host, host + kLen, kLen), 0);
}

INSTANTIATE_TEST_SUITE_P(Signal, CopyQueueModes, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool> &i) { return i.param ? "flag" : "event"; });

#if GDX_HAVE_CUDA_H
// With the free hooks on (the default), a cached answer is trusted without a driver call, so every way an
// application frees memory must reach a hook: gdx's driver entry points (which cuGetProcAddress handed out), the
// exported symbol an application linked with -lcuda calls, and the CUDA runtime.
TEST_F(GpuOnly, FreeHooksSeeEveryFreePath) {
    const FreeHookState &h = install_free_hooks();
    if (!h.installed && h.why.find("libucm") != std::string::npos) GTEST_SKIP() << h.why;
    ASSERT_TRUE(h.installed) << h.why;
    std::printf("[ hooks ] %s\n", h.why.c_str());
    Detector det, fresh(uncached());
    ASSERT_EQ(det.options().validation, CacheValidation::Events);
    auto cached_then_freed = [&](const char *what, const void *p, const std::function<void()> &free_it) {
        MemInfo info, truth;
        ASSERT_EQ(det.detect_one(p, &info), GDX_OK) << what;
        ASSERT_EQ(det.detect_one(p, &info), GDX_OK) << what; // from the cache now
        const MemInfo before = info;
        const uint64_t calls = free_hook_calls();
        free_it();
        EXPECT_GT(free_hook_calls(), calls) << what << ": the free did not reach a hook";
        ASSERT_EQ(det.detect_one(p, &info), GDX_OK) << what;
        ASSERT_EQ(fresh.detect_one(p, &truth), GDX_OK) << what;
        EXPECT_EQ(info.type, truth.type) << what << ": cached " << describe(info) << ", driver " << describe(truth)
                                         << ", before the free " << describe(before);
        EXPECT_EQ(info.buffer_id, truth.buffer_id) << what;
    };
    for (AllocKind k : {AllocKind::HostPinned, AllocKind::HostRegistered, AllocKind::CudaDevice,
                        AllocKind::CudaManaged, AllocKind::CudaVmm, AllocKind::CudaVmmHost, AllocKind::CudaPool}) {
        TestBuffer b;
        std::string why;
        if (!b.allocate(k, 1 << 20, 0, &why)) {
            ASSERT_TRUE(optional_kind(k)) << alloc_kind_name(k) << ": " << why;
            std::printf("[ hooks ] %s skipped: %s\n", alloc_kind_name(k), why.c_str());
            continue;
        }
        cached_then_freed(alloc_kind_name(k), static_cast<char *>(b.ptr()) + 10, [&] { b.release(); });
    }
    const cuda::DriverApi *api = cuda::driver();
    cuda::DeviceScope scope(0);
    ASSERT_TRUE(scope.ok());
    // The exported symbol, as an application linked with -lcuda calls it.
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    ASSERT_NE(lib, nullptr);
    auto exported_free = reinterpret_cast<CUresult (*)(CUdeviceptr)>(dlsym(lib, "cuMemFree_v2"));
    ASSERT_NE(exported_free, nullptr);
    CUdeviceptr d = 0;
    ASSERT_EQ(api->cuMemAlloc(&d, 1 << 20), CUDA_SUCCESS);
    cached_then_freed("cuMemFree_v2 by symbol", reinterpret_cast<void *>(d + 10),
                      [&] { EXPECT_EQ(exported_free(d), CUDA_SUCCESS); });
    // The CUDA runtime (a statically linked one reaches the driver the same way: cuGetProcAddress).
    void *rt = nullptr;
    for (const char *name : {"libcudart.so", "libcudart.so.13", "libcudart.so.12", "/usr/local/cuda/lib64/libcudart.so"})
        if ((rt = dlopen(name, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
    if (rt == nullptr) {
        std::printf("[ hooks ] CUDA runtime path not tested: no libcudart.so here\n");
        return;
    }
    using Malloc = int (*)(void **, size_t);
    using Free = int (*)(void *);
    auto rt_malloc = reinterpret_cast<Malloc>(dlsym(rt, "cudaMalloc"));
    auto rt_free = reinterpret_cast<Free>(dlsym(rt, "cudaFree"));
    auto rt_malloc_host = reinterpret_cast<Malloc>(dlsym(rt, "cudaMallocHost"));
    auto rt_free_host = reinterpret_cast<Free>(dlsym(rt, "cudaFreeHost"));
    ASSERT_TRUE(rt_malloc && rt_free && rt_malloc_host && rt_free_host);
    void *p = nullptr;
    ASSERT_EQ(rt_malloc(&p, 1 << 20), 0);
    cached_then_freed("cudaFree", static_cast<char *>(p) + 10, [&] { EXPECT_EQ(rt_free(p), 0); });
    ASSERT_EQ(rt_malloc_host(&p, 1 << 20), 0);
    cached_then_freed("cudaFreeHost", static_cast<char *>(p) + 10, [&] { EXPECT_EQ(rt_free_host(p), 0); });
    // Reuse: the runtime hands the same address out again; the answer follows the new allocation.
    void *a = nullptr, *b = nullptr;
    ASSERT_EQ(rt_malloc(&a, 4 << 20), 0);
    MemInfo info, truth;
    ASSERT_EQ(det.detect_one(a, &info), GDX_OK);
    ASSERT_EQ(rt_free(a), 0);
    ASSERT_EQ(rt_malloc_host(&b, 64 << 10), 0); // may or may not land at `a`; either way the answer must be fresh
    ASSERT_EQ(det.detect_one(a, &info), GDX_OK);
    ASSERT_EQ(fresh.detect_one(a, &truth), GDX_OK);
    EXPECT_EQ(info.type, truth.type) << describe(info) << " vs " << describe(truth);
    EXPECT_EQ(rt_free_host(b), 0);
    std::printf("[ hooks ] runtime frees seen through %s; %llu hooked calls in all\n", "libcudart",
                static_cast<unsigned long long>(free_hook_calls()));
}

TEST_F(GpuOnly, IntegratedFlagMatchesTheDevice) {
    TestBuffer b;
    std::string why;
    ASSERT_TRUE(b.allocate(AllocKind::CudaDevice, 1 << 20, 0, &why)) << why;
    Detector det;
    MemInfo info;
    ASSERT_EQ(det.detect_one(b.ptr(), &info), GDX_OK);
    const auto devs = cuda::list_devices();
    ASSERT_FALSE(devs.empty());
    EXPECT_EQ(info.integrated, devs[0].integrated);
}
#endif
