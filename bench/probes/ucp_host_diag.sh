#!/usr/bin/env bash
# Probe (a diagnosis, never a bar): why UCP over gdx_shm is slower than UCX posix for host memory on a machine.
# Prints the clock source, UCP's protocol choice for tag_bw at SIZE (UCX_PROTO_INFO) over posix and over gdx_shm,
# (module loaded from UCX_PLUGIN_PATH: UCX >= 1.22) and, where perf exists, the client's hottest symbols during tag_lat 8 B over gdx_shm.
#   bench/probes/ucp_host_diag.sh UCX_PREFIX MODULE [SIZE] [GDX_ENV...]
set -uo pipefail
prefix=$1 module=$2 size=${3:-65536}; shift 3 2>/dev/null || shift $#
cd "$(dirname "$0")/../.."
echo "# clocksource: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>&1)"
echo "# perf: $(command -v perf || echo none)"
pt=$prefix/bin/ucx_perftest
for cfg in "posix" "gdx_shm"; do
  port=$((20000 + RANDOM % 20000))
  if [ "$cfg" = posix ]; then pre=(env LD_LIBRARY_PATH="$prefix/lib" UCX_TLS=posix)
  else pre=(env "$@" LD_LIBRARY_PATH="$prefix/lib" UCX_PLUGIN_PATH="$(dirname "$module")" UCX_TLS=gdx_shm,gdx_aux:aux); fi
  "${pre[@]}" taskset -c ${DIAG_SRV_CPU:-2} timeout 60 "$pt" -p $port > /tmp/diag-srv.log 2>&1 &
  sleep 0.5
  echo "=== $cfg: tag_bw $size, UCX_PROTO_INFO=y (client)"
  UCX_PROTO_INFO=y "${pre[@]}" taskset -c ${DIAG_CLI_CPU:-3} timeout 60 "$pt" 127.0.0.1 -p $port -t tag_bw -s "$size" -n 20000 2>&1 |
    sed 's/^\[[0-9.]*\] \[[^]]*\] *//' | grep -vE "^\+-|^$" | head -60
  wait
  echo "--- server log"; tail -5 /tmp/diag-srv.log
done
if command -v perf >/dev/null; then
  port=$((20000 + RANDOM % 20000))
  pre=(env "$@" LD_LIBRARY_PATH="$prefix/lib" UCX_PLUGIN_PATH="$(dirname "$module")" UCX_TLS=gdx_shm,gdx_aux:aux)
  "${pre[@]}" taskset -c ${DIAG_SRV_CPU:-2} timeout 60 "$pt" -p $port > /tmp/diag-srv.log 2>&1 &
  sleep 0.5
  "${pre[@]}" taskset -c ${DIAG_CLI_CPU:-3} timeout 60 perf record -q -g -o /tmp/diag.perf "$pt" 127.0.0.1 -p $port -t tag_lat -s 8 -n 2000000 2>&1 | tail -2
  wait
  perf report -i /tmp/diag.perf --no-children --stdio 2>/dev/null | grep -E "^ +[0-9]" | head -40
fi
