#!/usr/bin/env bash
# Open MPI, 2 ranks, pml ucx + osc ucx over a gdx transport through tools/gdx-run: mpi_check must report 0 errors,
# and UCX must show its endpoints on the gdx transport. Wire-up goes over $GDX_RUN_AUX (default gdx_aux).
#   test_mpi.sh GDX_RUN MODULE MPI_CHECK TL
. "$(dirname "$0")/lib.sh"
gdx_run="$1" module="$2" mpi_check="$3" tl="$4"
require_tl "$module" "$tl"
log="${TMPDIR:-/tmp}/uct-mpi-$tl-$$.log"
run_mpi "$log" "$gdx_run" "$module" "$tl" "$mpi_check" 240
# UCX 1.13 logs "ep_cfg[1]: tag(gdx_shm/...)", 1.16 and later "ucp_context_0 intra-node cfg#1 tag(gdx_shm/...)"
grep -qE "(ep_cfg\[[0-9]+\]:|cfg#[0-9]+) tag\($tl/" "$log" || fail "UCX did not put the MPI traffic on $tl"
rm -f "$log"
echo "PASS"
