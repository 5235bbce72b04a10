#!/usr/bin/env bash
# ucx_perftest at the UCP level (two processes on this host, host memory) over gdx's transports through the UCX
# module, next to UCX's own transports, in ALTERNATING rounds: each round runs every configuration once per test
# (the order rotating from round to round), so load from other work on the machine hits all of them alike. The
# table holds the medians over the rounds; the output ends with one `bar ...` line per bar of issue 18 (host
# memory): UCP tag_lat 8 B over gdx_shm <= UCX posix, tag_bw over gdx_shm >= posix at 64 KiB, 1 MiB, 16 MiB.
#
#   bench/ucx_vs_gdx.sh [--ucx-prefix DIR] [--module PATH] [--baseline-module PATH] [--rounds N] [--out FILE]
#                       [--cpus A,B] [--sizes "BYTES ..."] [--configs "name=UCX_TLS ..."] [--gdx-env "VAR=V ..."]
#                       [--uct-lat]
#     --ucx-prefix  a UCX install (DIR/bin/ucx_perftest, DIR/bin/ucx_info, DIR/lib); default: the one on PATH
#     --module      libuct_gdx.so.0 built against THAT UCX (default: the one tools/gdx-run finds in this checkout:
#                   build/ first, other build-*/ by name, sanitizer trees, whose module cannot be preloaded alone,
#                   last); loaded with LD_PRELOAD below UCX 1.22, with UCX_PLUGIN_PATH from 1.22 on (as
#                   tools/gdx-run does)
#     --baseline-module  another tree's module (e.g. before a change): its gdx configurations run too, as
#                   base-<name>, and `check` lines compare this module with it in the same run
#     --rounds      alternating rounds (default 10; --reps is the old name)
#     --sizes       tag_bw message sizes (default 65536 1048576 16777216); tag_lat runs at 8 bytes
#     --configs     default: ucx-posix=posix ucx-sysv=sysv gdx-shm=gdx_shm,gdx_aux:aux (host-only, as posix:
#                   gdx_copy detects memory types, GDX_UCT_DETECT), and where this UCX has cuda_copy also
#                   ucx-posix-cuda=posix,cuda_copy and gdx-shm-copy=gdx_shm,gdx_copy,gdx_aux:aux (both CUDA-aware,
#                   printed as an `also` line) and gdx-shm-detect=gdx_shm,gdx_aux:aux+GDX_UCT_DETECT=all (gdx_shm
#                   detecting itself, as before GDX_UCT_DETECT; a diagnosis row); names starting with gdx-
#                   load the module; the others run UCX alone, as a user without gdx would); a configuration may
#                   add environment of its own after its UCX_TLS: name=TLS+VAR=V+VAR=V (e.g.
#                   gdx-shm-fence=gdx_shm,gdx_aux:aux+GDX_SHM_MEMBARRIER=no), and a module of its own instead of
#                   --module with +MODULE=PATH (a diagnosis build next to the product's, in the same rounds)
#     --gdx-env     extra environment for the gdx configurations only
#     --cpus        server and client CPUs (default 0,1; taskset)
#     --uct-lat     also UCT-level am_lat 8 B per configuration (`-t am_lat -x <its first transport> -d memory`:
#                   the transport's own small-message path without UCP; a diagnosis row, never a bar)
#   The GPU machine, Debian's UCX 1.13.1 built with CUDA into /tmp/ucx-deb and the module built against its sources
#   (/tmp/ucx-deb.build):  bench/ucx_vs_gdx.sh --ucx-prefix /tmp/ucx-deb --module <build>/src/uct/libuct_gdx.so.0
#
# Figures: tag_lat = ucx_perftest's typical (50th percentile) one-way latency in us, lower is better; tag_bw =
# overall bandwidth in GB/s (1e9 B/s; ucx_perftest's MB/s are MiB/s), higher is better. Every ratio is written so
# that higher is better for gdx: bandwidth gdx/peer, latency peer/gdx. Both processes spin; they are pinned to two
# CPUs (when the scheduler puts them on one, every exchange waits for a time slice and the figure measures the
# scheduler). Each run is bounded by a timeout; a failed run counts as missing (n/a), never as a number.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
ucx_prefix="" module="" base_module="" rounds=10 out="" cpus="0,1" gdx_env="" uct_lat=0
sizes="65536 1048576 16777216"
configs=""
timeout_s=120
cmdline="$0 $*"
while [ $# -gt 0 ]; do
  case "$1" in
    --ucx-prefix) ucx_prefix="$2"; shift 2 ;;
    --module) module="$2"; shift 2 ;;
    --baseline-module) base_module="$2"; shift 2 ;;
    --rounds|--reps) rounds="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --cpus) cpus="$2"; shift 2 ;;
    --sizes) sizes="$2"; shift 2 ;;
    --configs) configs="$2"; shift 2 ;;
    --gdx-env) gdx_env="$2"; shift 2 ;;
    --uct-lat) uct_lat=1; shift ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "ucx_vs_gdx.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
