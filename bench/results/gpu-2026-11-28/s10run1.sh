#!/usr/bin/env bash
# session 10, call 1 (diagnosis of the UCP tag_lat 8 B gap on the GPU machine): the CPU topology; UCP tag_lat and
# UCT am_lat, gdx_shm vs posix, with and without UCX's CUDA modules loaded (UCX_MODULES=^cu*), 8 alternating rounds;
# 4 rounds on another CPU pair; then both sides of tag_lat under callgrind (UCX 1.22 with CUDA) for each transport.
set -x
root=$(pwd); t0=$(date +%s)
{ lscpu; lscpu -e; for c in 0 1 2 3 8; do echo "cpu$c siblings $(cat /sys/devices/system/cpu/cpu$c/topology/thread_siblings_list)"; done; } > $OUT/topo.txt 2>&1
scripts/ucx-build.sh ucx .carry/ucx-1.22.0.tar.gz > $OUT/ucx-build.log 2>&1 || { tail -30 $OUT/ucx-build.log; exit 1; }
scripts/ucx-build.sh module "$root" /tmp/bnew > $OUT/mod-new.log 2>&1 || { tail -30 $OUT/mod-new.log; exit 1; }
echo "built at $(( $(date +%s) - t0 )) s"
M=/tmp/bnew/src/uct/libuct_gdx.so.0
timeout 170 bench/ucx_vs_gdx.sh --ucx-prefix /tmp/ucx-cuda --module $M --rounds 8 --sizes "" --uct-lat \
  --configs "ucx-posix=posix gdx-shm=gdx_shm,gdx_aux:aux ucx-posix-nocu=posix+UCX_MODULES=^cu* gdx-shm-nocu=gdx_shm,gdx_aux:aux+UCX_MODULES=^cu*" \
  --out $OUT/bench.txt > $OUT/bench.console 2>&1
echo "bench done at $(( $(date +%s) - t0 )) s"
timeout 60 bench/ucx_vs_gdx.sh --ucx-prefix /tmp/ucx-cuda --module $M --rounds 4 --sizes "" --cpus 2,5 \
  --configs "ucx-posix=posix gdx-shm=gdx_shm,gdx_aux:aux" --out $OUT/bench-cpus25.txt > /dev/null 2>&1
echo "bench 2 done at $(( $(date +%s) - t0 )) s"
mkdir -p /tmp/vg /tmp/cg && dpkg -x .carry/valgrind_*.deb /tmp/vg
export VALGRIND_LIB=/tmp/vg/usr/libexec/valgrind
cg() { # NAME TLS SRV_CPU CLI_CPU
  local p=$((13000 + RANDOM % 2000))
  env PATH=/tmp/ucx-cuda/bin:$PATH UCX_PLUGIN_PATH=$(dirname $M) UCX_TLS=$2 taskset -c $3 timeout 150 /tmp/vg/usr/bin/valgrind --tool=callgrind \
    --callgrind-out-file=/tmp/cg/srv.$1 ucx_perftest -t tag_lat -s 8 -n 3000 -p $p > /tmp/cg/srv.$1.log 2>&1 &
  sleep 8
  env PATH=/tmp/ucx-cuda/bin:$PATH UCX_PLUGIN_PATH=$(dirname $M) UCX_TLS=$2 taskset -c $4 timeout 150 /tmp/vg/usr/bin/valgrind --tool=callgrind \
    --callgrind-out-file=/tmp/cg/cli.$1 ucx_perftest -t tag_lat -s 8 -n 3000 -p $p 127.0.0.1 > /tmp/cg/cli.$1.log 2>&1
  wait
}
cg posix posix 2 3 & cg gdx gdx_shm,gdx_aux:aux 4 5 & wait
echo "callgrind done at $(( $(date +%s) - t0 )) s"
tail -5 /tmp/cg/*.log
tar czf $OUT/cg.tgz -C /tmp/cg .
tail -8 $OUT/bench.txt; tail -3 $OUT/bench-cpus25.txt
