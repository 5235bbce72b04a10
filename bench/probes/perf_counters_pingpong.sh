#!/usr/bin/env bash
# Probe (a diagnosis, never a bar): per-iteration hardware counts of both sides of a ucx_perftest ping-pong, for
# each configuration given, from perf_counters_preload.c (see there: user space, main thread, cycles, instructions,
# branch, L1i, iTLB and LLC misses, raw events such as MACHINE_CLEARS.MEMORY_ORDERING). Each configuration runs at
# N and at 2N iterations; (count(2N) - count(N)) / N is one iteration's cost, process start and UCX's set-up
# cancelled out. Prints "counts <config> <side> <event> <per iteration>" lines, or what was unavailable.
#
#   bench/probes/perf_counters_pingpong.sh [--ucx-prefix DIR] [--test am_lat|tag_lat] [-n N] [--cpus A,B]
#       [--raw "0x02c3,0x01c3"] CONFIG...
#   CONFIG: name=TLS[+VAR=V...][+MODULE=DIR]  (MODULE: the directory of libuct_gdx.so.0, loaded as tools/gdx-run
#           loads it for that UCX; am_lat runs UCT level on TLS's first transport, -d memory)
#   e.g. on the GPU machine: ... --ucx-prefix /tmp/ucx-cuda posix=posix gdx=gdx_shm+MODULE=build-uct-bench/src/uct
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
prefix="" test=am_lat n=200000 cpus=0,1 raw="0x02c3,0x01c3"
while [ $# -gt 0 ]; do
  case "$1" in
    --ucx-prefix) prefix="$2"; shift 2 ;;
    --test) test="$2"; shift 2 ;;
    -n) n="$2"; shift 2 ;;
    --cpus) cpus="$2"; shift 2 ;;
    --raw) raw="$2"; shift 2 ;;
    -*) echo "perf_counters_pingpong.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
pt=ucx_perftest; [ -n "$prefix" ] && { pt=$prefix/bin/ucx_perftest; export LD_LIBRARY_PATH=$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}; }
ucx_info="${prefix:+$prefix/bin/}ucx_info"
ver=$("$ucx_info" -v 2>/dev/null | sed -n 's/^# \(Library version:\|Version\) \([0-9]*\.[0-9]*\).*/\2/p' | head -1)
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
cc -O1 -shared -fPIC -o "$tmp/pc.so" "$root/bench/probes/perf_counters_preload.c" || exit 1
echo "# $(date -u '+%F %T UTC') $(uname -sr) $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1); UCX $ver; $test, n=$n and $((2 * n)); raw $raw"
for c in "$@"; do
  name=${c%%=*} spec=${c#*=} tls=${spec%%+*} envs=() mod=""
  IFS=+ read -r -a parts <<<"$spec"
  for e in "${parts[@]:1}"; do case "$e" in MODULE=*) mod=${e#MODULE=} ;; *) envs+=("$e") ;; esac; done
  loads=()
  if [ -n "$mod" ]; then # what tools/gdx-run sets for this UCX; the counters' preload goes after the module's
    mapfile -t loads < <(PATH="$(dirname "$(command -v "$ucx_info")"):$PATH" \
                           "$root/tools/gdx-run" --module "$mod/libuct_gdx.so.0" --print-load-env)
  fi
  pre="$tmp/pc.so"
  for k in "${!loads[@]}"; do
    case "${loads[$k]}" in LD_PRELOAD=*) pre="${loads[$k]#LD_PRELOAD=}:$pre"; unset 'loads[k]' ;; esac
  done
  loads+=("LD_PRELOAD=$pre")
  args=(-t "$test"); [ "$test" = am_lat ] && args+=(-x "${tls%%,*}" -d memory)
  for iters in "$n" $((2 * n)); do
    for side in server client; do rm -f "$tmp/$side.$iters"; done
    p=$((13000 + RANDOM % 2000))
    env UCX_TLS="$tls" "${envs[@]}" PERF_PRELOAD_OUT="$tmp/server.$iters" PERF_PRELOAD_RAW="$raw" "${loads[@]}" \
      taskset -c "${cpus%%,*}" "$pt" -p "$p" "${args[@]}" -s 8 -n "$iters" > /dev/null 2>&1 &
    sleep 1
    env UCX_TLS="$tls" "${envs[@]}" PERF_PRELOAD_OUT="$tmp/client.$iters" PERF_PRELOAD_RAW="$raw" "${loads[@]}" \
      taskset -c "${cpus#*,}" "$pt" 127.0.0.1 -p "$p" "${args[@]}" -s 8 -n "$iters" 2>&1 | grep '^Final' | sed "s/^/# $name n=$iters /"
    wait
  done
  for side in server client; do
    # the event lines of the two runs side by side: per iteration = (2N count - N count) / N
    join <(grep -v ' pid ' "$tmp/$side.$n" | awk '{print $2, $3}' | sort) \
         <(grep -v ' pid ' "$tmp/$side.$((2 * n))" | awk '{print $2, $3}' | sort) |
      awk -v c="$name" -v s="$side" -v n="$n" '$2 ~ /^[0-9]+$/ && $3 ~ /^[0-9]+$/ { printf "counts %s %s %s %.2f\n", c, s, $1, ($3 - $2) / n; next }
                                              { print "counts", c, s, $1, "unavailable" }'
  done
done