die() { echo "ucx_vs_gdx.sh: $*" >&2; exit 2; }

# ---- UCX, the module, the CPUs --------------------------------------------------------------------------------
ucx_env=()
if [ -n "$ucx_prefix" ]; then
  [ -x "$ucx_prefix/bin/ucx_perftest" ] || die "no $ucx_prefix/bin/ucx_perftest (--ucx-prefix names a UCX install)"
  ucx_env=(LD_LIBRARY_PATH="$ucx_prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
  perftest="$ucx_prefix/bin/ucx_perftest" ucx_info="$ucx_prefix/bin/ucx_info"
else
  perftest=$(command -v ucx_perftest) || die "ucx_perftest not found (ucx-utils, or --ucx-prefix)"
  ucx_info=$(command -v ucx_info) || die "ucx_info not found (ucx-utils, or --ucx-prefix)"
fi
ucx_version=$(env "${ucx_env[@]}" "$ucx_info" -v 2>/dev/null |
              sed -n 's/^# Library version: //p; s/^# Version //p' | head -1)
[ -n "$ucx_version" ] || die "cannot read the UCX version from $ucx_info -v"
if [ -z "$configs" ]; then
  configs="ucx-posix=posix ucx-sysv=sysv gdx-shm=gdx_shm,gdx_aux:aux"
  # In a process where a selected memory domain detects CUDA memory, UCP looks every send's and receive's buffer up
  # in its memory-type cache; UCX's posix alone never does, nor gdx_shm alone. The CUDA-aware pair, and gdx_shm
  # detecting by itself:
  if env "${ucx_env[@]}" "$ucx_info" -d 2>/dev/null | grep -q "Transport: cuda_copy"; then
    configs+=" ucx-posix-cuda=posix,cuda_copy gdx-shm-copy=gdx_shm,gdx_copy,gdx_aux:aux"
    configs+=" gdx-shm-detect=gdx_shm,gdx_aux:aux+GDX_UCT_DETECT=all"
  fi
fi
if [ -z "$module" ]; then
  module=$(env "${ucx_env[@]}" PATH="$(dirname "$ucx_info"):$PATH" "$root/tools/gdx-run" --print-module 2>/dev/null) ||
    module=""
fi
[ -f "$module" ] || die "libuct_gdx.so.0 not found (build it or pass --module)"
[ -z "$base_module" ] || [ -f "$base_module" ] || die "--baseline-module $base_module: no such file"
# Absolute, the name kept (not the symlink's target): gdx-run tells libuct_gdx.so.0 from another build by its name.
absolute() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
module=$(absolute "$module")
[ -n "$base_module" ] && base_module=$(absolute "$base_module")
srv_cpu=${cpus%%,*} cli_cpu=${cpus#*,}
command -v taskset >/dev/null || die "taskset not found (util-linux)"
taskset -c "$srv_cpu" true && taskset -c "$cli_cpu" true || die "cannot pin to CPUs $cpus (--cpus A,B)"

# How a module gets into ucx_perftest, as a user's process gets it: what tools/gdx-run sets for that UCX (from 1.22
# on UCX_PLUGIN_PATH; before, the loader preloaded where it was built beside the module, else the module; a
# sanitizer runtime first), one VAR=value a line.
load_env() { # MODULE
  env "${ucx_env[@]}" PATH="$(dirname "$ucx_info"):$PATH" "$root/tools/gdx-run" --module "$1" --print-load-env
}

if [ -n "$out" ]; then
  mkdir -p "$(dirname "$out")" || die "cannot create $(dirname "$out")"
  exec > >(tee "$out") 2>&1
fi
tmp=$(mktemp -d /tmp/ucx_vs_gdx.XXXXXX) || die "mktemp failed"
trap 'rm -rf "$tmp"' EXIT

# name TLS[+VAR=V...] MODULE ("-" for UCX alone), one per line; base-<name> for the baseline module's gdx configurations
cfg_list() {
  local c name tls
  for c in $configs; do
    name=${c%%=*} tls=${c#*=}
    case "$name" in gdx-*) echo "$name $tls $module"; [ -n "$base_module" ] && echo "base-$name $tls $base_module" ;;
                    *) echo "$name $tls -" ;; esac
  done
}
mapfile -t cfgs < <(cfg_list)

echo "# ucx_perftest, UCP level, host memory, 2 processes on this host: gdx's UCX module vs UCX's own transports"
echo "# command: $cmdline"
echo "# date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "# machine: $(hostname), $(uname -sr), $(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)), load $(cut -d' ' -f1-3 /proc/loadavg)"
# Whether ucx_perftest's buffers can get huge pages decides rendezvous by cross-memory attach from 256 KiB up (the
# kernel pins 4 KiB pages one by one: bench/results/cpu-2026-11-28/).
echo "# thp:     $(sed -n 's/.*\[\(.*\)\].*/\1/p' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo unknown) (transparent huge pages)"
echo "# UCX:     $ucx_version ($perftest); gdx $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$root" status --porcelain 2>/dev/null | grep -q . && echo ' + changes')"
echo "# module:  $module ($(load_env "$module" | cut -d= -f1 | paste -sd,))"
[ -n "$base_module" ] && echo "# baseline module: $base_module"
echo "# configs: ${cfgs[*]}"
echo "# pinning: server on CPU $srv_cpu, client on CPU $cli_cpu; $rounds alternating rounds, order rotating"
[ -n "$gdx_env" ] && echo "# gdx env: $gdx_env"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# Until the server listens on PORT (a loaded machine can take seconds to start it; a client that connects too early
# fails), at most 20 s; never by connecting (the server takes one connection only).
wait_listen() {
  local i
  for i in $(seq 200); do
    if command -v ss >/dev/null; then ss -Hltn "sport = :$1" | grep -q . && return
    elif [ "$i" -ge 5 ]; then return; fi # without ss: half a second, as before
    kill -0 "$2" 2>/dev/null || return
    sleep 0.1
  done
}

