#!/usr/bin/env bash
# rxe_bench.sh <build-dir> [rounds]: gdx rc put bandwidth and active-message latency against perftest's
# ib_write_bw and ib_send_lat on the same soft-RoCE device, in one guest boot, alternating the tools in each
# round so both see the same conditions. From the host it boots the guest (tests/rxe/run-in-rxe-vm.sh) and
# writes the output, headed by the command, machine and date, to bench/results/rxe-<date>.txt.
#
# Measures (defaults: 64 KiB x 2000 at depth 128; 8 B x 2000 for latency; 3 rounds):
#   ib_write_bw -d rxe0 -x 0 -s 65536 -n 2000 -t 128 --report_gbits   vs  rxe_bench put_bw -s 65536 -n 2000 -t 128
#   ib_send_lat -d rxe0 -x 0 -s 8 -n 2000                              vs  rxe_bench am_lat -s 8 -n 2000
#   rcache_bench (registration cache hit vs ibv_reg_mr + ibv_dereg_mr)
# Bar: gdx put bandwidth >= 0.9 x ib_write_bw in the same run (the summary line says whether it holds).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
[ $# -ge 1 ] || { echo "usage: $0 <build-dir> [rounds]" >&2; exit 2; }
build=$(cd -- "$1" && pwd -P)
rounds=${2:-3}
SIZE=${RXE_BENCH_SIZE:-65536} ITERS=${RXE_BENCH_ITERS:-2000} DEPTH=${RXE_BENCH_DEPTH:-128}
LSIZE=${RXE_BENCH_LAT_SIZE:-8} LITERS=${RXE_BENCH_LAT_ITERS:-2000}
bench=$build/tests/rc/rxe_bench rcb=$build/tests/rc/rcache_bench
[ -x "$bench" ] && [ -x "$rcb" ] || { echo "build $build first (targets rxe_bench, rcache_bench)" >&2; exit 2; }

if [ "${RXE_VM_GUEST:-}" != 1 ]; then
  date=$(date -u +%Y-%m-%d)
  out=$root/bench/results/rxe-$date.txt
  mkdir -p "$root/bench/results"
  tmp=$(mktemp)
  {
    echo "# gdx rc on soft-RoCE vs perftest, one guest boot"
    echo "# command: bench/rxe_bench.sh $1 $rounds   (git $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'))"
    echo "# date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "# host: $(uname -sr), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
    echo "# guest: qemu $(qemu-system-x86_64 --version | head -1 | awk '{print $4}') TCG -smp ${RXE_VM_SMP:-2} -m ${RXE_VM_MEM:-1G}, kernel $(cat /var/tmp/gdx-rxe-vm/kernel.version 2>/dev/null || echo '?'), rxe0 on dummy0 MTU ${RXE_VM_MTU:-1500}"
    echo "# perftest $(dpkg-query -W -f='${Version}' perftest 2>/dev/null), rdma-core $(dpkg-query -W -f='${Version}' rdma-core 2>/dev/null)"
    echo
  } > "$tmp"
  rc=0
  RXE_VM_TIMEOUT=${RXE_VM_TIMEOUT:-900} RXE_VM_RW="$root/bench/results" "$root/tests/rxe/run-in-rxe-vm.sh" "$0" "$@" | tee -a "$tmp" || rc=$?
  if [ "$rc" = 0 ]; then mv "$tmp" "$out"; echo "written: $out"; else rm -f "$tmp"; fi
  exit "$rc"
fi

# ---- in the guest -------------------------------------------------------------------------------------------
dev=rxe0
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

pair() { # pair NAME SERVER-CMD... -- CLIENT-CMD...: server in the background, client retried until it connects
  local name=$1; shift
  local srv=() cli=()
  while [ "$1" != -- ]; do srv+=("$1"); shift; done
  shift
  cli=("$@")
  "${srv[@]}" > "$log/$name.srv" 2>&1 &
  local spid=$! i
  for ((i = 0; i < 40; i++)); do
    sleep 0.25
    if "${cli[@]}" > "$log/$name.cli" 2>&1; then break; fi
  done
  wait "$spid" || true
}

pt_bw=() pt_lat=() gx_bw=() gx_lat=()
for ((r = 1; r <= rounds; r++)); do
  echo "## round $r"
  pair wbw ib_write_bw -d $dev -x 0 -s "$SIZE" -n "$ITERS" -t "$DEPTH" --report_gbits -F -- \
    ib_write_bw -d $dev -x 0 -s "$SIZE" -n "$ITERS" -t "$DEPTH" --report_gbits -F localhost
  line=$(awk -v s="$SIZE" '$1 == s && NF >= 4 {print; exit}' "$log/wbw.cli")
  echo "ib_write_bw  $dev: ${line:-FAILED (see below)}"
  [ -n "$line" ] || sed 's/^/    | /' "$log/wbw.cli"
  pt_bw+=("$(awk '{print $4}' <<< "$line")")

  g=$("$bench" put_bw -d $dev:1 -s "$SIZE" -n "$ITERS" -t "$DEPTH")
  echo "$g"
  gx_bw+=("$(sed -n 's/.* \([0-9.]*\) Gb\/s.*/\1/p' <<< "$g")")

  pair slat ib_send_lat -d $dev -x 0 -s "$LSIZE" -n "$LITERS" -F -- ib_send_lat -d $dev -x 0 -s "$LSIZE" -n "$LITERS" -F localhost
  line=$(awk -v s="$LSIZE" '$1 == s && NF >= 7 {print; exit}' "$log/slat.cli")
  echo "ib_send_lat  $dev: ${line:-FAILED (see below)}   (bytes iters t_min t_max t_typical t_avg ...)"
  [ -n "$line" ] || sed 's/^/    | /' "$log/slat.cli"
  pt_lat+=("$(awk '{print $5}' <<< "$line")")

  g=$("$bench" am_lat -d $dev:1 -s "$LSIZE" -n "$LITERS")
  echo "$g"
  gx_lat+=("$(sed -n 's/.*t_typical \([0-9.]*\) us.*/\1/p' <<< "$g")")
done

echo "## registration cache"
"$rcb" -n 100000 -m 1000

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR ? a[int((NR+1)/2)] : "nan")}'; }
mb=$(median "${pt_bw[@]}") mg=$(median "${gx_bw[@]}") lb=$(median "${pt_lat[@]}") lg=$(median "${gx_lat[@]}")
echo "## summary (medians of $rounds rounds)"
echo "put bandwidth: gdx $mg Gb/s vs ib_write_bw $mb Gb/s ($SIZE B, depth $DEPTH): ratio $(awk -v a="$mg" -v b="$mb" 'BEGIN {printf "%.2f", (b > 0 ? a / b : 0)}') (bar >= 0.90: $(awk -v a="$mg" -v b="$mb" 'BEGIN {print (b > 0 && a / b >= 0.9 ? "met" : "NOT met")}'))"
echo "latency ($LSIZE B, one way, typical): gdx am_short $lg us vs ib_send_lat $lb us"
