#include "transport/shm/sock.h"

#include "core/error.h"

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace gdx::tp::shm {

namespace {

constexpr const char *kComp = "shm";

socklen_t make_addr(const std::string &name, sockaddr_un *sa) {
    std::memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    // Abstract namespace: sun_path starts with a NUL byte; the length, not a terminator, ends the name.
    size_t n = std::min(name.size(), sizeof(sa->sun_path) - 1);
    std::memcpy(sa->sun_path + 1, name.data(), n);
    return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}

} // namespace

std::string socket_name(const char *transport, uint32_t pid, uint64_t nonce) {
    char buf[96];
    std::snprintf(buf, sizeof(buf), "gdx-%s-%u-%016" PRIx64, transport, pid, nonce);
    return buf;
}

gdx_status_t listen_abstract(const std::string &name, int *fd) {
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s < 0) return fail_errno(GDX_ERR_IO, errno, kComp, "socket(AF_UNIX, SOCK_SEQPACKET)");
    sockaddr_un sa;
    socklen_t len = make_addr(name, &sa);
    if (bind(s, reinterpret_cast<sockaddr *>(&sa), len) != 0) {
        int e = errno;
        close(s);
        return fail_errno(GDX_ERR_IO, e, kComp, "bind(@%s)", name.c_str());
    }
    if (listen(s, 128) != 0) {
        int e = errno;
        close(s);
        return fail_errno(GDX_ERR_IO, e, kComp, "listen(@%s)", name.c_str());
    }
    *fd = s;
    return GDX_OK;
}

gdx_status_t connect_abstract(const std::string &name, int *fd) {
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s < 0) return fail_errno(GDX_ERR_IO, errno, kComp, "socket(AF_UNIX, SOCK_SEQPACKET)");
    sockaddr_un sa;
    socklen_t len = make_addr(name, &sa);
    if (connect(s, reinterpret_cast<sockaddr *>(&sa), len) != 0) {
        int e = errno;
        close(s);
        if (e == EAGAIN) return GDX_ERR_NO_RESOURCE; // backlog full: the caller retries from progress()
        if (e == ECONNREFUSED || e == ENOENT)
            return GDX_FAIL(GDX_ERR_UNREACHABLE, kComp,
                            "connect(@%s): nobody listens there (peer gone, or another network namespace)",
                            name.c_str());
        return fail_errno(GDX_ERR_IO, e, kComp, "connect(@%s)", name.c_str());
    }
    *fd = s;
    return GDX_OK;
}

gdx_status_t accept_one(int listen_fd, int *fd) {
    int s = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (s < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED)
            return GDX_ERR_NO_RESOURCE;
        return fail_errno(GDX_ERR_IO, errno, kComp, "accept4 on the control socket");
    }
    *fd = s;
    return GDX_OK;
}

gdx_status_t peer_cred(int fd, PeerCred *out) {
    ucred c{};
    socklen_t len = sizeof(c);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c, &len) != 0)
        return fail_errno(GDX_ERR_IO, errno, kComp, "getsockopt(SO_PEERCRED)");
    out->pid = c.pid;
    out->uid = c.uid;
    out->gid = c.gid;
    return GDX_OK;
}

gdx_status_t check_peer_uid(int fd, const char *what, PeerCred *cred) {
    gdx_status_t st = peer_cred(fd, cred);
    if (st != GDX_OK) return st;
    uid_t me = geteuid();
    if (cred->uid != me)
        return GDX_FAIL(GDX_ERR_ACCESS_DENIED, kComp,
                        "%s: refused pid %d running as uid %u (only uid %u may share memory with this process)",
                        what, static_cast<int>(cred->pid), static_cast<unsigned>(cred->uid),
                        static_cast<unsigned>(me));
    return GDX_OK;
}

gdx_status_t send_msg(int fd, const void *buf, size_t len, const int *fds, size_t nfds) {
    if (nfds > kMaxFdsPerMsg) return GDX_FAIL(GDX_ERR_INVALID_PARAM, kComp, "send_msg: %zu fds (max %zu)", nfds,
                                              kMaxFdsPerMsg);
    iovec iov{const_cast<void *>(buf), len};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * kMaxFdsPerMsg)];
    if (nfds > 0) {
        std::memset(cbuf, 0, sizeof(cbuf));
        mh.msg_control = cbuf;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
        cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
        std::memcpy(CMSG_DATA(cm), fds, sizeof(int) * nfds);
    }
    for (;;) {
        ssize_t n = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n >= 0) {
            // SEQPACKET sends all or nothing.
            if (static_cast<size_t>(n) != len)
                return GDX_FAIL(GDX_ERR_IO, kComp, "sendmsg: short write %zd of %zu on a SEQPACKET socket", n, len);
            return GDX_OK;
        }
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return GDX_ERR_NO_RESOURCE;
        if (errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN)
            return GDX_FAIL(GDX_ERR_CONNECTION_RESET, kComp, "control socket: peer closed its end");
        return fail_errno(GDX_ERR_IO, errno, kComp, "sendmsg on the control socket");
    }
}

gdx_status_t recv_msg(int fd, void *buf, size_t cap, size_t *len, int *fds, size_t max_fds, size_t *nfds) {
    *nfds = 0;
    iovec iov{buf, cap};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * kMaxFdsPerMsg)];
    mh.msg_control = cbuf;
    mh.msg_controllen = sizeof(cbuf);
    ssize_t n;
    do {
        n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) return GDX_ERR_NO_RESOURCE;
        if (errno == ECONNRESET) return GDX_ERR_CONNECTION_RESET;
        return fail_errno(GDX_ERR_IO, errno, kComp, "recvmsg on the control socket");
    }
    // Collect every descriptor first so that none leaks, whatever is wrong with the message.
    size_t got = 0;
    bool too_many = false;
    for (cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm != nullptr; cm = CMSG_NXTHDR(&mh, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
        size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; ++i) {
            int f;
            std::memcpy(&f, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
            if (got < max_fds) {
                fds[got++] = f;
            } else {
                close(f);
                too_many = true;
            }
        }
    }
    if (n == 0 && got == 0) return GDX_ERR_CONNECTION_RESET;
    if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0 || too_many) {
        for (size_t i = 0; i < got; ++i) close(fds[i]);
        return GDX_FAIL(GDX_ERR_PROTOCOL, kComp, "control message truncated (%zd bytes, cap %zu, flags 0x%x)", n,
                        cap, mh.msg_flags);
    }
    *len = static_cast<size_t>(n);
    *nfds = got;
    return GDX_OK;
}

bool socket_hung_up(int fd) {
    pollfd p{fd, POLLIN | POLLRDHUP, 0};
    int r = poll(&p, 1, 0);
    return r > 0 && (p.revents & (POLLHUP | POLLERR | POLLRDHUP)) != 0;
}

} // namespace gdx::tp::shm
