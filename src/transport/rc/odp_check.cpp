#include "transport/rc/odp_check.h"

#include "core/log.h"
#include "transport/rc/device.h"
#include "transport/rc/qp_state.h"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <sys/mman.h>
#include <thread>
#include <unistd.h>

namespace gdx::tp::rc {

namespace {
std::atomic<bool> g_binding{true};

// Everything the check creates, released in reverse order whatever step failed.
struct Res {
    ibv_cq *cq = nullptr;
    ibv_qp *qp[2] = {nullptr, nullptr};
    ibv_mr *mr[2] = {nullptr, nullptr};
    void *buf[2] = {MAP_FAILED, MAP_FAILED};
    size_t len = 0;
    std::string cleanup_err;
    ~Res() {
        for (ibv_qp *q : qp)
            if (q != nullptr && ibv_destroy_qp(q) != 0) cleanup_err += " ibv_destroy_qp: " + errno_name(errno);
        if (cq != nullptr && ibv_destroy_cq(cq) != 0) cleanup_err += " ibv_destroy_cq: " + errno_name(errno);
        for (ibv_mr *m : mr)
            if (m != nullptr && ibv_dereg_mr(m) != 0) cleanup_err += " ibv_dereg_mr: " + errno_name(errno);
        for (void *b : buf)
            if (b != MAP_FAILED && munmap(b, len) != 0) cleanup_err += " munmap: " + errno_name(errno);
        if (!cleanup_err.empty()) GDX_DEBUG(kComp, "ODP check cleanup:%s", cleanup_err.c_str());
    }
};

std::string failed(const char *what, int err) { return std::string(what) + ": " + errno_name(err ? err : EIO); }

// RESET -> INIT -> RTR -> RTS towards `dest` (a QP of this same port).
std::string connect_qp(ibv_qp *qp, uint32_t dest, uint8_t port, const ibv_port_attr &pa, int gid_index,
                       const ibv_gid &gid) {
    if (int rc = qp_to_init(qp, port, IBV_ACCESS_REMOTE_WRITE)) return failed("ibv_modify_qp(INIT)", rc);
    QpPath path;
    path.port = port;
    path.mtu = pa.active_mtu;
    path.dest_qpn = dest;
    path.global = gid_index >= 0;
    path.dgid = gid;
    path.sgid_index = static_cast<uint8_t>(gid_index >= 0 ? gid_index : 0);
    path.hop_limit = 1;
    path.dlid = pa.lid;
    if (int rc = qp_to_rtr(qp, path)) return failed("ibv_modify_qp(RTR)", rc);
    if (int rc = qp_to_rts(qp, 14, 6, 0, 1)) return failed("ibv_modify_qp(RTS)", rc); // retry 7 = forever on rxe
    return "";
}
} // namespace

void trust_odp_without_check_for_test() { g_binding = false; }
bool odp_check_binding() { return g_binding; }

OdpCheck check_odp_loopback(ibv_context *ctx, ibv_pd *pd, uint8_t port, const ibv_port_attr &pa, int gid_index,
                            const ibv_gid &gid) {
    OdpCheck c;
    auto fail = [&c](std::string why) {
        c.result = std::move(why);
        return c;
    };
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    // Odd offsets on both sides, two pages long: whatever the MTU, packets start off page boundaries.
    const size_t src_off = 1000, dst_off = 1032;
    c.length = 2 * page;
    Res r;
    r.len = 4 * page;
    for (int i = 0; i < 2; ++i) {
        r.buf[i] = mmap(nullptr, r.len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (r.buf[i] == MAP_FAILED) return fail(failed("mmap", errno));
    }
    auto *src = static_cast<uint8_t *>(r.buf[0]), *dst = static_cast<uint8_t *>(r.buf[1]);
    for (size_t i = 0; i < r.len; ++i) src[i] = static_cast<uint8_t>(i * 131 + (i >> 9) + 7);
    const int access[2] = {IBV_ACCESS_LOCAL_WRITE, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE};
    for (int i = 0; i < 2; ++i) {
        r.mr[i] = ibv_reg_mr(pd, r.buf[i], r.len, access[i] | IBV_ACCESS_ON_DEMAND);
        if (r.mr[i] == nullptr) return fail(failed("ibv_reg_mr ON_DEMAND", errno));
    }
    r.cq = ibv_create_cq(ctx, 4, nullptr, nullptr, 0);
    if (r.cq == nullptr) return fail(failed("ibv_create_cq", errno));
    for (ibv_qp *&q : r.qp) {
        ibv_qp_init_attr qa{};
        qa.send_cq = qa.recv_cq = r.cq;
        qa.qp_type = IBV_QPT_RC;
        qa.cap.max_send_wr = qa.cap.max_recv_wr = 1;
        qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
        q = ibv_create_qp(pd, &qa);
        if (q == nullptr) return fail(failed("ibv_create_qp(RC)", errno));
    }
    for (int i = 0; i < 2; ++i) {
        std::string e = connect_qp(r.qp[i], r.qp[1 - i]->qp_num, port, pa, gid_index, gid);
        if (!e.empty()) return fail(e);
    }
    ibv_sge sge{reinterpret_cast<uintptr_t>(src + src_off), static_cast<uint32_t>(c.length), r.mr[0]->lkey};
    ibv_send_wr wr{}, *bad = nullptr;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(dst + dst_off);
    wr.wr.rdma.rkey = r.mr[1]->rkey;
    if (int rc = ibv_post_send(r.qp[0], &wr, &bad)) return fail(failed("ibv_post_send(RDMA WRITE)", rc));
    ibv_wc wc{};
    int n = 0;
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while ((n = ibv_poll_cq(r.cq, 1, &wc)) == 0 && std::chrono::steady_clock::now() < end)
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    if (n < 0) return fail("ibv_poll_cq failed");
    if (n == 0) return fail("no completion of the loopback RDMA WRITE within 10 s");
    if (wc.status != IBV_WC_SUCCESS)
        return fail(std::string("the loopback RDMA WRITE completed with ") + ibv_wc_status_str(wc.status));
    size_t first_bad = SIZE_MAX;
    for (size_t i = 0; i < r.len; ++i) {
        bool in = i >= dst_off && i < dst_off + c.length;
        uint8_t want = in ? src[src_off + (i - dst_off)] : 0;
        if (dst[i] != want) {
            ++c.wrong;
            if (first_bad == SIZE_MAX) first_bad = i;
        }
    }
    c.ok = c.wrong == 0;
    const std::string what = "a loopback RDMA WRITE of " + std::to_string(c.length) +
                             " bytes between ODP MRs at page offsets " + std::to_string(src_off) + " -> " +
                             std::to_string(dst_off) + ", MTU " + std::to_string(128 << pa.active_mtu);
    c.result = c.ok ? what + ": exact"
                    : what + ": " + std::to_string(c.wrong) + " bytes wrong in the " + std::to_string(r.len) +
                          "-byte target region, the first at page offset " + std::to_string(first_bad % page);
    return c;
}

} // namespace gdx::tp::rc
