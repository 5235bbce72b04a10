// The shape every gdx transport has, modelled on UCT (component → memory domain → interface → endpoint) and on
// NCCL's net plugin contract: a transport states precisely what it can do (Capabilities, per-chunk registration
// outcomes) and moves only bytes it can reach; the fallback layer above decides per fragment what goes direct
// and what is staged. A transport never calls up into src/fallback/.
//
// Threading: an Interface and its endpoints are used from one thread at a time (like UCS_THREAD_MODE_SINGLE);
// progress() runs callbacks on the calling thread. Different interfaces may be driven by different threads.
//
// Operation results (UCT's contract):
//   GDX_OK              done now; the Completion is not touched.
//   GDX_INPROGRESS      accepted; Completion::count is decremented when done and cb runs when it reaches 0.
//   GDX_ERR_NO_RESOURCE back-pressure: nothing was queued; retry after progress(), or pending_add().
//   other errors        nothing was queued; the log line says why.
#pragma once

#include "core/config.h"
#include "gdx/status.h"
#include "memtype/memory_ops.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gdx::tp {

// ---- access rights and how memory is reached ------------------------------------------------------------

enum Access : unsigned {
    kAccessLocalRead = 1u << 0,   // the local side reads it (source of a put, am_zcopy)
    kAccessLocalWrite = 1u << 1,  // the local side writes it (destination of a get)
    kAccessRemoteRead = 1u << 2,  // a peer may get from it through the remote key
    kAccessRemoteWrite = 1u << 3, // a peer may put into it through the remote key
    kAccessAll = 0xf,
};

// How the transport reaches a chunk of registered memory.
enum class Reach : uint8_t {
    None,     // not reachable directly: the fallback layer must stage this chunk
    Host,     // ordinary host memory registration (or none needed)
    Dmabuf,   // GPU memory through a dma-buf fd (ibv_reg_dmabuf_mr)
    PeerMem,  // GPU memory through nvidia-peermem (ibv_reg_mr on the device address)
    Odp,      // on-demand paging (IBV_ACCESS_ON_DEMAND)
    Ipc,      // GPU memory mapped into the peer process (CUDA IPC)
};
const char *reach_name(Reach r);

// One chunk of a registration and how it went. Registrations are made per chunk so one bad range does not
// spoil a whole message.
struct ChunkReg {
    size_t offset = 0;  // from MemHandle::addr()
    size_t length = 0;
    Reach reach = Reach::None;
    std::string reason; // why it is reached this way, or why not ("dma-buf: EOPNOTSUPP; no peer memory")
};

// ---- capabilities ---------------------------------------------------------------------------------------

enum Cap : uint64_t {
    kCapPut = 1u << 0,
    kCapGet = 1u << 1,
    kCapAmShort = 1u << 2,
    kCapAmBcopy = 1u << 3,
    kCapAmZcopy = 1u << 4,
    kCapFlush = 1u << 5,
    kCapFence = 1u << 6,
    kCapWakeup = 1u << 7,      // wakeup_fd() works
    kCapIntraNode = 1u << 8,   // reaches only peers on this host
    kCapErrHandling = 1u << 9, // a dead peer fails outstanding operations (never hangs)
    kCapPeerMap = 1u << 10,    // memory from MemoryDomain::alloc_shared can be mapped by peers (Endpoint::map_remote)
    kCapAmInPlace = 1u << 11,  // am_short_iov and am_bcopy_pack write straight into the transport's buffers
    kCapAmZcopyCopies = 1u << 12, // am_zcopy copies the payload before it returns: no fewer copies than am_bcopy
};

inline uint32_t type_bit(mem::MemType t) { return 1u << static_cast<unsigned>(t); }

