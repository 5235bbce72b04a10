// The C++ side of libuct_gdx: the objects behind the opaque handles of uct_gdx.h. They only adapt UCT's calling
// conventions to gdx::tp (completion objects, pending requests, address padding, lazily unpacked remote keys);
// every decision about bytes, registration and connections stays in the gdx transport.
#pragma once

#include "core/config.h"
#include "memtype/memtype.h"
#include "transport/transport.h"
#include "transport/uct/uct_gdx.h"

#include <memory>
#include <string>
#include <vector>

namespace gdx::uct {

inline constexpr const char *kComp = "uct";

tp::Component *tl_component(unsigned tl); // nullptr when out of range

} // namespace gdx::uct

// ---- the handles (global names: they complete the C typedefs of uct_gdx.h) -------------------------------

struct gdx_uct_iface;

struct gdx_uct_md {
    unsigned tl = 0;
    gdx::tp::Component *comp = nullptr;
    gdx::Config cfg;
    std::unique_ptr<gdx::mem::Detector> detector; // memory types for mem_reg and mem_query (GDX_CUDA, GDX_MEMTYPE_*)
    // transport.h hands out a MemoryDomain only through an Interface (Interface::md()), while UCT opens, queries
    // and registers with an MD before any interface exists. Until gdx::tp::Component can open an MD on its own
    // (README.md, "Gaps in transport.h"), the MD opens one Interface on the first device and uses its md(). The
    // first UCT interface on that device borrows this Interface, so registrations, remote keys and the endpoints
    // that serve them share one gdx MemoryDomain.
    std::unique_ptr<gdx::tp::Interface> anchor;
    gdx::tp::DeviceDesc anchor_dev;
    // The device offered to UCX: the anchor's, the one the transport could open with this configuration (UCP
    // opens an interface on every device it is offered and fails outright when one refuses, while
    // Component::query_devices cannot see the configuration: tcp lists every network device but opens only the
    // one holding GDX_TCP_ADDR). Only one: a second would not share the anchor's MemoryDomain.
    std::vector<gdx::tp::DeviceDesc> devices;
    bool anchor_lent = false;
    gdx::tp::MemoryDomain *md = nullptr;
    unsigned ifaces = 0; // open UCT interfaces, for the close-order check

    // What the allocation holding addr is. GDX_ERR_INVALID_PARAM for a null addr or len 0.
    gdx_status_t classify(const void *addr, size_t len, gdx::mem::MemInfo *out);
};

struct gdx_uct_memh {
    gdx_uct_md *md = nullptr;
    std::unique_ptr<gdx::tp::MemHandle> h;
};

struct gdx_uct_rkey {
    unsigned tl = 0;
    std::vector<uint8_t> packed;                // the transport's bytes (our header stripped)
    gdx::tp::MemoryDomain *unpacked_by = nullptr; // MD that made `key`
    std::unique_ptr<gdx::tp::RemoteKey> key;
    // The RemoteKey for `md`, unpacked on first use (UCT unpacks keys per component, gdx per MD).
    gdx_status_t resolve(gdx::tp::MemoryDomain &md, const gdx::tp::RemoteKey **out);
};

// A gdx Completion carrying the UCT completion it stands for. Pooled per interface: the data path allocates
// nothing once the pool has warmed up.
struct GdxUctComp {
    gdx::tp::Completion c;
    void *uct_comp = nullptr;    // uct_completion_t*, or NULL
    gdx_uct_iface *owner = nullptr;
    struct gdx_uct_ep *probe_of = nullptr; // set while this is the ep's flush probe (flush without completion)
    uint64_t probe_seq = 0;
    GdxUctComp *next_free = nullptr;
};

// A UCT pending request parked on a gdx endpoint. gdx's queue is intrusive and has no purge; UCT purges, and
// the request memory returns to UCP at that moment. So the queue holds this node, not the request: a purged
// node is marked cancelled and dropped (without touching the request) when gdx next dispatches it.
struct GdxUctPending {
    gdx::tp::PendingRequest p;
    void *req = nullptr; // uct_pending_req_t*, NULL once purged
    struct gdx_uct_ep *ep = nullptr;
    uint64_t seq = 0;    // order of parking on ep (gdx's queue is FIFO: it dispatches lower ones first)
    GdxUctPending *prev = nullptr, *next = nullptr; // ep's list of live nodes
};

struct AmSlot {
    gdx_uct_iface *iface = nullptr;
    uint8_t id = 0;
};

struct gdx_uct_ep {
    gdx_uct_iface *iface = nullptr;
    std::unique_ptr<gdx::tp::Endpoint> ep;
    // UCP connects a process's endpoint to itself (its own address) for messages to self; a gdx endpoint pairs
    // with another endpoint, so the glue pairs it with this hidden one on the same interface, which only
    // receives.
    std::unique_ptr<gdx::tp::Endpoint> mirror;
    uint64_t ops_seq = 0;       // operations accepted so far
    uint64_t flushed_seq = 0;   // every operation up to this one is known complete (a probe said so)
    GdxUctComp *probe = nullptr; // in-flight flush probe
    GdxUctPending *pending = nullptr; // live pending nodes (including cancelled ones gdx still holds)
    uint64_t parked_seq = 0;     // last GdxUctPending::seq handed out
    uint64_t dispatching = 0;    // seq of the node whose request gdx is dispatching now, 0 outside a dispatch
    gdx_uct_ep *prev = nullptr, *next = nullptr; // interface's endpoint list
};

struct gdx_uct_iface {
    gdx_uct_md *md = nullptr;
    std::unique_ptr<gdx::tp::Interface> owned; // null when the MD's anchor is borrowed
    gdx::tp::Interface *itf = nullptr;
    void *glue = nullptr;
    // Active messages: written in place by the transport (kCapAmInPlace), or gathered / packed into `scratch`
    // (max(max_am_short, max_am_bcopy) bytes, made at open only for such transports) and handed over from there.
    bool in_place = false;
    std::unique_ptr<uint8_t[]> scratch;
    size_t scratch_len = 0;
    AmSlot slots[gdx::tp::kMaxAmId];
    gdx_uct_ep *eps = nullptr;
    GdxUctComp *free_comps = nullptr;
    std::vector<std::unique_ptr<GdxUctComp[]>> comp_chunks;

    GdxUctComp *get_comp(void *uct_comp); // nullptr only when out of memory (logged)
    void put_comp(GdxUctComp *c);
};
