// The GPU registration ladder against the real CUDA driver (label gpu; skips without a GPU). The GPU machine
// has no RDMA device, so this checks what can be checked there:
//   - device memory (cuMemAlloc) and VMM memory (cuMemCreate, RDMA-capable) are classified dma-buf-exportable
//     by the memtype row and really export a dma-buf fd;
//   - the ladder, given a NIC that supports dma-buf (a fake registrar: there is no NIC), drives that export
//     and hands the NIC an open fd for the right range, per chunk; managed memory is never exported;
//   - with no RDMA device the decision is "staged", and gdx_info -t says so for every GPU.
#include "memtype/cuda_driver.h"
#include "rc_test_util.h"
#include "transport/rc/device.h"

#include <array>
#include <cstdio>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>

using namespace gdx;
using namespace gdx::tp;
using namespace gdx::tp::rc;

#if GDX_HAVE_CUDA_H
namespace {

std::string skip_reason() {
    if (cuda::driver() == nullptr) return "no GPU: " + cuda::why_unavailable();
    return "";
}

// A GPU allocation of one kind, released on destruction.
struct GpuAlloc {
    enum Kind { Device, Vmm, Managed } kind;
    CUdeviceptr ptr = 0;
    size_t size = 0;
    CUmemGenericAllocationHandle handle = 0;
    std::string why_not; // set when this machine cannot make it (VMM without RDMA capability, ...)

