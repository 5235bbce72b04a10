#include "memtype/memtype.h"

#include "core/error.h"
#include "core/log.h"
#include "memtype/config_vars.h"
#include "memtype/free_hooks.h"

#if GDX_HAVE_CUDA_H
#include "memtype/cuda_driver.h"
#endif

#include <cinttypes>
#include <cstdio>

namespace gdx::mem {

namespace {

constexpr const char *kComp = "memtype";

std::string why_no_cuda() {
#if GDX_HAVE_CUDA_H
    return cuda::why_unavailable();
#else
    return "gdx was built without cuda.h";
#endif
}

// Two answers describe the same allocation (or both the same kind of boundless host memory).
bool same_allocation(const MemInfo &a, const MemInfo &b) {
    return a.type == b.type && a.kind == b.kind && a.device == b.device && a.buffer_id == b.buffer_id &&
           a.block_id == b.block_id && a.base == b.base && a.size == b.size;
}

// The first multiple of `step` above x, or UINTPTR_MAX past the top of the address space.
uintptr_t next_probe(uintptr_t x, size_t step) {
    uintptr_t down = x - x % step;
    return down > UINTPTR_MAX - step ? UINTPTR_MAX : down + step;
}

} // namespace

std::string describe(const MemInfo &info) {
    char buf[192];
    int n = std::snprintf(buf, sizeof(buf), "%s", type_name(info.type));
    if (info.device >= 0) n += std::snprintf(buf + n, sizeof(buf) - n, " GPU%d", info.device);
    if (info.size != 0) n += std::snprintf(buf + n, sizeof(buf) - n, " [0x%" PRIxPTR ", +%zu)", info.base, info.size);
    if (info.buffer_id != 0) n += std::snprintf(buf + n, sizeof(buf) - n, " id %" PRIu64, info.buffer_id);
    if (info.block_id != 0) n += std::snprintf(buf + n, sizeof(buf) - n, " block %" PRIu64, info.block_id);
    if (info.dmabuf_allowed) std::snprintf(buf + n, sizeof(buf) - n, " dmabuf");
    return buf;
}

DetectorOptions Detector::options(const Config &cfg) {
    DetectorOptions o;
    o.use_cuda = cfg.ternary(MemtypeVar::CUDA) != Ternary::No;
    o.cache = cfg.boolean(MemtypeVar::MEMTYPE_CACHE);
    o.cache_entries = cfg.uint(MemtypeVar::MEMTYPE_CACHE_ENTRIES);
    o.hooks = cfg.ternary(MemtypeVar::MEMTYPE_HOOKS);
    return o;
}

gdx_status_t Detector::create(const Config &cfg, std::unique_ptr<Detector> *out) {
    if (out == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "Detector::create: null output");
    if (cfg.ternary(MemtypeVar::CUDA) == Ternary::Yes && !ops(MemKind::Cuda).available())
        return GDX_FAIL(GDX_ERR_NO_DEVICE, kComp, "GDX_CUDA=yes but %s", why_no_cuda().c_str());
    DetectorOptions o = options(cfg);
    // The copy row's knob is process-wide (like set_dmabuf_pcie_first): the last context made sets it.
    set_small_write_max(cfg.size(MemtypeVar::CUDA_SMALL_WRITE));
    if (o.hooks == Ternary::Yes && o.use_cuda && ops(MemKind::Cuda).available() && !install_free_hooks().installed)
        return GDX_FAIL(GDX_ERR_UNSUPPORTED, kComp, "GDX_MEMTYPE_HOOKS=yes but the CUDA free hooks are off: %s",
                        install_free_hooks().why.c_str());
    out->reset(new Detector(o));
    return GDX_OK;
}

Detector::Detector(const DetectorOptions &opts) : opts_(opts) {
    if (opts_.probe_step == 0) opts_.probe_step = size_t(2) << 20;
    if (!opts_.use_cuda) {
        GDX_LOG_ONCE(log::Level::Info, kComp, "memtype:cuda-off", "GDX_CUDA=no: every pointer is host memory");
    } else if (opts_.gpu_row != nullptr) {
        gpu_ = opts_.gpu_row;
    } else if (ops(MemKind::Cuda).available()) {
        gpu_ = &ops(MemKind::Cuda);
    } else {
        // With cuda.h, cuda::driver() has said why at info already; say it here only when it could not.
        GDX_LOG_ONCE(log::Level::Info, kComp, "memtype:no-cuda", "%s: every pointer is host memory",
                     why_no_cuda().c_str());
    }
    if (opts_.validation == CacheValidation::Auto) {
        // Hooks only make sense for the real CUDA row (a test row's frees are not driver calls).
        bool hooked = gpu_ == &ops(MemKind::Cuda) && opts_.cache && opts_.hooks != Ternary::No &&
                      install_free_hooks().installed;
        opts_.validation = hooked ? CacheValidation::Events : CacheValidation::PerHit;
    }
    // Only GPU rows produce cacheable answers: without one a cache would only cost.
    if (gpu_ != nullptr && opts_.cache && opts_.cache_entries > 0)
        cache_ = std::make_unique<RangeCache>(opts_.cache_entries, opts_.validation);
    GDX_DEBUG(kComp, "detector: GPU row %s, cache %s (%zu entries, %s validation)", gpu_ ? gpu_->name : "none",
              cache_ ? "on" : "off", cache_ ? cache_->capacity() : size_t(0), validation_name(opts_.validation));
}

gdx_status_t Detector::classify(const void *ptr, MemInfo *out) {
    uint64_t ticket = 0;
    if (cache_ && cache_->lookup(ptr, out, &ticket)) return GDX_OK;
    if (gpu_ != nullptr) {
        gdx_status_t st = gpu_->query(ptr, out);
        if (st == GDX_OK) {
            if (cache_) cache_->insert(*out, gpu_, ticket);
            return GDX_OK;
        }
        // A driver error is not "host": guessing host for device memory is the crash of ucx#2755.
        if (st != GDX_ERR_NOT_FOUND) return st;
    }
    return ops(MemKind::Host).query(ptr, out);
}

gdx_status_t Detector::detect_one_slow(const void *ptr, MemInfo *out) {
    if (ptr == nullptr || out == nullptr)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "detect_one(%p): null %s", ptr, ptr ? "output" : "pointer");
    return classify(ptr, out);
}

