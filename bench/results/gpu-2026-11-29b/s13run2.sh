#!/usr/bin/env bash
# session 13, call 2: the session's tree (UCP's handlers called straight from the probed delivery, one probe word
# per shm peer) on one H200 machine, with upstream UCX 1.22 + CUDA carried from call 1 (.carry/ucx-cuda.tar.xz:
# its install and the headers and config.h of its build tree), so nothing of UCX is rebuilt:
#  1. scripts/device-run.sh: the GPU test set, the module on the machine's UCX 1.16 + Open MPI 4.1.6, and the
#     CUDA-engine bars (bench/uct_engine_vs_pipeline.sh, 3 rounds);
#  2. issue 18's host latency bar: UCP tag_lat 8 B over gdx_shm vs posix, with the landed tree's module (db92a6d,
#     .carry/base-db92a6d.tar.gz) beside it in the same 10 alternating rounds; then tag_bw vs posix, 3 rounds.
# Returns: dev/{console,ctest-gpu,sysucx,uct-engine}.txt, dev/raw.tgz, lat.txt, bw.txt, logs.tgz.
set -x
root=$(pwd); t0=$(date +%s); L=/tmp/s13logs; mkdir -p $L
tar -C /tmp -xJf .carry/ucx-cuda.tar.xz && ls -la /tmp/ucx-cuda/bin/ucx_perftest /tmp/ucx-build/config.h || exit 1
mkdir -p /tmp/base && tar -xzf .carry/base-db92a6d.tar.gz -C /tmp/base
(sleep 60; scripts/ucx-build.sh module /tmp/base /tmp/bbase > $L/mod-base.log 2>&1) & base=$!
{ lscpu; cat /sys/kernel/mm/transparent_hugepage/enabled; } > $L/topo.txt 2>&1
timeout 430 scripts/device-run.sh --sysucx .carry/ucx-1.16.0.tar.gz --rounds 3 --skip probes,sanitize,bench,host-bench
echo "device-run done at $(( $(date +%s) - t0 )) s"
pack() { tar -czf $OUT/logs.tgz -C $L .; }
wait $base || { tail -30 $L/mod-base.log; pack; exit 1; }
M=$root/build-uct-bench/src/uct/libuct_gdx.so.0
[ -f $M ] || { echo "no module at $M"; pack; exit 1; }
timeout 100 bench/ucx_vs_gdx.sh --ucx-prefix /tmp/ucx-cuda --module $M --baseline-module /tmp/bbase/src/uct/libuct_gdx.so.0 \
  --rounds 10 --sizes "" --configs "ucx-posix=posix gdx-shm=gdx_shm,gdx_aux:aux" --out $OUT/lat.txt > $L/lat.console 2>&1
echo "lat done at $(( $(date +%s) - t0 )) s"
left=$(( 585 - ($(date +%s) - t0) ))
timeout $left bench/ucx_vs_gdx.sh --ucx-prefix /tmp/ucx-cuda --module $M --rounds 3 \
  --configs "ucx-posix=posix gdx-shm=gdx_shm,gdx_aux:aux" --out $OUT/bw.txt > $L/bw.console 2>&1
echo "bw done at $(( $(date +%s) - t0 )) s"
pack
grep -E "^bar|^check|^tag_" $OUT/lat.txt $OUT/bw.txt