struct Capabilities {
    uint64_t flags = 0;
    uint32_t direct_types = 0;   // mask of type_bit(MemType): kinds it may reach directly (if mem_reg agrees)
    size_t max_put = 0;          // per operation
    size_t max_get = 0;
    size_t max_am_short = 0;     // header + payload inline
    size_t max_am_bcopy = 0;
    size_t max_am_zcopy = 0;
    double latency_ns = 0;       // estimate for a small message, one way
    double bandwidth_Bps = 0;    // estimate per interface
    std::string describe() const; // one line for gdx_info / logs
};

// ---- completions and back-pressure ----------------------------------------------------------------------

struct Completion {
    using Callback = void (*)(Completion *self);
    Callback cb = nullptr;
    int32_t count = 0;            // operations this completion waits for; cb runs when it reaches 0
    gdx_status_t status = GDX_OK; // the first error among them
    void complete(gdx_status_t st) {
        if (st != GDX_OK && status == GDX_OK) status = st;
        if (--count == 0 && cb != nullptr) cb(this);
    }
};

// A request parked on an endpoint until resources free up. func returns GDX_OK (done, drop it), or
// GDX_ERR_NO_RESOURCE (keep it queued, stop dispatching for now). The queue is intrusive: no allocation.
struct PendingRequest {
    gdx_status_t (*func)(PendingRequest *self) = nullptr;
    PendingRequest *next = nullptr;
};

// ---- memory domain --------------------------------------------------------------------------------------

class MemHandle {
  public:
    virtual ~MemHandle() = default;
    void *addr() const { return addr_; }
    size_t length() const { return length_; }
    const mem::MemInfo &info() const { return info_; }
    unsigned access() const { return access_; }
    const std::vector<ChunkReg> &chunks() const { return chunks_; }
    // True when every byte of [offset, offset+len) lies in chunks the transport reaches directly.
    bool direct(size_t offset, size_t len) const;
    // Writes the remote key (MemoryDomain::rkey_packed_size() bytes). Only directly reachable chunks and
    // remote access rights granted at registration are opened by it.
    virtual gdx_status_t pack_rkey(std::span<uint8_t> out) const = 0;

  protected:
    MemHandle(void *addr, size_t length, const mem::MemInfo &info, unsigned access)
        : addr_(addr), length_(length), info_(info), access_(access) {}
    void *addr_;
    size_t length_;
    mem::MemInfo info_;
    unsigned access_;
    std::vector<ChunkReg> chunks_;
};

// The peer's view of a registration, unpacked from the bytes MemHandle::pack_rkey wrote. Opaque beyond the
// range it claims: the target side (or the NIC) enforces range and rights; a raw pointer is never trusted.
class RemoteKey {
  public:
    virtual ~RemoteKey() = default;
    uint64_t base() const { return base_; }
    uint64_t length() const { return length_; }
    unsigned access() const { return access_; }

  protected:
    uint64_t base_ = 0, length_ = 0;
    unsigned access_ = 0;
};

class MemoryDomain {
  public:
    virtual ~MemoryDomain() = default;
    virtual std::string_view name() const = 0;
    // Registers [addr, addr+len) classified as `info` for `access`. Never fails because memory is unreachable:
    // such chunks come back with Reach::None and a reason (GDX_ERR_UNSUPPORTED only with GDX_GDR=yes policies
    // that demand directness). Errors: bad arguments, resource exhaustion.
    virtual gdx_status_t mem_reg(void *addr, size_t len, const mem::MemInfo &info, unsigned access,
                                 std::unique_ptr<MemHandle> *out) = 0;
    virtual size_t rkey_packed_size() const = 0;
    // Validates the packed bytes (version, size, fields) before trusting any of them.
    virtual gdx_status_t rkey_unpack(std::span<const uint8_t> packed, std::unique_ptr<RemoteKey> *out) = 0;

