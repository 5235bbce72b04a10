#!/usr/bin/env bash
# session 8, call 4: the bars of issue 18 on host memory at this session's final module, beside 0ca40d4's (session 7)
# and UCX's posix, in 6 alternating rounds: UCP tag_lat 8 B, tag_bw 64 KiB / 1 MiB / 16 MiB.
#   gdx-shm         gdx_shm,gdx_aux:aux: the bar's configuration (host-only, as posix: gdx_copy detects memory types)
#   gdx-shm-copy    gdx_shm,gdx_copy,gdx_aux:aux: the CUDA-aware pair of ucx-posix-cuda (posix,cuda_copy)
#   gdx-shm-locked  this module with GDX_UCT_LOCKFREE=no: the probed delivery under the async lock again
#   gdx-base        0ca40d4's module, gdx_shm,gdx_aux:aux (gdx_shm detecting CUDA itself, delivery under the lock)
set -x
root=$(pwd)
t0=$(date +%s)
scripts/ucx-build.sh ucx .carry/ucx-1.22.0.tar.gz > $OUT/ucx-build.log 2>&1 || { tail -30 $OUT/ucx-build.log; exit 1; }
echo "ucx built in $(( $(date +%s) - t0 )) s"
mkdir -p /tmp/base && tar -xzf .carry/base-0ca40d4.tar.gz -C /tmp/base
scripts/ucx-build.sh module /tmp/base /tmp/bbase > $OUT/mod-base.log 2>&1 &
scripts/ucx-build.sh module "$root" /tmp/bnew > $OUT/mod-new.log 2>&1 &
wait
for b in bbase bnew; do [ -f /tmp/$b/src/uct/libuct_gdx.so.0 ] || { tail -30 $OUT/mod-${b#b}.log; exit 1; }; done
echo "modules built at $(( $(date +%s) - t0 )) s"
g=gdx_shm,gdx_aux:aux
timeout 440 bench/ucx_vs_gdx.sh --ucx-prefix /tmp/ucx-cuda --module /tmp/bnew/src/uct/libuct_gdx.so.0 --rounds 6 \
  --sizes "65536 1048576 16777216" \
  --configs "ucx-posix=posix ucx-posix-cuda=posix,cuda_copy gdx-shm=$g gdx-shm-copy=gdx_shm,gdx_copy,gdx_aux:aux gdx-shm-locked=$g+GDX_UCT_LOCKFREE=no gdx-base=$g+MODULE=/tmp/bbase/src/uct/libuct_gdx.so.0" \
  --out $OUT/bench.txt > $OUT/bench.console 2>&1
echo "bench done at $(( $(date +%s) - t0 )) s"
tail -16 $OUT/bench.txt
