#!/usr/bin/env bash
# session 5 device call 3: is the rest of the CUDA-aware latency gap the transport's, or the CUDA context that gdx's
# CUDA transports create at memory-domain open (UCP's memory-type cache then holds the context's mappings)?
# tag_lat only, 7 alternating rounds: posix, posix,cuda_copy, posix,cuda_copy with a CUDA context made at start
# (bench/probes/cuda_context_preload.c), gdx_shm, gdx_shm GDX_CUDA=no. Then UCP's memory-type cache per config.
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
cc -O1 -shared -fPIC -o /tmp/ccp.so bench/probes/cuda_context_preload.c -ldl || exit 1
cc -O1 -o /tmp/mtc bench/probes/ucp_memtype_cache.c -I/tmp/ucx-build/src -I/tmp/ucx-build -I/tmp/ucx-cuda/include \
   -L/tmp/ucx-cuda/lib -lucp -lucs || exit 1
echo "built: $(( $(date +%s) - t0 )) s"
g=gdx_shm,gdx_aux:aux
timeout 330 bench/ucx_vs_gdx.sh --ucx-prefix /tmp/ucx-cuda --module build-uct-bench/src/uct/libuct_gdx.so.0 --rounds 7 --sizes "" \
  --configs "ucx-posix=posix ucx-posix-cuda=posix,cuda_copy ucx-posix-cuda-ctx=posix,cuda_copy+LD_PRELOAD=/tmp/ccp.so gdx-shm=$g gdx-shm-nocuda=$g+GDX_CUDA=no" \
  --out $OUT/dev/lat-context.txt > /dev/null 2>&1
echo "bench done: $(( $(date +%s) - t0 )) s"
grep -E "^bar |^also |^tag|^test" $OUT/dev/lat-context.txt
export LD_LIBRARY_PATH=/tmp/ucx-cuda/lib
m=$PWD/build-uct-bench/src/uct
{
for c in "posix,cuda_copy" "posix,cuda_copy LD_PRELOAD=/tmp/ccp.so" "gdx_shm,gdx_aux:aux UCX_PLUGIN_PATH=$m"; do
  set -- $c
  echo "=== memtype cache, UCX_TLS=$*"
  env UCX_TLS=$1 ${2:-} /tmp/mtc 2>&1 | grep -vE "^    maps|^region" | tail -3
  env UCX_TLS=$1 ${2:-} /tmp/mtc 2>&1 | grep -E "nvidia" | head -3
done
} > $OUT/dev/memtype-cache.txt 2>&1
cat $OUT/dev/memtype-cache.txt