# run_one TLS[+VAR=V...] MODULE TEST SIZE ITERS -> the client's Final line fields (after "Final:"), or nothing on
# failure
run_one() {
  local tls="${1%%+*}" mod="$2" test="$3" size="$4" iters="$5" port spid crc src extra=() envs uct=()
  [ "$test" = am_lat ] && uct=(-x "${tls%%,*}" -d memory) # UCT level: the configuration's first transport
  [ "$1" != "$tls" ] && IFS=+ read -r -a extra <<<"${1#*+}"
  local e kept=()
  for e in "${extra[@]}"; do case "$e" in MODULE=*) mod=${e#MODULE=} ;; *) kept+=("$e") ;; esac; done
  extra=("${kept[@]}")
  envs=("${ucx_env[@]}" UCX_TLS="$tls")
  if [ "$mod" != - ]; then
    local loads
    mapfile -t loads < <(load_env "$mod")
    envs+=("${loads[@]}" $gdx_env)
  fi
  envs+=("${extra[@]}")
  port=$(free_port)
  env "${envs[@]}" taskset -c "$srv_cpu" timeout "$timeout_s" "$perftest" -p "$port" "${uct[@]}" >"$tmp/srv" 2>&1 &
  spid=$!
  wait_listen "$port" "$spid"
  env "${envs[@]}" taskset -c "$cli_cpu" timeout "$timeout_s" "$perftest" 127.0.0.1 -p "$port" -t "$test" \
    -s "$size" -n "$iters" "${uct[@]}" >"$tmp/cli" 2>&1
  crc=$?
  wait "$spid"; src=$?
  if [ "$crc" != 0 ] || [ "$src" != 0 ]; then
    # The first error line, else each side's last line (a sanitizer's or the loader's complaint names no error).
    local why
    why=$(grep -m1 -iE 'error|fail' "$tmp/cli" "$tmp/srv" | head -1)
    [ -n "$why" ] || why="client: $(grep . "$tmp/cli" | tail -1); server: $(grep . "$tmp/srv" | tail -1)"
    echo "#   failed ($tls $test $size): client exit $crc, server exit $src: $why" >&2
    return 1
  fi
  sed -n 's/^Final:[[:space:]]*//p' "$tmp/cli" | tail -1
}

