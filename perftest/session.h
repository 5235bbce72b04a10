// One gdx_perftest connection from HELLO to BYE: the client runs every memory pair (allocate, open the data
// path, exchange addresses and keys, run the tests, report rows), the server mirrors it.
#pragma once

#include "control.h"
#include "options.h"
#include "report.h"

#include <string>

namespace gdx::perf {

// Checks that this machine can hold memory of kind `m` (a GPU for the cuda kinds) before anything connects.
bool memory_available_here(const MemSpec &m, std::string *why);

// Both return the process exit status (0, 1, or 3 for a validation mismatch); failures are printed.
int run_client(const Options &opt, Control &ctl, Reporter &rep);
int run_server(Options opt, Control &ctl, bool quiet);

} // namespace gdx::perf
