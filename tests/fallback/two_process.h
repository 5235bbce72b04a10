// Runs the two-process scenario: this process is rank 0, staging_peer (exec'd) is rank 1.
#pragma once

#include "staging_scenario.h"

namespace gdx::test {

struct TwoProcessRun {
    RankResult rank0;
    int peer_exit = -1;     // staging_peer's exit status (0 = its bytes are right), -1 = did not run / killed
    std::string setup_error; // "" when both processes ran
};

// `peer_config`: GDX_* settings for the peer only (rank 0 uses o.config).
TwoProcessRun run_two_process(const RankOptions &o, const std::string &peer_kind,
                              const std::vector<std::pair<std::string, std::string>> &peer_config);

} // namespace gdx::test
