#!/usr/bin/env bash
# Open MPI, 2 ranks, device buffers through pml ucx over gdx (tools/gdx-run): mpi_gpu_check must report 0 errors.
# Skips (77) without a GPU.
#   test_mpi_gpu.sh GDX_RUN MODULE MPI_GPU_CHECK TLS
. "$(dirname "$0")/lib.sh"
gdx_run="$1" module="$2" check="$3" tls="$4"
probe=$("$check" -c 2>&1); rc=$?
[ "$rc" = 77 ] && skip "$probe"
[ "$rc" = 0 ] || fail "probe failed (exit $rc): $probe"
log="${TMPDIR:-/tmp}/uct-mpi-gpu-$$.log"
run_mpi "$log" "$gdx_run" "$module" "$tls" "$check" 240
rm -f "$log"
echo "PASS"
