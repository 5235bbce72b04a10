#include "api/context.h"
#include "info_sections.h"

#include <cstdio>

namespace gdx::tools {

void print_topology(const Context &) {
    // Filled in by the verbs/topology work: until then there is no decision to report.
    std::printf("# Topology and path decisions\n#   not available in this build (no topology layer yet)\n");
}

} // namespace gdx::tools