gdx_status_t Detector::detect(const void *ptr, size_t len, std::vector<MemSegment> *out) {
    if (out == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "detect(%p, %zu): null output", ptr, len);
    out->clear();
    if (ptr == nullptr) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "detect(nullptr, %zu): null pointer", len);
    if (len == 0) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "detect(%p, 0): zero length", ptr);
    const uintptr_t start = reinterpret_cast<uintptr_t>(ptr);
    if (len > UINTPTR_MAX - start)
        return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "detect(%p, %zu): range wraps around the address space", ptr,
                        len);
    const uintptr_t end = start + len;
    uintptr_t cur = start;
    MemInfo info, next;
    bool have_next = false; // a probe already classified `cur`
    while (cur < end) {
        if (have_next) {
            info = next;
            have_next = false;
        } else if (gdx_status_t st = classify(reinterpret_cast<const void *>(cur), &info); st != GDX_OK) {
            out->clear();
            return st;
        }
        uintptr_t seg_end = end;
        if (info.size != 0 && cur >= info.base && cur - info.base < info.size) {
            // Bounds known: the segment ends with the allocation (or the range).
            if (info.base + info.size - cur < end - cur) seg_end = info.base + info.size;
        } else {
            // Bounds unknown (pageable host, or GPU memory the driver gave no range for): the stretch lasts until
            // a probe point answers differently. Cost: one query per probe_step (README: 'Host gaps').
            for (uintptr_t q = next_probe(cur, opts_.probe_step); q < end; q = next_probe(q, opts_.probe_step)) {
                if (gdx_status_t st = classify(reinterpret_cast<const void *>(q), &next); st != GDX_OK) {
                    out->clear();
                    return st;
                }
                if (!same_allocation(info, next)) {
                    // An allocation that starts between two probe points ends the stretch where it starts.
                    seg_end = next.size != 0 && next.base > cur && next.base < q ? next.base : q;
                    have_next = true;
                    break;
                }
            }
        }
        if (!out->empty() && out->back().addr + out->back().length == cur && same_allocation(out->back().info, info))
            out->back().length += seg_end - cur;
        else
            out->push_back(MemSegment{cur, seg_end - cur, info});
        cur = seg_end;
    }
    GDX_TRACE(kComp, "detect(%p, %zu): %zu segment(s), first %s", ptr, len, out->size(),
              describe(out->front().info).c_str());
    return GDX_OK;
}

} // namespace gdx::mem
