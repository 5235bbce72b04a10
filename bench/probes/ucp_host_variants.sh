#!/usr/bin/env bash
# Probe (a diagnosis, never a bar): UCP tag_lat 8 B and tag_bw SIZE over gdx_shm (module from UCX_PLUGIN_PATH,
# UCX >= 1.22) and over posix under several environments, 2 runs each, to see which part of the stack a gap
# comes from.   bench/probes/ucp_host_variants.sh UCX_PREFIX MODULE [SIZE]
set -uo pipefail
prefix=$1 module=$2 size=${3:-65536}
pt=$prefix/bin/ucx_perftest
one() { # label tls test size env...
  local label=$1 tls=$2 test=$3 sz=$4; shift 4
  local port=$((20000 + RANDOM % 20000)) base=(env LD_LIBRARY_PATH="$prefix/lib" UCX_TLS="$tls" "$@")
  [[ $tls == gdx* ]] && base+=(UCX_PLUGIN_PATH="$(dirname "$module")")
  "${base[@]}" taskset -c 2 timeout 60 "$pt" -p $port > /dev/null 2>&1 &
  sleep 0.4
  local v
  v=$("${base[@]}" taskset -c 3 timeout 60 "$pt" 127.0.0.1 -p $port -t "$test" -s "$sz" -n 200000 2>&1 |
      sed -n 's/^Final:[[:space:]]*//p' | awk -v t="$test" '{ if (t ~ /lat/) print $2 " us"; else printf "%.2f GB/s\n", $6*1048576/1e9 }')
  wait
  printf '%-44s %-8s %8s  %s\n' "$label" "$test" "$sz" "${v:-failed}"
}
for r in 1 2; do
  for v in "posix|posix|" "posix memtype-cache=n|posix|UCX_MEMTYPE_CACHE=n" \
           "gdx default|gdx_shm,gdx_aux:aux|" "gdx GDX_CUDA=no|gdx_shm,gdx_aux:aux|GDX_CUDA=no" \
           "gdx memtype-cache=n|gdx_shm,gdx_aux:aux|UCX_MEMTYPE_CACHE=n" \
           "gdx GDX_MEMTYPE_HOOKS=no|gdx_shm,gdx_aux:aux|GDX_MEMTYPE_HOOKS=no" \
           "gdx no zcopy/rndv (UCX_ZCOPY_THRESH=inf RNDV=inf)|gdx_shm,gdx_aux:aux|UCX_ZCOPY_THRESH=inf UCX_RNDV_THRESH=inf"; do
    IFS='|' read -r label tls envs <<<"$v"
    one "$label" "$tls" tag_lat 8 $envs
    one "$label" "$tls" tag_bw "$size" $envs
  done
done
