// The objects behind the C API's endpoints, registrations, remote keys and requests.
//
// An Endpoint is one peer reached over one or more lanes (one transport endpoint each). gdx_ep_create makes a
// transport endpoint on every opened transport and publishes their addresses in one blob; gdx_ep_connect reads
// the peer's blob and keeps the lanes both sides agree on without talking further (both run the same rule on the
// same two blobs):
//   peer on this host   every intra-node transport both have (cuda_ipc, shm), in the registry's preference
//                       order; if there is none, the first other transport both have;
//   peer elsewhere      the first transport both have that is not intra-node (rc before tcp: rc is only there
//                       when this host has an RDMA device).
// Which lane carries a put or get is the staging layer's decision (fallback/lanes.h: the first lane that reaches
// both buffers directly, else the first that can stage): the api hands it the lanes (staging_lanes) and the request.
//
// Address blob (little-endian): magic u32 "GDXA", version u16, count u16, host id u64, then per transport:
//   name_len u8, name, addr_len u32, address bytes.
// Registration blob: magic u32 "GDXM", version u16, count u16, then per transport: name_len u8, name,
//   key_len u32, the staging engine's key (fallback/region.h).
#pragma once

#include "api/context.h"
#include "fallback/lanes.h"

#include <memory>
#include <span>
#include <string>
#include <vector>

namespace gdx {

class RemoteKey;

class Memory {
  public:
    static gdx_status_t create(Context &ctx, void *addr, size_t len, unsigned access, std::unique_ptr<Memory> *out);
    ~Memory(); // deregisters (callers check busy() first)
    gdx_status_t pack(std::vector<uint8_t> *out) const;
    fb::Region *region(const TransportSlot *slot) const;
    bool busy() const;

  private:
    struct PerTransport {
        TransportSlot *slot;
        fb::Region *region;
    };
    std::vector<PerTransport> regs_;
};

class Endpoint {
  public:
    struct Lane {
        TransportSlot *slot = nullptr;
        std::unique_ptr<tp::Endpoint> ep;
    };

    static gdx_status_t create(Context &ctx, std::unique_ptr<Endpoint> *out);
    ~Endpoint();
    const std::vector<uint8_t> &address() const { return address_; }
    gdx_status_t connect(std::span<const uint8_t> peer_blob);
    gdx_status_t state() const;
    const std::string &transports() const { return lane_names_; }
    std::vector<Lane> &lanes() { return lanes_; }
    const std::vector<Lane> &lanes() const { return lanes_; }
    bool connected_called() const { return connect_called_; }
    // Releases the engines' state for the lanes; GDX_ERR_BUSY while requests or peer transfers use them.
    gdx_status_t close();
    // Takes up to `max` notifications that arrived on the lanes, oldest first (merged by arrival across lanes).
    size_t notify_poll(uint64_t *values, size_t max);
    // The lanes as the staging layer chooses among them (fb::submit): per lane, its engine and transport endpoint,
    // `mem`'s registration with that engine and `rkey`'s key for that transport (nullptr where there is none).
    // Fills out[0..n) in lane order and returns n (at most out.size()).
    size_t staging_lanes(const Memory &mem, const RemoteKey &rkey, std::span<fb::Lane> out);

  private:
    Context *ctx_ = nullptr;
    std::vector<Lane> lanes_; // before connect: one per opened transport; after: the chosen ones
    std::vector<uint8_t> address_;
    std::string lane_names_;
    bool connect_called_ = false;
};

class RemoteKey {
  public:
    // The peer's registration blob, unpacked for each lane of `ep` (a lane whose transport the blob lacks stays
    // empty and is never used with this key).
    static gdx_status_t unpack(Endpoint &ep, std::span<const uint8_t> blob, std::unique_ptr<RemoteKey> *out);
    const fb::RemoteRegion *remote(size_t lane) const { return lane < keys_.size() ? keys_[lane].get() : nullptr; }
    const Endpoint *endpoint() const { return ep_; }

  private:
    const Endpoint *ep_ = nullptr;
    std::vector<std::unique_ptr<fb::RemoteRegion>> keys_; // by lane index
};

} // namespace gdx
