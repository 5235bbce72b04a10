// Bounds-checked little-endian writer and reader for the staging engine's wire data (packed keys, control
// messages). Fields are stored byte by byte with the transport layer's codecs (transport/wire.h), never by
// copying structs, so the layout does not depend on padding or host byte order. A reader that runs past the end
// latches a failure instead of reading: decoders check ok() once, at the end.
#pragma once

#include "transport/wire.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace gdx::fb {

class ByteWriter {
  public:
    explicit ByteWriter(std::vector<uint8_t> *out) : out_(out) {}
    void u8(uint8_t v) { out_->push_back(v); }
    void u16(uint16_t v) { tp::wire::store_le16(grow(2), v); }
    void u32(uint32_t v) { tp::wire::store_le32(grow(4), v); }
    void u64(uint64_t v) { tp::wire::store_le64(grow(8), v); }
    void i32(int32_t v) { u32(static_cast<uint32_t>(v)); }
    void bytes(std::span<const uint8_t> b) { out_->insert(out_->end(), b.begin(), b.end()); }

  private:
    uint8_t *grow(size_t n) {
        out_->resize(out_->size() + n);
        return out_->data() + out_->size() - n;
    }
    std::vector<uint8_t> *out_;
};

class ByteReader {
  public:
    explicit ByteReader(std::span<const uint8_t> in) : in_(in) {}
    uint8_t u8() { return take(1) ? in_[pos_ - 1] : 0; }
    uint16_t u16() { return take(2) ? tp::wire::load_le16(&in_[pos_ - 2]) : 0; }
    uint32_t u32() { return take(4) ? tp::wire::load_le32(&in_[pos_ - 4]) : 0; }
    uint64_t u64() { return take(8) ? tp::wire::load_le64(&in_[pos_ - 8]) : 0; }
    int32_t i32() { return static_cast<int32_t>(u32()); }
    std::span<const uint8_t> bytes(size_t n) {
        if (!take(n)) return {};
        return in_.subspan(pos_ - n, n);
    }
    bool ok() const { return ok_; }
    size_t remaining() const { return ok_ ? in_.size() - pos_ : 0; }

  private:
    bool take(size_t n) {
        if (!ok_ || n > in_.size() - pos_) {
            ok_ = false;
            return false;
        }
        pos_ += n;
        return true;
    }
    std::span<const uint8_t> in_;
    size_t pos_ = 0;
    bool ok_ = true;
};

} // namespace gdx::fb
