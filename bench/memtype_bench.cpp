// memtype_bench: what a memory-type lookup costs. For device, pinned and pageable host memory: a cached hit
// (per-hit validation, and events mode), a miss (full classification, cache off), and the raw driver calls
// behind them. Prints median and p99 in ns per call and a command/date/machine header; no thresholds. Without a
// CUDA driver it says so and exits 0.
//   memtype_bench [--samples N] [--batch B]
#include "memtype/free_hooks.h"
#include "memtype/memtype.h"
#if GDX_HAVE_CUDA_H
#include "memtype/cuda_driver.h"
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <string>
#include <sys/utsname.h>
#include <unistd.h>
#include <vector>

using namespace gdx;
using namespace gdx::mem;

namespace {

int g_samples = 2000;
int g_batch = 32;
volatile uint64_t g_sink; // keeps the measured calls from being optimized away

struct Result {
    double median, p99;
    int samples;
};

// Each sample times `g_batch` back-to-back calls (the clock read costs ~20 ns: too much for one call) and
// divides. At most ~1.5 s per row: slow rows (host queries) get fewer samples, reported.
Result measure(const std::function<uint64_t()> &call) {
    for (int i = 0; i < 200; ++i)
        g_sink = g_sink + call(); // warm-up: caches, memo, driver paths
    std::vector<double> ns;
    ns.reserve(g_samples);
    const auto budget_end = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
    for (int s = 0; s < g_samples; ++s) {
        uint64_t acc = 0;
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < g_batch; ++i)
            acc += call();
        const auto t1 = std::chrono::steady_clock::now();
        g_sink = g_sink + acc;
        ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / g_batch);
        if (t1 > budget_end && s >= 50) break;
    }
    std::sort(ns.begin(), ns.end());
    return Result{ns[ns.size() / 2], ns[std::min(ns.size() - 1, ns.size() * 99 / 100)], static_cast<int>(ns.size())};
}

void row(const char *memory, const char *what, const Result &r) {
    std::printf("| %-16s | %-58s | %10.1f | %10.1f | %7d |\n", memory, what, r.median, r.p99, r.samples);
    std::fflush(stdout);
}

void header(int argc, char **argv) {
    std::string cmd;
    for (int i = 0; i < argc; ++i)
        cmd += (i ? " " : "") + std::string(argv[i]);
    char date[64];
    std::time_t now = std::time(nullptr);
    std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    utsname u{};
    uname(&u);
    std::string cpu = "unknown CPU";
    std::ifstream ci("/proc/cpuinfo");
    for (std::string line; std::getline(ci, line);)
        if (line.rfind("model name", 0) == 0) {
            cpu = line.substr(line.find(':') + 2);
            break;
        }
    std::printf("# memtype_bench: %s\n# date: %s\n# machine: %s, %s %s %s, %s, %ld cores\n", cmd.c_str(), date, host,
                u.sysname, u.release, u.machine, cpu.c_str(), sysconf(_SC_NPROCESSORS_ONLN));
#if GDX_HAVE_CUDA_H
    if (const cuda::DriverApi *api = cuda::driver()) {
        for (const cuda::DeviceInfo &d : cuda::list_devices())
            std::printf("# gpu %d: %s (%s), CUDA driver API %d.%d\n", d.ordinal, d.name.c_str(), d.pci_bus_id.c_str(),
                        api->driver_version / 1000, api->driver_version % 1000 / 10);
    }
#endif
    std::printf("# method: each sample times %d back-to-back calls on one thread and divides; median and p99 over "
                "up to %d samples (1.5 s per row at most); ns per call\n",
                g_batch, g_samples);
}

} // namespace

