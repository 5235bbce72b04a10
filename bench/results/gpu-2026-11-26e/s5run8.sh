#!/usr/bin/env bash
# session 5 device call 8 (diagnosis): UCT level, no UCP: ucx_perftest -t am_lat 8 B over gdx_shm against posix
# (-d memory both), 9 alternating rounds, de9e683's module: is the Xeon's latency gap in the transport itself?
set -uo pipefail
mkdir -p $OUT/dev
j=$(nproc)
t0=$(date +%s)
if ! [ -x /tmp/ucx-cuda/bin/ucx_perftest ]; then
  ( set -e
    rm -rf /tmp/ucx-build && mkdir -p /tmp/ucx-build && tar -xzf .carry/ucx-1.22.0.tar.gz -C /tmp/ucx-build --strip-components=1
    cd /tmp/ucx-build
    ./contrib/configure-release --prefix=/tmp/ucx-cuda --with-cuda=/usr/local/cuda --without-verbs --without-rdmacm \
      NVCC=/bin/false --without-java --without-go --without-gda
    make -j "$j" install ) > $OUT/dev/ucx-build.log 2>&1 || { tail -30 $OUT/dev/ucx-build.log; exit 1; }
fi
( cmake -S . -B build-uct-bench -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGDX_BUILD_TESTS=OFF \
   -DGDX_UCX_PREFIX=/tmp/ucx-cuda -DGDX_UCX_SRC_DIR=/tmp/ucx-build -DGDX_UCX_INFO=/tmp/ucx-cuda/bin/ucx_info &&
  cmake --build build-uct-bench -j "$j" --target uct_gdx ) > $OUT/dev/build.log 2>&1 || { tail -30 $OUT/dev/build.log; exit 1; }
echo "built: $(( $(date +%s) - t0 )) s"
export LD_LIBRARY_PATH=/tmp/ucx-cuda/lib
pt=/tmp/ucx-cuda/bin/ucx_perftest
m=$PWD/build-uct-bench/src/uct
{
echo "# ucx_perftest -t am_lat -s 8 -n 200000, UCT level, -d memory; server CPU 0, client CPU 1; 9 alternating rounds"
echo "# $(date -u '+%F %T UTC'), $(uname -sr), UCX 1.22.0 with CUDA (/tmp/ucx-cuda), module de9e683"
for r in 1 2 3 4 5 6 7 8 9; do
  for tl in posix gdx_shm; do
    p=$((13000 + RANDOM % 2000))
    env UCX_PLUGIN_PATH=$m taskset -c 0 $pt -p $p -t am_lat -x $tl -d memory -s 8 -n 200000 > /tmp/srv.txt 2>&1 & sleep 1
    v=$(env UCX_PLUGIN_PATH=$m taskset -c 1 $pt 127.0.0.1 -p $p -t am_lat -x $tl -d memory -s 8 -n 200000 2>&1 | awk '/^Final:/ {print $3}')
    wait
    echo "raw $tl am_lat 8 $v"
  done
done
} > $OUT/dev/uct-am-lat.txt 2>&1
python3 - $OUT/dev/uct-am-lat.txt <<'PY'
import sys,collections
d=collections.defaultdict(list)
for l in open(sys.argv[1]):
    f=l.split()
    if f and f[0]=='raw' and len(f)>4: d[f[1]].append(float(f[4]))
for k,v in d.items(): print(k, 'median', sorted(v)[len(v)//2], v)
if len(d)==2: print('gdx_shm/posix ratio (posix/gdx):', sorted(d['posix'])[len(d['posix'])//2]/sorted(d['gdx_shm'])[len(d['gdx_shm'])//2])
PY
