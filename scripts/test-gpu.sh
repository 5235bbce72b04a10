#!/usr/bin/env bash
# The GPU test set and GPU benchmarks, for a machine with an NVIDIA GPU (the device machine). Builds in build-gpu,
# runs `ctest -L gpu` (and the cpu set, which also exercises the CUDA rows where a GPU is present), then the GPU
# benches; raw output goes to OUT-DIR (default: bench/results/gpu-<date>), one file per step.
#
# Usage: scripts/test-gpu.sh [OUT-DIR] [--tests-only|--bench-only] [--ucx CARRY-DIR] [--no-cpu]
#   --ucx CARRY-DIR   Debian's UCX 1.13.1 as `scripts/carry-ucx.sh download` packed it: unpacked to /tmp/ucx and
#                     used to build libuct_gdx.so.0 too, so the uct.gpu.* checks (UCP and Open MPI over gdx with
#                     CUDA buffers) run with the rest. Without it the module is not built (the machine's own UCX
#                     has no headers) and those checks are not registered.
#   --no-cpu          skip the cpu set (it has run in CI; saves a few minutes of device time)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out="" mode=all carry="" cpu=1
while [ $# -gt 0 ]; do
  case "$1" in
    --tests-only|--bench-only) mode=$1 ;;
    --ucx) carry=$2; shift ;;
    --no-cpu) cpu=0 ;;
    -*) echo "test-gpu.sh: unknown option $1" >&2; exit 2 ;;
    *) out=$1 ;;
  esac
  shift
done
out=${out:-bench/results/gpu-$(date -u +%Y%m%d)}
mkdir -p "$out"
{
  echo "# command: scripts/test-gpu.sh $out $mode ${carry:+--ucx $carry} $([ $cpu = 0 ] && echo --no-cpu)"
  echo "# date: $(date -u +%FT%TZ)"
  echo "# machine: $(uname -srm), $(nproc) cores"
  nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id --format=csv,noheader 2>&1 | sed 's/^/# gpu: /'
} > "$out/header.txt"
cat "$out/header.txt"

uct=(-DGDX_BUILD_UCT=OFF)
if [ -n "$carry" ]; then
  scripts/carry-ucx.sh unpack "$carry" /tmp/ucx > "$out/carry-ucx.log" 2>&1 || { cat "$out/carry-ucx.log"; exit 1; }
  # shellcheck disable=SC1091
  . /tmp/ucx/env.sh
  read -r -a uct <<< "$CARRIED_UCX_CMAKE_ARGS"
fi
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
t0=$(date +%s)
cmake -S . -B build-gpu "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${uct[@]}" > "$out/build.log" 2>&1 &&
  cmake --build build-gpu -j "$(nproc)" >> "$out/build.log" 2>&1 || { tail -50 "$out/build.log"; exit 1; }
echo "# built in $(( $(date +%s) - t0 )) s"

rc=0
if [ "$mode" != --bench-only ]; then
  labels=gpu; [ $cpu = 1 ] && labels='gpu|cpu'
  ctest --test-dir build-gpu -L "$labels" --output-on-failure -j4 --timeout 600 > "$out/ctest.txt" 2>&1 || rc=1
  grep -E "tests passed|Total Test time|\*\*\*|Failed|SKIP" "$out/ctest.txt" | grep -v "^\s*$" | tail -40
  # What the hooks and the churn printed (the notes of the memtype cases).
  build-gpu/tests/memtype/test_memtype_gpu --gtest_filter='GpuOnly.FreeHooks*:Validation/Churn.*' \
    > "$out/memtype-hooks.txt" 2>&1 || rc=1
  grep -E "^\[ (hooks|churn) \]|FAILED|PASSED" "$out/memtype-hooks.txt"
fi
if [ "$mode" != --tests-only ]; then
  build-gpu/bench/memtype_bench > "$out/memtype-bench.txt" 2>&1 || rc=1
  grep -E "^# CUDA free|cuda-device |^# raw" "$out/memtype-bench.txt"
  for stage in local remote both; do
    build-gpu/bench/staging_bench --mode null --mem cuda --stage "$stage" --sizes 4M,16M,64M,256M --seconds 2
  done > "$out/staging-null-stages.txt" 2>&1 || rc=1
  grep -E "^null" "$out/staging-null-stages.txt" | cut -c1-90
fi
exit $rc
