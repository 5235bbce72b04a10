#!/usr/bin/env bash
# session 14, call 3: this tree (the cell demote of call 2 dropped: no gain there; GDX_UCT_IDLE_PAUSE now a count,
# default 1) beside posix in the same rounds: tag_lat and UCT am_lat 8 B, 16 alternating rounds, with 0, 1 (the
# default) and 2 PAUSEs per idle look; then the bandwidth bars, 3 rounds.
# Returns: lat.txt, bw.txt, logs.tgz.
set -x
root=$(pwd); t0=$(date +%s); L=/tmp/s14logs3; mkdir -p $L
[ -x /tmp/ucx-cuda/bin/ucx_perftest ] || tar -C /tmp -xJf .carry/ucx-cuda.tar.xz || exit 1
tar -xzf .carry/ucx-1.22.0.tar.gz -C /tmp/ucx-build --strip-components=1 --skip-old-files || exit 1
rm -rf /tmp/bnew; scripts/ucx-build.sh module "$root" /tmp/bnew > $L/mod-new.log 2>&1 || { tail -20 $L/mod-new.log; exit 1; }
echo "module built at $(( $(date +%s) - t0 )) s"
M=/tmp/bnew/src/uct/libuct_gdx.so.0
timeout 330 bench/ucx_vs_gdx.sh --ucx-prefix /tmp/ucx-cuda --module $M --rounds 16 --sizes "" --uct-lat \
  --configs "ucx-posix=posix gdx-shm=gdx_shm,gdx_aux:aux gdx-pause0=gdx_shm,gdx_aux:aux+GDX_UCT_IDLE_PAUSE=0 gdx-pause2=gdx_shm,gdx_aux:aux+GDX_UCT_IDLE_PAUSE=2" \
  --out $OUT/lat.txt > $L/lat.console 2>&1
echo "lat done at $(( $(date +%s) - t0 )) s"
grep -E "^bar|^tag_|^am_" $OUT/lat.txt
left=$(( 570 - ($(date +%s) - t0) ))
timeout $left bench/ucx_vs_gdx.sh --ucx-prefix /tmp/ucx-cuda --module $M --rounds 3 \
  --configs "ucx-posix=posix gdx-shm=gdx_shm,gdx_aux:aux" --out $OUT/bw.txt > $L/bw.console 2>&1
echo "bw done at $(( $(date +%s) - t0 )) s"
tar -czf $OUT/logs.tgz -C $L .
grep -E "^bar|^tag_" $OUT/bw.txt
