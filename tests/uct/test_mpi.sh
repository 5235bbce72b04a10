#!/usr/bin/env bash
# Open MPI, 2 ranks, pml ucx + osc ucx over a gdx transport through tools/gdx-run: mpi_check must report 0 errors,
# and UCX must show its endpoints on the gdx transport. Wire-up goes over $GDX_RUN_AUX (default gdx_aux).
# With EVERY, the staging engine is made to stage (GDX_FAULT_P2P_EVERY=EVERY: 1 every fragment, 3 a message mixes
# paths), the ping-pong goes up to MAX bytes, and the engine's path totals must show it (check_engine_paths: staged
# only for 1, mixed otherwise).
#   test_mpi.sh GDX_RUN MODULE MPI_CHECK TL [EVERY MAX]
. "$(dirname "$0")/lib.sh"
gdx_run="$1" module="$2" mpi_check="$3" tl="$4" every="${5:-}" max="${6:-}"
require_tl "$module" "$tl"
log="${TMPDIR:-/tmp}/uct-mpi-$tl-$$.log"
if [ -n "$every" ]; then
  export GDX_FAULT_P2P_EVERY="$every" GDX_UCT_STATS=yes GDX_LOG_LEVEL=info UCT_MPI_TIMEOUT=500
  run_mpi "$log" "$gdx_run" "$module" "$tl" "$mpi_check" 400 ${max:+"$max"}
  check_engine_paths "$tl" "$([ "$every" = 1 ] && echo staged || echo mixed)" 2 "$log"
else
  run_mpi "$log" "$gdx_run" "$module" "$tl" "$mpi_check" 240
fi
# UCX 1.13 logs "ep_cfg[1]: tag(gdx_shm/...)", 1.16 and later "ucp_context_0 intra-node cfg#1 tag(gdx_shm/...)"
grep -qE "(ep_cfg\[[0-9]+\]:|cfg#[0-9]+) tag\($tl/" "$log" || fail "UCX did not put the MPI traffic on $tl"
rm -f "$log"
echo "PASS"
