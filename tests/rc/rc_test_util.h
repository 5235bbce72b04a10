// Test aids for the rc transport: a fake NIC registrar (no verbs) and a fake GPU memory descriptor.
#pragma once

#include "core/config.h"
#include "core/error.h"
#include "core/log.h"
#include "memtype/memory_ops.h"
#include "support/log_capture.h"
#include "transport/rc/reg_ladder.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace gdx::test {

// FakeGpuMemoryForTest: a descriptor that says "cuda-device memory of GPU `device`" for what really is host
// memory. Fault injection only: it drives the registration ladder's decisions (which rung, which reason) on
// machines without a GPU. Nothing may copy through it as if it were GPU memory.
struct FakeGpuMemoryForTest {
    explicit FakeGpuMemoryForTest(size_t len, int device = 0, uint64_t buffer_id = 0x5eed, mem::MemType type = mem::MemType::CudaDevice)
        : bytes(len) {
        info.type = type;
        info.kind = mem::MemKind::Cuda;
        info.device = device;
        info.base = reinterpret_cast<uintptr_t>(bytes.data());
        info.size = len;
        info.buffer_id = buffer_id;
        info.dmabuf_allowed = type != mem::MemType::CudaManaged && type != mem::MemType::CudaPool;
        info.host_accessible = type == mem::MemType::CudaManaged;
    }
    void *ptr() { return bytes.data(); }
    std::vector<char> bytes;
    mem::MemInfo info;
};

// A registrar that records what it is asked and fails as told; its MRs are heap objects with unique keys.
class FakeRegistrar final : public tp::rc::Registrar {
  public:
    explicit FakeRegistrar(std::string name = "fake0") : name_(std::move(name)) {
        support_.dmabuf_errno = EOPNOTSUPP;
        support_.odp_errno = EINVAL;
        support_.odp_why = "no ODP (device reports none; ibv_reg_mr ON_DEMAND: EINVAL)";
    }
    ~FakeRegistrar() override { EXPECT_EQ(live.size(), 0u) << "MRs leaked by the code under test"; }

    const std::string &device_name() const override { return name_; }
    const tp::rc::NicGdrSupport &support() override { return support_; }
    tp::rc::RegAttempt reg_va(void *addr, size_t len, int access) override {
        ++va_calls;
        return make(addr, len, access, va_errno, va_fail_offsets);
    }
    tp::rc::RegAttempt reg_dmabuf(int fd, uint64_t, size_t len, uint64_t iova, int access) override {
        ++dmabuf_calls;
        struct stat st;
        fd_was_open = fstat(fd, &st) == 0;
        last_fd = fd;
        return make(reinterpret_cast<void *>(iova), len, access, dmabuf_errno, {});
    }
    tp::rc::RegAttempt reg_odp(void *addr, size_t len, int access) override {
        ++odp_calls;
        return make(addr, len, access, odp_errno, {});
    }
    void dereg(ibv_mr *mr) override {
        ASSERT_EQ(live.erase(mr), 1u) << "dereg of an MR this registrar did not make";
        delete mr;
    }
    std::shared_ptr<ibv_mr> implicit_odp(int *err) override {
        ++implicit_calls;
        *err = implicit_errno;
        if (implicit_errno != 0) return nullptr;
        if (implicit_ == nullptr) implicit_ = std::make_shared<ibv_mr>(ibv_mr{.lkey = 7, .rkey = 0});
        return implicit_;
    }
    int prefetch(ibv_mr *, void *, size_t len, bool write) override {
        ++prefetch_calls;
        prefetched += len;
        last_prefetch_write = write;
        return prefetch_errno;
    }

    tp::rc::NicGdrSupport support_;
    int va_errno = 0, dmabuf_errno = 0, odp_errno = 0;
    std::set<uintptr_t> va_fail_offsets; // reg_va fails (EFAULT) for chunks starting at base + these
    uintptr_t base = 0;
    int va_calls = 0, dmabuf_calls = 0, odp_calls = 0;
    int implicit_errno = 0, prefetch_errno = 0, implicit_calls = 0, prefetch_calls = 0;
    size_t prefetched = 0;
    bool last_prefetch_write = false;
    bool fd_was_open = false;
    int last_fd = -1;
    std::set<ibv_mr *> live;

  private:
    tp::rc::RegAttempt make(void *addr, size_t len, int access, int err, const std::set<uintptr_t> &fail_at) {
        tp::rc::RegAttempt a;
        uintptr_t off = reinterpret_cast<uintptr_t>(addr) - base;
        if (err != 0 || fail_at.count(off)) {
            a.err = err ? err : EFAULT;
            return a;
        }
        a.mr = new ibv_mr{};
        a.mr->addr = addr;
        a.mr->length = len;
        a.mr->lkey = next_key_;
        a.mr->rkey = next_key_ + 0x10000;
        ++next_key_;
        (void)access;
        live.insert(a.mr);
        return a;
    }
    std::string name_;
    uint32_t next_key_ = 100;
    std::shared_ptr<ibv_mr> implicit_;
};

// An exporter that hands out a real (pipe) fd, so tests can check the ladder closes it.
inline gdx_status_t fake_dmabuf_export(const void *, size_t, int *fd, uint64_t *offset) {
    int p[2];
    if (pipe(p) != 0) return GDX_ERR_IO;
    close(p[1]);
    *fd = p[0];
    *offset = 0;
    return GDX_OK;
}
inline gdx_status_t failing_dmabuf_export(const void *, size_t, int *, uint64_t *) { return GDX_ERR_DRIVER; }

inline Config config_with(const Config::Overrides &o) {
    Config c;
    std::string err;
    EXPECT_EQ(Config::load(o, &c, &err), GDX_OK) << err;
    return c;
}

} // namespace gdx::test
