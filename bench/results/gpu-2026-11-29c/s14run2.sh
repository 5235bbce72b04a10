#!/usr/bin/env bash
# session 14, call 2: the two changes call 1 pointed at, as product knobs, beside posix in the same rounds:
#   gdx-shm:    this tree's defaults: GDX_UCT_IDLE_PAUSE=yes (an idle look that found nothing ends with PAUSE) and
#               GDX_SHM_DEMOTE=yes (the sender CLDEMOTEs a small message's ring cell once published)
#   gdx-pause:  GDX_SHM_DEMOTE=no (the pause alone)
#   gdx-s13:    GDX_UCT_IDLE_PAUSE=no GDX_SHM_DEMOTE=no (session 13's behaviour)
# tag_lat and UCT am_lat 8 B, 14 alternating rounds; then tag_bw 64 KiB / 1 MiB / 16 MiB, 3 rounds.
# Returns: lat.txt, bw.txt, handshake.txt, logs.tgz.
set -x
root=$(pwd); t0=$(date +%s); L=/tmp/s14logs2; mkdir -p $L
tar -C /tmp -xJf .carry/ucx-cuda.tar.xz && tar -xzf .carry/ucx-1.22.0.tar.gz -C /tmp/ucx-build --strip-components=1 --skip-old-files || exit 1
export PATH=/tmp/ucx-cuda/bin:$PATH
scripts/ucx-build.sh module "$root" /tmp/bnew > $L/mod-new.log 2>&1 || { tail -20 $L/mod-new.log; exit 1; }
echo "module built at $(( $(date +%s) - t0 )) s"
M=/tmp/bnew/src/uct/libuct_gdx.so.0
# What each endpoint uses (wakeup handshake, cell demote, lock-free delivery), from one short debug run.
mapfile -t LE < <(tools/gdx-run --module $M --print-load-env)
env "${LE[@]}" UCX_TLS=gdx_shm,gdx_aux:aux GDX_LOG_LEVEL=debug taskset -c 0 timeout 60 ucx_perftest -p 23456 > $L/hs-srv.txt 2>&1 &
sleep 2
env "${LE[@]}" UCX_TLS=gdx_shm,gdx_aux:aux GDX_LOG_LEVEL=debug taskset -c 1 timeout 60 ucx_perftest 127.0.0.1 -p 23456 -t tag_lat -n 1000 > $L/hs-cli.txt 2>&1
wait
grep -h "wakeup handshake\|lockfree\|membarrier\|demote" $L/hs-*.txt | sed 's/^.*\] *//' | sort | uniq -c > $OUT/handshake.txt; cat $OUT/handshake.txt
timeout 330 bench/ucx_vs_gdx.sh --ucx-prefix /tmp/ucx-cuda --module $M --rounds 14 --sizes "" --uct-lat \
  --configs "ucx-posix=posix gdx-shm=gdx_shm,gdx_aux:aux gdx-pause=gdx_shm,gdx_aux:aux+GDX_SHM_DEMOTE=no gdx-s13=gdx_shm,gdx_aux:aux+GDX_UCT_IDLE_PAUSE=no+GDX_SHM_DEMOTE=no" \
  --out $OUT/lat.txt > $L/lat.console 2>&1
echo "lat done at $(( $(date +%s) - t0 )) s"
grep -E "^bar|^tag_|^am_" $OUT/lat.txt
timeout 200 bench/ucx_vs_gdx.sh --ucx-prefix /tmp/ucx-cuda --module $M --rounds 3 --sizes "65536 1048576 16777216" \
  --configs "ucx-posix=posix gdx-shm=gdx_shm,gdx_aux:aux gdx-s13=gdx_shm,gdx_aux:aux+GDX_UCT_IDLE_PAUSE=no+GDX_SHM_DEMOTE=no" \
  --out $OUT/bw.txt > $L/bw.console 2>&1
echo "bw done at $(( $(date +%s) - t0 )) s"
tar -czf $OUT/logs.tgz -C $L .
grep -E "^bar|^tag_" $OUT/bw.txt
