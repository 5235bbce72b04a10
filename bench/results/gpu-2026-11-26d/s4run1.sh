#!/usr/bin/env bash
# session 4 device call 1: the tree with the membarrier wakeup handshake (GDX_SHM_MEMBARRIER). GPU test set, system
# UCX 1.16 module set, the CUDA bench through UCX 1.22 (1 round); then d2be992's module (the previous session's final
# tree) against the same UCX, and a tag_lat-only diagnosis: this module and d2be992's, each as is, with the fence
# handshake (GDX_SHM_MEMBARRIER=no), with the smallest ring (GDX_SHM_RING_SIZE=64K) and without CUDA detection.
set -uo pipefail
mkdir -p $OUT/dev
scripts/device-run.sh --ucx-src .carry/ucx-1.22.0.tar.gz --sysucx .carry/ucx-1.16.0.tar.gz --rounds 1 --skip probes,sanitize,bench,host-bench > $OUT/dev/console.txt 2>&1
grep -E "^=== |^bar |^also |tests passed|tests failed|\(Failed\)|\(Timeout\)|FAILED" $OUT/dev/console.txt | tail -30
grep -E "^(size|1M|256M) " $OUT/dev/uct-engine.txt
rm -rf /tmp/base && mkdir -p /tmp/base && tar -xzf .carry/baseline-d2be992.tar.gz -C /tmp/base
( cmake -S /tmp/base -B /tmp/base/build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGDX_BUILD_TESTS=OFF \
   -DGDX_UCX_PREFIX=/tmp/ucx-cuda -DGDX_UCX_SRC_DIR=/tmp/ucx-build -DGDX_UCX_INFO=/tmp/ucx-cuda/bin/ucx_info &&
  cmake --build /tmp/base/build -j 16 --target uct_gdx ) > $OUT/dev/base-build.log 2>&1 || tail -20 $OUT/dev/base-build.log
m=build-uct-bench/src/uct/libuct_gdx.so.0
g=gdx_shm,gdx_aux:aux
timeout 240 bench/ucx_vs_gdx.sh --ucx-prefix /tmp/ucx-cuda --module $m --baseline-module /tmp/base/build/src/uct/libuct_gdx.so.0 \
  --rounds 5 --sizes "" --configs "ucx-posix=posix ucx-posix-cuda=posix,cuda_copy gdx-shm=$g gdx-shm-fence=$g+GDX_SHM_MEMBARRIER=no gdx-shm-ring64k=$g+GDX_SHM_RING_SIZE=64K gdx-shm-nocuda=$g+GDX_CUDA=no" \
  --out $OUT/dev/lat-diag.txt > /dev/null 2>&1
grep -E "^bar |^check |^tag|^test" $OUT/dev/lat-diag.txt
lscpu | grep -E "Model name|Thread|Core|Socket|NUMA|L2|L3" > $OUT/dev/lscpu.txt; cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list >> $OUT/dev/lscpu.txt
