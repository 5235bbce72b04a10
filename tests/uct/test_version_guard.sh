#!/usr/bin/env bash
# A module built for another UCX version (the build-time override GDX_UCT_BUILT_VERSION="1.13.9") must refuse to
# register: a clear message on stderr naming both versions, and no gdx component in ucx_info.
#   test_version_guard.sh FAKE_MODULE
. "$(dirname "$0")/lib.sh"
module="$1"
[ -f "$module" ] || fail "module $module missing"
running=$(timeout 60 ucx_info -v | sed -n 's/^# \(Library version:\|Version\) \([0-9.]*\).*/\2/p' | head -1)  # 1.13 / 1.14+
out=$(ucx_info_with "$module" -d 2>&1) || fail "ucx_info -d failed with the guarded module: $out"
grep -q "libuct_gdx: built against UCX internals of 1.13.9 but running with UCX $running; not registering" <<<"$out" ||
  fail "no refusal message; got: $(head -5 <<<"$out")"
grep -q "Component: gdx_" <<<"$out" && fail "a gdx component was registered despite the version mismatch"
echo "PASS (refused: 1.13.9 vs $running)"
