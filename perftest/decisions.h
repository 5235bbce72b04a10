// gdx_info -t's decision lines for this run's device pair (its GPUs and, over rc, its NIC).
#pragma once

#include <string>
#include <vector>

namespace gdx::perf {

// `gpus`: ordinals of the GPUs whose memory this side uses (empty for host memory); `transport`/`device`: the
// data path's (device "mlx5_0:1" names the NIC over rc). Computed once per process (the topology probe opens
// devices), filtered per call. Never fails: when the topology is unavailable the one line says why.
std::vector<std::string> topology_decisions(const std::vector<int> &gpus, const std::string &transport,
                                            const std::string &device);

// The filter alone, over gdx_info -t's output lines (tests).
std::vector<std::string> filter_decisions(const std::vector<std::string> &all, const std::vector<int> &gpus,
                                          const std::string &transport, const std::string &device);

} // namespace gdx::perf
