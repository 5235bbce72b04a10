// Which way the target serves a peer's get of host memory of at least GDX_SHM_CMA_THRESH bytes, when cross-memory
// attach works both ways: by CMA (one kernel copy, split between the two processes) or through the ring (two
// copies, one per process, pipelined record by record). Neither wins everywhere. CMA pins every page of the far
// side for each call: with 4 KiB pages (malloc'd memory where transparent huge pages are 'madvise') that and the
// kernel's per-page copy held UCP tag_bw of 1 MiB to ~30 GB/s on a 2-vCPU EPYC guest, where the ring carried ~55;
// with huge pages CMA ran at ~95 (bench/results/cpu-2026-11-28/). What the memory is made of is not cheap to ask
// the kernel, so the target measures: per power-of-two size, the rate each way served its gets, as bytes over the
// target's own copying time (CMA: its share, which the initiator's share runs beside; the ring: its copies into
// the records, which the initiator's copies out of them run behind). Not the time until the initiator has the
// last byte: tried (2026-11-29), a ring get timed so while the other gets went by CMA took 4-30 times as long as
// alone, the initiator being busy with those CMA gets' shares; a try of the other way must be measured by what
// that way costs alone.
// It tries each way until it has a few measurements of both, then serves by the faster (the median of the last
// kWindow measurements each: a vCPU preempted mid-copy makes outliers) and keeps trying the other now and then
// (kExploreEvery), so that it follows the memory when it changes. The first get of each way in a size is not
// measured: it pays for first touches (the initiator's pages faulted in, the ring's records pulled into the
// caches), and a cold first CMA sample, the one the warm-up starts with, could hand a short run to a slower ring.
#pragma once

#include <cstdint>

namespace gdx::tp::shm {

class GetPathChooser {
  public:
    enum class Path : uint8_t { Cma = 0, Ring = 1 };
    static constexpr unsigned kWarmSamples = 2; // measurements of each way before the faster one is trusted (after
                                                // the unmeasured first one)
    // The other way is tried every kExploreEvery-th get, every kExploreRarely-th while it measured under 2/3 of
    // the faster, every kExploreSeldom-th under 1/3: a try costs (faster / other - 1) gets' time, so the tries cost
    // at most ~3 % of the time wherever the other way runs at more than 1/9 of the faster.
    static constexpr unsigned kExploreEvery = 16;
    static constexpr unsigned kExploreRarely = 64;
    static constexpr unsigned kExploreSeldom = 256;
    static constexpr unsigned kWindow = 8;

    // `learn` false: always CMA (GDX_SHM_CMA_LEARN=no, the behaviour before the choice existed).
    explicit GetPathChooser(bool learn) : learn_(learn) {}
    // The way to serve a get of `len` bytes (>= 1). `component` names the transport in the one log line per size
    // that says which way was found faster.
    Path choose(uint64_t len, const char *component);
    // A get of `len` bytes served by `path` took `ns` of the target's time.
    void record(Path path, uint64_t len, int64_t ns);

    // For tests: the rate (bytes per ns, the median of the last kWindow; 0 until measured) and measurement count.
    double rate(Path path, uint64_t len) const { return median(bucket(len), path); }
    unsigned samples(Path path, uint64_t len) const { return bucket(len).samples[idx(path)]; }

  private:
    struct Bucket {
        float last[2][kWindow] = {};
        uint32_t samples[2] = {0, 0};
        bool cold_seen[2] = {false, false}; // the first get of each way came back, not measured
        uint32_t issued[2] = {0, 0};
        uint32_t gets = 0;
        int8_t reported = -1; // the way the log line named, -1 before it
    };
    static unsigned idx(Path p) { return static_cast<unsigned>(p); }
    static unsigned bucket_of(uint64_t len) { return 63u - static_cast<unsigned>(__builtin_clzll(len | 1)); }
    const Bucket &bucket(uint64_t len) const { return b_[bucket_of(len)]; }
    static double median(const Bucket &b, Path p);
    bool learn_;
    Bucket b_[64];
};

} // namespace gdx::tp::shm
