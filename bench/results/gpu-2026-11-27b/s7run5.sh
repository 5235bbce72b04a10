#!/usr/bin/env bash
# session 7, call 5 (calibration, a diagnosis): this tree (T) and T plus ~190 instructions of empty loop on
# am_short's path (K), UCT am_lat and UCP tag_lat next to posix, alternating rounds.
set -x
root=$(pwd); t0=$(date +%s)
scripts/ucx-build.sh ucx .carry/ucx-1.22.0.tar.gz > $OUT/ucx-build.log 2>&1 || { tail -30 $OUT/ucx-build.log; exit 1; }
echo "ucx built in $(( $(date +%s) - t0 )) s"
mkdir -p /tmp/treeK && tar --exclude=./.carry --exclude='./build*' -cf - . | tar -xf - -C /tmp/treeK && (cd /tmp/treeK && patch -p1 < $root/.carry/varK.patch) || exit 1
scripts/ucx-build.sh module "$root" /tmp/bT > $OUT/modT.log 2>&1 &
scripts/ucx-build.sh module /tmp/treeK /tmp/bK > $OUT/modK.log 2>&1 &
wait
echo "modules built at $(( $(date +%s) - t0 )) s"
g=gdx_shm,gdx_aux:aux+GDX_CUDA=no
bench/ucx_vs_gdx.sh --ucx-prefix /tmp/ucx-cuda --module /tmp/bT/src/uct/libuct_gdx.so.0 --rounds 5 --uct-lat --sizes "" \
  --configs "ucx-posix=posix gdx-T=$g gdx-K=$g+MODULE=/tmp/bK/src/uct/libuct_gdx.so.0" --out $OUT/cal.txt > /dev/null 2>&1
echo "bench done at $(( $(date +%s) - t0 )) s"
tail -5 $OUT/cal.txt
