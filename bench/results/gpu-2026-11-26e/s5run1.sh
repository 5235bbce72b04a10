#!/usr/bin/env bash
# session 5 device call 1: the host bars at this tree (the receive path without a second quiet pass, the engine's
# and the module's progress split hot/cold, Channel::poll direct to its owner), 5 alternating rounds, against
# bca0ffa's module (session 4's final code) in the same rounds, with the like-for-like latency pairs.
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
rm -rf /tmp/base && mkdir -p /tmp/base && tar -xzf .carry/baseline-bca0ffa.tar.gz -C /tmp/base
mod() { cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGDX_BUILD_TESTS=OFF \
   -DGDX_UCX_PREFIX=/tmp/ucx-cuda -DGDX_UCX_SRC_DIR=/tmp/ucx-build -DGDX_UCX_INFO=/tmp/ucx-cuda/bin/ucx_info &&
   cmake --build "$2" -j "$j" --target uct_gdx; }
( mod /tmp/base /tmp/base/build > $OUT/dev/base-build.log 2>&1 ) &
mod . build-uct-bench > $OUT/dev/build.log 2>&1 || { tail -30 $OUT/dev/build.log; exit 1; }
wait
echo "modules built: $(( $(date +%s) - t0 )) s"
g=gdx_shm,gdx_aux:aux
timeout 420 bench/ucx_vs_gdx.sh --ucx-prefix /tmp/ucx-cuda --module build-uct-bench/src/uct/libuct_gdx.so.0 \
  --baseline-module /tmp/base/build/src/uct/libuct_gdx.so.0 --rounds 5 \
  --configs "ucx-posix=posix ucx-posix-cuda=posix,cuda_copy gdx-shm=$g gdx-shm-nocuda=$g+GDX_CUDA=no" \
  --out $OUT/dev/host-vs-ucx-ab.txt > /dev/null 2>&1
echo "bench done: $(( $(date +%s) - t0 )) s"
grep -E "^bar |^also |^check |^tag|^test" $OUT/dev/host-vs-ucx-ab.txt
lscpu > $OUT/dev/lscpu.txt 2>&1
