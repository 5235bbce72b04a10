#include "control.h"

#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

namespace gdx::perf {

namespace {

using Clock = std::chrono::steady_clock;

std::string errno_text(const char *call) { return std::string(call) + ": " + std::strerror(errno); }

std::string addr_text(const sockaddr *sa) {
    char host[INET6_ADDRSTRLEN] = "?";
    uint16_t port = 0;
    if (sa->sa_family == AF_INET) {
        auto *in = reinterpret_cast<const sockaddr_in *>(sa);
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
        port = ntohs(in->sin_port);
    } else if (sa->sa_family == AF_INET6) {
        auto *in6 = reinterpret_cast<const sockaddr_in6 *>(sa);
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
        port = ntohs(in6->sin6_port);
    }
    return std::string(host) + ":" + std::to_string(port);
}

// Milliseconds left before `deadline`, for poll(); -1 = no deadline.
int ms_left(Clock::time_point deadline, bool bounded) {
    if (!bounded) return -1;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
}

Clock::time_point deadline_after(double s) {
    return Clock::now() + std::chrono::microseconds(static_cast<long long>(std::min(s, 1e6) * 1e6));
}

void tune(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    // A peer host that dies without closing is noticed within ~25 s (idle 10 s + 3 probes 5 s apart).
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    int idle = 10, intvl = 5, cnt = 3;
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

gdx_status_t resolve(const std::string &host, uint16_t port, bool passive, addrinfo **res, std::string *why) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = passive ? AI_PASSIVE : 0;
    std::string service = std::to_string(port);
    int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, res);
    if (rc != 0) {
        *why = "cannot resolve '" + host + "': " + gai_strerror(rc);
        return GDX_ERR_UNREACHABLE;
    }
    return GDX_OK;
}

} // namespace

const char *msg_name(Msg m) {
    switch (m) {
    case Msg::Hello: return "HELLO";
    case Msg::Spec: return "SPEC";
    case Msg::Ready: return "READY";
    case Msg::Begin: return "BEGIN";
    case Msg::Fill: return "FILL";
    case Msg::Check: return "CHECK";
    case Msg::End: return "END";
    case Msg::Ok: return "OK";
    case Msg::Error: return "ERROR";
    case Msg::Bye: return "BYE";
    }
    return "?";
}

const std::string &Message::field(size_t i) const {
    static const std::string empty;
    return i < fields.size() ? fields[i] : empty;
}

uint64_t Message::u64(size_t i) const {
    const std::string &f = field(i);
    uint64_t v = 0;
    for (char c : f) {
        if (c < '0' || c > '9') return 0;
        v = v * 10 + static_cast<uint64_t>(c - '0');
    }
    return v;
}

std::string num(uint64_t v) { return std::to_string(v); }

Control::~Control() { close(); }

void Control::close() {
    if (fd_ >= 0) ::close(fd_);
    if (listen_fd_ >= 0) ::close(listen_fd_);
    fd_ = listen_fd_ = -1;
}

gdx_status_t Control::listen(const std::string &host, uint16_t port, std::string *why) {
    addrinfo *res = nullptr;
    gdx_status_t st = resolve(host, port, true, &res, why);
    if (st != GDX_OK) return st;
    std::string last = "no address";
    for (addrinfo *ai = res; ai != nullptr; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            last = errno_text("socket");
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (::bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd, 4) != 0) {
            last = errno_text("bind/listen");
            ::close(fd);
            continue;
        }
        sockaddr_storage ss{};
        socklen_t sl = sizeof(ss);
        if (getsockname(fd, reinterpret_cast<sockaddr *>(&ss), &sl) != 0) {
            last = errno_text("getsockname");
            ::close(fd);
            continue;
        }
        port_ = ss.ss_family == AF_INET ? ntohs(reinterpret_cast<sockaddr_in *>(&ss)->sin_port)
                                        : ntohs(reinterpret_cast<sockaddr_in6 *>(&ss)->sin6_port);
        listen_fd_ = fd;
        freeaddrinfo(res);
        return GDX_OK;
    }
    freeaddrinfo(res);
    *why = "cannot listen on " + host + ":" + std::to_string(port) + ": " + last;
    return GDX_ERR_IO;
}

