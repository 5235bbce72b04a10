#!/usr/bin/env bash
# Open MPI, 2 ranks, pml ucx + osc ucx over a gdx transport through tools/gdx-run: mpi_check must report 0 errors,
# and UCX must show its endpoints on the gdx transport.
#   test_mpi.sh GDX_RUN MODULE MPI_CHECK TL
. "$(dirname "$0")/lib.sh"
gdx_run="$1" module="$2" mpi_check="$3" tl="$4"
require_tl "$module" "$tl"
command -v mpirun >/dev/null || skip "mpirun not installed"
log="${TMPDIR:-/tmp}/uct-mpi-$tl-$$.log"
# Open MPI refuses a node named "(none)", which is what the soft-RoCE guest (tests/rxe) is: give this run a name
# in a UTS namespace of its own (the machine's name is untouched).
uts=()
if [ "$(hostname)" = "(none)" ]; then
  command -v unshare >/dev/null || skip "no host name and no unshare: Open MPI cannot run here"
  uts=(unshare --uts sh -c 'hostname gdx-test && exec "$@"' sh)
fi
UCX_LOG_LEVEL=info timeout 300 "${uts[@]}" "$gdx_run" --module "$module" --tls "$tl" --aux gdx_aux \
  mpirun --allow-run-as-root --oversubscribe -np 2 -x UCX_LOG_LEVEL "$mpi_check" 240 >"$log" 2>&1
rc=$?
grep -E "^rank [01]:" "$log"
if [ "$rc" != 0 ]; then tail -40 "$log"; fail "mpirun exit $rc (124 = timed out)"; fi
[ "$(grep -c 'errors=0 (all ranks: checks=[0-9]* errors=0)' "$log")" = 2 ] || fail "not both ranks reported 0 errors"
grep -q "ep_cfg\[[0-9]*\]: tag($tl/" "$log" || fail "UCX did not put the MPI traffic on $tl"
rm -f "$log"
echo "PASS"
