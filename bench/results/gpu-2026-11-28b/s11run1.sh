#!/usr/bin/env bash
# session 11, call 1 (issue 18, the GPU machine's UCP tag_lat 8 B bar): this tree's module (the idle look's full
# progress paced by the kernel tick instead of every 32nd call; probed deliveries straight to the glue) beside the
# module of db9a802 (the last stop, --baseline-module) and UCX posix, in the same alternating rounds; the new module
# with a 64 KiB ring as a diagnosis row; then the host tag_bw bars (64 KiB, 1 MiB, 16 MiB).
set -x
root=$(pwd); t0=$(date +%s)
mkdir -p /tmp/base-src && tar -xzf .carry/base-db9a802.tar.gz -C /tmp/base-src
{ lscpu; cat /sys/kernel/mm/transparent_hugepage/enabled; } > $OUT/topo.txt 2>&1
scripts/ucx-build.sh ucx .carry/ucx-1.22.0.tar.gz > $OUT/ucx-build.log 2>&1 || { tail -30 $OUT/ucx-build.log; exit 1; }
echo "ucx built at $(( $(date +%s) - t0 )) s"
scripts/ucx-build.sh module "$root" /tmp/bnew > $OUT/mod-new.log 2>&1 & a=$!
scripts/ucx-build.sh module /tmp/base-src /tmp/bbase > $OUT/mod-base.log 2>&1 & b=$!
wait $a || { tail -30 $OUT/mod-new.log; exit 1; }
wait $b || { tail -30 $OUT/mod-base.log; exit 1; }
echo "modules built at $(( $(date +%s) - t0 )) s"
M=/tmp/bnew/src/uct/libuct_gdx.so.0 B=/tmp/bbase/src/uct/libuct_gdx.so.0
timeout 200 bench/ucx_vs_gdx.sh --ucx-prefix /tmp/ucx-cuda --module $M --baseline-module $B --rounds 8 --sizes "" \
  --configs "ucx-posix=posix gdx-shm=gdx_shm,gdx_aux:aux gdx-shm-r64k=gdx_shm,gdx_aux:aux+GDX_SHM_RING_SIZE=64K" \
  --out $OUT/lat.txt > $OUT/lat.console 2>&1
echo "lat done at $(( $(date +%s) - t0 )) s"
timeout 150 bench/ucx_vs_gdx.sh --ucx-prefix /tmp/ucx-cuda --module $M --rounds 4 \
  --configs "ucx-posix=posix gdx-shm=gdx_shm,gdx_aux:aux" --out $OUT/bw.txt > $OUT/bw.console 2>&1
echo "bw done at $(( $(date +%s) - t0 )) s"
grep -E "^bar|^check|^test|^tag_" $OUT/lat.txt $OUT/bw.txt
