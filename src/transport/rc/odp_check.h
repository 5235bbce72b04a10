// A data check of a device's on-demand paging before gdx trusts it: one loopback RDMA WRITE between two ODP
// memory regions whose packets start off page boundaries, compared byte for byte. Debian sid's 7.2.13 rxe claims
// ODP and moves such packets to or from the start of their page (tests/rxe/README.md, "ODP"); a rung that can
// deliver wrong bytes must not be used, whatever the capability bits say.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <string>

namespace gdx::tp::rc {

struct OdpCheck {
    bool ok = false;     // the write completed and every byte arrived where it belongs
    size_t wrong = 0;    // bytes that differ (when the write completed)
    size_t length = 0;   // bytes written
    std::string result;  // "a loopback RDMA WRITE of ...: exact", "...: 9188 bytes wrong in ...", "ibv_create_qp: ..."
};

// Runs the check on an opened device port: `gid_index` < 0 means InfiniBand (LID `lid`). Waits at most a few
// seconds for the completion (a hang guard, not a measurement).
OdpCheck check_odp_loopback(ibv_context *ctx, ibv_pd *pd, uint8_t port, const ibv_port_attr &pa, int gid_index,
                            const ibv_gid &gid);

// Tests only: the check still runs and is reported, but no longer withdraws ODP (to exercise registrations on
// a device whose ODP the check refuses). Call before the first device is opened.
void trust_odp_without_check_for_test();
bool odp_check_binding();

} // namespace gdx::tp::rc
