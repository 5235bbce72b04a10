#!/usr/bin/env bash
# expect_build.sh BUILD_DIR ok TARGET...      every TARGET builds
# expect_build.sh BUILD_DIR fail TARGET HEADER TARGET fails to build, because HEADER is not found (the failure
#                                             must be that one, not some other error)
# Used by the layering tests (CMakeLists.txt here). Exit 0 when the expectation holds; 1 saying why not.
set -uo pipefail
build=${1:?usage: expect_build.sh BUILD_DIR ok|fail TARGET... [HEADER]} want=${2:?} ; shift 2
if [ "$want" = ok ]; then
  out=$(cmake --build "$build" --target "$@" 2>&1) && { echo "built: $*"; exit 0; }
  echo "$out"; echo "FAIL: expected $* to build (an allowed include must resolve)"; exit 1
fi
target=${1:?} header=${2:?}
if out=$(cmake --build "$build" --target "$target" 2>&1); then
  echo "$out"; echo "FAIL: $target built, but it includes $header, which its layer must not see"; exit 1
fi
# gcc: "fatal error: x/y.h: No such file or directory"; clang: "fatal error: 'x/y.h' file not found"
if grep -qE "$header'?: No such file or directory|'$header' file not found" <<<"$out"; then
  echo "refused as expected: $(grep -m1 -E 'No such file|file not found' <<<"$out")"; exit 0
fi
echo "$out"; echo "FAIL: $target failed, but not because $header was not found"; exit 1