declare -A res
tests=("tag_lat 8")
[ "$uct_lat" = 1 ] && tests+=("am_lat 8")
for s in $sizes; do tests+=("tag_bw $s"); done
ncfg=${#cfgs[@]}
for r in $(seq "$rounds"); do
  echo "# round $r (load $(cut -d' ' -f1 /proc/loadavg))"
  for t in "${tests[@]}"; do
    read -r test size <<<"$t"
    if [ "$test" != tag_bw ]; then iters=200000; else iters=$(( 512 * 1048576 / size )); [ "$iters" -lt 32 ] && iters=32; fi
    for k in $(seq 0 $((ncfg - 1))); do
      read -r name tls mod <<<"${cfgs[$(( (k + r) % ncfg ))]}"
      line=$(run_one "$tls" "$mod" "$test" "$size" "$iters") && [ -n "$line" ] || line=""
      if [ -z "$line" ]; then v="n/a"
      elif [ "$test" != tag_bw ]; then v=$(awk '{print $2}' <<<"$line")
      else v=$(awk '{printf "%.2f", $6 * 1048576 / 1e9}' <<<"$line"); fi
      res[$name,$test,$size]+=" $v"
      printf 'raw %-14s %-8s %9s %10s\n' "$name" "$test" "$size" "$v"
    done
  done
done

median() { tr ' ' '\n' | grep -E '^[0-9.]+$' | sort -g | awk '{v[NR]=$1} END {if (NR==0) print "n/a"; else print v[int((NR+1)/2)]}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a+0 > 0 && b+0 > 0) printf "%.2f", a/b; else print "n/a" }'; }
med() { median <<<"${res[$1,$2,$3]:-}"; }
human() { awk -v n="$1" 'BEGIN { if (n >= 1048576 && n % 1048576 == 0) printf "%d MiB", n / 1048576;
                                  else if (n >= 1024 && n % 1024 == 0) printf "%d KiB", n / 1024; else printf "%d B", n }'; }

echo
echo "# medians over $rounds rounds: tag_lat (and am_lat, UCT level) us (lower is better), tag_bw GB/s (higher is better)"
printf '%-16s' "test"; for c in "${cfgs[@]}"; do printf ' %15s' "${c%% *}"; done; printf '\n'
for t in "${tests[@]}"; do
  read -r test size <<<"$t"
  printf '%-16s' "$test $(human "$size")"
  for c in "${cfgs[@]}"; do printf ' %15s' "$(med "${c%% *}" "$test" "$size")"; done
  printf '\n'
done

# bars: gdx-shm against ucx-posix (when both ran); checks: this module against the baseline module
if [ -n "${res[gdx-shm,tag_lat,8]:-}" ] && [ -n "${res[ucx-posix,tag_lat,8]:-}" ]; then
  g=$(med gdx-shm tag_lat 8) p=$(med ucx-posix tag_lat 8)
  echo "bar UCP tag_lat 8 B over gdx_shm <= UCX posix (us; ratio = posix/gdx, higher is better): gdx $g vs posix $p = $(ratio "$p" "$g")x"
  for s in $sizes; do
    g=$(med gdx-shm tag_bw "$s") p=$(med ucx-posix tag_bw "$s")
    echo "bar UCP tag_bw $(human "$s") over gdx_shm >= UCX posix (GB/s; ratio = gdx/posix): gdx $g vs posix $p = $(ratio "$g" "$p")x"
  done
fi
# Both processes CUDA-aware (not the bar's words): each with its copy transport, which detects memory types.
if [ -n "${res[gdx-shm-copy,tag_lat,8]:-}" ] && [ -n "${res[ucx-posix-cuda,tag_lat,8]:-}" ]; then
  g=$(med gdx-shm-copy tag_lat 8) p=$(med ucx-posix-cuda tag_lat 8)
  echo "also UCP tag_lat 8 B, both CUDA-aware: gdx_shm,gdx_copy vs UCX posix,cuda_copy (us; ratio = posix/gdx): gdx $g vs posix $p = $(ratio "$p" "$g")x"
fi
if [ -n "$base_module" ]; then
  for c in "${cfgs[@]}"; do
    name=${c%% *}
    [[ "$name" == gdx-* ]] || continue
    for t in "${tests[@]}"; do
      read -r test size <<<"$t"
      a=$(med "$name" "$test" "$size") b=$(med "base-$name" "$test" "$size")
      if [ "$test" = tag_lat ]; then q=$(ratio "$b" "$a"); else q=$(ratio "$a" "$b"); fi
      echo "check $name $test $(human "$size") vs the baseline module (higher is better): this $a vs baseline $b = ${q}x"
    done
  done
fi
