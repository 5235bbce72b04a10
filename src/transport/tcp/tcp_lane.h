// Lanes: extra TCP connections of one endpoint that carry stripes of large puts, each driven by a helper
// thread, so an endpoint is bound neither by one socket nor by the one core that runs progress(). This is what
// NCCL's socket transport does with NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD; one loopback connection on
// one core moves 4-7 GB/s, which was the ceiling of staged GPU->GPU over tcp before lanes.
//
// Who owns what:
// - The endpoint (progress thread) decides which puts are striped, cuts them, and keeps the per-put record a
//   stripe's tag names. It talks to a lane only through its worker: submit(), poke(), remove().
// - The worker thread owns everything inside a Lane below "worker thread only": the socket, the send queue,
//   the receive state machine. It writes stripes straight from the user's buffer and receives peers' stripes
//   straight into registered memory (checked against the interface's key table, pinned per recv, like the
//   main connection). It never calls the user: results go back as LaneEvents, delivered by progress().
// - Both sides stripe over the same lanes: each lane carries this side's stripes and the peer's PUT_ACKs one
//   way, the peer's stripes and our PUT_ACKs the other.
//
// Ordering (what fence() promises) crosses threads in two directions; see wire.h for the frames:
// - stripes before a fence, main-connection messages after it: a FENCE on the main connection lists, per
//   lane, the stripes sent so far; the target's main connection holds until its lanes have landed them;
// - main-connection messages before a fence, stripes after it: each stripe names how many main-connection
//   requests the target must have performed first (`after_main`); the target's lane holds until then.
// Stripes before and after a fence on different lanes are ordered through the FENCE they both refer to.
#pragma once

#include "transport/rkey_table.h"
#include "transport/wire.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace gdx::tp::tcp {

class TcpEndpoint;
class LaneWorker;
class LanePool;

// One stripe of a put, as the endpoint hands it to a lane.
struct StripeJob {
    const uint8_t *src = nullptr;
    uint64_t len = 0, key_id = 0, addr = 0;
    uint64_t after_main = 0; // main-connection requests the target performs before this stripe
    uint32_t tag = 0;        // the endpoint's striped-put record this stripe belongs to
};

// What an endpoint's main connection and its lanes share across threads.
struct LaneShared {
    std::atomic<uint64_t> main_performed{0}; // the peer's requests our main connection has performed
    // Bumped (release) after each write of the main connection; a lane acquires it before a stripe writes into
    // registered memory. A GET reply read from memory that a later stripe overwrites is ordered by the peer (it
    // asked for the stripe after the reply arrived), which ThreadSanitizer cannot see across processes; this
    // makes that order visible in-process at the cost of one atomic per write.
    std::atomic<uint64_t> main_writes{0};
};

class Lane;

struct LaneEvent {
    enum Kind : uint8_t { StripeDone, Landed, Failed };
    Kind kind = StripeDone;
    std::shared_ptr<Lane> lane;
    uint32_t tag = 0;            // StripeDone
    gdx_status_t status = GDX_OK; // StripeDone, Failed
};

class Lane : public std::enable_shared_from_this<Lane> {
  public:
    Lane(TcpEndpoint *owner, unsigned index, int fd, std::shared_ptr<LaneShared> shared, std::string peer,
         uint32_t peer_max_stripes);
    ~Lane();
    Lane(const Lane &) = delete;
    Lane &operator=(const Lane &) = delete;

    // ---- progress thread
    TcpEndpoint *owner = nullptr; // null once the endpoint let go of the lane
    const unsigned index;
    uint64_t issued = 0;          // stripes this side queued on the lane (what a FENCE lists)
    LaneWorker *worker = nullptr;
    std::vector<StripeJob> leftovers; // after remove(): stripes never reported (the endpoint cancels them)

    // ---- any thread
    uint64_t landed() const { return landed_.load(std::memory_order_acquire); } // peer stripes performed here
    uint64_t waiting_main() const { return waiting_main_.load(std::memory_order_seq_cst); }
    // Progress thread: ends the wait for `want` if it is still the one published; true for the one who did.
    bool clear_wait(uint64_t want) { return waiting_main_.compare_exchange_strong(want, 0, std::memory_order_seq_cst); }
    const std::string &peer() const { return peer_; }

  private:
    friend class LaneWorker;
    std::atomic<uint64_t> landed_{0};
    std::atomic<uint64_t> waiting_main_{0}; // non-zero: receiving holds until main_performed reaches it
    const std::shared_ptr<LaneShared> shared_;
    const std::string peer_;

