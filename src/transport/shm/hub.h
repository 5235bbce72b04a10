// The per-interface side of the intra-node transports: the listening control socket, the interface's eventfd
// (peers write it when they push into a ring we sleep on), the epoll set behind wakeup_fd(), and the channels
// of the interface's endpoints. Connection set-up, descriptor passing and peer-death detection run in
// progress_ctrl(), which costs one epoll_wait(0) about once a millisecond (at most once per kernel tick) while
// nothing is connecting, so the data path stays free of system calls.
#pragma once

#include "core/clock.h"
#include "core/config.h"
#include "transport/shm/channel.h"

#include <chrono>
#include <memory>
#include <vector>

namespace gdx::tp::shm {

struct HubConfig {
    const char *transport = "shm"; // socket names and log lines
    wire::TransportId tid = wire::TransportId::Shm;
    size_t ring_size = 1u << 20; // power of two
    size_t extra_size = 0;       // owner area at the end of each segment
    Ternary cma = Ternary::Try;  // GDX_SHM_CMA
    Ternary membarrier = Ternary::Try; // GDX_SHM_MEMBARRIER
    bool fault_membarrier = false;     // GDX_FAULT_SHM_MEMBARRIER (testing aid)
    int64_t conn_timeout_ns = 10'000'000'000;

    // The rows every hub reads (GDX_SHM_RING_SIZE, GDX_SHM_MEMBARRIER and its fault, GDX_CONN_TIMEOUT); the owning
    // transport sets its name, id, extra area and CMA.
    static HubConfig from(const Config &cfg, const char *transport, wire::TransportId tid);
};

// Segment layout: RingCtl at 0, ring data at kRingDataOff, the owner's extra area after the ring.
inline constexpr size_t kRingDataOff = 256;
size_t segment_size(size_t ring_size, size_t extra_size);

class Hub {
  public:
    static gdx_status_t create(const HubConfig &cfg, std::unique_ptr<Hub> *out);
    ~Hub();
    Hub(const Hub &) = delete;
    Hub &operator=(const Hub &) = delete;

    const HubConfig &config() const { return cfg_; }
    uint64_t nonce() const { return nonce_; }
    uint64_t host_id() const { return host_id_; }
    int event_fd() const { return event_fd_; }
    int wakeup_fd() const { return epoll_fd_; }

    // Channels register on construction (and get their endpoint id) and leave on destruction.
    uint64_t add_channel(Channel *c);
    void remove_channel(Channel *c);
    void watch(int fd);
    void unwatch(int fd);

    // Accepts connections, routes HELLOs, reads control messages, notices hang-ups and time-outs. Cheap unless
    // something is connecting or a millisecond has passed (or `force`). Returns the events handled.
    // Inline: the interface calls it on every progress call, and all but every 32nd idle one end here.
    unsigned progress_ctrl(bool force = false) { return !force && ctrl_quiet() ? 0 : look_ctrl(force); }
    // progress_ctrl() would do nothing on this call: nothing connecting and no control-socket look due. Counts the
    // call as an idle one (so the look still comes every 32nd call).
    bool ctrl_quiet() {
        if (!ctrl_idle() || ((idle_calls_ + 1) & 31) == 0) return false;
        ++idle_calls_;
        return true;
    }
    // Nothing connecting and no accepted connection waiting for its HELLO (ctrl_quiet() without the look's pacing:
    // for an idle probe, whose owner paces the looks itself).
    bool ctrl_idle() const { return !maybe_connecting_ && pending_.empty(); }
    // A channel started connecting: progress_ctrl() runs on every call until none is (it clears this).
    void note_connecting() { maybe_connecting_ = true; }
    // Accepts waiting connections and hands the HELLOs already there to their channels; nothing else is read
    // (Channel::finish_connect, from an operation, must not run other endpoints' handlers).
    void take_hellos();
    // Drains the eventfd and marks every up channel's ring as sleeping. GDX_ERR_BUSY (nothing marked) when a
    // ring already holds records: progress first (or, once logged, when membarrier() failed: never a sleep that
    // could miss a message).
    gdx_status_t arm();
    // The wakeup handshake without a sender-side fence (GDX_SHM_MEMBARRIER): this process is registered for
    // MEMBARRIER_CMD_GLOBAL_EXPEDITED, and arm() issues that barrier before it looks at the rings. A channel skips
    // the fence of every send only when both ends say so (Channel::signal_peer).
    bool membarrier_wakeup() const { return membarrier_; }
    // Clears the sleeping marks (after the caller woke up, or when arm() must report BUSY for other reasons).
    void disarm();

    // The clocks (core/clock.h): now_ns() for connection deadlines; coarse_ns() for what runs on every progress
    // call and only needs milliseconds (the control-socket look, the peer-silence clock).
    static int64_t now_ns() { return clock::now_ns(); }
    static int64_t coarse_ns() { return clock::coarse_ns(); }

  private:
    Hub() = default;
    unsigned look_ctrl(bool force); // progress_ctrl() past its idle check
    void accept_all();
    void handle_pending(size_t i);
    void drop_pending(size_t i);
    Channel *find_by_sock(int fd) const;
    Channel *find_by_ep(uint64_t ep_id) const;

    HubConfig cfg_;
    uint64_t nonce_ = 0, host_id_ = 0, next_ep_id_ = 1;
    std::string name_;
    int listen_fd_ = -1, event_fd_ = -1, epoll_fd_ = -1;
    std::vector<Channel *> channels_;
    struct Pending {
        int fd;
        PeerCred cred;
        int64_t deadline_ns;
    };
    std::vector<Pending> pending_; // accepted, HELLO not yet read
    int64_t next_poll_ns_ = 0; // coarse_ns() of the next look at the control sockets while idle
    unsigned idle_calls_ = 0;  // progress calls while idle: the clock is read on every 32nd
    bool maybe_connecting_ = false; // a channel may be Connecting (set by note_connecting, cleared by progress_ctrl)
    bool membarrier_ = false;
    bool barrier_failed_logged_ = false;
};

uint64_t host_identity(); // hash of the kernel's boot id: equal for every process of this boot

} // namespace gdx::tp::shm
