#!/usr/bin/env bash
# session 6 device call 6: can uct.gpu.ucp_gpu_check.host_no_context fail? The same check (ucp_gpu_check -m host -x
# over gdx_shm,gdx_ipc,gdx_copy, two processes) with this tree's module and with e88bab3's (before the lazy copy
# queue and the context-free hook self-test), both built against upstream UCX 1.22 with CUDA.
set -uo pipefail
mkdir -p $OUT/dev
t0=$(date +%s)
scripts/ucx-build.sh ucx .carry/ucx-1.22.0.tar.gz > $OUT/dev/ucx-build.log 2>&1 || { tail -30 $OUT/dev/ucx-build.log; exit 1; }
rm -rf /tmp/base && mkdir -p /tmp/base && tar -xzf .carry/base-e88bab3.tar.gz -C /tmp/base
( scripts/ucx-build.sh module /tmp/base /tmp/base/build > $OUT/dev/base-build.log 2>&1 ) &
( cmake -S . -B build-t -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGDX_UCX_PREFIX=/tmp/ucx-cuda \
    -DGDX_UCX_SRC_DIR=/tmp/ucx-build -DGDX_UCX_INFO=/tmp/ucx-cuda/bin/ucx_info &&
  cmake --build build-t -j 16 --target uct_gdx ucp_gpu_check ) > $OUT/dev/build.log 2>&1 || { tail -30 $OUT/dev/build.log; exit 1; }
wait
[ -f /tmp/base/build/src/uct/libuct_gdx.so.0 ] || { tail -20 $OUT/dev/base-build.log; exit 1; }
echo "built: $(( $(date +%s) - t0 )) s"
export LD_LIBRARY_PATH=/tmp/ucx-cuda/lib PATH=/tmp/ucx-cuda/bin:$PATH
{
for m in this:build-t/src/uct/libuct_gdx.so.0 e88bab3:/tmp/base/build/src/uct/libuct_gdx.so.0; do
  echo "=== module ${m%%:*} (${m#*:}), UCX 1.22.0 with CUDA"
  timeout 200 tests/uct/test_gpu.sh tools/gdx-run ${m#*:} build-t/tests/uct/ucp_gpu_check gdx_shm,gdx_ipc,gdx_copy -m host -x -S 1048576
  echo "=== exit $?"
done
} > $OUT/dev/host-no-context-ab.txt 2>&1
cat $OUT/dev/host-no-context-ab.txt
