#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine (as root): installs what is missing, builds, and runs
#   1. the CPU test set (ctest -L cpu) on a warnings-as-errors build;
#   2. the RDMA test set inside a soft-RoCE qemu guest (tests/rxe/), one boot;
#   3. the wire-protocol fuzzer for a bounded time (clang libFuzzer);
#   4. the CPU test set again under AddressSanitizer + UndefinedBehaviorSanitizer (its ctest summary ends the
#      output).
# GPU tests skip here with a stated reason; run them on a GPU machine with scripts/test-gpu.sh.
# Environment: GDX_TEST_SKIP_RXE=1 / GDX_TEST_SKIP_FUZZ=1 / GDX_TEST_SKIP_ASAN=1 skip a stage (local use).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
t0=$(date +%s)
stage() { echo; echo "=== [$(( $(date +%s) - t0 ))s] $*"; }

stage "setup"
scripts/setup.sh --all

stage "build (warnings are errors)"
scripts/build.sh build

fail=0
if [ "${GDX_TEST_SKIP_ASAN:-0}" != 1 ]; then
  stage "CPU test set (the sanitizer build repeats it last)"
  ctest --test-dir build -L cpu --output-on-failure -j2 || fail=1
fi

if [ "${GDX_TEST_SKIP_RXE:-0}" != 1 ] && [ -x tests/rxe/run-tests.sh ]; then
  stage "RDMA test set in the soft-RoCE guest"
  if tests/rxe/run-tests.sh build; then :; else fail=1; fi
fi

if [ "${GDX_TEST_SKIP_FUZZ:-0}" != 1 ] && [ -x tests/fuzz/run.sh ]; then
  stage "wire-protocol fuzzer (bounded)"
  tests/fuzz/run.sh 60 || fail=1
fi

last_dir=build
if [ "${GDX_TEST_SKIP_ASAN:-0}" != 1 ]; then
  stage "build with address,undefined sanitizers"
  scripts/build.sh build-asan -DGDX_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=Debug
  last_dir=build-asan
fi
stage "earlier stages $([ $fail = 0 ] && echo passed || echo FAILED); CPU test set in $last_dir (its ctest summary ends this output)"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1
rc=0
ctest --test-dir "$last_dir" -L cpu --output-on-failure -j2 || rc=$?
[ $fail = 0 ] || exit 1
exit $rc
