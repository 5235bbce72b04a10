#!/usr/bin/env bash
# session 6 device call 5 (warm after call 4: UCX 1.22 with CUDA in /tmp/ucx-cuda): the host bars at this tree,
# 5 alternating rounds, beside e88bab3's module (session 5's final code: check lines), with the like-for-like pairs.
set -uo pipefail
mkdir -p $OUT/dev
t0=$(date +%s)
scripts/ucx-build.sh ucx .carry/ucx-1.22.0.tar.gz > $OUT/dev/ucx-build.log 2>&1 || { tail -30 $OUT/dev/ucx-build.log; exit 1; }
rm -rf /tmp/base && mkdir -p /tmp/base && tar -xzf .carry/base-e88bab3.tar.gz -C /tmp/base
( scripts/ucx-build.sh module /tmp/base /tmp/base/build > $OUT/dev/base-build.log 2>&1 ) &
scripts/ucx-build.sh module . build-uct-bench > $OUT/dev/build.log 2>&1 || { tail -30 $OUT/dev/build.log; exit 1; }
wait
[ -f /tmp/base/build/src/uct/libuct_gdx.so.0 ] || { tail -20 $OUT/dev/base-build.log; exit 1; }
echo "modules built: $(( $(date +%s) - t0 )) s"
g=gdx_shm,gdx_aux:aux
timeout 500 bench/ucx_vs_gdx.sh --ucx-prefix /tmp/ucx-cuda --module build-uct-bench/src/uct/libuct_gdx.so.0 \
  --baseline-module /tmp/base/build/src/uct/libuct_gdx.so.0 --rounds 5 \
  --configs "ucx-posix=posix ucx-posix-cuda=posix,cuda_copy gdx-shm=$g gdx-shm-nocuda=$g+GDX_CUDA=no" \
  --out $OUT/dev/host-vs-ucx-ab.txt > /dev/null 2>&1
echo "bench done: $(( $(date +%s) - t0 )) s"
grep -E "^bar |^also |^check |^tag|^test" $OUT/dev/host-vs-ucx-ab.txt
lscpu > $OUT/dev/lscpu.txt 2>&1
