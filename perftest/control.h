// The out-of-band channel between the two gdx_perftest processes, on gdx's bootstrap (gdx_ext.h's gdx_ext_oob_*):
// rank 0 (the server) listens like ib_write_bw, rank 1 (the client) joins, or Open MPI's environment says who is
// who. Every step is an exchange (an allgather of two): both sides contribute a message and get the other's.
//
// The bootstrap blocks its caller, but a target must keep progressing gdx while it waits (staged fragments are
// copied out by the peer's engine; tcp's one-sided operations are served in software). So each exchange runs
// on a helper thread while the calling thread drives the data path; the bootstrap itself is only ever used by
// one thread at a time. Each step is bounded by --timeout; a vanished peer fails the step with the bootstrap's
// reason.
//
// A request/response (client: call(); server: next_request() + reply()) is two exchanges, so the server has
// acted on a request before the client goes on.
#pragma once

#include <gdx/gdx_ext.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace gdx::perf {

class DataPath;

enum class Msg : uint8_t {
    Idle = 0,    // a side's part of an exchange that carries nothing from it
    Hello = 1,   // both ways: protocol version, host name, GPU count
    Spec = 2,    // client -> server: one memory pair's parameters, the client's endpoint address and key
    Ready = 3,   // server -> client: the server's endpoint address and key, device, decisions
    Begin = 4,   // client -> server: test, size, iterations, warm-up, window
    Fill = 5,    // client -> server: fill the server's buffer with pattern(seed) at [offset, +len)
    Check = 6,   // client -> server: check the server's buffer for pattern(seed) at [offset, +len)
    End = 7,     // client -> server: a test/size is done
    Ok = 8,      // server -> client: the request succeeded (fields depend on the request)
    Error = 9,   // either way: a failure, with its message
    Bye = 10,    // client -> server: no more runs
};
const char *msg_name(Msg m);

struct Message {
    Msg type = Msg::Idle;
    std::vector<std::string> fields; // byte strings
    const std::string &field(size_t i) const;
    uint64_t u64(size_t i) const;    // a decimal field (0 when absent or malformed)
};

// Message <-> bytes: u8 type, then each field as u32 length (LE) + bytes. decode() validates every length.
std::string encode(const Message &m);
bool decode(const std::vector<uint8_t> &bytes, Message *out, std::string *why);

inline constexpr uint32_t kProtocolVersion = 2;

class Control {
  public:
    Control();
    ~Control(); // waits for an exchange in flight (bounded by its timeout)
    Control(const Control &) = delete;
    Control &operator=(const Control &) = delete;

    // Server (rank 0): binds host:port at once (port 0 = any; bound_port() tells) and accepts the client during
    // the first exchange. Client (rank 1): connects, retrying while the server is not up, for at most timeout_s.
    // mpirun: Open MPI's rank decides; rank 0 listens on host:port.
    gdx_status_t listen(const std::string &host, uint16_t port, double timeout_s, std::string *why);
    gdx_status_t join(const std::string &host, uint16_t port, double timeout_s, std::string *why);
    gdx_status_t from_env(const std::string &host, uint16_t port, double timeout_s, std::string *why);
    uint16_t bound_port() const;
    std::string where() const { return where_; } // "127.0.0.1:18515"

    // One exchange, progressing `dp` (may be null) while it runs.
    gdx_status_t exchange(const Message &mine, Message *theirs, DataPath *dp, std::string *why);
    // The same, split: start it, poll done(), then finish() (which waits when not done yet).
    void start(const Message &mine);
    bool done() const { return done_.load(std::memory_order_acquire); }
    bool busy() const { return worker_.joinable(); }
    // True once an exchange failed (peer gone, timeout): nothing more can be said to the peer.
    bool broken() const { return broken_; }
    // Best effort: tells the peer this side failed (skipped when the channel is already broken).
    void notify_failure(const std::string &message, DataPath *dp);
    // Client, inside long phases: every third of --timeout, an empty exchange, which restarts the server's
    // bounded wait for the next request (one round trip per period; the server answers it with nothing).
    gdx_status_t keepalive(DataPath *dp, std::string *why);
    gdx_status_t finish(Message *theirs, std::string *why);

    // Client: sends a request, returns the server's reply; a reply of another type than `expect` (an Error:
    // "peer: <its message>") fails.
    gdx_status_t call(Msg type, const std::vector<std::string> &fields, Msg expect, Message *reply, DataPath *dp,
                      std::string *why);
    // Server: answers the request it acted on.
    gdx_status_t reply(Msg type, const std::vector<std::string> &fields, DataPath *dp, std::string *why);

  private:
    struct OobFree {
        void operator()(gdx_ext_oob_t *o) const { gdx_ext_oob_destroy(o); }
    };
    std::unique_ptr<gdx_ext_oob_t, OobFree> bs_;
    std::string where_;
    std::thread worker_;
    std::atomic<bool> done_{false};
    gdx_status_t result_ = GDX_OK;
    bool broken_ = false;
    bool peer_failed_ = false; // the last failure was the peer's Error: no need to tell it back
    uint64_t exchanges_ = 0; // completed; the first one is the rendezvous
    std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
    double timeout_s_ = 60;
    std::string result_why_;
    std::vector<std::vector<uint8_t>> gathered_;
};

// Decimal text of a number (fields are text unless they carry blobs).
std::string num(uint64_t v);

} // namespace gdx::perf