    // ---- worker thread only
    void queue(LaneWorker &w, const StripeJob &job);
    void flush_tx(LaneWorker &w);
    void on_readable(LaneWorker &w);
    void on_header(LaneWorker &w);
    void begin_put(LaneWorker &w);
    void stripe_landed(LaneWorker &w);
    bool try_resume(LaneWorker &w); // a held stripe may go on: main_performed moved
    void fail(LaneWorker &w, gdx_status_t st, const std::string &why);
    void update_watch(LaneWorker &w);
    bool busy() const;
    ssize_t recv_some(LaneWorker &w, uint8_t *dst, size_t len);
    ssize_t recv_error(LaneWorker &w, int err); // recv_once failed with err (0: the peer closed): fails the lane

    int fd_;
    const uint32_t peer_max_; // stripes the peer may have unacknowledged (bounds our ack queue)
    bool failed_ = false;
    gdx_status_t status_ = GDX_OK; // why it failed
    bool removed_ = false;    // set under the worker's mutex; remove() waits for it
    bool want_write_ = false;
    unsigned watched_ = 0;    // epoll interest: bit 0 read, bit 1 write
    std::chrono::steady_clock::time_point last_activity_;

    std::deque<StripeJob> tx_;      // to write; the front may be partly written
    size_t tx_sent_ = 0;            // bytes of the front's header + payload written
    uint8_t tx_head_[wire::kHeaderSize];
    std::deque<StripeJob> unacked_; // written, awaiting PUT_ACK (acks come in order)
    std::deque<std::pair<uint64_t, int32_t>> acks_; // PUT_ACKs to write (op id, status)
    uint8_t ack_buf_[wire::kHeaderSize * 32];
    size_t ack_len_ = 0, ack_sent_ = 0;

    enum class Rx : uint8_t { Header, Held, Payload, Discard };
    Rx rx_ = Rx::Header;
    uint8_t rx_hdr_[wire::kHeaderSize];
    size_t rx_got_ = 0;
    wire::FrameHeader rx_cur_;
    uint8_t *rx_dst_ = nullptr;
    uint64_t rx_left_ = 0;
    gdx_status_t rx_status_ = GDX_OK;
};

// One helper thread and the lanes it drives (an epoll set over their sockets and an eventfd for commands).
class LaneWorker {
  public:
    explicit LaneWorker(LanePool &pool) : pool_(pool) {}
    ~LaneWorker(); // stops and joins
    gdx_status_t start(unsigned id);

    // ---- progress thread
    void add(const std::shared_ptr<Lane> &lane);
    void submit(const std::shared_ptr<Lane> &lane, const StripeJob &job);
    void poke(const std::shared_ptr<Lane> &lane); // main_performed moved past what the lane waits for
    // Returns once the worker has let go of the lane: its socket closed, unreported stripes in lane->leftovers.
    void remove(const std::shared_ptr<Lane> &lane);

    // ---- worker thread (used by Lane)
    LanePool &pool() { return pool_; }
    std::vector<uint8_t> &scratch() { return scratch_; }
    void watch(int fd, Lane *lane, unsigned mask, unsigned was);

  private:
    void run();
    void wake();
    struct Cmd {
        enum Kind : uint8_t { Add, Submit, Poke, Remove } kind;
        std::shared_ptr<Lane> lane;
        StripeJob job;
    };
    void apply(Cmd &c);
    void check_timeouts();

    LanePool &pool_;
    std::mutex mu_;
    std::condition_variable removed_cv_;
    std::vector<Cmd> cmds_, taking_;
    bool stop_ = false;
    int epfd_ = -1, evfd_ = -1;
    std::thread thread_;
    std::vector<std::shared_ptr<Lane>> lanes_; // worker thread only
    std::vector<uint8_t> scratch_;             // where refused stripes are drained
};

// The helper threads of one interface and the queue of their results.
class LanePool {
  public:
    LanePool(RkeyTable &table, const wire::Limits &limits, std::chrono::steady_clock::duration silence_timeout,
             unsigned nthreads);
    ~LanePool();
    gdx_status_t init();                  // the notification eventfd
    int notify_fd() const { return evfd_; } // readable while events wait (in the interface's wakeup set)

    // ---- progress thread
    // Hands the lane to worker `slot % threads`, starting that worker on first use.
    gdx_status_t attach(const std::shared_ptr<Lane> &lane, uint64_t slot);
    bool pending() const { return pending_.load(std::memory_order_acquire); }
    void take(std::vector<LaneEvent> *out); // appends

    // ---- worker threads
    void post(LaneEvent ev);
    RkeyTable &table() { return table_; }
    const wire::Limits &limits() const { return limits_; }
    std::chrono::steady_clock::duration silence_timeout() const { return silence_timeout_; }

  private:
    RkeyTable &table_;
    wire::Limits limits_;
    std::chrono::steady_clock::duration silence_timeout_; // GDX_PEER_SILENCE_TIMEOUT
    std::mutex mu_;
    std::vector<LaneEvent> events_;
    std::atomic<bool> pending_{false};
    int evfd_ = -1;
    std::vector<std::unique_ptr<LaneWorker>> workers_;
};

} // namespace gdx::tp::tcp
