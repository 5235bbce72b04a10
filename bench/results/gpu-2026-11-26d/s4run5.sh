#!/usr/bin/env bash
# session 4 device call 5: the host bars at the final tree, 5 alternating rounds, with the like-for-like latency pairs
# (posix,cuda_copy; gdx with GDX_CUDA=no) and d2be992's module beside it. The CUDA bench (1 round) first: it builds the
# module against UCX 1.22.
set -uo pipefail
mkdir -p $OUT/dev
scripts/device-run.sh --ucx-src .carry/ucx-1.22.0.tar.gz --rounds 1 --skip probes,tests,sanitize,sysucx,bench,host-bench > $OUT/dev/console.txt 2>&1
grep -E "^=== |^bar |FAILED" $OUT/dev/console.txt | tail -12
rm -rf /tmp/base && mkdir -p /tmp/base && tar -xzf .carry/baseline-d2be992.tar.gz -C /tmp/base
( cmake -S /tmp/base -B /tmp/base/build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGDX_BUILD_TESTS=OFF \
   -DGDX_UCX_PREFIX=/tmp/ucx-cuda -DGDX_UCX_SRC_DIR=/tmp/ucx-build -DGDX_UCX_INFO=/tmp/ucx-cuda/bin/ucx_info &&
  cmake --build /tmp/base/build -j 16 --target uct_gdx ) > $OUT/dev/base-build.log 2>&1 || tail -20 $OUT/dev/base-build.log
timeout 380 bench/ucx_vs_gdx.sh --ucx-prefix /tmp/ucx-cuda --module build-uct-bench/src/uct/libuct_gdx.so.0 \
  --baseline-module /tmp/base/build/src/uct/libuct_gdx.so.0 --rounds 5 --out $OUT/dev/host-vs-ucx-ab.txt > /dev/null 2>&1
grep -E "^bar |^also |^check |^tag|^test" $OUT/dev/host-vs-ucx-ab.txt
