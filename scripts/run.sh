#!/usr/bin/env bash
# The main job, from a fresh Debian 12 machine (as root): installs what is missing, builds gdx, prints what gdx
# sees on this machine, and runs a loopback bandwidth/latency sweep (host memory; GPU memory too when a GPU is
# present), printing which path carried the bytes.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/setup.sh
scripts/build.sh build
build/tools/gdx_info -v -d -t
if [ -x build/perftest/gdx_perftest ]; then
  build/perftest/gdx_perftest --loopback "$@"
fi
