#!/usr/bin/env bash
# session 8, call 5 (a diagnosis): how much the every-32nd full progress of an idle interface costs now that the
# probed delivery takes no lock: this tree (T, kFullEvery 32) against T with every 256th (varF256.patch) and every
# 1024th (varF1024.patch), beside UCX's posix; UCP tag_lat 8 B and UCT am_lat 8 B, 8 alternating rounds.
set -x
root=$(pwd); t0=$(date +%s)
scripts/ucx-build.sh ucx .carry/ucx-1.22.0.tar.gz > $OUT/ucx-build.log 2>&1 || { tail -30 $OUT/ucx-build.log; exit 1; }
echo "ucx built in $(( $(date +%s) - t0 )) s"
for n in 256 1024; do
  mkdir -p /tmp/tree$n && tar --exclude=./.carry --exclude='./build*' -cf - . | tar -xf - -C /tmp/tree$n &&
    (cd /tmp/tree$n && patch -p1 < $root/.carry/varF$n.patch) || exit 1
done
scripts/ucx-build.sh module "$root" /tmp/bT > $OUT/modT.log 2>&1 &
scripts/ucx-build.sh module /tmp/tree256 /tmp/b256 > $OUT/mod256.log 2>&1 &
scripts/ucx-build.sh module /tmp/tree1024 /tmp/b1024 > $OUT/mod1024.log 2>&1 &
wait
for b in bT b256 b1024; do [ -f /tmp/$b/src/uct/libuct_gdx.so.0 ] || { tail -30 $OUT/mod*.log; exit 1; }; done
echo "modules built at $(( $(date +%s) - t0 )) s"
g=gdx_shm,gdx_aux:aux
timeout 400 bench/ucx_vs_gdx.sh --ucx-prefix /tmp/ucx-cuda --module /tmp/bT/src/uct/libuct_gdx.so.0 --rounds 8 --uct-lat --sizes "" \
  --configs "ucx-posix=posix gdx-shm=$g gdx-f256=$g+MODULE=/tmp/b256/src/uct/libuct_gdx.so.0 gdx-f1024=$g+MODULE=/tmp/b1024/src/uct/libuct_gdx.so.0" \
  --out $OUT/bench.txt > $OUT/bench.console 2>&1
echo "bench done at $(( $(date +%s) - t0 )) s"
tail -8 $OUT/bench.txt
