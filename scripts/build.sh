#!/usr/bin/env bash
# Configures and builds one gdx build tree. Usage: scripts/build.sh <dir> [cmake args...]
set -euo pipefail
dir=${1:?usage: scripts/build.sh <build-dir> [cmake args...]}; shift
root=$(cd "$(dirname "$0")/.." && pwd)
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
if [ ! -f "$dir/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$dir" "${gen[@]}" -DGDX_WERROR=ON "$@"
else
  cmake -S "$root" -B "$dir" "$@" >/dev/null
fi
cmake --build "$dir" -j "$(nproc)"
