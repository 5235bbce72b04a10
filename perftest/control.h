// The out-of-band channel between the two gdx_perftest processes: one TCP connection carrying framed
// messages (type + a list of byte fields). Parameters, endpoint addresses and remote keys are exchanged over
// it, and the data tests synchronize on it. Every wait is bounded; a vanished peer is detected (EOF, reset,
// TCP keepalive) and named.
//
// Frame: u32 length (LE, of what follows), u8 type, then fields as u32 length (LE) + bytes.
#pragma once

#include "gdx/status.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gdx::perf {

enum class Msg : uint8_t {
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
    Msg type = Msg::Error;
    std::vector<std::string> fields; // byte strings
    const std::string &field(size_t i) const;
    uint64_t u64(size_t i) const;    // a decimal field (0 when absent or malformed)
};

inline constexpr uint32_t kProtocolVersion = 1;
inline constexpr size_t kMaxFrame = 1u << 20;

class Control {
  public:
    Control() = default;
    ~Control();
    Control(const Control &) = delete;
    Control &operator=(const Control &) = delete;

    // Server side: bind host:port (port 0 = any; bound_port() tells). Client side: connect, retrying while
    // the server is not up yet, for at most timeout_s.
    gdx_status_t listen(const std::string &host, uint16_t port, std::string *why);
    uint16_t bound_port() const { return port_; }
    gdx_status_t accept(double timeout_s, std::string *why);
    gdx_status_t connect(const std::string &host, uint16_t port, double timeout_s, std::string *why);
    std::string peer_text() const { return peer_; } // "127.0.0.1:18515"

    gdx_status_t send(Msg type, const std::vector<std::string> &fields, std::string *why);
    // Waits at most timeout_s (< 0: until the peer goes away) for the next message.
    gdx_status_t recv(Message *out, double timeout_s, std::string *why);
    // True when a whole message may be read now (non-blocking check).
    bool readable();
    // Closes the connection (the peer sees EOF at once).
    void close();
    // recv() that expects `type`; an Error from the peer becomes *why = "peer: <its message>".
    gdx_status_t expect(Msg type, Message *out, double timeout_s, std::string *why);

  private:
    gdx_status_t read_exact(void *buf, size_t len, double timeout_s, std::string *why);
    int listen_fd_ = -1;
    int fd_ = -1;
    uint16_t port_ = 0;
    std::string peer_;
};

// Decimal text of a number (fields are text unless they carry blobs).
std::string num(uint64_t v);

} // namespace gdx::perf
