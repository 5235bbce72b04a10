#!/usr/bin/env bash
# session 12, call 1: the final tree of the session on one H200 machine.
#  1. the GPU test set and the module on the machine's UCX 1.16 + Open MPI 4.1.6 (scripts/device-run.sh: $OUT/dev/),
#     while upstream UCX 1.22 with CUDA builds in the background;
#  2. issue 18's host bars through that UCX: UCP tag_lat 8 B over gdx_shm vs posix (8 alternating rounds), then
#     tag_bw 64 KiB / 1 MiB / 16 MiB vs posix with the same module's GDX_SHM_CMA_LEARN=no beside it (3 rounds):
#     what the learned CMA-or-ring choice costs or gains against always-CMA on this machine.
# Returns (the device tool brings back 8 files): dev/{console,ctest-gpu,sysucx}.txt, dev/raw.tgz, lat.txt, bw.txt,
# logs.tgz (the UCX and module build logs, the benches' consoles, lscpu).
set -x
root=$(pwd); t0=$(date +%s); L=/tmp/s12logs; mkdir -p $L
scripts/ucx-build.sh ucx .carry/ucx-1.22.0.tar.gz > $L/ucx-build.log 2>&1 & ucx=$!
{ lscpu; cat /sys/kernel/mm/transparent_hugepage/enabled; } > $L/topo.txt 2>&1
timeout 330 scripts/device-run.sh --sysucx .carry/ucx-1.16.0.tar.gz --skip probes,sanitize,bench,uct-bench,host-bench
echo "tests done at $(( $(date +%s) - t0 )) s"
pack() { tar -czf $OUT/logs.tgz -C $L .; }
wait $ucx || { tail -30 $L/ucx-build.log; pack; exit 1; }
echo "ucx built at $(( $(date +%s) - t0 )) s"
scripts/ucx-build.sh module "$root" /tmp/bnew > $L/mod-new.log 2>&1 || { tail -30 $L/mod-new.log; pack; exit 1; }
echo "module built at $(( $(date +%s) - t0 )) s"
M=/tmp/bnew/src/uct/libuct_gdx.so.0
timeout 100 bench/ucx_vs_gdx.sh --ucx-prefix /tmp/ucx-cuda --module $M --rounds 8 --sizes "" \
  --configs "ucx-posix=posix gdx-shm=gdx_shm,gdx_aux:aux" --out $OUT/lat.txt > $L/lat.console 2>&1
echo "lat done at $(( $(date +%s) - t0 )) s"
left=$(( 580 - ($(date +%s) - t0) ))
timeout $left bench/ucx_vs_gdx.sh --ucx-prefix /tmp/ucx-cuda --module $M --rounds 3 \
  --configs "ucx-posix=posix gdx-shm=gdx_shm,gdx_aux:aux gdx-cma=gdx_shm,gdx_aux:aux+GDX_SHM_CMA_LEARN=no" \
  --out $OUT/bw.txt > $L/bw.console 2>&1
echo "bw done at $(( $(date +%s) - t0 )) s"
pack
grep -E "^bar|^check|^test|^tag_" $OUT/lat.txt $OUT/bw.txt
