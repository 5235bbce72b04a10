#!/usr/bin/env bash
# run-tests.sh <build-dir>: the RDMA test set (ctest label rdma) inside one soft-RoCE guest boot.
#
#   tests/rxe/run-tests.sh build            # what scripts/test.sh runs
#
# Runs `ctest --test-dir <build-dir> -L rdma --output-on-failure` in one guest through run-in-rxe-vm.sh,
# then the two-host check (two-host.sh: two guests on a qemu link, one killed mid-transfer; about 30 s;
# RXE_TESTS_TWO_HOST=0 leaves it out), then the ODP stage: one boot of Debian sid's kernel, whose rxe has
# on-demand paging, running the ODP tests (RcOdp*) alone (about 30 s once its kernel is cached; RXE_TESTS_ODP=0
# leaves it out; it skips, saying why, when that kernel package cannot be fetched). Each guest first prints its
# kernel and rxe0's ODP capabilities (guest-caps.sh). Exits with the first failing stage's status (124: a run
# timed out; 125: the VM or the harness failed), 0 when all passed. The build must
# exist already: the guest sees the host's / read-only (the build directory is shared read-write only for
# ctest's own records).
#
# Skips (exit 0, with a line that says why) only when qemu cannot start at all on this host: no
# qemu-system-x86_64, or it cannot start even an empty machine. Anything else is a result, not a skip.
#
# Environment: RXE_TESTS_TIMEOUT [900] seconds for the whole guest run; RXE_TESTS_REGEX: only tests whose
# names match (ctest -R), for local use; RXE_VM_* knobs pass through to the harness.
set -euo pipefail

prog=rxe-tests
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ $# -ne 1 ]; then
  echo "usage: $0 <build-dir>" >&2
  exit 2
fi
build=$(cd -- "$1" 2>/dev/null && pwd -P) || { echo "$prog: build directory '$1' does not exist" >&2; exit 2; }
[ -f "$build/CTestTestfile.cmake" ] || { echo "$prog: $build is not a configured build (no CTestTestfile.cmake)" >&2; exit 2; }

# ---- can qemu start at all? -------------------------------------------------------------------------------
qemu=qemu-system-x86_64
if ! command -v "$qemu" >/dev/null 2>&1; then
  echo "SKIPPED: RDMA test set not run: $qemu is not installed (scripts/setup.sh --rxe installs it)"
  exit 0
fi
# An empty machine with the same accelerator, stopped before its first instruction, then quit through the
# monitor: this fails only when qemu itself cannot run here.
probe_err=$(mktemp)
trap 'rm -f "$probe_err"' EXIT
if ! echo quit | timeout 60 "$qemu" -accel "${RXE_VM_ACCEL:-tcg}" -machine none -nodefaults -display none -S \
    -monitor stdio >/dev/null 2>"$probe_err"; then
  echo "SKIPPED: RDMA test set not run: $qemu cannot start an empty machine on this host: $(head -c 300 "$probe_err" | tr '\n' ' ')"
  exit 0
fi

# ---- one boot, the whole rdma set -------------------------------------------------------------------------
args=(ctest --test-dir "$build" -L rdma --output-on-failure --timeout 900)
[ -z "${RXE_TESTS_REGEX:-}" ] || args+=(-R "$RXE_TESTS_REGEX")
echo "$prog: ${args[*]} (in the soft-RoCE guest)"
t0=$(date +%s)
rc=0
RXE_VM_TIMEOUT=${RXE_TESTS_TIMEOUT:-900} RXE_VM_RW="${RXE_VM_RW:-} $build" "$here/run-in-rxe-vm.sh" "$here/guest-caps.sh" "${args[@]}" || rc=$?
echo "$prog: guest stage took $(( $(date +%s) - t0 )) s, exit status $rc"

# ---- two hosts: two guests joined by a qemu link, one killed mid-transfer (about 30 s) -------------------
if [ "${RXE_TESTS_TWO_HOST:-1}" = 1 ] && [ -z "${RXE_TESTS_REGEX:-}" ]; then
  if [ -x "$build/tests/rc/rc_two_host" ]; then
    t1=$(date +%s)
    rc2=0
    "$here/two-host.sh" "$build" || rc2=$?
    echo "$prog: two-host stage took $(( $(date +%s) - t1 )) s, exit status $rc2"
    [ "$rc" != 0 ] || rc=$rc2
  else
    echo "$prog: two-host stage not run: $build/tests/rc/rc_two_host is not built"
    [ "$rc" != 0 ] || rc=1
  fi
fi
# ---- ODP: Debian sid's kernel, one boot, the ODP tests alone ----------------------------------------------
# MTU 9000 (RoCE MTU 4096): sid's rxe moves ODP packets that start off a page boundary wrongly, which gdx's data
# check refuses (tests/rxe/README.md, "ODP"); with whole-page packets the tests can also exercise the ODP
# registrations themselves on page-aligned buffers.
if [ "${RXE_TESTS_ODP:-1}" = 1 ] && [ -z "${RXE_TESTS_REGEX:-}" ]; then
  t2=$(date +%s)
  rc3=0
  out=$(RXE_VM_KERNEL=sid "$here/build-rxe-vm.sh" --quiet 2>&1) || rc3=$?
  if [ "$rc3" = 3 ]; then
    echo "SKIPPED: ODP stage not run: Debian sid's kernel package cannot be fetched: $(tail -n 1 <<< "$out")"
    rc3=0
  elif [ "$rc3" != 0 ]; then
    printf '%s\n' "$out" >&2
    echo "$prog: ODP stage: building the sid guest failed (build-rxe-vm.sh, above)"
  else
    [ -z "$out" ] || printf '%s\n' "$out" >&2
    odp=(ctest --test-dir "$build" -L rdma -R '^RcOdp' --output-on-failure --timeout 600)
    echo "$prog: ${odp[*]} (in the soft-RoCE guest, Debian sid's kernel)"
    RXE_VM_KERNEL=sid RXE_VM_MTU=9000 RC_TEST_EXPECT_ODP=yes RXE_VM_TIMEOUT=600 RXE_VM_RW="${RXE_VM_RW:-} $build" \
      "$here/run-in-rxe-vm.sh" "$here/guest-caps.sh" "${odp[@]}" || rc3=$?
  fi
  echo "$prog: ODP stage took $(( $(date +%s) - t2 )) s, exit status $rc3"
  [ "$rc" != 0 ] || rc=$rc3
fi
exit "$rc"
