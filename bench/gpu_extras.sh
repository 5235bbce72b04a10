#!/usr/bin/env bash
# Measurements beside scripts/device-run.sh on the GPU machine (run after it: uses its build-gpu and /tmp/ucx):
#   memtype_bench three times (separate processes: the spread of the hit and raw rows);
#   staged GPU->GPU over TCP loopback through the C API (two processes on GPU --gpu/--peer-gpu);
#   compute-sanitizer memcheck of the staging GPU tests (with the CUDA free hooks in place);
#   UCP RMA (ucp_put_nbx/ucp_get_nbx) on CUDA memory over gdx, which UCP 1.13 is not expected to support.
# Usage: bench/gpu_extras.sh OUT-DIR    (one file per step in OUT-DIR)
set -uo pipefail
out=${1:?usage: bench/gpu_extras.sh OUT-DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
mkdir -p "$out"
b=build-gpu
for i in 1 2 3; do
  echo "## run $i"
  $b/bench/memtype_bench
done > "$out/memtype-bench-x3.txt" 2>&1
grep -E "^## run|default \(hooks|raw cuPointerGetAttributes \(|^# raw" "$out/memtype-bench-x3.txt" | grep -v "host-"

$b/bench/staging_bench --mode tcp --mem cuda --sizes 1M,16M,256M --gpu 0 --peer-gpu 0 --seconds 2 \
  > "$out/staging-tcp.txt" 2>&1
grep -E "^tcp" "$out/staging-tcp.txt" | cut -c1-100

timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 --target-processes all \
  $b/tests/fallback/test_fallback_gpu --gtest_filter='Kinds/StagingGpuLoop.*:StagingGpuFaults.*' \
  > "$out/sanitizer-staging.txt" 2>&1
echo "compute-sanitizer staging: exit $?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$out/sanitizer-staging.txt" | tail -3

if [ -f /tmp/ucx/env.sh ] && [ -x $b/tests/uct/ucp_gpu_check ]; then
  . /tmp/ucx/env.sh
  for tls in gdx_shm,gdx_ipc,gdx_copy gdx_tcp,gdx_copy; do
    port=$(( 20000 + RANDOM % 20000 ))
    run=(tools/gdx-run --module $b/src/uct/libuct_gdx.so.0 --tls "$tls" --aux gdx_aux
         $b/tests/uct/ucp_gpu_check -r -p "$port" -t 60)
    { echo "## UCX_TLS $tls, ucp_gpu_check -r"; timeout 90 "${run[@]}" & sleep 0.5
      timeout 90 "${run[@]}" 127.0.0.1; echo "client exit $?"; wait; echo "server exit $?"; } >> "$out/ucp-rma-gpu.txt" 2>&1
  done
  grep -E "^##|exit|rma|FAIL|PASS" "$out/ucp-rma-gpu.txt" | head -20
fi
exit 0
