#!/usr/bin/env bash
# session 6 device call 7, UCX 1.22.0 with CUDA: (A) after gdx_copy accesses host memory too, ucp_gpu_check over
# gdx-run's own UCX_TLS (gdx_shm,gdx_ipc,gdx_copy: no UCX copy transport), host -x (no CUDA context) and CUDA tag
# + RMA: the worker must now start (call 6: "no copy across memory types transport"); (B) can host_no_context fail?
# e88bab3's module against this tree's with cuda_copy added (UCP's memory-type endpoint then works for both).
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
new=build-t/src/uct/libuct_gdx.so.0 old=/tmp/base/build/src/uct/libuct_gdx.so.0 chk=build-t/tests/uct/ucp_gpu_check
run() { local what="$1"; shift; echo "=== $what"; timeout 240 tests/uct/test_gpu.sh tools/gdx-run "$@"; echo "=== exit $?"; }
{
run "A1 this tree, gdx_shm,gdx_ipc,gdx_copy, host -x" $new $chk gdx_shm,gdx_ipc,gdx_copy -m host -x -S 1048576
run "A2 this tree, gdx_shm,gdx_ipc,gdx_copy, CUDA tag + RMA to 4 MiB" $new $chk gdx_shm,gdx_ipc,gdx_copy -r -S 4194304
run "A3 this tree, gdx_shm,gdx_copy (staged by the engine), CUDA tag + RMA to 4 MiB" $new $chk gdx_shm,gdx_copy -r -S 4194304
run "B1 e88bab3, gdx_shm,gdx_ipc,cuda_copy, host -x (expected: FAIL, a context)" $old $chk gdx_shm,gdx_ipc,cuda_copy -m host -x -S 1048576
run "B2 this tree, gdx_shm,gdx_ipc,cuda_copy, host -x" $new $chk gdx_shm,gdx_ipc,cuda_copy -m host -x -S 1048576
} > $OUT/dev/ucx122-gpu-checks.txt 2>&1
echo "done: $(( $(date +%s) - t0 )) s"
grep -E "^===|context|PASS|FAIL|ERROR" $OUT/dev/ucx122-gpu-checks.txt | head -60