    // Host memory that connected peers may map into their own address space (kCapPeerMap): an owner-only
    // shared-memory segment, zero-filled and untouched. Registered with remote read and write over its whole
    // length, its key lets a peer's Endpoint::map_remote map it, so a peer's copy engine can write into it with
    // no transport copy in between (the staging engine's bounce pools). GDX_ERR_UNSUPPORTED elsewhere.
    virtual gdx_status_t alloc_shared(size_t len, void **out) {
        (void)len;
        (void)out;
        return GDX_ERR_UNSUPPORTED;
    }
    virtual void free_shared(void *p) { (void)p; }
};

// ---- endpoint and interface -----------------------------------------------------------------------------

class Endpoint;

// Called from progress() for each active message with this id. `data` is valid only during the call.
using AmHandler = void (*)(void *arg, Endpoint *ep, const void *data, size_t length);

// One piece of an active message that Endpoint::am_short_iov gathers.
struct AmSeg {
    const void *data; // may be null when len is 0
    size_t len;
};
// Writes an active message's bytes at `dst` and returns how many it wrote (UCT's pack callback).
using AmPackFn = size_t (*)(void *dst, void *arg);

class Endpoint {
  public:
    virtual ~Endpoint() = default;
    // Bytes the peer needs to connect back to this endpoint (exchanged out of band, e.g. by the bootstrap).
    virtual std::vector<uint8_t> address() const = 0;
    // Connects to the peer endpoint whose address() bytes are given: GDX_OK when already up, GDX_INPROGRESS while
    // the handshake goes on. Operations issued before the connection is up return GDX_ERR_NO_RESOURCE (or are
    // queued internally, bounded); once both sides called connect(), an operation first completes what of the
    // handshake has arrived (shm, cuda_ipc), so the first send needs no progress call in between (UCT's
    // connect-to-ep contract, which UCX's own gtest checks).
    virtual gdx_status_t connect(std::span<const uint8_t> remote_address) = 0;
    // GDX_OK once connected, GDX_INPROGRESS while connecting, or the error that broke the connection.
    virtual gdx_status_t state() const = 0;

