#!/usr/bin/env bash
# session 7, call 1: UCX 1.22 with CUDA; four modules (A = HEAD, B = 128-byte records, C = one record per probed
# delivery and a probe re-pointed without a load, D = B+C); UCT am_lat + UCP tag_lat, alternating rounds; counters.
set -x
root=$(pwd)
{ date -u; uname -a; cat /proc/sys/kernel/perf_event_paranoid; lscpu; nvidia-smi -L; } > $OUT/sys.txt 2>&1
t0=$(date +%s)
scripts/ucx-build.sh ucx .carry/ucx-1.22.0.tar.gz > $OUT/ucx-build.log 2>&1 || { tail -30 $OUT/ucx-build.log; exit 1; }
echo "ucx built in $(( $(date +%s) - t0 )) s"
for v in A B C D; do
  mkdir -p /tmp/tree$v
  tar --exclude=./.carry --exclude='./build*' -cf - . | tar -xf - -C /tmp/tree$v
done
(cd /tmp/treeB && patch -p1 < $root/.carry/varB.patch) && (cd /tmp/treeC && patch -p1 < $root/.carry/varC.patch) &&
(cd /tmp/treeD && patch -p1 < $root/.carry/varB.patch && patch -p1 < $root/.carry/varC.patch) || exit 1
for v in A B C D; do scripts/ucx-build.sh module /tmp/tree$v /tmp/b$v > $OUT/mod$v.log 2>&1 & done
wait
for v in A B C D; do [ -f /tmp/b$v/src/uct/libuct_gdx.so.0 ] || { tail -30 $OUT/mod$v.log; exit 1; }; done
echo "modules built at $(( $(date +%s) - t0 )) s"
m() { echo "+MODULE=/tmp/b$1/src/uct/libuct_gdx.so.0"; }
timeout 300 bench/ucx_vs_gdx.sh --ucx-prefix /tmp/ucx-cuda --module /tmp/bA/src/uct/libuct_gdx.so.0 --rounds 5 --uct-lat --sizes "" \
  --configs "ucx-posix=posix ucx-posix64=posix+UCX_POSIX_FIFO_ELEM_SIZE=64 gdx-A=gdx_shm,gdx_aux:aux+GDX_CUDA=no gdx-B=gdx_shm,gdx_aux:aux+GDX_CUDA=no$(m B) gdx-C=gdx_shm,gdx_aux:aux+GDX_CUDA=no$(m C) gdx-D=gdx_shm,gdx_aux:aux+GDX_CUDA=no$(m D)" \
  --out $OUT/lat.txt > /dev/null 2>&1
echo "bench done at $(( $(date +%s) - t0 )) s"
tail -12 $OUT/lat.txt
timeout 120 bench/probes/perf_counters_pingpong.sh --ucx-prefix /tmp/ucx-cuda -n 200000 --raw "0x02c3,0x04d2,0x02d2,0x01d2" \
  posix=posix "gdxA=gdx_shm+GDX_CUDA=no+MODULE=/tmp/bA/src/uct" "gdxD=gdx_shm+GDX_CUDA=no+MODULE=/tmp/bD/src/uct" > $OUT/counters.txt 2>&1
echo "all done at $(( $(date +%s) - t0 )) s"
head -40 $OUT/counters.txt