gdx_status_t Control::accept(double timeout_s, std::string *why) {
    pollfd p{listen_fd_, POLLIN, 0};
    int rc;
    do {
        rc = poll(&p, 1, static_cast<int>(std::min(timeout_s, 2e6) * 1000));
    } while (rc < 0 && errno == EINTR);
    if (rc < 0) {
        *why = errno_text("poll on the listening socket");
        return GDX_ERR_IO;
    }
    if (rc == 0) {
        char buf[64];
        std::snprintf(buf, sizeof(buf), "%g", timeout_s);
        *why = std::string("no client connected within ") + buf + " s (--timeout)";
        return GDX_ERR_TIMEOUT;
    }
    sockaddr_storage ss{};
    socklen_t sl = sizeof(ss);
    fd_ = ::accept4(listen_fd_, reinterpret_cast<sockaddr *>(&ss), &sl, SOCK_CLOEXEC);
    if (fd_ < 0) {
        *why = errno_text("accept");
        return GDX_ERR_IO;
    }
    tune(fd_);
    peer_ = addr_text(reinterpret_cast<sockaddr *>(&ss));
    ::close(listen_fd_);
    listen_fd_ = -1;
    return GDX_OK;
}

gdx_status_t Control::connect(const std::string &host, uint16_t port, double timeout_s, std::string *why) {
    addrinfo *res = nullptr;
    gdx_status_t st = resolve(host, port, false, &res, why);
    if (st != GDX_OK) return st;
    auto deadline = deadline_after(timeout_s);
    std::string last;
    for (;;) {
        for (addrinfo *ai = res; ai != nullptr; ai = ai->ai_next) {
            int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
            if (fd < 0) {
                last = errno_text("socket");
                continue;
            }
            int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
            if (rc != 0 && errno == EINPROGRESS) {
                pollfd p{fd, POLLOUT, 0};
                rc = poll(&p, 1, std::max(1, ms_left(deadline, true)));
                int err = 0;
                socklen_t el = sizeof(err);
                if (rc == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0) rc = 0;
                else {
                    errno = rc == 0 ? ETIMEDOUT : (err ? err : errno);
                    rc = -1;
                }
            }
            if (rc == 0) {
                int flags = fcntl(fd, F_GETFL);
                fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
                tune(fd);
                fd_ = fd;
                peer_ = addr_text(ai->ai_addr);
                freeaddrinfo(res);
                return GDX_OK;
            }
            last = addr_text(ai->ai_addr) + ": " + std::strerror(errno);
            ::close(fd);
        }
        if (Clock::now() >= deadline) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(100)); // the server may not be listening yet
    }
    freeaddrinfo(res);
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%g", timeout_s);
    *why = "cannot connect to the server at " + host + ":" + std::to_string(port) + " within " + buf +
           " s: " + last + " (is gdx_perftest running there, on this port?)";
    return GDX_ERR_UNREACHABLE;
}

gdx_status_t Control::send(Msg type, const std::vector<std::string> &fields, std::string *why) {
    std::string frame(5, '\0');
    frame[4] = static_cast<char>(type);
    for (const std::string &f : fields) {
        uint32_t n = static_cast<uint32_t>(f.size());
        for (int i = 0; i < 4; ++i) frame.push_back(static_cast<char>(n >> (8 * i)));
        frame += f;
    }
    uint32_t len = static_cast<uint32_t>(frame.size() - 4);
    if (len > kMaxFrame) {
        *why = std::string("control message ") + msg_name(type) + " too large";
        return GDX_ERR_INVALID_PARAM;
    }
    for (int i = 0; i < 4; ++i) frame[i] = static_cast<char>(len >> (8 * i));
    size_t off = 0;
    while (off < frame.size()) {
        ssize_t n = ::send(fd_, frame.data() + off, frame.size() - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            *why = std::string("cannot send ") + msg_name(type) + " to the peer (" + peer_ +
                   "): " + std::strerror(errno) + " (did the peer exit?)";
            return GDX_ERR_CONNECTION_RESET;
        }
        off += static_cast<size_t>(n);
    }
    return GDX_OK;
}

