#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine (as root): installs what is missing, builds, and runs
#   1. the CPU test set (ctest -L cpu) on a warnings-as-errors build;
#   2. the RDMA test set inside a soft-RoCE qemu guest (tests/rxe/), one boot;
#   3. the wire-protocol fuzzer for a bounded time (clang libFuzzer);
#   4. the UCX module's uct.* set on other UCX releases (tests/uct/ucx-matrix.sh): UCX 1.22.0 built from the
#      shared release sources (../shared/ucx-src), loaded through UCX_PLUGIN_PATH; Debian 13's UCX 1.18.1 and
#      Open MPI 5 in a debootstrapped root; Ubuntu 24.04's runtime-only UCX 1.16 (the GPU machine's: no ucx_info,
#      the configuration read off the libraries) and Open MPI 4.1.6 in a debootstrapped root, through
#      tests/uct/gpu-system-ucx.sh. (Debian 12's UCX 1.13.1 + Open MPI 4.1: in stage 1.)
#   5. the CPU test set again under AddressSanitizer + UndefinedBehaviorSanitizer (its ctest summary ends the
#      output).
# Each stage's cost is printed when it ends, and all of them before the last stage.
# GPU tests skip here with a stated reason; run them on a GPU machine with scripts/test-gpu.sh.
# Environment: GDX_TEST_SKIP_RXE=1 / GDX_TEST_SKIP_FUZZ=1 / GDX_TEST_SKIP_UCX_MATRIX=1 / GDX_TEST_SKIP_ASAN=1 skip a
# stage (local use); GDX_UCX_MATRIX_WORK (default <repo>/.ucx-matrix) keeps the UCX builds and the Debian 13 and Ubuntu 24.04 roots.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
t0=$(date +%s)
costs=()
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

if [ "${GDX_TEST_SKIP_UCX_MATRIX:-0}" != 1 ]; then
  work=${GDX_UCX_MATRIX_WORK:-$root/.ucx-matrix}
  stage "uct.* on UCX 1.22.0 (built from ../shared/ucx-src, module through UCX_PLUGIN_PATH)"
  tests/uct/ucx-matrix.sh 1.22 "$work" || fail=1
  stage "uct.* on Debian 13: UCX 1.18.1 + Open MPI 5 (debootstrapped root)"
  tests/uct/ucx-matrix.sh 1.18 "$work" || fail=1
  stage "uct.* on Ubuntu 24.04's runtime-only UCX 1.16 + Open MPI 4.1.6 (the GPU machine's, no ucx_info; debootstrapped root)"
  tests/uct/ucx-matrix.sh 1.16 "$work" || fail=1
fi

last_dir=build
if [ "${GDX_TEST_SKIP_ASAN:-0}" != 1 ]; then
  stage "build with address,undefined sanitizers"
  scripts/build.sh build-asan -DGDX_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=Debug
  last_dir=build-asan
fi
stage "earlier stages $([ $fail = 0 ] && echo passed || echo FAILED); CPU test set in $last_dir (its ctest summary ends this output)"
echo "=== stage costs so far:"; printf '%s\n' "${costs[@]}"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1
rc=0
ctest --test-dir "$last_dir" -L cpu --output-on-failure -j2 || rc=$?
[ $fail = 0 ] || exit 1
exit $rc
