#include "transport/rc/qp_state.h"

namespace gdx::tp::rc {

int qp_to_init(ibv_qp *qp, uint8_t port, int access_flags) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = port;
    a.qp_access_flags = static_cast<unsigned>(access_flags);
    return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

int qp_to_rtr(ibv_qp *qp, const QpPath &p) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = p.mtu;
    a.dest_qp_num = p.dest_qpn;
    a.rq_psn = p.rq_psn;
    a.max_dest_rd_atomic = p.max_dest_rd_atomic;
    a.min_rnr_timer = 12; // 0.64 ms; credits make RNR a bug, not a state
    a.ah_attr.port_num = p.port;
    if (p.global) {
        a.ah_attr.is_global = 1;
        a.ah_attr.grh.dgid = p.dgid;
        a.ah_attr.grh.sgid_index = p.sgid_index;
        a.ah_attr.grh.hop_limit = p.hop_limit;
    } else {
        a.ah_attr.dlid = p.dlid;
    }
    return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
}

int qp_to_rts(ibv_qp *qp, uint8_t timeout, uint8_t retry_cnt, uint32_t sq_psn, uint8_t max_rd_atomic) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = timeout;
    a.retry_cnt = retry_cnt;
    a.rnr_retry = 6; // bounded: never expected (credits), never a hang
    a.sq_psn = sq_psn;
    a.max_rd_atomic = max_rd_atomic;
    return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                     IBV_QP_MAX_QP_RD_ATOMIC);
}

} // namespace gdx::tp::rc