gdx_status_t Control::read_exact(void *buf, size_t len, double timeout_s, std::string *why) {
    auto deadline = deadline_after(timeout_s);
    bool bounded = timeout_s >= 0;
    size_t off = 0;
    while (off < len) {
        pollfd p{fd_, POLLIN, 0};
        int rc = poll(&p, 1, ms_left(deadline, bounded));
        if (rc < 0 && errno == EINTR) continue;
        if (rc < 0) {
            *why = errno_text("poll on the control connection");
            return GDX_ERR_IO;
        }
        if (rc == 0) {
            char t[64];
            std::snprintf(t, sizeof(t), "%g", timeout_s);
            *why = "the peer (" + peer_ + ") sent nothing for " + t + " s (--timeout)";
            return GDX_ERR_TIMEOUT;
        }
        ssize_t n = ::recv(fd_, static_cast<char *>(buf) + off, len - off, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n == 0) {
            *why = "the peer (" + peer_ + ") closed the control connection (it exited or failed; see its output)";
            return GDX_ERR_CONNECTION_RESET;
        }
        if (n < 0) {
            *why = "control connection to " + peer_ + " failed: " + std::strerror(errno);
            return GDX_ERR_CONNECTION_RESET;
        }
        off += static_cast<size_t>(n);
    }
    return GDX_OK;
}

gdx_status_t Control::recv(Message *out, double timeout_s, std::string *why) {
    uint8_t hdr[5];
    gdx_status_t st = read_exact(hdr, 5, timeout_s, why);
    if (st != GDX_OK) return st;
    uint32_t len = hdr[0] | (hdr[1] << 8) | (hdr[2] << 16) | (static_cast<uint32_t>(hdr[3]) << 24);
    if (len < 1 || len > kMaxFrame || hdr[4] < static_cast<uint8_t>(Msg::Hello) ||
        hdr[4] > static_cast<uint8_t>(Msg::Bye)) {
        *why = "malformed control message from " + peer_ + " (length " + std::to_string(len) + ", type " +
               std::to_string(hdr[4]) + "): is the peer a gdx_perftest of the same version?";
        return GDX_ERR_PROTOCOL;
    }
    std::string body(len - 1, '\0');
    st = read_exact(body.data(), body.size(), timeout_s < 0 ? 60 : timeout_s, why);
    if (st != GDX_OK) return st;
    out->type = static_cast<Msg>(hdr[4]);
    out->fields.clear();
    size_t off = 0;
    while (off < body.size()) {
        if (body.size() - off < 4) {
            *why = "malformed control message from " + peer_ + ": truncated field";
            return GDX_ERR_PROTOCOL;
        }
        uint32_t n = 0;
        for (int i = 3; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(body[off + i]);
        off += 4;
        if (n > body.size() - off) {
            *why = "malformed control message from " + peer_ + ": field longer than the message";
            return GDX_ERR_PROTOCOL;
        }
        out->fields.push_back(body.substr(off, n));
        off += n;
    }
    return GDX_OK;
}

bool Control::readable() {
    pollfd p{fd_, POLLIN, 0};
    return poll(&p, 1, 0) > 0;
}

gdx_status_t Control::expect(Msg type, Message *out, double timeout_s, std::string *why) {
    gdx_status_t st = recv(out, timeout_s, why);
    if (st != GDX_OK) return st;
    if (out->type == Msg::Error) {
        *why = "peer: " + out->field(0);
        return GDX_ERR_CANCELED;
    }
    if (out->type != type) {
        *why = std::string("protocol error: expected ") + msg_name(type) + " from the peer, got " + msg_name(out->type);
        return GDX_ERR_PROTOCOL;
    }
    return GDX_OK;
}

} // namespace gdx::perf
