#include "transport/shm/get_path.h"

#include "core/log.h"

#include <algorithm>

namespace gdx::tp::shm {

GetPathChooser::Path GetPathChooser::choose(uint64_t len, const char *component) {
    if (!learn_) return Path::Cma;
    Bucket &b = b_[bucket_of(len)];
    ++b.gets;
    Path pick;
    if (b.samples[0] < kWarmSamples || b.samples[1] < kWarmSamples) {
        // Both ways by turns (by what was issued: many gets are served before the first measurement comes back).
        pick = b.issued[idx(Path::Cma)] <= b.issued[idx(Path::Ring)] ? Path::Cma : Path::Ring;
    } else {
        const double rate[2] = {median(b, Path::Cma), median(b, Path::Ring)};
        const Path best = rate[idx(Path::Ring)] > rate[idx(Path::Cma)] ? Path::Ring : Path::Cma;
        if (b.reported != static_cast<int8_t>(best)) {
            const bool first = b.reported < 0;
            b.reported = static_cast<int8_t>(best);
            GDX_LOG(first ? log::Level::Info : log::Level::Debug, component,
                    "host gets of %llu..%llu bytes: served %s (%.1f GB/s measured) rather than %s (%.1f GB/s)",
                    1ull << bucket_of(len), (2ull << bucket_of(len)) - 1,
                    best == Path::Ring ? "through the ring" : "by cross-memory attach",
                    rate[idx(best)], best == Path::Ring ? "by cross-memory attach" : "through the ring",
                    rate[idx(best) ^ 1]);
        }
        const double other = rate[idx(best) ^ 1], fast = rate[idx(best)];
        const unsigned every = other * 3 < fast       ? kExploreSeldom
                               : other * 3 < fast * 2 ? kExploreRarely
                                                      : kExploreEvery;
        pick = b.gets % every == 0 ? static_cast<Path>(idx(best) ^ 1) : best;
    }
    ++b.issued[idx(pick)];
    return pick;
}

void GetPathChooser::record(Path path, uint64_t len, int64_t ns) {
    if (!learn_ || len == 0) return;
    Bucket &b = b_[bucket_of(len)];
    if (!b.cold_seen[idx(path)]) {
        b.cold_seen[idx(path)] = true; // first touches: not the way's rate (get_path.h)
        return;
    }
    const double r = static_cast<double>(len) / static_cast<double>(ns > 0 ? ns : 1);
    b.last[idx(path)][b.samples[idx(path)]++ % kWindow] = static_cast<float>(r);
}

double GetPathChooser::median(const Bucket &b, Path p) {
    const unsigned n = std::min<unsigned>(b.samples[idx(p)], kWindow);
    if (n == 0) return 0;
    float v[kWindow];
    std::copy(b.last[idx(p)], b.last[idx(p)] + n, v);
    std::nth_element(v, v + n / 2, v + n);
    return v[n / 2];
}

} // namespace gdx::tp::shm
