#!/usr/bin/env bash
# session 14, call 5: the final tree's host latency bar once more, with more rounds: UCP tag_lat (and UCT am_lat)
# 8 B over gdx_shm with the defaults (GDX_UCT_IDLE_PAUSE=1) beside posix, 20 alternating rounds.
# Returns: lat.txt, logs.tgz.
set -x
root=$(pwd); t0=$(date +%s); L=/tmp/s14logs5; mkdir -p $L
tar -C /tmp -xJf .carry/ucx-cuda.tar.xz && tar -xzf .carry/ucx-1.22.0.tar.gz -C /tmp/ucx-build --strip-components=1 --skip-old-files || exit 1
scripts/ucx-build.sh module "$root" /tmp/bnew > $L/mod-new.log 2>&1 || { tail -20 $L/mod-new.log; exit 1; }
echo "module built at $(( $(date +%s) - t0 )) s"
timeout 260 bench/ucx_vs_gdx.sh --ucx-prefix /tmp/ucx-cuda --module /tmp/bnew/src/uct/libuct_gdx.so.0 --rounds 20 --sizes "" \
  --uct-lat --configs "ucx-posix=posix gdx-shm=gdx_shm,gdx_aux:aux" --out $OUT/lat.txt > $L/lat.console 2>&1
echo "lat done at $(( $(date +%s) - t0 )) s"
tar -czf $OUT/logs.tgz -C $L .
grep -E "^bar|^tag_|^am_" $OUT/lat.txt
