#!/usr/bin/env bash
# ucx_perftest (UCP level, host memory, two processes on this host) over gdx's transports next to UCX's own,
# in one run: tag_bw at 1..16 MiB and tag_lat at 8 B. Each figure is the median of --reps runs.
#
# Both processes spin. Server and client are pinned to two different CPUs (--cpus, default 0,1): when the
# scheduler puts them on one CPU, every exchange that needs the other process to run costs a time slice (about
# 8 ms here), and posix and gdx alike drop to a few hundred MB/s or less; that measures the scheduler, not the
# transport. Other load on the machine still shows: read the figures next to the header's load line.
#
#   bench/ucx_vs_gdx.sh [--module PATH] [--reps N] [--out FILE] [--cpus A,B] [--configs "name=UCX_TLS ..."]
#     default configs: ucx-posix=posix  ucx-sysv=sysv  ucx-tcp=tcp  gdx-shm=gdx_shm,gdx_aux:aux
#                      gdx-tcp=gdx_tcp,gdx_aux:aux     (a gdx config whose transport is missing is reported n/a)
#     --out FILE: also write the report there (bench/results/ucx-<date>.txt is the convention)
#
# The ratio columns compare gdx-shm with ucx-posix and gdx-tcp with ucx-tcp (bandwidth: gdx/ucx, higher is
# better for gdx; latency: gdx/ucx, lower is better for gdx).
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
module=""
reps=3
out=""
configs="ucx-posix=posix ucx-sysv=sysv ucx-tcp=tcp gdx-shm=gdx_shm,gdx_aux:aux gdx-tcp=gdx_tcp,gdx_aux:aux"
sizes="1048576 2097152 4194304 8388608 16777216"
timeout_s=120
cpus="0,1"
cmdline="$0 $*"

while [ $# -gt 0 ]; do
  case "$1" in
    --module) module="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --configs) configs="$2"; shift 2 ;;
    --cpus) cpus="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "ucx_vs_gdx.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
if [ -z "$module" ]; then
  for cand in "$root"/build*/src/transport/uct/libuct_gdx.so.0; do [ -f "$cand" ] && { module="$cand"; break; }; done
