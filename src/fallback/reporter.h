// Reporter: the staging engine's counters (Stats) and the one way a refused control message is reported (counted
// in Stats::protocol_errors and logged at WARN). Owned by the Engine, which reads the counters for Engine::stats();
// every part that counts something or refuses a peer's message is handed it.
#pragma once

#include "core/log.h"
#include "fallback/path_report.h"

#include <string>

namespace gdx::fb {

inline constexpr const char *kComp = "fallback"; // the staging engine's log component

class Reporter {
  public:
    Stats &stats() { return stats_; }
    const Stats &stats() const { return stats_; }
    // A control message from a peer was refused: `what` names it ("FILLED"), `why` says what was wrong.
    void protocol_error(const char *what, const std::string &why) {
        ++stats_.protocol_errors;
        GDX_WARN(kComp, "refused %s from a peer: %s", what, why.c_str());
    }

  private:
    Stats stats_;
};

} // namespace gdx::fb
