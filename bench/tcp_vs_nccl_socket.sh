#!/usr/bin/env bash
# Issue #6's TCP bar in one run on one machine: staged GPU->GPU over tcp loopback through gdx (staging_bench
# --mode tcp, two processes, the peer checks every byte) next to NCCL's socket transport (nccl_anchor --mode
# socket: NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1), GPU A -> GPU B, alternated ROUNDS times so both see the same
# machine state. Needs two GPUs (NCCL will not put two ranks on one GPU) and a build with bench/nccl_anchor.
# Usage: bench/tcp_vs_nccl_socket.sh OUT-FILE [BUILD-DIR] [A,B] [ROUNDS]        (about 1 minute per round)
set -uo pipefail
out=${1:?usage: bench/tcp_vs_nccl_socket.sh OUT-FILE [BUILD-DIR] [A,B] [ROUNDS]}
b=${2:-build-gpu} gpus=${3:-0,1} rounds=${4:-3}
ga=${gpus%,*} gb=${gpus#*,}
{
  echo "# command: bench/tcp_vs_nccl_socket.sh $out $b $gpus $rounds"
  echo "# date: $(date -u +%FT%TZ)"
  echo "# machine: $(uname -srm), $(nproc) cores; gdx $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader 2>&1 | sed 's/^/# gpu: /'
  for r in $(seq "$rounds"); do
    echo "## round $r: nccl socket"
    timeout 120 "$b/bench/nccl_anchor" --mode socket --gpus "$gpus" 2>&1 | grep -E "256MiB|16MiB|skipped|rror"
    echo "## round $r: gdx staged over tcp (defaults)"
    timeout 120 "$b/bench/staging_bench" --mode tcp --mem cuda --sizes 16M,256M --gpu "$ga" --peer-gpu "$gb" \
      --seconds 3 2>&1 | grep -E "^tcp|rror" | cut -c1-110
  done
} > "$out" 2>&1
cat "$out"