int main(int argc, char **argv) {
    for (int i = 1; i + 1 < argc; i += 2) {
        if (std::strcmp(argv[i], "--samples") == 0) g_samples = std::max(1, std::atoi(argv[i + 1]));
        if (std::strcmp(argv[i], "--batch") == 0) g_batch = std::max(1, std::atoi(argv[i + 1]));
    }
    header(argc, argv);
#if !GDX_HAVE_CUDA_H
    std::printf("# skipped: no CUDA driver: gdx was built without cuda.h\n");
    return 0;
#else
    const cuda::DriverApi *api = cuda::driver();
    if (api == nullptr) {
        std::printf("# skipped: %s\n", cuda::why_unavailable().c_str());
        return 0;
    }
    if (cuda::bind_device(0) != CUDA_SUCCESS) {
        std::printf("# skipped: cannot bind GPU 0\n");
        return 0;
    }
    const size_t kSize = 1 << 20;
    CUdeviceptr dev = 0;
    void *pinned = nullptr;
    std::vector<char> pageable(kSize, 1);
    if (api->cuMemAlloc(&dev, kSize) != CUDA_SUCCESS || api->cuMemHostAlloc(&pinned, kSize, 0) != CUDA_SUCCESS) {
        std::printf("# skipped: cannot allocate device or pinned memory\n");
        return 0;
    }
    std::vector<CUdeviceptr> many(64);
    for (CUdeviceptr &p : many)
        if (api->cuMemAlloc(&p, 64 << 10) != CUDA_SUCCESS) p = dev;

    // The batch cuda_ops.cpp sends on a miss.
    auto raw_batch = [api](const void *p) {
        unsigned int memtype = 0;
        int managed = 0, ordinal = -1, mapped = 0, legacy = 0;
        unsigned long long id = 0;
        CUdeviceptr start = 0;
        size_t size = 0;
        CUmemoryPool pool = nullptr;
        uint64_t handles = 0;
        CUpointer_attribute ids[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                     CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                     CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                     CU_POINTER_ATTRIBUTE_BUFFER_ID,
                                     CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                     CU_POINTER_ATTRIBUTE_RANGE_SIZE,
                                     CU_POINTER_ATTRIBUTE_MAPPED,
                                     CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE,
                                     CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
                                     CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES};
        void *data[] = {&memtype, &managed, &ordinal, &id, &start, &size, &mapped, &pool, &legacy, &handles};
        api->cuPointerGetAttributes(10, ids, data, reinterpret_cast<CUdeviceptr>(p));
        return static_cast<uint64_t>(memtype) + id;
    };
    auto raw_one = [api](const void *p, CUpointer_attribute a) {
        unsigned long long v = 0; // wide enough for BUFFER_ID and MEMORY_TYPE
        api->cuPointerGetAttribute(&v, a, reinterpret_cast<CUdeviceptr>(p));
        return static_cast<uint64_t>(v);
    };
    DetectorOptions per_hit, events, off, deflt;
    per_hit.validation = CacheValidation::PerHit;
    events.validation = CacheValidation::Events;
    off.cache = false;
    Detector d_hit(per_hit), d_ev(events), d_off(off), d_default(deflt);
    const FreeHookState &hooks = install_free_hooks();
    std::printf("# CUDA free hooks: %s (%s); the default (GDX_MEMTYPE_HOOKS=try) validates hits: %s\n",
                hooks.installed ? "on" : "off", hooks.why.c_str(), validation_name(d_default.options().validation));
    auto lookup = [](Detector &d, const void *p) {
        MemInfo info;
        d.detect_one(p, &info);
        return static_cast<uint64_t>(info.type) + info.buffer_id;
    };

    std::printf("\n| memory           | what                                                       |  median ns "
                "|     p99 ns | samples |\n|---|---|---|---|---|\n");
    struct Mem {
        const char *name;
        const void *p;
    } mems[] = {{"cuda-device", reinterpret_cast<void *>(dev + 4096)},
                {"host-pinned", static_cast<char *>(pinned) + 4096},
                {"host-pageable", pageable.data() + 4096}};
    double raw_dev = 0, hit_dev = 0, hit_dev_ev = 0, hit_dev_default = 0;
    for (const Mem &m : mems) {
        Result r = measure([&] { return raw_batch(m.p); });
        row(m.name, "raw cuPointerGetAttributes (the 10 attributes of a miss)", r);
        if (m.p == mems[0].p) raw_dev = r.median;
        row(m.name, "raw cuPointerGetAttribute(BUFFER_ID) (the per-hit check)",
            measure([&] { return raw_one(m.p, CU_POINTER_ATTRIBUTE_BUFFER_ID); }));
        row(m.name, "raw cuPointerGetAttribute(MEMORY_TYPE)",
            measure([&] { return raw_one(m.p, CU_POINTER_ATTRIBUTE_MEMORY_TYPE); }));
        row(m.name, "miss: detect_one, cache off (full classification)", measure([&] { return lookup(d_off, m.p); }));
        r = measure([&] { return lookup(d_hit, m.p); });
        row(m.name,
            m.p == mems[2].p ? "detect_one, cache on (host answers are never cached)"
                             : "hit: detect_one, per-hit validation (hooks off)",
            r);
        if (m.p == mems[0].p) hit_dev = r.median;
        if (m.p != mems[2].p) {
            r = measure([&] { return lookup(d_ev, m.p); });
            row(m.name, "hit: detect_one, events validation (no driver call)", r);
            if (m.p == mems[0].p) hit_dev_ev = r.median;
            r = measure([&] { return lookup(d_default, m.p); });
            row(m.name, hooks.installed ? "hit: detect_one, default (hooks on: events)"
                                        : "hit: detect_one, default (hooks off: per-hit)",
                r);
            if (m.p == mems[0].p) hit_dev_default = r.median;
        }
    }
    size_t i = 0;
    row("cuda-device x64", "hit, 64 allocations round robin, per-hit validation",
        measure([&] { return lookup(d_hit, reinterpret_cast<void *>(many[i++ % many.size()])); }));
    row("cuda-device x64", "hit, 64 allocations round robin, events validation",
        measure([&] { return lookup(d_ev, reinterpret_cast<void *>(many[i++ % many.size()])); }));
    std::vector<MemSegment> segs;
    row("cuda-device", "detect() of the 1 MiB buffer, cached (one segment)", measure([&] {
            d_hit.detect(reinterpret_cast<void *>(dev), kSize, &segs);
            return segs.size();
        }));
    std::printf("\n# raw cuPointerGetAttributes / cached hit, device memory: %.1fx (per-hit), %.1fx (events), "
                "%.1fx (default)\n",
                raw_dev / hit_dev, raw_dev / hit_dev_ev, raw_dev / hit_dev_default);
    const RangeCacheStats s = d_hit.cache()->stats();
    std::printf("# per-hit cache: %llu hits, %llu misses, %llu stale, %zu entries\n",
                static_cast<unsigned long long>(s.hits), static_cast<unsigned long long>(s.misses),
                static_cast<unsigned long long>(s.stale), s.entries);
    for (CUdeviceptr p : many)
        if (p != dev) api->cuMemFree(p);
    api->cuMemFree(dev);
    api->cuMemFreeHost(pinned);
    return 0;
#endif
}
