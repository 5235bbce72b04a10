// Unix-domain control sockets of the intra-node transports (shm, cuda_ipc): abstract-namespace SOCK_SEQPACKET
// sockets, so every message keeps its boundary and may carry file descriptors (SCM_RIGHTS), and nothing is left
// in the file system when a process dies (the kernel drops an abstract name with its last socket).
//
// An abstract name has no file permissions: anyone in the network namespace may connect. Both ends therefore
// check the other's credentials (SO_PEERCRED, filled in by the kernel at connect time, not claimed by the
// peer) and refuse any uid but their own (check_peer_uid).
#pragma once

#include "gdx/status.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <sys/types.h>

namespace gdx::tp::shm {

inline constexpr size_t kMaxFdsPerMsg = 4;
inline constexpr size_t kMaxCtrlMsg = 1024; // largest control message either side accepts

// "gdx-<transport>-<pid>-<nonce in hex>": unique per interface (the nonce is 64 random bits). The uid is not
// part of the name: an address claiming another uid still reaches the real listener, whose SO_PEERCRED tells.
std::string socket_name(const char *transport, uint32_t pid, uint64_t nonce);

// Non-blocking, close-on-exec listening socket bound to the abstract `name`.
gdx_status_t listen_abstract(const std::string &name, int *fd);
// Non-blocking connect to the abstract `name`. GDX_ERR_NO_RESOURCE when the listener's backlog is full (retry),
// GDX_ERR_UNREACHABLE when nothing listens there (the peer is gone or lives in another network namespace).
gdx_status_t connect_abstract(const std::string &name, int *fd);
// accept4 of one pending connection: GDX_OK with *fd, GDX_ERR_NO_RESOURCE when none is pending.
gdx_status_t accept_one(int listen_fd, int *fd);

struct PeerCred {
    pid_t pid = 0;
    uid_t uid = 0;
    gid_t gid = 0;
};
gdx_status_t peer_cred(int fd, PeerCred *out);
// GDX_OK when the process at the other end of `fd` runs as our effective uid; GDX_ERR_ACCESS_DENIED (logged,
// naming both uids) otherwise.
gdx_status_t check_peer_uid(int fd, const char *what, PeerCred *cred);

// One message with up to kMaxFdsPerMsg descriptors (duplicated into the peer; the caller keeps its own).
// GDX_ERR_NO_RESOURCE when the socket buffer is full (nothing sent), GDX_ERR_CONNECTION_RESET when the peer
// is gone.
gdx_status_t send_msg(int fd, const void *buf, size_t len, const int *fds, size_t nfds);
// One message into buf (cap bytes). Received descriptors are close-on-exec and belong to the caller.
// GDX_ERR_NO_RESOURCE when nothing is waiting, GDX_ERR_CONNECTION_RESET at end of stream, GDX_ERR_PROTOCOL
// when the message or its descriptors did not fit (descriptors that did arrive are closed).
gdx_status_t recv_msg(int fd, void *buf, size_t cap, size_t *len, int *fds, size_t max_fds, size_t *nfds);

// True when the socket reports hang-up or an error (the peer process died or closed its end).
bool socket_hung_up(int fd);

} // namespace gdx::tp::shm
