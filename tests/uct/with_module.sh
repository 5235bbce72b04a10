#!/usr/bin/env bash
# with_module.sh MODULE CMD...: runs CMD with the module preloaded (and, in sanitizer builds, its runtime first).
. "$(dirname "$0")/lib.sh"
module="$1"; shift
LD_PRELOAD="$(preload_of "$module")" exec "$@"
