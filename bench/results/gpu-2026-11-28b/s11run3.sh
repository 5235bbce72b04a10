#!/usr/bin/env bash
# session 11, call 3 (issue 18's host bars on the GPU machine, the final tree of the session): UCP tag_lat 8 B and
# tag_bw 64 KiB / 1 MiB / 16 MiB over gdx_shm against UCX posix, with this tree's module beside the module of
# db9a802 (the last stop, --baseline-module), in the same alternating rounds.
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
timeout 170 bench/ucx_vs_gdx.sh --ucx-prefix /tmp/ucx-cuda --module $M --baseline-module $B --rounds 10 --sizes "" \
  --configs "ucx-posix=posix gdx-shm=gdx_shm,gdx_aux:aux" --out $OUT/lat.txt > $OUT/lat.console 2>&1
echo "lat done at $(( $(date +%s) - t0 )) s"
timeout 230 bench/ucx_vs_gdx.sh --ucx-prefix /tmp/ucx-cuda --module $M --baseline-module $B --rounds 5 \
  --configs "ucx-posix=posix gdx-shm=gdx_shm,gdx_aux:aux" --out $OUT/bw.txt > $OUT/bw.console 2>&1
echo "bw done at $(( $(date +%s) - t0 )) s"
grep -E "^bar|^check|^test|^tag_" $OUT/lat.txt $OUT/bw.txt
