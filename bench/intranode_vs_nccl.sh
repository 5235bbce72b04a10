#!/usr/bin/env bash
# gdx's intra-node paths and NCCL side by side, GPU A -> GPU B, in one go, printed as one table.
#   bench/intranode_vs_nccl.sh [BUILD_DIR] [GPUS]        defaults: build 0,1
# Runs intranode_bench (shm host->host, cuda_ipc P2P), gdx_perftest -x shm with GPU memory on both sides (staged:
# gdx_put -> staging engine -> shm, the path users take), then nccl_anchor in its p2p,
# shm (NCCL_P2P_DISABLE=1) and socket (+NCCL_SHM_DISABLE=1) modes. Every stage runs under `timeout`, so the
# whole run is bounded (< 4 minutes); no interaction. Raw output goes to
# bench/results/intranode-vs-nccl-<UTC time>.txt, with the table appended at its end.
set -u
cd "$(dirname "$0")/.."
BUILD=${1:-build}
GPUS=${2:-0,1}
mkdir -p bench/results
OUT=bench/results/intranode-vs-nccl-$(date -u +%Y%m%d-%H%M%S).txt
for b in bench/intranode_bench bench/nccl_anchor perftest/gdx_perftest; do
  [ -x "$BUILD/$b" ] || { echo "missing $BUILD/$b: build first (ninja -C $BUILD ${b#*/})" >&2; exit 2; }
done

{
  echo "# $0 $*  ($(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -n), git $(git rev-parse --short HEAD 2>/dev/null))"
  nvidia-smi --query-gpu=index,name,pci.bus_id --format=csv,noheader 2>/dev/null | sed 's/^/# gpu /'
  nvidia-smi topo -m 2>/dev/null | sed 's/^/# topo /' | head -6
  echo "# yama ptrace_scope: $(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo absent)"
} > "$OUT"

stage() { # stage <seconds> <command...>
  local limit=$1
  shift
  echo "## $*" >> "$OUT"
  timeout -k 5 "$limit" "$@" >> "$OUT" 2>&1
  local rc=$?
  [ $rc -eq 0 ] || echo "## exit status $rc$([ $rc -eq 124 ] && echo ' (timed out)')" >> "$OUT"
  echo "stage done (rc $rc): $*" >&2
}

stage 130 "$BUILD/bench/intranode_bench" --mode all --gpus "$GPUS"
# Staged GPU -> GPU through the product: gdx_perftest's CSV rows, rewritten as table lines like intranode_bench's.
staged_rows() {
  "$BUILD/perftest/gdx_perftest" --loopback -x shm -m "cuda:${GPUS%,*}" -M "cuda:${GPUS#*,}" -t put_bw,put_lat \
    -s 8,1M,256M --validate --csv --no-decisions |
    awk -F, '$1 ~ /^put_/ { s = $2 == 8 ? "8B" : ($2 == 1048576 ? "1MiB" : ($2 == 268435456 ? "256MiB" : $2 "B"))
                            if ($1 == "put_bw" && $2 > 8) printf "| staged %s | bw | %s | %s GB/s |\n", $10, s, $12
                            if ($1 == "put_lat" && $2 == 8) printf "| staged %s | lat | %s | %s us |\n", $10, s, $16 }'
}
export BUILD GPUS
export -f staged_rows
stage 120 bash -c staged_rows
for m in p2p shm socket; do
  stage 30 "$BUILD/bench/nccl_anchor" --mode "$m" --gpus "$GPUS"
done

# One table: rows = metric and size, columns = path. Bars are the intra-node issue's targets on H200x2.
awk -F'|' '
  function trim(s) { gsub(/^ +| +$/, "", s); return s }
  /^\| / && $3 !~ /metric/ {
    path = trim($2); metric = trim($3); size = trim($4); val = trim($5)
    split(val, vu, " "); v = vu[1]
    if (metric == "skipped") next
    m = (metric ~ /lat/) ? "lat" : (metric ~ /bw/ ? "bw" : metric)
    if (path ~ /^cuda_ipc/) col = "gdx_p2p"
    else if (path ~ /^staged/) col = "gdx_staged"
    else if (path == "shm host->host") { if (metric ~ /get/) next; col = "gdx_shm_host" }
    else if (path == "shm host->host ring") { if (metric ~ /get/) next; col = "gdx_shm_ring" }
    else if (path == "nccl p2p") col = "nccl_p2p"
    else if (path == "nccl shm") col = "nccl_shm"
    else if (path == "nccl socket") col = "nccl_socket"
    else next
    key = m " " size
    if (!(key in seen)) { seen[key] = 1; order[++n] = key }
    cell[key, col] = v
  }
  END {
    bar["lat 8B"] = "p2p<=5us staged<=8us"; bar["lat 1KiB"] = "p2p<=5us"
    bar["bw 1MiB"] = "p2p>=220 staged>=45"; bar["bw 256MiB"] = "p2p>=390 staged>=48"
    bar["bw 16MiB"] = "shm host>=14.4 (1.5x UCX cma 9.6)"
    ncol = split("gdx_p2p nccl_p2p gdx_staged nccl_shm nccl_socket gdx_shm_host gdx_shm_ring", cols, " ")
    printf "\n| %-12s |", "metric"
    for (c = 1; c <= ncol; c++) printf " %12s |", cols[c]
    printf " %s\n", "bar (H200x2)"
    for (i = 1; i <= n; i++) {
      k = order[i]; printf "| %-12s |", k
      for (c = 1; c <= ncol; c++) printf " %12s |", ((k, cols[c]) in cell) ? cell[k, cols[c]] : "-"
      printf " %s\n", (k in bar) ? bar[k] : ""
    }
    print "(lat: us, half round trip as the receiver sees it; bw: GB/s, receiver view)"
  }' "$OUT" | tee -a "$OUT"
echo "raw output: $OUT"
