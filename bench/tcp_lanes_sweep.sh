#!/usr/bin/env bash
# tcp lanes (GDX_TCP_LANES, GDX_TCP_LANE_THREADS, GDX_TCP_STRIPE_MIN) against what they are for: staged GPU->GPU
# between two processes over tcp loopback, and host->host through the same C API (the socket path alone).
# Every row is staging_bench --mode tcp (two processes, the peer checks every byte); GPU rows run on --gpu 0 ->
# --peer-gpu G (default 0: one GPU; 1 on a two-GPU machine). Run after scripts/device-run.sh (uses build-gpu), or
# with BUILD=build for the host rows on a machine without a GPU.
# Usage: bench/tcp_lanes_sweep.sh OUT-FILE [PEER-GPU] [LANES:THREADS ...]     (about 3 minutes)
#   With LANES:THREADS pairs (e.g. 4:4 8:4 8:8), only those, host and cuda at 16M and 256M, twice each: the
#   comparison behind the defaults.
set -uo pipefail
out=${1:?usage: bench/tcp_lanes_sweep.sh OUT-FILE [PEER-GPU] [LANES:THREADS ...]}
peer=${2:-0}
shift; [ $# -gt 0 ] && shift
matrix=("$@")
root=$(cd "$(dirname "$0")/.." && pwd)
b=${BUILD:-$root/build-gpu}
sb=$b/bench/staging_bench
{
  echo "# command: bench/tcp_lanes_sweep.sh $out $peer ${matrix[*]}"
  echo "# date: $(date -u +%FT%TZ)"
  echo "# machine: $(uname -srm), $(nproc) cores"
  nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/# gpu: /'
  row() { # label, env..., -- staging_bench args...
    local label=$1; shift
    local envs=()
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    echo "## $label"
    env "${envs[@]}" timeout 120 "$sb" --mode tcp --seconds 2 "$@" 2>&1 | grep -E "^tcp|rror|FAIL" | cut -c1-110
  }
  if [ ${#matrix[@]} -gt 0 ]; then
    for rep in 1 2; do
      for lt in "${matrix[@]}"; do
        l=${lt%%:*} t=${lt##*:}
        row "host->host lanes=$l threads=$t (pass $rep)" GDX_TCP_LANES=$l GDX_TCP_LANE_THREADS=$t -- \
          --mem host --sizes 16M,256M
        nvidia-smi -L > /dev/null 2>&1 &&
          row "cuda->cuda lanes=$l threads=$t (pass $rep)" GDX_TCP_LANES=$l GDX_TCP_LANE_THREADS=$t -- \
            --mem cuda --sizes 16M,256M --gpu 0 --peer-gpu "$peer"
      done
    done
  else
  for l in 0 1 2 4 8; do
    row "host->host lanes=$l threads=$((l > 0 ? l : 1))" GDX_TCP_LANES=$l GDX_TCP_LANE_THREADS=$((l > 0 ? l : 1)) -- \
      --mem host --sizes 16M,256M
  done
  if nvidia-smi -L > /dev/null 2>&1; then
    for l in 0 2 4 8; do
      row "cuda->cuda lanes=$l threads=$((l > 0 ? l : 1))" GDX_TCP_LANES=$l GDX_TCP_LANE_THREADS=$((l > 0 ? l : 1)) -- \
        --mem cuda --sizes 16M,64M,256M --gpu 0 --peer-gpu "$peer"
    done
    row "cuda->cuda lanes=8 threads=8 frag 8M depth 8" GDX_TCP_LANES=8 GDX_TCP_LANE_THREADS=8 -- \
      --mem cuda --sizes 64M,256M --frag 8M --depth 8 --gpu 0 --peer-gpu "$peer"
    row "cuda->cuda lanes=4 threads=4 stripe_min 1M" GDX_TCP_LANES=4 GDX_TCP_LANE_THREADS=4 GDX_TCP_STRIPE_MIN=1M -- \
      --mem cuda --sizes 64M,256M --gpu 0 --peer-gpu "$peer"
    row "cuda->cuda defaults" -- --mem cuda --sizes 1M,16M,256M --gpu 0 --peer-gpu "$peer"
  fi
  fi
} > "$out" 2>&1
cat "$out"