fi
[ -f "$module" ] || { echo "ucx_vs_gdx.sh: libuct_gdx.so.0 not found (build it or pass --module)" >&2; exit 2; }
command -v ucx_perftest >/dev/null || { echo "ucx_vs_gdx.sh: ucx_perftest not found (ucx-utils)" >&2; exit 2; }
srv_cpu=${cpus%%,*} cli_cpu=${cpus#*,}
command -v taskset >/dev/null || { echo "ucx_vs_gdx.sh: taskset not found (util-linux)" >&2; exit 2; }
taskset -c "$srv_cpu" true && taskset -c "$cli_cpu" true ||
  { echo "ucx_vs_gdx.sh: cannot pin to CPUs $cpus (--cpus A,B)" >&2; exit 2; }

tmp=$(mktemp -d /tmp/ucx_vs_gdx.XXXXXX) || exit 2
trap 'rm -rf "$tmp"' EXIT
available=$(LD_PRELOAD="$module" timeout 60 ucx_info -d 2>/dev/null | sed -n 's/^#[[:space:]]*Transport: //p' | sort -u)

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# run_one TLS TEST SIZE ITERS -> prints the client's Final line fields, or nothing on failure
run_one() {
  local tls="$1" test="$2" size="$3" iters="$4" port spid
  port=$(free_port)
  env LD_PRELOAD="$module" UCX_TLS="$tls" taskset -c "$srv_cpu" timeout "$timeout_s" \
    ucx_perftest -p "$port" -t "$test" -s "$size" -n "$iters" >"$tmp/srv" 2>&1 &
  spid=$!
  sleep 0.3
  env LD_PRELOAD="$module" UCX_TLS="$tls" taskset -c "$cli_cpu" timeout "$timeout_s" \
    ucx_perftest 127.0.0.1 -p "$port" -t "$test" -s "$size" -n "$iters" >"$tmp/cli" 2>&1
  local crc=$?
  wait "$spid"; local src=$?
  [ "$crc" = 0 ] && [ "$src" = 0 ] && sed -n 's/^Final:[[:space:]]*//p' "$tmp/cli" | tail -1
}

median() { sort -g | awk '{v[NR]=$1} END {if (NR==0) print "n/a"; else print v[int((NR+1)/2)]}'; }

# measure TLS TEST SIZE ITERS FIELD: median over reps of a Final-line field (2 = 50th-percentile latency us,
# 3 = average latency us, 6 = overall bandwidth MB/s)
measure() {
  local tls="$1" test="$2" size="$3" iters="$4" field="$5" r line
  for r in $(seq "$reps"); do
    line=$(run_one "$tls" "$test" "$size" "$iters") && [ -n "$line" ] && awk -v f="$field" '{print $f}' <<<"$line"
  done | median
}

usable() { # a config whose gdx transport is not registered here is skipped, not failed
  local tl
  for tl in ${1//,/ }; do
    tl=${tl%:aux}
    case "$tl" in gdx_*) grep -qx "$tl" <<<"$available" || return 1 ;; esac
  done
}

declare -A bw lat
names=()
for c in $configs; do
  name=${c%%=*} tls=${c#*=}
  names+=("$name")
  if ! usable "$tls"; then
    for s in $sizes; do bw[$name,$s]="n/a"; done
    lat[$name]="n/a"
    continue
  fi
  for s in $sizes; do
    iters=$(( 200 * 1048576 / s )); [ "$iters" -lt 20 ] && iters=20
    bw[$name,$s]=$(measure "$tls" tag_bw "$s" "$iters" 6)
    echo "  $name tag_bw $s: ${bw[$name,$s]} MB/s" >&2
  done
  lat[$name]=$(measure "$tls" tag_lat 8 20000 2)
  echo "  $name tag_lat 8: ${lat[$name]} us" >&2
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "n/a" || b == "n/a" || b == 0) print "n/a"; else printf "%.2f", a / b }'; }

report() {
  echo "# ucx_perftest over gdx vs UCX's own transports (UCP level, host memory, 2 processes, this host)"
  echo "# command: $cmdline"
  echo "# date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "# machine: $(hostname), $(uname -sr), $(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)), load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# UCX:     $(ucx_info -v | sed -n 's/^# Version //p'); gdx $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown); module $module"
  echo "# configs: $configs"
  echo "# pinning: server on CPU $srv_cpu, client on CPU $cli_cpu (taskset)"
  echo "# figures: median of $reps runs; tag_bw = overall MB/s (higher is better), tag_lat = 50th percentile us (lower)"
  echo
  printf "%-14s" "tag_bw size"; for n in "${names[@]}"; do printf "%12s" "$n"; done
  printf "%14s%14s\n" "shm/posix" "gdx/ucx tcp"
  for s in $sizes; do
    printf "%-14s" "$((s / 1048576)) MiB"
    for n in "${names[@]}"; do printf "%12s" "${bw[$n,$s]}"; done
    printf "%14s%14s\n" "$(ratio "${bw[gdx-shm,$s]:-n/a}" "${bw[ucx-posix,$s]:-n/a}")" \
                        "$(ratio "${bw[gdx-tcp,$s]:-n/a}" "${bw[ucx-tcp,$s]:-n/a}")"
  done
  printf "%-14s" "tag_lat 8 B"; for n in "${names[@]}"; do printf "%12s" "${lat[$n]}"; done
  printf "%14s%14s\n" "$(ratio "${lat[gdx-shm]:-n/a}" "${lat[ucx-posix]:-n/a}")" \
                      "$(ratio "${lat[gdx-tcp]:-n/a}" "${lat[ucx-tcp]:-n/a}")"
}

if [ -n "$out" ]; then
  mkdir -p "$(dirname "$out")"
  report | tee "$out"
else
  report
fi
