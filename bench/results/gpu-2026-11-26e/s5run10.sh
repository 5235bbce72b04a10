#!/usr/bin/env bash
# session 5 device call 10 (diagnosis, never a product build): does the record layout explain the transport's gap?
# A copy of this tree with records 128-byte aligned (ring.h kRecAlign 128, the size of UCX mm's FIFO elements: two
# consecutive small messages then never share a 128-byte pair of lines) beside the product module: UCT am_lat
# 9 rounds, UCP tag_lat 5 rounds.
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
rm -rf /tmp/diag && mkdir -p /tmp/diag && tar --exclude=./build* --exclude=./.carry --exclude=./.git -cf - . | tar -xf - -C /tmp/diag
sed -i 's/^inline constexpr size_t kRecAlign = 64;/inline constexpr size_t kRecAlign = 128;/' /tmp/diag/src/transport/shm/ring.h
grep -n "kRecAlign = " /tmp/diag/src/transport/shm/ring.h > $OUT/dev/diag-patch.txt
mod() { cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGDX_BUILD_TESTS=OFF \
   -DGDX_UCX_PREFIX=/tmp/ucx-cuda -DGDX_UCX_SRC_DIR=/tmp/ucx-build -DGDX_UCX_INFO=/tmp/ucx-cuda/bin/ucx_info &&
   cmake --build "$2" -j 8 --target uct_gdx; }
( mod /tmp/diag /tmp/diag/build > $OUT/dev/diag-build.log 2>&1 ) &
mod . build-uct-bench > $OUT/dev/build.log 2>&1 || { tail -30 $OUT/dev/build.log; exit 1; }
wait
[ -f /tmp/diag/build/src/uct/libuct_gdx.so.0 ] || { tail -20 $OUT/dev/diag-build.log; exit 1; }
echo "built: $(( $(date +%s) - t0 )) s"
export LD_LIBRARY_PATH=/tmp/ucx-cuda/lib
pt=/tmp/ucx-cuda/bin/ucx_perftest
{
echo "# ucx_perftest -t am_lat -s 8 -n 200000, UCT level, -d memory; server CPU 0, client CPU 1; 9 alternating rounds"
echo "# $(date -u '+%F %T UTC'), $(uname -sr), UCX 1.22.0 with CUDA; gdx = this tree's module, align128 = the diagnosis copy"
for r in 1 2 3 4 5 6 7 8 9; do
  for c in posix:posix:$PWD/build-uct-bench/src/uct gdx:gdx_shm:$PWD/build-uct-bench/src/uct align128:gdx_shm:/tmp/diag/build/src/uct; do
    IFS=: read -r name tl m <<<"$c"
    p=$((13000 + RANDOM % 2000))
    env UCX_PLUGIN_PATH=$m taskset -c 0 $pt -p $p -t am_lat -x $tl -d memory -s 8 -n 200000 > /tmp/srv.txt 2>&1 & sleep 1
    v=$(env UCX_PLUGIN_PATH=$m taskset -c 1 $pt 127.0.0.1 -p $p -t am_lat -x $tl -d memory -s 8 -n 200000 2>&1 | awk '/^Final:/ {print $3}')
    wait
    echo "raw $name am_lat 8 $v"
  done
done
} > $OUT/dev/uct-am-lat-align128.txt 2>&1
python3 - $OUT/dev/uct-am-lat-align128.txt <<'PY'
import sys,collections
d=collections.defaultdict(list)
for l in open(sys.argv[1]):
    f=l.split()
    if f and f[0]=='raw' and len(f)>4: d[f[1]].append(float(f[4]))
med=lambda v: sorted(v)[len(v)//2]
for k,v in d.items(): print('am_lat', k, 'median', med(v), v)
PY
echo "am_lat done: $(( $(date +%s) - t0 )) s"
g=gdx_shm,gdx_aux:aux
timeout 240 bench/ucx_vs_gdx.sh --ucx-prefix /tmp/ucx-cuda --module build-uct-bench/src/uct/libuct_gdx.so.0 --rounds 5 --sizes "" \
  --configs "ucx-posix=posix gdx-shm-nocuda=$g+GDX_CUDA=no align128-nocuda=$g+GDX_CUDA=no+MODULE=/tmp/diag/build/src/uct/libuct_gdx.so.0 ucx-posix-cuda=posix,cuda_copy gdx-shm=$g align128=$g+MODULE=/tmp/diag/build/src/uct/libuct_gdx.so.0" \
  --out $OUT/dev/lat-align128.txt > /dev/null 2>&1
echo "tag_lat done: $(( $(date +%s) - t0 )) s"
grep -E "^tag|^test" $OUT/dev/lat-align128.txt
