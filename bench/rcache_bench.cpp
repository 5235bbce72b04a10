// rcache_bench: what a registration-cache hit costs against a real registration (ibv_reg_mr + ibv_dereg_mr)
// on host memory, through RcMemoryDomain::mem_reg exactly as callers use it (register, use the handle, drop
// it). With an RDMA device it measures both; without one, only the cache side against a no-op registrar
// (the hit cost does not depend on the NIC).
//
//   rcache_bench [-n hits] [-m misses]
#include "core/config.h"
#include "transport/rc/component.h"
#include "transport/rc/iface.h"
#include "transport/rc/md.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>

using namespace gdx;
using namespace gdx::tp;
using Clock = std::chrono::steady_clock;

namespace {

// Stands in for the NIC when there is none: hands out distinct fake MRs, does nothing else.
class NullRegistrar final : public rc::Registrar {
  public:
    const std::string &device_name() const override { return name_; }
    const rc::NicGdrSupport &support() override { return sup_; }
    rc::RegAttempt reg_va(void *a, size_t n, int) override { return {new ibv_mr{nullptr, nullptr, a, n, 0, 1, 2}, 0}; }
    rc::RegAttempt reg_dmabuf(int, uint64_t, size_t, uint64_t, int) override { return {nullptr, EOPNOTSUPP}; }
    rc::RegAttempt reg_odp(void *, size_t, int) override { return {nullptr, EINVAL}; }
    void dereg(ibv_mr *mr) override { delete mr; }

  private:
    std::string name_ = "none";
    rc::NicGdrSupport sup_;
};

double ns_per(Clock::time_point t0, long n) {
    return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / static_cast<double>(n);
}

// Registers [p, p+len) `n` times, dropping each handle at once; ns per registration.
double reg_loop(MemoryDomain &md, void *p, size_t len, const mem::MemInfo &info, long n) {
    auto t0 = Clock::now();
    for (long i = 0; i < n; ++i) {
        std::unique_ptr<MemHandle> h;
        if (md.mem_reg(p, len, info, kAccessAll, &h) != GDX_OK) {
            std::fprintf(stderr, "rcache_bench: mem_reg failed\n");
            std::exit(1);
        }
    }
    return ns_per(t0, n);
}

} // namespace

int main(int argc, char **argv) {
    long hits = 200000, misses = 2000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "-n")) hits = std::atol(argv[i + 1]);
        else if (!std::strcmp(argv[i], "-m")) misses = std::atol(argv[i + 1]);
    }
    std::vector<rc::PortDesc> ports;
    rc::list_ports(&ports);
    Config cached = Config::defaults(), uncached;
    std::string err;
    Config::load({{"GDX_RCACHE_MAX_SIZE", "0"}}, &uncached, &err);
    std::unique_ptr<Interface> ic, iu;
    std::unique_ptr<MemoryDomain> fake;
    MemoryDomain *mc = nullptr, *mu = nullptr;
    std::string where;
    if (!ports.empty()) {
        DeviceDesc d{ports[0].device + ":" + std::to_string(ports[0].port), "", false};
        if (rc::component()->open(d, cached, &ic) != GDX_OK || rc::component()->open(d, uncached, &iu) != GDX_OK) return 1;
        mc = &ic->md(), mu = &iu->md();
        where = d.name;
    } else {
        fake = std::make_unique<rc::RcMemoryDomain>(nullptr, cached, std::make_shared<NullRegistrar>(), nullptr);
        mc = fake.get();
        where = "no RDMA device (cache side only)";
    }
    std::printf("rcache_bench on %s: mem_reg + handle drop, host memory with a buffer id (HostPinned)\n", where.c_str());
    for (size_t len : {size_t(4096), size_t(1) << 20, size_t(64) << 20}) {
        void *p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
        if (p == MAP_FAILED) return 1;
        mem::MemInfo info;
        info.type = mem::MemType::HostPinned;
        info.buffer_id = 1000 + len;
        reg_loop(*mc, p, len, info, 10); // warm: the first one registers and caches
        double hit = reg_loop(*mc, p, len, info, hits);
        // A sub-range of the cached region: the range lookup, not an exact match.
        double sub = reg_loop(*mc, static_cast<char *>(p) + len / 4, len / 2, info, hits);
        if (mu != nullptr) {
            double miss = reg_loop(*mu, p, len, info, len >= (64u << 20) ? misses / 20 : misses);
            std::printf("  %8zu B: hit %7.0f ns, sub-range hit %7.0f ns, register+deregister %10.0f ns (%.0fx)\n", len, hit,
                        sub, miss, miss / hit);
        } else {
            std::printf("  %8zu B: hit %7.0f ns, sub-range hit %7.0f ns\n", len, hit, sub);
        }
        munmap(p, len);
    }
    // A cache holding many regions: the lookup scans only candidates that can cover the address.
    {
        const int kRegions = 4096;
        size_t len = 4096 * kRegions;
        char *p = static_cast<char *>(mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0));
        mem::MemInfo info;
        info.type = mem::MemType::HostPinned;
        info.buffer_id = 77;
        for (int i = 0; i < kRegions; ++i) reg_loop(*mc, p + 4096 * i, 4096, info, 1);
        auto t0 = Clock::now();
        for (long i = 0; i < hits; ++i) {
            std::unique_ptr<MemHandle> h;
            mc->mem_reg(p + 4096 * (i * 7919 % kRegions), 4096, info, kAccessAll, &h);
        }
        std::printf("  %d cached 4 KiB regions, random hits: %.0f ns\n", kRegions, ns_per(t0, hits));
        munmap(p, len);
    }
    return 0;
}