    // One-sided write of local [buf, buf+len) (inside `lmemh`, a registration of this transport's MD; may be
    // null only for host memory when the transport says it needs no local registration) to remote_addr inside
    // `rkey`.
    virtual gdx_status_t put(const void *buf, size_t len, const MemHandle *lmemh, uint64_t remote_addr,
                             const RemoteKey &rkey, Completion *comp) = 0;
    // One-sided read of remote [remote_addr, +len) into local buf.
    virtual gdx_status_t get(void *buf, size_t len, const MemHandle *lmemh, uint64_t remote_addr,
                             const RemoteKey &rkey, Completion *comp) = 0;
    // Active messages: short (inline, ≤ caps.max_am_short) and bcopy (copied at once into the transport's
    // buffers, ≤ max_am_bcopy). Both complete at once (GDX_OK) or return GDX_ERR_NO_RESOURCE.
    virtual gdx_status_t am_short(uint8_t id, const void *data, size_t len) = 0;
    virtual gdx_status_t am_bcopy(uint8_t id, const void *data, size_t len) = 0;
    // The same without a buffer in between, where the transport has kCapAmInPlace (else GDX_ERR_UNSUPPORTED: the
    // caller gathers or packs into a buffer and calls am_short / am_bcopy). The handler sees one message either
    // way. UCX's own transports write a message where it goes; these let the UCX glue do the same.
    //   am_short_iov   the pieces `segs`, in order (total <= max_am_short): UCT's am_short_iov.
    //   am_short_hdr   an 8-byte header word, then `len` payload bytes (8 + len <= max_am_short): UCT's am_short,
    //                  which every small UCP message takes; by default am_short_iov of the two pieces.
    //   am_bcopy_pack  the bytes `pack(dst, arg)` writes at dst, at most max_am_bcopy; *len gets what it returned.
    //                  pack must not call into this endpoint. GDX_ERR_NO_RESOURCE: not sent, and pack may have run
    //                  (where the transport cannot tell in advance whether the message will fit): a caller whose
    //                  pack has side effects undoes them, as UCP does. pack writing more than max_am_bcopy is the
    //                  caller's bug: the endpoint fails rather than send what it may have overwritten.
    virtual gdx_status_t am_short_iov(uint8_t id, std::span<const AmSeg> segs) {
        (void)id;
        (void)segs;
        return GDX_ERR_UNSUPPORTED;
    }
    // (Out of line in transport.cpp: a body in sight here lets the compiler guess it at every call and inline it
    // behind a check, which costs the UCX glue's small-message path a stack frame and a compare.)
    virtual gdx_status_t am_short_hdr(uint8_t id, uint64_t header, const void *payload, size_t len);
    virtual gdx_status_t am_bcopy_pack(uint8_t id, AmPackFn pack, void *arg, size_t *len) {
        (void)id;
        (void)pack;
        (void)arg;
        (void)len;
        return GDX_ERR_UNSUPPORTED;
    }
    // Large active message without an intermediate copy: header (≤ max_am_short) then payload from a
    // registered buffer; the handler sees header and payload contiguous.
    virtual gdx_status_t am_zcopy(uint8_t id, const void *header, size_t header_len, const void *payload,
                                  size_t len, const MemHandle *memh, Completion *comp) = 0;
    // Completes when every operation issued before it is complete at the target. GDX_ERR_NO_RESOURCE while
    // requests are parked with pending_add (they were not issued; the flush goes behind them, as in UCT).
    virtual gdx_status_t flush(Completion *comp) = 0;
    // Operations issued after the fence are performed after those issued before it.
    virtual gdx_status_t fence() = 0;
    // Parks `req` until resources free up. GDX_ERR_BUSY when resources are available now (retry yourself): only
    // when an operation issued now would not answer GDX_ERR_NO_RESOURCE, fences included (FenceGate,
    // pending_queue.h), or a caller that retries on BUSY spins.
    virtual gdx_status_t pending_add(PendingRequest *req) = 0;
    // Maps the peer memory `rkey` opens into this process, when the peer allocated it with alloc_shared
    // (kCapPeerMap). GDX_OK: *local is where rkey.base() lies here, valid for rkey.length() bytes until this
    // endpoint is destroyed (one mapping per key, however often asked); GDX_INPROGRESS: the peer's answer is on its
    // way (progress, then ask again); GDX_ERR_UNSUPPORTED: the key names no shared memory, or lacks remote read
    // and write; the endpoint's error once it failed. A pending map counts as outstanding for GDX_PEER_TIMEOUT.
    virtual gdx_status_t map_remote(const RemoteKey &rkey, uint8_t **local) {
        (void)rkey;
        (void)local;
        return GDX_ERR_UNSUPPORTED;
    }
    // False when this endpoint moves nothing directly whatever the registrations say, because the path to this
    // peer is missing (cuda_ipc once connected to a GPU it has no peer-to-peer access to): put/get of directly
    // reachable memory would return GDX_ERR_UNREACHABLE, so the staging layer stages every fragment instead.
    virtual bool direct_possible() const { return true; }
};

