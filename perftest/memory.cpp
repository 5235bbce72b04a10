#include "memory.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace gdx::perf {

namespace {

inline uint64_t mix(uint64_t x) { // splitmix64 finalizer
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

inline uint64_t word(uint64_t key, uint64_t index) { return mix(key ^ (index * 0xd6e8feb86659fd93ull)); }

} // namespace

uint8_t pattern_byte(uint64_t seed, size_t offset) {
    uint64_t w = word(mix(seed), offset / 8);
    return static_cast<uint8_t>(w >> (8 * (offset % 8)));
}

void pattern_fill(uint64_t seed, size_t offset, uint8_t *dst, size_t len) {
    uint64_t key = mix(seed);
    size_t i = 0;
    while (i < len && (offset + i) % 8 != 0) {
        dst[i] = pattern_byte(seed, offset + i);
        ++i;
    }
    for (; i + 8 <= len; i += 8) {
        uint64_t w = word(key, (offset + i) / 8);
        std::memcpy(dst + i, &w, 8); // little-endian byte order matches pattern_byte
    }
    for (; i < len; ++i) dst[i] = pattern_byte(seed, offset + i);
}

size_t pattern_find_mismatch(uint64_t seed, size_t offset, const uint8_t *src, size_t len) {
    uint64_t key = mix(seed);
    size_t i = 0;
    while (i < len && (offset + i) % 8 != 0) {
        if (src[i] != pattern_byte(seed, offset + i)) return i;
        ++i;
    }
    for (; i + 8 <= len; i += 8) {
        uint64_t w = word(key, (offset + i) / 8), got;
        std::memcpy(&got, src + i, 8);
        if (got != w) {
            for (size_t j = 0; j < 8; ++j)
                if (src[i + j] != pattern_byte(seed, offset + i + j)) return i + j;
        }
    }
    for (; i < len; ++i)
        if (src[i] != pattern_byte(seed, offset + i)) return i;
    return SIZE_MAX;
}

int gpu_count(std::string *why) {
    int n = 0;
    if (gdx_ext_gpu_count(&n) != GDX_OK) *why = gdx_last_error();
    return n;
}

gdx_ext_mem_kind_t ext_kind(MemKindOpt k) {
    switch (k) {
    case MemKindOpt::Host: return GDX_EXT_MEM_HOST;
    case MemKindOpt::HostPinned: return GDX_EXT_MEM_HOST_PINNED;
    case MemKindOpt::Cuda: return GDX_EXT_MEM_CUDA;
    case MemKindOpt::CudaManaged: return GDX_EXT_MEM_CUDA_MANAGED;
    case MemKindOpt::CudaVmm: return GDX_EXT_MEM_CUDA_VMM;
    }
    return GDX_EXT_MEM_HOST;
}

gdx_status_t Buffer::allocate(const MemSpec &spec, size_t len, std::unique_ptr<Buffer> *out, std::string *why) {
    std::unique_ptr<Buffer> b(new Buffer);
    b->spec_ = spec;
    b->len_ = len;
    if (gdx_status_t st = gdx_ext_buffer_alloc(ext_kind(spec.kind), spec.gpu, len, &b->buf_); st != GDX_OK) {
        *why = gdx_last_error(); // names the kind and why
        return st;
    }
    *out = std::move(b);
    return GDX_OK;
}

Buffer::~Buffer() { gdx_ext_buffer_free(buf_); }

gdx_status_t Buffer::fill(uint64_t seed, size_t offset, size_t len, std::string *why) {
    if (offset > len_ || len > len_ - offset) {
        *why = "fill range exceeds the buffer";
        return GDX_ERR_INVALID_PARAM;
    }
    if (scratch_.size() < len) scratch_.resize(len);
    pattern_fill(seed, 0, scratch_.data(), len);
    gdx_status_t st = gdx_ext_buffer_write(buf_, offset, scratch_.data(), len);
    if (st != GDX_OK) *why = gdx_last_error();
    return st;
}

bool Buffer::check(uint64_t seed, size_t offset, size_t len, size_t *bad_offset, std::string *why) {
    if (offset > len_ || len > len_ - offset) {
        *why = "check range exceeds the buffer";
        *bad_offset = 0;
        return false;
    }
    if (scratch_.size() < len) scratch_.resize(len);
    if (gdx_ext_buffer_read(buf_, offset, scratch_.data(), len) != GDX_OK) {
        *why = "cannot read back " + spec_.text() + " memory: " + gdx_last_error();
        *bad_offset = 0;
        return false;
    }
    uint8_t *src = scratch_.data();
    // Test aid: GDX_PERFTEST_CORRUPT_AT=N flips byte N of every message checked, so the tests can prove a
    // corrupted transfer is caught and its offset named. Never set outside tests.
    static const long long corrupt_at = [] {
        const char *e = std::getenv("GDX_PERFTEST_CORRUPT_AT");
        return e != nullptr ? std::atoll(e) : -1;
    }();
    if (corrupt_at >= 0 && static_cast<size_t>(corrupt_at) < len) src[corrupt_at] ^= 0x5a;
    size_t bad = pattern_find_mismatch(seed, 0, src, len);
    if (bad == SIZE_MAX) return true;
    *bad_offset = bad;
    char msg[160];
    std::snprintf(msg, sizeof(msg), "first bad byte at offset %zu of the %zu-byte message: expected 0x%02x, found 0x%02x",
                  bad, len, pattern_byte(seed, bad), src[bad]);
    *why = msg;
    return false;
}

} // namespace gdx::perf
