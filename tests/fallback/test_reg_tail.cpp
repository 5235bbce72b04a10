// Engine::mem_reg's GPU tail slack: UCX's memory-type cache rounds a CUDA allocation up to 16 bytes, and UCP 1.22
// registers that rounded length (a 1 MiB + 8 B cudaMalloc as 1 MiB + 16 B; found on the H200, 2026-11-26). The
// engine leaves up to `gpu_tail_slack` bytes past the end of a GPU allocation out of the region; more than that, or
// no slack, is still refused as a range spanning two kinds of memory. The GPU allocation is the memtype layer's
// fault-injection row (tests/memtype/fake_cuda_ops.h) laid over host memory, so this runs in CI.
#include "loop_fixture.h"

#include "../memtype/fake_cuda_ops.h"
#include "core/error.h"

#include <vector>

namespace gdx::test {
namespace {

using mem::test::FakeCudaOpsForTest;

class RegTail : public LoopPairTest {
  protected:
    static constexpr size_t kAlloc = (1 << 20) + 8; // what the "driver" allocated
    std::vector<uint8_t> mem = std::vector<uint8_t>(kAlloc + 4096);
    uintptr_t base = 0;

    void SetUp() override {
        LoopPairTest::SetUp();
        FakeCudaOpsForTest::get().reset();
        mem::DetectorOptions o;
        o.gpu_row = FakeCudaOpsForTest::get().row();
        detector = std::make_unique<mem::Detector>(o);
        base = (reinterpret_cast<uintptr_t>(mem.data()) + 255) & ~uintptr_t(255);
        FakeCudaOpsForTest::get().alloc(base, kAlloc, mem::MemType::CudaDevice, 0);
        ASSERT_NO_FATAL_FAILURE(start());
    }
    void TearDown() override {
        LoopPairTest::TearDown();
        FakeCudaOpsForTest::get().reset();
    }
    gdx_status_t reg(size_t len, size_t slack, fb::Region **r) {
        return a.engine->mem_reg(reinterpret_cast<void *>(base), len, tp::kAccessAll, r, slack);
    }
};

TEST_F(RegTail, ATailWithinTheSlackIsLeftOutOfTheRegion) {
    fb::Region *r = nullptr;
    ASSERT_EQ(reg(kAlloc + 8, 15, &r), GDX_OK) << last_error(); // UCP's 16-byte rounding: 8 bytes past the end
    EXPECT_EQ(r->length(), kAlloc);
    EXPECT_EQ(r->info().kind, mem::MemKind::Cuda);
    EXPECT_EQ(a.engine->mem_dereg(r), GDX_OK);
}

TEST_F(RegTail, AnExactRangeIsRegisteredWhole) {
    fb::Region *r = nullptr;
    ASSERT_EQ(reg(kAlloc, 15, &r), GDX_OK) << last_error();
    EXPECT_EQ(r->length(), kAlloc);
    EXPECT_EQ(a.engine->mem_dereg(r), GDX_OK);
}

TEST_F(RegTail, ATailBeyondTheSlackOrWithoutSlackIsRefused) {
    fb::Region *r = nullptr;
    EXPECT_EQ(reg(kAlloc + 16, 15, &r), GDX_ERR_UNSUPPORTED);
    EXPECT_NE(last_error().find("spans"), std::string::npos) << last_error();
    EXPECT_EQ(reg(kAlloc + 8, 0, &r), GDX_ERR_UNSUPPORTED);
    EXPECT_EQ(r, nullptr);
}

} // namespace
} // namespace gdx::test
