#!/usr/bin/env bash
# Probe (a diagnosis, never a bar): UCP over gdx_shm against UCX posix, host memory, on a machine with a GPU and
# UCX built with CUDA (Debian's 1.13.1, scripts/ucx-build.sh). Answers three questions in one run:
#   1. does UCX's memory-type cache hold regions once the context is up (bench/probes/ucp_memtype_cache.c)? UCP 1.22
#      sends small host messages on its fast path only while it is empty;
#   2. tag_lat 8 B, this module against another one (--base-module) and posix, alternating rounds;
#   3. tag_bw per size under forced protocols (eager only, rendezvous only, rendezvous with the shm transport's
#      cross-memory-attach threshold lowered), to see where rendezvous over gdx_shm starts to pay.
#   bench/probes/ucp_host_sweep.sh --ucx-prefix P --ucx-src S --ucx-build B --module M [--base-module M0]
#                                  [--rounds N] [--sizes "..."] [--cpus A,B]
set -uo pipefail
prefix="" src="" ubuild="" module="" base="" rounds=2 cpus="0,1"
sizes="8192 16384 32768 65536 131072 262144 524288 1048576"
while [ $# -gt 0 ]; do
  case "$1" in
    --ucx-prefix) prefix=$2; shift 2 ;; --ucx-src) src=$2; shift 2 ;; --ucx-build) ubuild=$2; shift 2 ;;
    --module) module=$2; shift 2 ;; --base-module) base=$2; shift 2 ;; --rounds) rounds=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;; --cpus) cpus=$2; shift 2 ;;
    *) echo "ucp_host_sweep.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/../.."
pt=$prefix/bin/ucx_perftest
srv_cpu=${cpus%,*} cli_cpu=${cpus#*,}
echo "# date: $(date -u +%FT%TZ)  cpus: $(nproc)  pinned: server $srv_cpu, client $cli_cpu"
lscpu | grep -E "Model name|Thread|Core|Socket|NUMA node[0-9]|L2|L3" | sed 's/^/# /'

# ---- 1. UCX's memory-type cache ----------------------------------------------------------------------------------
cc -O1 -o /tmp/ucp_memtype_cache bench/probes/ucp_memtype_cache.c -I"$src/src" -I"$ubuild" -I"$ubuild/src" \
   -I"$prefix/include" -L"$prefix/lib" -lucp -lucs || echo "# memtype probe did not build"
mt() { # label env...
  local label=$1; shift
  echo "=== memtype cache: $label"
  env LD_LIBRARY_PATH="$prefix/lib" "$@" timeout 60 /tmp/ucp_memtype_cache 2>&1 | head -40
}
mt "posix" UCX_TLS=posix
mt "posix,cuda_copy (UCX's own CUDA)" UCX_TLS=posix,cuda_copy
mt "gdx (this module)" UCX_PLUGIN_PATH="$(dirname "$module")" UCX_TLS=gdx_shm,gdx_aux:aux
[ -n "$base" ] && mt "gdx (base module)" UCX_PLUGIN_PATH="$(dirname "$base")" UCX_TLS=gdx_shm,gdx_aux:aux
[ -n "$base" ] && mt "gdx (base module) GDX_MEMTYPE_HOOKS=no" UCX_PLUGIN_PATH="$(dirname "$base")" \
  UCX_TLS=gdx_shm,gdx_aux:aux GDX_MEMTYPE_HOOKS=no
mt "gdx (this module) GDX_CUDA=no" UCX_PLUGIN_PATH="$(dirname "$module")" UCX_TLS=gdx_shm,gdx_aux:aux GDX_CUDA=no

# ---- 2 and 3: ucx_perftest pairs ---------------------------------------------------------------------------------
one() { # mod(-|path) tls test size env... -> prints the figure or n/a
  local mod=$1 tls=$2 test=$3 sz=$4; shift 4
  local port=$((20000 + RANDOM % 20000)) n=$(( (1 << 30) / sz ))
  [ "$n" -gt 200000 ] && n=200000; [ "$n" -lt 1000 ] && n=1000
  [[ $test == *lat ]] && n=200000
  local e=(env LD_LIBRARY_PATH="$prefix/lib" UCX_TLS="$tls" "$@")
  [ "$mod" != - ] && e+=(UCX_PLUGIN_PATH="$(dirname "$mod")")
  "${e[@]}" taskset -c "$srv_cpu" timeout 60 "$pt" -p $port > /dev/null 2>&1 &
  local spid=$!
  sleep 0.3
  local v
  v=$("${e[@]}" taskset -c "$cli_cpu" timeout 60 "$pt" 127.0.0.1 -p $port -t "$test" -s "$sz" -n "$n" 2>&1 |
      sed -n 's/^Final:[[:space:]]*//p' |
      awk -v t="$test" '{ if (t ~ /lat/) printf "%.3f", $2; else printf "%.2f", $6 * 1048576 / 1e9 }')
  wait $spid 2>/dev/null
  echo "${v:-n/a}"
}
G=gdx_shm,gdx_aux:aux
echo "=== tag_lat 8 B (us, one way), $rounds alternating rounds"
for r in $(seq "$rounds"); do
  line="round $r: posix $(one - posix tag_lat 8) | gdx $(one "$module" $G tag_lat 8)"
  [ -n "$base" ] && line+=" | base $(one "$base" $G tag_lat 8)"
  line+=" | gdx GDX_CUDA=no $(one "$module" $G tag_lat 8 GDX_CUDA=no)"
  echo "$line"
done
echo "=== tag_bw (GB/s) per size: posix | gdx default | eager only | rndv only (CMA from 1M) | rndv, CMA from 64K split 32K | rndv, CMA from 16K split 64K | base default"
for r in $(seq "$rounds"); do
  for sz in $sizes; do
    line="r$r $sz: $(one - posix tag_bw "$sz") | $(one "$module" $G tag_bw "$sz")"
    line+=" | $(one "$module" $G tag_bw "$sz" UCX_RNDV_THRESH=inf)"
    line+=" | $(one "$module" $G tag_bw "$sz" UCX_RNDV_THRESH=0)"
    line+=" | $(one "$module" $G tag_bw "$sz" UCX_RNDV_THRESH=0 GDX_SHM_CMA_THRESH=64K GDX_SHM_CMA_SPLIT=32K)"
    line+=" | $(one "$module" $G tag_bw "$sz" UCX_RNDV_THRESH=0 GDX_SHM_CMA_THRESH=16K GDX_SHM_CMA_SPLIT=64K)"
    [ -n "$base" ] && line+=" | $(one "$base" $G tag_bw "$sz")"
    echo "$line"
  done
done