// What an idle caller may look at without the lock that guards the interface (UCX's worker-async lock: UCP's
// async thread may create or destroy endpoints meanwhile): the words peers write in shared memory when they give
// this process work, each with the value it will hold when they do. Interface::fill_idle_probe() fills it when
// nothing but those words is left to wait on; quiet() then answers in a few loads, lock-free, until a word changes.
// Sockets, clocks and this process's own calls are not words: the owner still runs progress() every so often and
// after every call that may have given the interface work (src/uct/bridge_idle.cpp).
// Where an idle probe's delivery (IdleProbe::deliver) hands the active messages it may take: a table of receivers
// indexed by id, of which it calls those whose bit is set in `ids`. The table is the owner's, read at each call: the
// UCX module lends UCT's own handler table (uct_am_handler_t, whose layout and calling convention AmSinkHandler
// repeats; the glue checks both), so that a message goes from the ring word to UCP's handler with no layer between
// (src/uct/bridge_idle.cpp), and a handler UCP replaces is the one called next. A receiver gets the transport's
// receive buffer, valid during the call only, and flags 0 (it may not keep the buffer); it returns 0, any other
// status is logged once (note_sink_status) and the message counts as delivered.
struct AmSinkHandler {
    int8_t (*fn)(void *arg, void *data, size_t len, unsigned flags); // UCT's status: a signed byte
    void *arg;
    uint32_t flags; // the owner's (UCT's callback flags); the delivery ignores them
};
struct AmSink {
    const AmSinkHandler *table = nullptr; // kMaxAmId entries
    uint32_t ids = 0;
};
// A sink's receiver returned `status` for active message `id`: logged once per process, at warn.
void note_sink_status(int status, uint8_t id);
// Hands active message `id` (`data`, `len`: the transport's buffer) to receiver `r`: what every delivery to a sink's
// table does, the probed one and a handler that forwards to it alike.
[[gnu::always_inline]] inline void call_receiver(const AmSinkHandler &r, uint8_t id, void *data, size_t len) {
    if (const int st = r.fn(r.arg, data, len, 0); st != 0) [[unlikely]]
        note_sink_status(st, id);
}

struct IdleProbe {
    static constexpr unsigned kMaxWords = 32;
    struct Word;
    // What a delivery did: how many messages it handed over, and whether the probe still covers what is left
    // (deliver()). Returned in registers: a flag behind a pointer would go through memory on the receive path.
    struct Delivered {
        unsigned n;
        bool valid;
    };
    // Delivers what word `w` announces (see deliver()); `ctx` is the transport's.
    using DeliverFn = Delivered (*)(void *ctx, Word *w, const AmSink &sink);
    struct Word {
        const std::atomic<uint64_t> *addr;
        // What the word will hold when the work comes (a ring's next seq word, whose value is known before it is
        // written: no load of a line the peer is about to write, and no earlier lap's leftovers to tell apart).
        uint64_t value;
        void *ctx;
        DeliverFn deliver; // null: nothing the transport can hand over without a full progress()
    };
    unsigned n = 0;
    Word words[kMaxWords];

    // A word that will hold `expected` when work comes, and what delivers that work.
    bool add_expected(const std::atomic<uint64_t> *addr, uint64_t expected, void *ctx, DeliverFn deliver) {
        if (n >= kMaxWords) return false;
        words[n++] = Word{addr, expected, ctx, deliver};
        return true;
    }
    bool quiet() const { return changed() < 0; }
    // The first word that announces work, or -1.
    int changed() const {
        for (unsigned i = 0; i < n; ++i)
            if (words[i].addr->load(std::memory_order_acquire) == words[i].value) return static_cast<int>(i);
        return -1;
    }
    // Called under the lock that guards the interface when word `i` of a probe that fill_idle_probe() filled (and
    // that nothing invalidated since) announced work: delivers the active messages it announces, those with their
    // id's bit set in sink.ids, to their receivers in sink.table, without a full progress(), and re-points the word
    // so that the probe covers what is left (records one call did not take included: the word announces them at
    // once). Returns how many it delivered, with valid false when the probe no longer covers what is left (a record
    // of another kind or id, a word without a delivery: the caller must then progress() in full before it trusts
    // the probe again). The caller also stops trusting it when a handler gave the interface work (an operation, a
    // flush: what invalidates a probe anyway). A message delivered here costs its receiver no walk of the
    // interface's other endpoints and no look at what no word shows; that look comes with the next progress(). A
    // direct call through the word, not a virtual one through the interface: this is the receive path of every
    // small message through UCX, where each instruction between the message's arrival and the reply is latency
    // (bench/results/gpu-2026-11-27b/).
    Delivered deliver(unsigned i, const AmSink &sink) {
        if (i >= n || words[i].deliver == nullptr) [[unlikely]]
            return {0, false};
        return words[i].deliver(words[i].ctx, &words[i], sink);
    }
};

