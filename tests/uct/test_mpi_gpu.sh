#!/usr/bin/env bash
# Open MPI, 2 ranks, device buffers through pml ucx over gdx (tools/gdx-run): mpi_gpu_check must report 0 errors.
# With EXPECT (staged or mixed), the first transport of TLS must have carried the bytes through the staging engine
# that way (GDX_UCT_STATS totals and path lines: check_engine_paths in lib.sh). Skips (77) without a GPU.
#   test_mpi_gpu.sh GDX_RUN MODULE MPI_GPU_CHECK TLS [EXPECT [CHECK-ARGS...]]
. "$(dirname "$0")/lib.sh"
gdx_run="$1" module="$2" check="$3" tls="$4" expect="${5:-}"
shift 4; [ $# -gt 0 ] && shift
probe=$("$check" -c 2>&1); rc=$?
[ "$rc" = 77 ] && skip "$probe"
[ "$rc" = 0 ] || fail "probe failed (exit $rc): $probe"
log="${TMPDIR:-/tmp}/uct-mpi-gpu-$$.log"
[ -n "$expect" ] && export GDX_UCT_STATS=yes GDX_LOG_LEVEL=info UCT_MPI_TIMEOUT=500
run_mpi "$log" "$gdx_run" "$module" "$tls" "$check" -t 400 "$@"
[ -n "$expect" ] && check_engine_paths "${tls%%,*}" "$expect" 2 "$log"
rm -f "$log"
echo "PASS"
