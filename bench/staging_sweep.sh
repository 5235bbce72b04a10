#!/usr/bin/env bash
# The staging engine's benchmarks for the GPU machine, one non-interactive command, bounded in time (about 6
# minutes with the build tree present; each step has its own timeout and a step that fails or times out is
# reported, not fatal). Raw output of every step goes to one file (also printed).
#
#   bench/staging_sweep.sh [--out FILE] [--build DIR] [--mem cuda|managed|host] [--quick]
#     --out FILE   default bench/results/staging-<UTC date>.txt
#     --build DIR  build tree (default build-gpu, as scripts/device-run.sh); built here if staging_bench is missing
#     --mem KIND   buffer kind on both sides (default cuda; host runs on any machine)
#     --quick      fewer points (a smoke run: about a minute)
#
# Steps (GPU 0 -> GPU 1 when there are two GPUs, GPU 0 -> GPU 0 otherwise):
#   1. pipeline overhead: staging_bench --mode null (the transport moves nothing) at 1M..256M with the defaults,
#      next to the raw D2H rate for the same fragment size (bar: staged >= 90% of it; notes/gpu-machine.md has
#      D2H 47.7 GB/s at 1 MiB, 52.9 GB/s at 4 MiB fragments);
#   2. fragment size x depth at 256 MiB on the null path (what the copy engines want);
#   3. staged GPU -> GPU over tcp loopback between two processes at 1M..256M with the defaults
#      (bar: at 256 MiB >= 2x NCCL's socket transport, 5.2-6.1 GB/s there; wrong_bytes must be 0);
#   4. fragment size x depth at 256 MiB over tcp (what justifies GDX_FRAG_SIZE cuda and GDX_STAGING_DEPTH);
#   5. step 3 again with fault injection (every 3rd fragment denied its direct path, one-buffer pools):
#      wrong_bytes must still be 0.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out="" build=build-gpu mem=cuda quick=0
cmdline="$0 $*"
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --mem) mem="$2"; shift 2 ;;
    --quick) quick=1; shift ;;
    *) echo "usage: $0 [--out FILE] [--build DIR] [--mem cuda|managed|host] [--quick]" >&2; exit 2 ;;
  esac
done
[ -n "$out" ] || out=bench/results/staging-$(date -u +%Y%m%d-%H%M).txt
mkdir -p "$(dirname "$out")"
bin=$build/bench/staging_bench
if [ ! -x "$bin" ]; then
  gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
  { cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGDX_BUILD_UCT=OFF >/dev/null &&
    timeout 600 cmake --build "$build" -j "$(nproc)" --target staging_bench >/dev/null; } ||
    { echo "build of staging_bench failed" >&2; exit 1; }
fi

sizes=1M,4M,16M,64M,256M frags="512K 1M 2M 4M 8M" depths="1 2 4 8" secs=2
if [ $quick = 1 ]; then sizes=1M,16M,256M frags="1M 4M" depths="2 4" secs=1; fi

{
  echo "# staging_sweep: $cmdline"
  echo "# date: $(date -u +%FT%TZ)  host: $(hostname)  git: $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet 2>/dev/null || echo -dirty)"
  nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id --format=csv,noheader 2>/dev/null | sed 's/^/# gpu: /'
} | tee "$out"

step() { # step <title> <timeout s> <command...>
  local title=$1 limit=$2; shift 2
  echo "## $title" | tee -a "$out"
  timeout "$limit" "$@" 2>&1 | tee -a "$out"
  local rc=${PIPESTATUS[0]}
  [ "$rc" = 0 ] || echo "## step ended with status $rc$([ "$rc" = 124 ] && echo ' (timed out)')" | tee -a "$out"
}

step "1. pipeline overhead (null transport), defaults" 120 "$bin" --mode null --mem "$mem" --sizes "$sizes" --seconds "$secs"
for f in $frags; do
  for d in $depths; do
    step "2. null, frag $f depth $d" 30 "$bin" --mode null --mem "$mem" --sizes 256M --frag "$f" --depth "$d" --seconds "$secs"
  done
done
step "3. staged over tcp loopback, two processes, defaults" 180 "$bin" --mode tcp --mem "$mem" --sizes "$sizes" --seconds "$secs"
for f in $frags; do
  for d in $depths; do
    step "4. tcp, frag $f depth $d" 60 "$bin" --mode tcp --mem "$mem" --sizes 256M --frag "$f" --depth "$d" --seconds "$secs"
  done
done
GDX_FAULT_P2P_EVERY=3 GDX_FAULT_POOL_LIMIT=1 step "5. tcp with fault injection (every 3rd fragment, one-buffer pools)" 180 \
  "$bin" --mode tcp --mem "$mem" --sizes "$sizes" --seconds "$secs"
echo "# raw output: $out"
