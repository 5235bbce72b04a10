// Sections of gdx_info that the layers above core contribute (topology and path decisions).
#pragma once

namespace gdx {
class Context;
}

namespace gdx::tools {
// -t: for each (GPU, RDMA device) pair, the PCIe path class and the path gdx takes, with the reason.
void print_topology(const Context &ctx);
} // namespace gdx::tools
