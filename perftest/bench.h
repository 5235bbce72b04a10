// The five tests, both sides. The client (initiator) drives: it announces each (test, size) with BEGIN, moves
// the data, and closes it with END; the server (target) progresses, answers active messages, and fills or
// checks its buffer when --validate asks. Buffers hold two regions of the largest size: [0, S) is the source
// of what a side sends, [S, 2S) where the ping-pong tests land.
#pragma once

#include "control.h"
#include "datapath.h"
#include "memory.h"
#include "options.h"
#include "report.h"

#include <string>

namespace gdx::perf {

uint64_t iteration_seed(Test t, uint64_t size, uint64_t iteration);

// State shared with the active-message callback (runs inside DataPath::progress()).
struct AmState {
    Test test = Test::PutBw;
    uint64_t size = 0, window = 1;
    bool validate = false;
    Buffer *buf = nullptr;
    size_t region = 0;            // S: offset of the landing region
    uint64_t data_count = 0;      // am_bw messages received
    uint64_t ack_value = 0;       // last ACK received (client)
    uint64_t pings = 0, pongs = 0; // ping-pong messages received
    uint64_t last_value = 0;      // payload of the last put_lat signal
    std::string mismatch;         // first validation failure seen in a handler
    std::string error;            // a copy into the buffer failed
    void reset(Test t, uint64_t s, uint64_t w, bool v) {
        test = t;
        size = s;
        window = w;
        validate = v;
        data_count = ack_value = pings = pongs = last_value = 0;
        mismatch.clear();
        error.clear();
    }
};
void am_callback(void *arg, uint8_t id, const void *data, size_t len);

struct PairContext {
    const Options &opt;
    Control &ctl;
    DataPath &dp;
    Buffer &buf;
    AmState am;
    size_t region;                // the largest size: offset of the landing region
};

// Outcome of one (test, size) on the client.
struct TestOutcome {
    int exit_code = 0;            // 0 ok, 1 failure, 3 validation mismatch
    std::string message;          // why, when not 0
    bool skipped = false;         // not applicable (e.g. larger than the transport's largest active message)
    Row row;
};

TestOutcome client_test(PairContext &c, Test t, uint64_t size);
// Serves one BEGIN (already received, `begin`) until END. Returns GDX_OK or the failure (*why).
gdx_status_t server_test(PairContext &c, const Message &begin, std::string *why);

} // namespace gdx::perf
