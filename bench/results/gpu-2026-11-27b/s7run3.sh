#!/usr/bin/env bash
# session 7, call 3: is it the every-32nd full progress? Modules: A = HEAD, E = full progress every 1024th idle
# call, G = every 2^20th (almost never: the floor), CE = varC + E. UCT am_lat + UCP tag_lat, alternating rounds.
set -x
root=$(pwd)
t0=$(date +%s)
scripts/ucx-build.sh ucx .carry/ucx-1.22.0.tar.gz > $OUT/ucx-build.log 2>&1 || { tail -30 $OUT/ucx-build.log; exit 1; }
echo "ucx built in $(( $(date +%s) - t0 )) s"
for v in A E G CE; do
  mkdir -p /tmp/tree$v
  tar --exclude=./.carry --exclude='./build*' -cf - . | tar -xf - -C /tmp/tree$v
done
(cd /tmp/treeE && patch -p1 < $root/.carry/varE.patch) && (cd /tmp/treeG && patch -p1 < $root/.carry/varG.patch) &&
(cd /tmp/treeCE && patch -p1 < $root/.carry/varC.patch && patch -p1 < $root/.carry/varE.patch) || exit 1
for v in A E G CE; do scripts/ucx-build.sh module /tmp/tree$v /tmp/b$v > $OUT/mod$v.log 2>&1 & done
wait
for v in A E G CE; do [ -f /tmp/b$v/src/uct/libuct_gdx.so.0 ] || { tail -30 $OUT/mod$v.log; exit 1; }; done
echo "modules built at $(( $(date +%s) - t0 )) s"
m() { echo "+MODULE=/tmp/b$1/src/uct/libuct_gdx.so.0"; }
g="gdx_shm,gdx_aux:aux"
timeout 330 bench/ucx_vs_gdx.sh --ucx-prefix /tmp/ucx-cuda --module /tmp/bA/src/uct/libuct_gdx.so.0 --rounds 7 --uct-lat --sizes "" \
  --configs "ucx-posix=posix ucx-posix-cuda=posix,cuda_copy gdx-shm=$g gdx-A=$g+GDX_CUDA=no gdx-E=$g+GDX_CUDA=no$(m E) gdx-G=$g+GDX_CUDA=no$(m G) gdx-CE=$g+GDX_CUDA=no$(m CE) gdx-CE-cuda=$g$(m CE)" \
  --out $OUT/lat.txt > /dev/null 2>&1
echo "bench done at $(( $(date +%s) - t0 )) s"
tail -8 $OUT/lat.txt
