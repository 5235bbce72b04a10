#!/usr/bin/env bash
# session 7, call 4: this tree (the probed delivery without a second load, a direct call and a budget; am_short's
# fast status and small copy) against 971c00b, with UCX's posix, in alternating rounds: UCP tag_lat, UCT am_lat,
# tag_bw 64 KiB and 1 MiB.
set -x
root=$(pwd)
t0=$(date +%s)
scripts/ucx-build.sh ucx .carry/ucx-1.22.0.tar.gz > $OUT/ucx-build.log 2>&1 || { tail -30 $OUT/ucx-build.log; exit 1; }
echo "ucx built in $(( $(date +%s) - t0 )) s"
mkdir -p /tmp/base && tar -xzf .carry/base-971c00b.tar.gz -C /tmp/base
scripts/ucx-build.sh module /tmp/base /tmp/bbase > $OUT/mod-base.log 2>&1 &
scripts/ucx-build.sh module "$root" /tmp/bnew > $OUT/mod-new.log 2>&1 &
wait
for b in bbase bnew; do [ -f /tmp/$b/src/uct/libuct_gdx.so.0 ] || { tail -30 $OUT/mod-${b#b}.log; exit 1; }; done
echo "modules built at $(( $(date +%s) - t0 )) s"
timeout 420 bench/ucx_vs_gdx.sh --ucx-prefix /tmp/ucx-cuda --module /tmp/bnew/src/uct/libuct_gdx.so.0 \
  --baseline-module /tmp/bbase/src/uct/libuct_gdx.so.0 --rounds 7 --uct-lat --sizes "65536 1048576" --configs "ucx-posix=posix ucx-posix-cuda=posix,cuda_copy gdx-shm=gdx_shm,gdx_aux:aux gdx-shm-nocuda=gdx_shm,gdx_aux:aux+GDX_CUDA=no" --out $OUT/bench.txt > /dev/null 2>&1
echo "bench done at $(( $(date +%s) - t0 )) s"
tail -22 $OUT/bench.txt
