// The RC queue pair's way from RESET to RTS, shared by the endpoints (ep.cpp) and the ODP data check
// (odp_check.cpp): one place for the attribute masks verbs requires at each transition.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

namespace gdx::tp::rc {

// Where the queue pair sends: the peer's QP and, on RoCE, its GID (else its LID).
struct QpPath {
    uint8_t port = 1;
    ibv_mtu mtu = IBV_MTU_1024;
    uint32_t dest_qpn = 0, rq_psn = 0;
    bool global = false; // RoCE: route by GID
    ibv_gid dgid{};
    uint8_t sgid_index = 0, hop_limit = 64;
    uint16_t dlid = 0;
    uint8_t max_dest_rd_atomic = 1;
};

// Each returns 0 or ibv_modify_qp's error number.
int qp_to_init(ibv_qp *qp, uint8_t port, int access_flags);
int qp_to_rtr(ibv_qp *qp, const QpPath &path);
int qp_to_rts(ibv_qp *qp, uint8_t timeout, uint8_t retry_cnt, uint32_t sq_psn, uint8_t max_rd_atomic);

} // namespace gdx::tp::rc
