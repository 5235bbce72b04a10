// Registered memory as the staging engine sees it: a local Region (the transport's MemHandle with its per-chunk
// outcomes, plus what memory it is and an unguessable id peers name it by) and a RemoteRegion (the peer's packed
// fallback key, unpacked and validated).
//
// Fallback key, little-endian (wraps the transport's rkey; every field is checked on unpack):
//   off size field
//    0   4   magic        0x4B584447 ("GDXK")
//    4   2   version      kKeyVersion
//    6   2   reserved     0
//    8   8   region_id    random, nonzero: control messages name the region by it
//   16   8   base         the region's virtual address in the owner's process
//   24   8   length
//   32   8   frag_size    the owner's bounce-slot size for this memory kind (GDX_FRAG_SIZE): fragments that the
//                         owner stages must fit in it
//   40   4   access       tp::kAccessRemoteRead | kAccessRemoteWrite granted at registration
//   44   1   kind         mem::MemKind
//   45   1   type         mem::MemType
//   46   2   device       int16, -1 for none
//   48   4   nchunks      ≤ kMaxKeyChunks
//   52   4   rkey_len     must equal the transport's rkey_packed_size()
//   56   17×nchunks       {offset u64, length u64, reach u8}: they tile [0, length) in order
//    …   rkey_len         the transport's packed rkey
#pragma once

#include "memtype/memory_ops.h"
#include "transport/transport.h"

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace gdx::fb {

inline constexpr uint32_t kKeyMagic = 0x4B584447;
inline constexpr uint16_t kKeyVersion = 1;
inline constexpr size_t kKeyHeaderSize = 56;
inline constexpr size_t kKeyChunkSize = 17;
inline constexpr uint32_t kMaxKeyChunks = 4096;

// The key's fields (the layout above) apart from its bytes. pack_region_key and RemoteRegion::unpack go through
// encode_key/decode_key, and so does the UCX module, which carries the same fields compactly inside UCP's key
// (src/uct/bridge_key.cpp): one writer and one reader of the layout.
struct KeyFields {
    struct Chunk {
        uint64_t offset, length;
        uint8_t reach; // tp::Reach
    };
    uint64_t id = 0, base = 0, length = 0, frag_size = 0;
    uint32_t access = 0;
    uint8_t kind = 0, type = 0; // mem::MemKind, mem::MemType
    int16_t device = -1;
    std::vector<Chunk> chunks;
    std::span<const uint8_t> rkey; // the caller's bytes (encode), or within the decoded key (decode)
};
void encode_key(const KeyFields &k, std::vector<uint8_t> *out);
// Reads the layout: magic, version, reserved field, chunk count, and a size that matches the counts exactly. The
// values are the caller's to check. On failure *why names what is wrong and *value shows it.
bool decode_key(std::span<const uint8_t> in, KeyFields *k, const char **why, uint64_t *value);

// Bounce-pool id of memory of this kind on this device: 0 for host memory, device + 1 for a GPU. Both sides derive
// it the same way, so a sender names the receiver's pool from the receiver's key.
inline uint16_t pool_id_for(mem::MemKind kind, int device) {
    return kind == mem::MemKind::Host ? 0 : static_cast<uint16_t>((device < 0 ? 0 : device) + 1);
}

class Region {
  public:
    Region(void *addr, size_t length, const mem::MemInfo &info, unsigned access, uint64_t id,
           std::unique_ptr<tp::MemHandle> memh)
        : addr_(static_cast<uint8_t *>(addr)), length_(length), info_(info), access_(access), id_(id),
          memh_(std::move(memh)) {}

    uint8_t *ptr(size_t offset = 0) const { return addr_ + offset; }
    size_t length() const { return length_; }
    const mem::MemInfo &info() const { return info_; }
    unsigned access() const { return access_; }
    uint64_t id() const { return id_; }
    const tp::MemHandle &memh() const { return *memh_; }
    uint16_t pool_id() const { return pool_id_for(info_.kind, info_.device); }
    // The transport reaches every byte of [offset, offset+len) directly.
    bool direct(size_t offset, size_t len) const { return memh_->direct(offset, len); }
    // The chunk holding `offset`: its reach and the transport's reason.
    const tp::ChunkReg *chunk_at(size_t offset) const;
    bool fully_direct() const { return memh_->direct(0, length_); }

    // Requests and peer copies that use this region; mem_dereg refuses (GDX_ERR_BUSY) while nonzero.
    uint32_t busy = 0;

  private:
    uint8_t *addr_;
    size_t length_;
    mem::MemInfo info_;
    unsigned access_;
    uint64_t id_;
    std::unique_ptr<tp::MemHandle> memh_;
};

class RemoteRegion {
  public:
    struct Chunk {
        uint64_t offset = 0, length = 0;
        tp::Reach reach = tp::Reach::None;
    };

    uint64_t id() const { return id_; }
    uint64_t base() const { return base_; }
    uint64_t length() const { return length_; }
    uint64_t frag_size() const { return frag_size_; }
    unsigned access() const { return access_; }
    mem::MemKind kind() const { return kind_; }
    mem::MemType type() const { return type_; }
    int device() const { return device_; }
    uint16_t pool_id() const { return pool_id_for(kind_, device_); }
    const tp::RemoteKey &rkey() const { return *rkey_; }
    const std::vector<Chunk> &chunks() const { return chunks_; }
    // The owner's transport reaches every byte of [offset, offset+len) directly.
    bool direct(uint64_t offset, uint64_t len) const;
    tp::Reach reach_at(uint64_t offset) const;

    // Validates every field of `packed` (see the layout above) and unpacks the embedded transport rkey with
    // `md`. GDX_ERR_PROTOCOL (or the MD's error) with a log line naming the bad field.
    static gdx_status_t unpack(std::span<const uint8_t> packed, tp::MemoryDomain &md,
                               std::unique_ptr<RemoteRegion> *out);

  private:
    uint64_t id_ = 0, base_ = 0, length_ = 0, frag_size_ = 0;
    unsigned access_ = 0;
    mem::MemKind kind_ = mem::MemKind::Host;
    mem::MemType type_ = mem::MemType::HostPageable;
    int device_ = -1;
    std::vector<Chunk> chunks_;
    std::unique_ptr<tp::RemoteKey> rkey_;
};

// Writes the fallback key of `region` (frag_size: this side's slot size for the region's kind).
gdx_status_t pack_region_key(const Region &region, uint64_t frag_size, size_t rkey_size,
                             std::vector<uint8_t> *out);

} // namespace gdx::fb