class Interface {
  public:
    virtual ~Interface() = default;
    virtual std::string_view transport_name() const = 0; // "tcp", "shm", "cuda_ipc", "rc"
    virtual std::string_view device_name() const = 0;    // "lo", "rxe0:1", "GPU0", ...
    virtual const Capabilities &caps() const = 0;
    virtual MemoryDomain &md() = 0;
    virtual gdx_status_t ep_create(std::unique_ptr<Endpoint> *out) = 0;
    // Registers the handler for active-message `id` (< kMaxAmId). Replaces an earlier one.
    virtual gdx_status_t set_am_handler(uint8_t id, AmHandler fn, void *arg) = 0;
    // Drives sends, receives, completions and pending requests; returns how many events it processed.
    virtual unsigned progress() = 0;
    // True when progress() would find nothing to do now and may be skipped: a few loads, no clock, no system
    // call. The callers' idle loop (UCP's worker progress spins on it) pays for every instruction of an idle call
    // in latency, since a message that lands mid-call waits for the call to end. It may also count the call as
    // progress() would (shm counts idle calls to pace its control-socket look). False is always correct.
    virtual bool quiet() { return false; }
    // Called where progress() just found nothing to do, under the interface's lock: true when nothing but the words
    // it put in *probe is left to wait on (probe->n may be 0), and the memory behind them stays mapped until the
    // next progress() call, whatever endpoints are destroyed meanwhile. False (the default) when the transport
    // cannot tell: its caller then progresses it on every call.
    virtual bool fill_idle_probe(IdleProbe *probe) {
        (void)probe;
        return false;
    }
    // A file descriptor that becomes readable when progress() has work; -1 when kCapWakeup is absent.
    // Call arm_wakeup() (GDX_OK: safe to sleep; GDX_ERR_BUSY: events pending, progress first) before poll().
    virtual int wakeup_fd() const { return -1; }
    virtual gdx_status_t arm_wakeup() { return GDX_ERR_UNSUPPORTED; }
    // SO_SNDBUF / SO_RCVBUF in bytes (0: the kernel's default and autotuning; SIZE_MAX: unchanged) for the
    // connections this interface makes or accepts from now on, where it has sockets (UCX's SNDBUF/RCVBUF
    // interface settings for tcp).
    virtual gdx_status_t set_socket_buffers(size_t sndbuf, size_t rcvbuf) {
        (void)sndbuf, (void)rcvbuf;
        return GDX_ERR_UNSUPPORTED;
    }
};

inline constexpr unsigned kMaxAmId = 32;
static_assert(kMaxAmId <= 32, "IdleProbe::deliver takes the ids as a 32-bit mask");

// ---- component (a transport family) and the registry ----------------------------------------------------

struct DeviceDesc {
    std::string name;          // "lo", "rxe0:1", "GPU0"
    std::string sys_bus_id;    // PCI bus id of the device, "" if none (loopback, shm)
    bool intra_node = false;
};

class Component {
  public:
    virtual ~Component() = default;
    virtual std::string_view name() const = 0;
    virtual gdx_status_t query_devices(std::vector<DeviceDesc> *out) = 0;
    virtual gdx_status_t open(const DeviceDesc &dev, const Config &cfg, std::unique_ptr<Interface> *out) = 0;
};

// Every transport compiled in, in preference order (registry.cpp: one line per transport). An explicit table
// rather than static registration objects, which a static-library link would silently drop.
std::span<Component *const> components();
Component *find_component(std::string_view name);
// Moves the device of the current CUDA context's GPU (matched by PCI bus id) to the front of `devs`, for callers
// that open one interface per transport: a process bound to GPU 1 gets its cuda_ipc interface on GPU 1, whose
// memory it registers. No-op without a driver, a current context, or such a device.
void prefer_current_gpu(std::vector<DeviceDesc> *devs);

} // namespace gdx::tp
