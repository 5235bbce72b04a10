// Test buffers of every memory kind gdx_perftest measures, and the validation pattern. The memory comes from
// gdx_ext.h's test buffers (the CUDA driver gdx opens at run time: nothing here links libcuda); on a machine
// without a GPU the GPU kinds fail with the reason, never a crash.
#pragma once

#include "options.h"

#include <gdx/gdx_ext.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gdx::perf {

class Buffer {
  public:
    // Allocates `len` bytes of kind `spec`. On failure returns an error and *why names the kind and the reason
    // ("memory kind 'cuda:1': GPU 1 does not exist (this machine has 1 GPU)").
    static gdx_status_t allocate(const MemSpec &spec, size_t len, std::unique_ptr<Buffer> *out, std::string *why);
    ~Buffer();
    Buffer(const Buffer &) = delete;
    Buffer &operator=(const Buffer &) = delete;

    void *data() const { return gdx_ext_buffer_ptr(buf_); }
    size_t size() const { return len_; }
    const MemSpec &spec() const { return spec_; }

    // Writes pattern(seed) over the message at [offset, offset+len) (pattern position 0 at `offset`): generated on
    // the host, then copied in.
    gdx_status_t fill(uint64_t seed, size_t offset, size_t len, std::string *why);
    // Compares the message at [offset, offset+len) with pattern(seed). On mismatch returns false with
    // *bad_offset (from the message's start) and *why describing expected vs found bytes. A failed copy also
    // returns false.
    bool check(uint64_t seed, size_t offset, size_t len, size_t *bad_offset, std::string *why);

  private:
    Buffer() = default;
    MemSpec spec_;
    gdx_ext_buffer_t *buf_ = nullptr;
    size_t len_ = 0;
    std::vector<uint8_t> scratch_; // host copy of a message (fill/check)
};

// The validation pattern: byte i of pattern(seed) is a hash of (seed, i / 8) — every iteration and every
// offset differ, so a stale iteration, a shifted fragment or a dropped fragment is caught.
void pattern_fill(uint64_t seed, size_t offset, uint8_t *dst, size_t len);
// Index of the first byte of src (relative to src) that differs from pattern(seed) at `offset`, or SIZE_MAX.
size_t pattern_find_mismatch(uint64_t seed, size_t offset, const uint8_t *src, size_t len);
uint8_t pattern_byte(uint64_t seed, size_t offset);

// Number of GPUs (0 when no CUDA driver or none found); *why says why when 0.
int gpu_count(std::string *why);
// The memory kind as gdx_ext.h names it.
gdx_ext_mem_kind_t ext_kind(MemKindOpt k);

} // namespace gdx::perf
