// The rc memory domain: registrations (host memory pinned or, with GDX_REG_METHODS=...,odp, on demand; GPU
// memory up the ladder of reg_ladder.h, gated by the topology), the registration cache, and the packed remote key.
//
// Packed remote key (kRkeyPackedSize bytes, little-endian, written and read field by field):
//   off size field
//    0   4   magic      0x4b524447 ("GDRK")
//    4   1   version    1
//    5   1   access     kAccessRemoteRead | kAccessRemoteWrite granted (nothing else)
//    6   1   nchunks    1..16 chunk rkeys that follow
//    7   1   first      index of the first packed chunk in the registration (chunks before it are not
//                       covered by this key)
//    8   8   base       first byte the key opens
//   16   8   length     bytes it opens
//   24   8   origin     address of chunk 0 of the registration (chunk i = [origin + i*chunk, +chunk))
//   32   8   chunk      chunk size
//   40   4   opened     bit i: packed chunk i is registered (else it is staged: no rkey)
//   44  64   rkeys      16 x u32, the NIC's rkey per packed chunk (0 where not opened)
// The key only claims; the NIC enforces range and rights of each memory region, and the initiator checks the
// claim before posting, so a forged or stale key is refused either way and never addresses memory it names.
#pragma once

#include "transport/rc/rcache.h"
#include "transport/rc/reg_ladder.h"

#include <memory>
#include <mutex>

namespace gdx::tp::rc {

inline constexpr size_t kRkeyPackedSize = 108;

int ibv_access_of(unsigned gdx_access);

// One registration (possibly cached, possibly shared by several handles).
class RcRegion final : public CachedRegion {
  public:
    ~RcRegion() override;
    std::shared_ptr<Registrar> registrar; // deregisters the chunks' MRs
    std::shared_ptr<DeviceCtx> dev;       // keeps the PD alive while the MRs exist
    size_t chunk_size = 0;                // chunk i covers [addr + i*chunk_size, ...)
    std::vector<Chunk> chunks;
    std::shared_ptr<ibv_mr> shared_mr;    // the implicit ODP MR a chunk uses: released, not deregistered, here
};

class RcMemHandle final : public MemHandle {
  public:
    RcMemHandle(void *addr, size_t len, const mem::MemInfo &info, unsigned access, std::shared_ptr<RcRegion> r);
    gdx_status_t pack_rkey(std::span<uint8_t> out) const override;
    // The local key for [p, p+n) and how many bytes from p lie in the same chunk; false when p is outside the
    // handle or its chunk is not registered (Reach::None: staged memory).
    bool lkey_at(const void *p, size_t n, uint32_t *lkey, size_t *contig) const;
    const RcRegion &region() const { return *region_; }
    const void *md_tag = nullptr; // the MD that made it (a handle of another MD has other keys)

  private:
    std::shared_ptr<RcRegion> region_;
};

class RcRemoteKey final : public RemoteKey {
  public:
    // The rkey for [raddr, raddr+n) if the key opens it for `need` (kAccessRemote*), and how many bytes from
    // raddr lie in the same chunk. GDX_ERR_ACCESS_DENIED with *why otherwise.
    gdx_status_t lookup(uint64_t raddr, size_t n, unsigned need, uint32_t *rkey, size_t *contig,
                        std::string *why) const;
    static gdx_status_t unpack(std::span<const uint8_t> in, std::unique_ptr<RemoteKey> *out);

  private:
    uint64_t origin_ = 0, chunk_ = 0;
    unsigned first_ = 0, nchunks_ = 0;
    uint32_t opened_ = 0;
    uint32_t rkeys_[kMaxChunks] = {};
};

class RcMemoryDomain final : public MemoryDomain {
  public:
    // Production: verbs registrar on `dev`, dma-buf export from the memtype CUDA row.
    RcMemoryDomain(std::shared_ptr<DeviceCtx> dev, const Config &cfg);
    // Tests: any registrar and exporter (fault injection, fake NIC capabilities); dev may be null then (no
    // PCIe path: the topology gate sees an unknown path).
    RcMemoryDomain(std::shared_ptr<DeviceCtx> dev, const Config &cfg, std::shared_ptr<Registrar> registrar,
                   DmabufExport exporter);
    ~RcMemoryDomain() override;

    std::string_view name() const override { return name_; }
    gdx_status_t mem_reg(void *addr, size_t len, const mem::MemInfo &info, unsigned access,
                         std::unique_ptr<MemHandle> *out) override;
    size_t rkey_packed_size() const override { return kRkeyPackedSize; }
    gdx_status_t rkey_unpack(std::span<const uint8_t> packed, std::unique_ptr<RemoteKey> *out) override;

    const RcacheStats &rcache_stats() const { return rcache_.stats(); }
    // Topology and policy verdict for device memory of CUDA ordinal `device` on this NIC.
    topo::GdrDecision gate_for_gpu(int device);

  private:
    gdx_status_t register_region(void *addr, size_t len, const mem::MemInfo &info, unsigned access,
                                 std::shared_ptr<RcRegion> *out);
    std::string gpu_bus_id(int device);

    std::shared_ptr<DeviceCtx> dev_;
    std::shared_ptr<Registrar> registrar_;
    DmabufExport exporter_;
    LadderConfig ladder_;
    topo::GdrPolicy policy_;
    Config cfg_;
    std::string name_;
    Rcache rcache_;
    bool gpu_bus_known_ = false;
    std::vector<std::string> gpu_bus_; // by CUDA ordinal
};

} // namespace gdx::tp::rc
