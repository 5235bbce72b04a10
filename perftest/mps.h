// CUDA MPS for a --loopback run whose two processes share one GPU. Without MPS the GPU time-slices between the two
// processes' contexts and every small operation costs a slice (~150 us on an H100, gdx and UCX alike): the figures
// would describe the scheduler, not the software. gdx_perftest therefore starts a private MPS control daemon for
// the run (pipe and log folders of its own, so nothing else on the machine is affected unless it uses them), and
// stops it afterwards; it says so, and says why a figure is not representative when it cannot.
#pragma once

#include <string>

namespace gdx::perf {

class MpsForRun {
  public:
    // mode "auto": start a daemon unless one is reachable already; "no": never (the figures are then flagged).
    // Call before anything initializes CUDA in this process and before the peer is started: both inherit
    // CUDA_MPS_PIPE_DIRECTORY from here. *note: one line for the report's header.
    void start(const std::string &mode, int gpu, std::string *note);
    ~MpsForRun(); // stops the daemon this object started, and removes its folders
    bool active() const { return started_ || already_; }

  private:
    bool started_ = false;
    bool already_ = false;
    std::string ctl_, dir_;
};

} // namespace gdx::perf
