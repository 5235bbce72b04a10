// A passive endpoint waits for its peer to dial. Past GDX_CONN_TIMEOUT the peer is either busy (it has not called
// connect yet: a rank that has not entered MPI) or gone, and its listener tells them apart: while its process lives
// the kernel accepts a TCP connection there; once it is gone the connection is refused (or, host down, never
// answered within GDX_CONN_TIMEOUT). A busy peer delays the connection and never fails it.
#include "core/error.h"
#include "transport/tcp/tcp_internal.h"

#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace gdx::tp::tcp {

namespace {
constexpr auto kProbeRecheck = std::chrono::milliseconds(50);
} // namespace

Clock::time_point TcpEndpoint::check_passive(Clock::time_point now) {
    auto gone = [&](gdx_status_t st, const std::string &why) {
        if (probe_fd_ >= 0) ::close(probe_fd_);
        probe_fd_ = -1;
        GDX_FAIL(st, "tcp", "endpoint 0x%016" PRIx64 ": peer %s:%u never connected within GDX_CONN_TIMEOUT=%s, and %s",
                 id_, remote_.ip_text().c_str(), remote_.port, format_duration(iface_->conn_timeout()).c_str(),
                 why.c_str());
        on_closed(st);
        return Clock::time_point::max();
    };
    int err = 0;
    if (probe_fd_ < 0) {
        asio::ip::tcp::endpoint peer = peer_endpoint();
        probe_fd_ = ::socket(peer.protocol().family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (probe_fd_ < 0) return gone(GDX_ERR_IO, std::string("socket() for a probe of its listener failed: ") +
                                                       std::strerror(errno));
        probe_started_ = now;
        if (::connect(probe_fd_, peer.data(), static_cast<socklen_t>(peer.size())) != 0) err = errno;
    }
    if (err == 0 || err == EINPROGRESS) { // answered now, or later: poll it (again at the next look)
        pollfd p{probe_fd_, POLLOUT, 0};
        if (::poll(&p, 1, 0) < 0)
            return gone(GDX_ERR_IO, std::string("poll() of the probe failed: ") + std::strerror(errno));
        if (p.revents == 0) { // the handshake is still on its way
            if (now - probe_started_ > iface_->conn_timeout())
                return gone(GDX_ERR_UNREACHABLE, "its host did not answer a TCP connect either (host or link down)");
            connect_deadline_ = now + kProbeRecheck;
            return connect_deadline_;
        }
        socklen_t len = sizeof(err);
        if (::getsockopt(probe_fd_, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    }
    ::close(probe_fd_);
    probe_fd_ = -1;
    if (err != 0)
        return gone(GDX_ERR_UNREACHABLE, std::string("its listener refuses connections (") + std::strerror(err) +
                                             "): its process is gone");
    if (!slow_peer_said_) {
        slow_peer_said_ = true;
        GDX_INFO("tcp", "endpoint 0x%016" PRIx64 ": peer %s:%u has not dialled within GDX_CONN_TIMEOUT=%s; its "
                        "listener answers, so it is busy, not gone: still waiting",
                 id_, remote_.ip_text().c_str(), remote_.port, format_duration(iface_->conn_timeout()).c_str());
    }
    connect_deadline_ = now + iface_->conn_timeout();
    return connect_deadline_;
}

} // namespace gdx::tp::tcp
