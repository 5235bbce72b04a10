#!/usr/bin/env bash
# Open MPI, 2 ranks, device buffers through pml ucx over gdx (tools/gdx-run): mpi_gpu_check must report 0 errors.
# Skips (77) without a GPU.
#   test_mpi_gpu.sh GDX_RUN MODULE MPI_GPU_CHECK TLS
. "$(dirname "$0")/lib.sh"
gdx_run="$1" module="$2" check="$3" tls="$4"
probe=$("$check" -c 2>&1); rc=$?
[ "$rc" = 77 ] && skip "$probe"
[ "$rc" = 0 ] || fail "probe failed (exit $rc): $probe"
command -v mpirun >/dev/null || skip "mpirun not installed"
log="${TMPDIR:-/tmp}/uct-mpi-gpu-$$.log"
timeout 300 "$gdx_run" --module "$module" --tls "$tls" --aux "${GDX_RUN_AUX:-gdx_aux}" \
  mpirun --allow-run-as-root --oversubscribe -np 2 "$check" 240 >"$log" 2>&1
rc=$?
grep -E "^rank [01]:" "$log"
if [ "$rc" != 0 ]; then tail -40 "$log"; fail "mpirun exit $rc (124 = timed out)"; fi
[ "$(grep -c 'errors=0 (all ranks: checks=[0-9]* errors=0)' "$log")" = 2 ] || fail "not both ranks reported 0 errors"
rm -f "$log"
echo "PASS"
