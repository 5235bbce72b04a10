#!/usr/bin/env bash
# session 8, call 2: this tree (GDX_UCT_DETECT=copy: gdx_shm alone is host-only as posix is; the probed delivery
# without the async lock) against 0ca40d4 (session 7's module), beside UCX's posix, in alternating rounds: UCP tag_lat
# 8 B, UCT am_lat 8 B, tag_bw 64 KiB / 1 MiB / 16 MiB. gdx-shm-locked is this module with GDX_UCT_LOCKFREE=no (the
# lock-free delivery alone), gdx-shm-copy the CUDA-aware pair of posix,cuda_copy.
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
  --uct-lat --sizes "65536 1048576 16777216" \
  --configs "ucx-posix=posix ucx-posix-cuda=posix,cuda_copy gdx-shm=$g gdx-shm-locked=$g+GDX_UCT_LOCKFREE=no gdx-shm-copy=gdx_shm,gdx_copy,gdx_aux:aux gdx-base=$g+MODULE=/tmp/bbase/src/uct/libuct_gdx.so.0" \
  --out $OUT/bench.txt > $OUT/bench.console 2>&1
echo "bench done at $(( $(date +%s) - t0 )) s"
tail -24 $OUT/bench.txt
