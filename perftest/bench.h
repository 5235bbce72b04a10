// The three tests, both sides. The client (initiator) drives: it announces each (test, size) with BEGIN, moves
// the data, and closes it with END; the server (target) progresses, echoes put_lat's pings, and fills or checks
// its buffer when --validate asks. Buffers hold two regions of the largest size: [0, S) is the source of what a
// side sends, [S, 2S) where the ping-pong lands.
//
// put_bw / get_bw: a window of gdx_put / gdx_get requests in flight; an operation counts once its request
// completed (its bytes are in the destination buffer). put_lat: a gdx_put_notify ping-pong; one way is a put
// whose notification the peer has seen (so its bytes are there), half a round trip.
#pragma once

#include "control.h"
#include "datapath.h"
#include "memory.h"
#include "options.h"
#include "report.h"

#include <string>

namespace gdx::perf {

uint64_t iteration_seed(Test t, uint64_t size, uint64_t iteration);

struct PairContext {
    const Options &opt;
    Control &ctl;
    DataPath &dp;
    Buffer &buf;
    size_t region;                // the largest size: offset of the landing region
};

// Outcome of one (test, size) on the client.
struct TestOutcome {
    int exit_code = 0;            // 0 ok, 1 failure, 3 validation mismatch
    std::string message;          // why, when not 0
    Row row;
};

TestOutcome client_test(PairContext &c, Test t, uint64_t size);
// Serves one BEGIN (already received, `begin`) until END. Returns GDX_OK or the failure (*why).
gdx_status_t server_test(PairContext &c, const Message &begin, std::string *why);

} // namespace gdx::perf