    GpuAlloc(Kind k, size_t n) : kind(k), size(n) {
        const cuda::DriverApi *api = cuda::driver();
        EXPECT_EQ(cuda::bind_device(0), CUDA_SUCCESS);
        if (k == Device) {
            EXPECT_EQ(api->cuMemAlloc(&ptr, n), CUDA_SUCCESS);
        } else if (k == Managed) {
            EXPECT_EQ(api->cuMemAllocManaged(&ptr, n, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
        } else {
            if (!api->cuMemCreate || !api->cuMemMap || !api->cuMemAddressReserve || !api->cuMemSetAccess) {
                why_not = "driver without the VMM API";
                return;
            }
            CUmemAllocationProp prop{};
            prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
            prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
            prop.location.id = 0;
            prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
            prop.allocFlags.gpuDirectRDMACapable = 1; // what an RDMA registration of VMM memory needs
            size_t gran = 0;
            if (api->cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS || !gran) {
                why_not = "no VMM granularity";
                return;
            }
            size = (n + gran - 1) / gran * gran;
            if (api->cuMemCreate(&handle, size, &prop, 0) != CUDA_SUCCESS) {
                why_not = "cuMemCreate with gpuDirectRDMACapable refused (GPU_DIRECT_RDMA_WITH_CUDA_VMM unsupported?)";
                handle = 0;
                return;
            }
            EXPECT_EQ(api->cuMemAddressReserve(&ptr, size, 0, 0, 0), CUDA_SUCCESS);
            EXPECT_EQ(api->cuMemMap(ptr, size, 0, handle, 0), CUDA_SUCCESS);
            CUmemAccessDesc ad{};
            ad.location = prop.location;
            ad.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
            EXPECT_EQ(api->cuMemSetAccess(ptr, size, &ad, 1), CUDA_SUCCESS);
        }
    }
    ~GpuAlloc() {
        const cuda::DriverApi *api = cuda::driver();
        if (kind == Vmm && handle) {
            api->cuMemUnmap(ptr, size);
            api->cuMemAddressFree(ptr, size);
            api->cuMemRelease(handle);
        } else if (ptr) {
            api->cuMemFree(ptr);
        }
    }
    void *p() const { return reinterpret_cast<void *>(ptr); }
};

std::string fdinfo(int fd) {
    std::string out;
    FILE *f = std::fopen(("/proc/self/fdinfo/" + std::to_string(fd)).c_str(), "r");
    if (!f) return out;
    char line[256];
    while (std::fgets(line, sizeof(line), f)) out += line;
    std::fclose(f);
    return out;
}

class RcGpu : public ::testing::Test {
  protected:
    void SetUp() override {
        if (std::string r = skip_reason(); !r.empty()) GTEST_SKIP() << r;
        reset_learned_for_test();
    }
    // The memtype row classifies, then exports [p+64K, +1M) (an interior range: offset handling matters).
    void check_export(const GpuAlloc &a, mem::MemType want) {
        const mem::Ops &row = mem::ops(mem::MemKind::Cuda);
        mem::MemInfo info;
        ASSERT_EQ(row.query(a.p(), &info), GDX_OK) << last_error();
        EXPECT_EQ(info.type, want) << mem::type_name(info.type);
        ASSERT_TRUE(info.dmabuf_allowed) << "the memtype row must allow the dma-buf export of " << mem::type_name(want);
        int fd = -1;
        uint64_t off = 0;
        ASSERT_EQ(row.dmabuf_fd(static_cast<char *>(a.p()) + 65536, 1 << 20, &fd, &off), GDX_OK) << last_error();
        ASSERT_GE(fd, 0);
        struct stat st;
        EXPECT_EQ(fstat(fd, &st), 0);
        std::string fi = fdinfo(fd);
        std::printf("%s: dma-buf fd %d, offset %llu; fdinfo:\n%s", mem::type_name(want), fd, (unsigned long long)off, fi.c_str());
        EXPECT_NE(fi.find("exp_name"), std::string::npos) << "not a dma-buf fd: " << fi;
        close(fd);

        // The ladder with a NIC that takes dma-buf: it must export through the row and hand over an open fd.
        auto reg = std::make_shared<gdx::test::FakeRegistrar>();
        reg->support_.dmabuf = true;
        reg->support_.dmabuf_errno = EBADF;
        LadderConfig cfg;
        std::vector<Chunk> out;
        topo::GdrDecision gate{true, "test"};
        ASSERT_EQ(register_gpu(*reg, row.dmabuf_fd, cfg, a.p(), a.size, info, IBV_ACCESS_LOCAL_WRITE, gate, "GPU0", &out), GDX_OK);
        ASSERT_EQ(out.size(), 1u);
        EXPECT_EQ(out[0].reg.reach, Reach::Dmabuf) << out[0].reg.reason;
        EXPECT_TRUE(reg->fd_was_open);
        EXPECT_EQ(fcntl(reg->last_fd, F_GETFD), -1) << "the ladder closes the fd after registering";
        for (Chunk &c : out)
            if (c.mr) reg->dereg(c.mr);
    }
};

} // namespace

TEST_F(RcGpu, DeviceMemoryExportsDmabufAndTheLadderUsesIt) {
    GpuAlloc a(GpuAlloc::Device, 4 << 20);
    check_export(a, mem::MemType::CudaDevice);
}

TEST_F(RcGpu, VmmMemoryExportsDmabufAndTheLadderUsesIt) {
    GpuAlloc a(GpuAlloc::Vmm, 4 << 20);
    if (!a.why_not.empty()) GTEST_SKIP() << a.why_not;
    check_export(a, mem::MemType::CudaVmm);
}

TEST_F(RcGpu, ManagedMemoryIsNeverExported) {
    GpuAlloc a(GpuAlloc::Managed, 1 << 20);
    mem::MemInfo info;
    ASSERT_EQ(mem::ops(mem::MemKind::Cuda).query(a.p(), &info), GDX_OK) << last_error();
    EXPECT_EQ(info.type, mem::MemType::CudaManaged);
    EXPECT_FALSE(info.dmabuf_allowed);
    gdx::test::FakeRegistrar reg;
    reg.support_.dmabuf = reg.support_.peermem = true;
    std::vector<Chunk> out;
    ASSERT_EQ(register_gpu(reg, mem::ops(mem::MemKind::Cuda).dmabuf_fd, LadderConfig{}, a.p(), 1 << 20, info,
                           IBV_ACCESS_LOCAL_WRITE, topo::GdrDecision{true, ""}, "GPU0", &out), GDX_OK);
    EXPECT_EQ(out[0].reg.reach, Reach::None);
    EXPECT_EQ(reg.dmabuf_calls + reg.va_calls, 0) << "no export and no peer-memory pin of managed memory";
}

TEST_F(RcGpu, NoNicMeansStagedForEveryGpu) {
    std::vector<PortDesc> ports;
    ASSERT_EQ(list_ports(&ports), GDX_OK);
    if (!ports.empty()) GTEST_SKIP() << "this machine has an RDMA device (" << ports[0].device << "): the no-NIC decision does not apply";
    std::string cmd = "env -u GDX_TOPO_FILE " GDX_TEST_BINARY_DIR "/tools/gdx_info -t 2>&1";
    FILE *p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string out;
    std::array<char, 4096> buf;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
    ASSERT_EQ(pclose(p), 0) << out;
    std::printf("%s", out.c_str());
    for (const cuda::DeviceInfo &d : cuda::list_devices())
        EXPECT_NE(out.find("GPU" + std::to_string(d.ordinal) + ": no RDMA device → staged (TCP/shm only)"), std::string::npos) << out;
}

#else
TEST(RcGpu, Skipped) { GTEST_SKIP() << "gdx was built without CUDA headers"; }
#endif
