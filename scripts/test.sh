#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine (as root): installs what is missing, builds, and runs
#   1. the CPU test set (ctest -L cpu) on a warnings-as-errors build;
#   2. the RDMA test set inside a soft-RoCE qemu guest (tests/rxe/), one boot;
#   3. the wire-protocol fuzzer for a bounded time (clang libFuzzer);
#   4. UCX's own UCT test suite (gtest, from Debian 12's UCX 1.13.1 source package, built once and cached) on
#      gdx's transports beside UCX's own transports of the same class (tests/uct/gtest/);
#   5. the CPU test set again under AddressSanitizer + UndefinedBehaviorSanitizer.
# The output ends with the earlier stages that failed, each with the lines of its output that say why.
# Each stage's cost is printed when it ends, and all of them before the last stage.
# GPU tests skip here with a stated reason; run them on a GPU machine with scripts/device-run.sh (README, "Test sets").
# The UCX module is built and tested against Debian 12's UCX 1.13.1 only: binaries from apt, internal headers
# from `apt-get source ucx` (scripts/fetch-ucx-src.sh). Nothing comes from anywhere but Debian's archive.
# Environment: GDX_TEST_SKIP_RXE=1 / GDX_TEST_SKIP_FUZZ=1 / GDX_TEST_SKIP_UCX_GTEST=1 / GDX_TEST_SKIP_ASAN=1 skip a
# stage (local use).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
t0=$(date +%s)
costs=()
failed=()      # "<stage>: <its summary lines>" for each checked stage that failed, repeated at the very end
logs=$(mktemp -d /tmp/gdx-test-logs.XXXXXX)
stage_name="" stage_t=$t0
stage() {
  local now; now=$(date +%s)
  if [ -n "$stage_name" ]; then
    costs+=("$(printf '%5ss  %s' $(( now - stage_t )) "$stage_name")")
    echo "=== cost: $(( now - stage_t ))s for: $stage_name"
  fi
  stage_name="$*" stage_t=$now
  echo; echo "=== [$(( now - t0 ))s] $*"
}
# checked <cmd...>: runs a test stage, its output also kept, and on failure records the lines that say why (CI
# shows only the end of the output, so a failed early stage must be named again there).
checked() {
  local log="$logs/stage-${#costs[@]}.log" rc=0
  "$@" 2>&1 | tee "$log" || rc=$?
  if [ $rc != 0 ]; then
    failed+=("$stage_name (exit $rc): $(grep -E -i 'fail|hung|error|timed out|NEW|SKIPPED' "$log" | grep -v -E ' Passed |tests passed, 0 tests failed' | tail -n 12)")
  fi
  return 0
}

stage "setup"
scripts/setup.sh --all

stage "build (warnings are errors)"
scripts/build.sh build

if [ "${GDX_TEST_SKIP_ASAN:-0}" != 1 ]; then
  stage "CPU test set (the sanitizer build repeats it last)"
  checked ctest --test-dir build -L cpu --output-on-failure -j2
fi

if [ "${GDX_TEST_SKIP_RXE:-0}" != 1 ] && [ -x tests/rxe/run-tests.sh ]; then
  stage "RDMA test set in the soft-RoCE guest"
  checked tests/rxe/run-tests.sh build
fi

if [ "${GDX_TEST_SKIP_FUZZ:-0}" != 1 ] && [ -x tests/fuzz/run.sh ]; then
  stage "wire-protocol fuzzer (bounded)"
  checked tests/fuzz/run.sh 60
fi

if [ "${GDX_TEST_SKIP_UCX_GTEST:-0}" != 1 ]; then
  stage "UCX's UCT gtest (Debian 12's UCX 1.13.1) on gdx's and UCX's transports"
  checked tests/uct/gtest/run.sh
fi

last_dir=build
if [ "${GDX_TEST_SKIP_ASAN:-0}" != 1 ]; then
  stage "build with address,undefined sanitizers"
  scripts/build.sh build-asan -DGDX_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=Debug
  last_dir=build-asan
fi
stage "earlier stages $([ ${#failed[@]} = 0 ] && echo passed || echo FAILED); CPU test set in $last_dir"
echo "=== stage costs so far:"; printf '%s\n' "${costs[@]}"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1
rc=0
ctest --test-dir "$last_dir" -L cpu --output-on-failure -j2 || rc=$?
echo
if [ ${#failed[@]} = 0 ]; then
  echo "=== earlier stages: all passed"
else
  echo "=== earlier stages that FAILED (their lines that say why; the whole logs were in $logs):"
  printf '%s\n\n' "${failed[@]}"
fi
echo "=== CPU test set in $last_dir: $([ $rc = 0 ] && echo passed || echo "FAILED (exit $rc)")"
[ ${#failed[@]} = 0 ] || exit 1
exit $rc
