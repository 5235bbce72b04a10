#!/usr/bin/env bash
# session 5 device call 7 (diagnosis): does gdx_shm's latency against posix depend on which two CPUs the processes
# run on? tag_lat 8 B only, 5 alternating rounds per CPU pair, de9e683's module; the CPU topology (lscpu -e).
set -uo pipefail
mkdir -p $OUT/dev
j=$(nproc)
t0=$(date +%s)
lscpu -e > $OUT/dev/lscpu-e.txt 2>&1; cat $OUT/dev/lscpu-e.txt
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
g=gdx_shm,gdx_aux:aux
for cpus in 0,1 0,8 2,3; do
  timeout 150 bench/ucx_vs_gdx.sh --ucx-prefix /tmp/ucx-cuda --module build-uct-bench/src/uct/libuct_gdx.so.0 --rounds 5 \
    --sizes "" --cpus $cpus --configs "ucx-posix=posix ucx-posix-cuda=posix,cuda_copy gdx-shm=$g gdx-shm-nocuda=$g+GDX_CUDA=no" \
    --out $OUT/dev/lat-cpus-${cpus/,/-}.txt > /dev/null 2>&1
  echo "== cpus $cpus ($(( $(date +%s) - t0 )) s)"; grep -E "^bar |^also |^tag" $OUT/dev/lat-cpus-${cpus/,/-}.txt
done
