#!/usr/bin/env bash
# with_module.sh MODULE CMD...: runs CMD with the module loaded as the running UCX needs it (lib.sh with_loaded;
# in sanitizer builds, its runtime first).
. "$(dirname "$0")/lib.sh"
module="$1"; shift
with_loaded "$module" "$@"
