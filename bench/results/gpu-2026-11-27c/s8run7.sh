#!/usr/bin/env bash
# session 8, call 7: the latency bar at the final tree, more rounds: UCP tag_lat 8 B, gdx_shm against posix and the
# CUDA-aware pair, 12 alternating rounds.
set -x
root=$(pwd); t0=$(date +%s)
scripts/ucx-build.sh ucx .carry/ucx-1.22.0.tar.gz > $OUT/ucx-build.log 2>&1 || { tail -30 $OUT/ucx-build.log; exit 1; }
scripts/ucx-build.sh module "$root" /tmp/bnew > $OUT/mod-new.log 2>&1 || { tail -30 $OUT/mod-new.log; exit 1; }
echo "built at $(( $(date +%s) - t0 )) s"
timeout 200 bench/ucx_vs_gdx.sh --ucx-prefix /tmp/ucx-cuda --module /tmp/bnew/src/uct/libuct_gdx.so.0 --rounds 12 --sizes "" \
  --configs "ucx-posix=posix gdx-shm=gdx_shm,gdx_aux:aux ucx-posix-cuda=posix,cuda_copy gdx-shm-copy=gdx_shm,gdx_copy,gdx_aux:aux" \
  --out $OUT/bench.txt > $OUT/bench.console 2>&1
echo "bench done at $(( $(date +%s) - t0 )) s"
tail -6 $OUT/bench.txt
