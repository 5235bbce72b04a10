#!/usr/bin/env bash
# session 5 device call 4: the host bars at this tree (the lock-free idle look, gdx_aux out of idle progress, and
# call 1's changes), 5 alternating rounds, beside bca0ffa's module (session 4's final code, the baseline: check
# lines) and 8dc2ba8s (this session before the idle look: mid-8dc2ba8), with the like-for-like latency pairs.
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
echo "ucx built: $(( $(date +%s) - t0 )) s"
mod() { cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGDX_BUILD_TESTS=OFF \
   -DGDX_UCX_PREFIX=/tmp/ucx-cuda -DGDX_UCX_SRC_DIR=/tmp/ucx-build -DGDX_UCX_INFO=/tmp/ucx-cuda/bin/ucx_info &&
   cmake --build "$2" -j 8 --target uct_gdx; }
for t in base:baseline-bca0ffa mid:mid-8dc2ba8; do
  d=/tmp/${t%%:*}; rm -rf $d && mkdir -p $d && tar -xzf .carry/${t#*:}.tar.gz -C $d
  ( mod $d $d/build > $OUT/dev/${t%%:*}-build.log 2>&1 ) &
done
mod . build-uct-bench > $OUT/dev/build.log 2>&1 || { tail -30 $OUT/dev/build.log; exit 1; }
wait
ls /tmp/base/build/src/uct/libuct_gdx.so.0 /tmp/mid/build/src/uct/libuct_gdx.so.0 || exit 1
echo "modules built: $(( $(date +%s) - t0 )) s"
g=gdx_shm,gdx_aux:aux
timeout 420 bench/ucx_vs_gdx.sh --ucx-prefix /tmp/ucx-cuda --module build-uct-bench/src/uct/libuct_gdx.so.0 \
  --baseline-module /tmp/base/build/src/uct/libuct_gdx.so.0 --rounds 5 \
  --configs "ucx-posix=posix ucx-posix-cuda=posix,cuda_copy gdx-shm=$g gdx-shm-nocuda=$g+GDX_CUDA=no mid-8dc2ba8=$g+MODULE=/tmp/mid/build/src/uct/libuct_gdx.so.0" \
  --out $OUT/dev/host-vs-ucx-ab.txt > /dev/null 2>&1
echo "bench done: $(( $(date +%s) - t0 )) s"
grep -E "^bar |^also |^check |^tag|^test" $OUT/dev/host-vs-ucx-ab.txt
lscpu > $OUT/dev/lscpu.txt 2>&1
