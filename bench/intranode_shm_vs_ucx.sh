#!/usr/bin/env bash
# Host -> host shared-memory bandwidth at 16 MiB: gdx shm (CMA split copy, and the ring copy) against UCX's sm
# transports (cma) with ucx_perftest, interleaved run by run so both see the same machine load. Runs anywhere (no
# GPU); each run is bounded by `timeout`.
#   bench/intranode_shm_vs_ucx.sh [BUILD_DIR] [RUNS]      defaults: build 5
# Prints every run with the load average and the median per column; save it as bench/results/shm-<date>.txt.
set -u
cd "$(dirname "$0")/.."
BUILD=${1:-build}
RUNS=${2:-5}
SIZE=16777216
PORT=$((20000 + RANDOM % 20000))

ucx() { # ucx <test> -> GB/s (receiver's final average), or "-" without ucx_perftest
  command -v ucx_perftest >/dev/null || { echo -; return; }
  UCX_TLS=sm,self timeout 60 ucx_perftest -t "$1" -s $SIZE -n 300 -p $PORT >/dev/null 2>&1 &
  sleep 0.5
  UCX_TLS=sm,self timeout 60 ucx_perftest 127.0.0.1 -t "$1" -s $SIZE -n 300 -p $PORT 2>/dev/null |
    awk '/Final/ { printf "%.2f", $6 / 1000; found = 1 } END { if (!found) printf "-" }'
  wait
}

echo "# $0 $*  ($(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -n), $(nproc) CPUs, git $(git rev-parse --short HEAD 2>/dev/null))"
echo "# yama ptrace_scope: $(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo absent); UCX $(ucx_info -v 2>/dev/null | awk 'NR==1{print $3}')"
echo "# GB/s at 16 MiB; gdx: intranode_bench --mode shm --size $SIZE (window 4, median of 3 per run); ucx: ucx_perftest UCX_TLS=sm,self -n 300"
printf "%-4s %-6s %9s %9s %9s %9s %11s %11s\n" run load gdx_put gdx_get ring_put ring_get ucx_tag_bw ucx_put_bw
rows=()
for i in $(seq 1 "$RUNS"); do
  load=$(cut -d' ' -f1 /proc/loadavg)
  g=$(timeout 120 "$BUILD/bench/intranode_bench" --mode shm --size $SIZE | awk -F'|' '
      /put bw|get bw/ { split($5, a, " "); k = ($2 ~ /ring/ ? "r" : "c") ($3 ~ /put/ ? "p" : "g"); v[k] = a[1] }
      END { printf "%s %s %s %s", v["cp"], v["cg"], v["rp"], v["rg"] }')
  t=$(ucx tag_bw)
  p=$(ucx ucp_put_bw)
  row=$(printf "%-4s %-6s %9s %9s %9s %9s %11s %11s" "$i" "$load" $g "$t" "$p")
  echo "$row"
  rows+=("$row")
done
printf '%s\n' "${rows[@]}" | awk '
  { for (c = 3; c <= 8; c++) col[c, NR] = $c; n = NR }
  END {
    printf "%-11s", "median"
    for (c = 3; c <= 8; c++) {
      m = 0; for (r = 1; r <= n; r++) if (col[c, r] != "-") v[++m] = col[c, r] + 0
      for (a = 1; a <= m; a++) for (b = a + 1; b <= m; b++) if (v[b] < v[a]) { t = v[a]; v[a] = v[b]; v[b] = t }
      printf (c < 7 ? " %9s" : " %11s"), (m ? sprintf("%.2f", v[int((m + 1) / 2)]) : "-")
    }
    printf "\n"
  }'
