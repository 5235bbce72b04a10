#!/usr/bin/env bash
# The GPU test set and GPU benchmarks, for a machine with an NVIDIA GPU (the device machine). Builds in
# build-gpu, runs `ctest -L gpu` (and the cpu set, which also exercises the CUDA rows where a GPU is present),
# then every bench that exists; raw output goes to $1 (default: bench/results/gpu-<date>).
# Usage: scripts/test-gpu.sh [out-dir] [--tests-only|--bench-only]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=${1:-bench/results/gpu-$(date -u +%Y%m%d)}
mode=${2:-all}
mkdir -p "$out"
{
  echo "# command: scripts/test-gpu.sh $*"
  echo "# date: $(date -u +%FT%TZ)"
  echo "# machine: $(uname -srm), $(nproc) cores"
  nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id --format=csv,noheader 2>&1 | sed 's/^/# gpu: /'
} > "$out/header.txt"
cat "$out/header.txt"
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S . -B build-gpu "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGDX_BUILD_UCT=OFF > "$out/build.log" 2>&1 &&
  cmake --build build-gpu -j "$(nproc)" >> "$out/build.log" 2>&1 || { tail -50 "$out/build.log"; exit 1; }
rc=0
if [ "$mode" != --bench-only ]; then
  ctest --test-dir build-gpu -L 'gpu|cpu' --output-on-failure -j4 --timeout 600 2>&1 | tee "$out/ctest.txt" | tail -40
  [ "${PIPESTATUS[0]}" = 0 ] || rc=1
fi
exit $rc
