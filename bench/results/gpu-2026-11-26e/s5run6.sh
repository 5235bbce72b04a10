#!/usr/bin/env bash
# session 5 device call 6 (warm after call 5: UCX 1.22 with CUDA, this tree's module in build-uct-bench): tag_lat
# 8 B only, 9 alternating rounds, this tree (de9e683) against bca0ffa (session 4's final code), each CUDA-aware and
# with GDX_CUDA=no, beside posix and posix,cuda_copy: does the session's work move the latency outside the spread?
set -uo pipefail
mkdir -p $OUT/dev
t0=$(date +%s)
[ -x /tmp/ucx-cuda/bin/ucx_perftest ] && [ -f build-uct-bench/src/uct/libuct_gdx.so.0 ] || { echo "not warm"; exit 1; }
rm -rf /tmp/base && mkdir -p /tmp/base && tar -xzf .carry/baseline-bca0ffa.tar.gz -C /tmp/base
( cmake -S /tmp/base -B /tmp/base/build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGDX_BUILD_TESTS=OFF \
   -DGDX_UCX_PREFIX=/tmp/ucx-cuda -DGDX_UCX_SRC_DIR=/tmp/ucx-build -DGDX_UCX_INFO=/tmp/ucx-cuda/bin/ucx_info &&
  cmake --build /tmp/base/build -j 16 --target uct_gdx ) > $OUT/dev/base-build.log 2>&1 || { tail -20 $OUT/dev/base-build.log; exit 1; }
echo "built: $(( $(date +%s) - t0 )) s"
g=gdx_shm,gdx_aux:aux
timeout 480 bench/ucx_vs_gdx.sh --ucx-prefix /tmp/ucx-cuda --module build-uct-bench/src/uct/libuct_gdx.so.0 \
  --baseline-module /tmp/base/build/src/uct/libuct_gdx.so.0 --rounds 9 --sizes "" \
  --configs "ucx-posix=posix ucx-posix-cuda=posix,cuda_copy gdx-shm=$g gdx-shm-nocuda=$g+GDX_CUDA=no" \
  --out $OUT/dev/lat-ab-9.txt > /dev/null 2>&1
echo "bench done: $(( $(date +%s) - t0 )) s"
grep -E "^bar |^also |^check |^tag|^test" $OUT/dev/lat-ab-9.txt
