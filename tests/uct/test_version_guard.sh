#!/usr/bin/env bash
# A module built for another UCX must refuse to register: a clear message on stderr naming both sides, no gdx
# component in ucx_info, the process going on. Two such builds (build-time overrides): one believing it is for
# UCX 1.13.9 (another version), one for this version with assertions the other way round (another
# configuration: the async mutex of UCX changes layout with ENABLE_ASSERT). This is the guard UCX >= 1.22 relies
# on, where UCX loads the module itself with no loader in front.
#   test_version_guard.sh FAKEVER_MODULE FAKECFG_MODULE
. "$(dirname "$0")/lib.sh"
fakever="$1" fakecfg="$2"
[ -f "$fakever" ] && [ -f "$fakecfg" ] || fail "module $fakever or $fakecfg missing"
running=$(timeout 60 ucx_info -v | sed -n 's/^# \(Library version:\|Version\) \([0-9.]*\).*/\2/p' | head -1)  # 1.13 / 1.14+

out=$(ucx_info_with "$fakever" -d 2>&1) || fail "ucx_info -d failed with the 1.13.9 module: $out"
grep -q "libuct_gdx: built against UCX internals of 1.13.9 but running with UCX $running; not registering" <<<"$out" ||
  fail "no refusal message; got: $(head -5 <<<"$out")"
grep -q "Component: gdx_" <<<"$out" && fail "a gdx component was registered despite the version mismatch"
echo "PASS (refused: 1.13.9 vs $running)"

out=$(ucx_info_with "$fakecfg" -d 2>&1) || fail "ucx_info -d failed with the other-assertions module: $out"
line=$(grep -m1 "^libuct_gdx: built for UCX $running \[assert=[01] .*\] but running with UCX $running \[assert=[01] " \
       <<<"$out") || fail "no configuration refusal; got: $(head -5 <<<"$out")"
built=$(sed -n 's/.*built for UCX [0-9.]* \[assert=\([01]\).*/\1/p' <<<"$line")
run=$(sed -n 's/.*running with UCX [0-9.]* \[assert=\([01]\).*/\1/p' <<<"$line")
[ "$built" != "$run" ] || fail "the refusal does not show the assertions differing: $line"
grep -q "assert: from the library" <<<"$line" || fail "the refusal does not say how it read the running UCX: $line"
grep -q "Component: gdx_" <<<"$out" && fail "a gdx component was registered despite the configuration mismatch"
grep -qE "Transport: (tcp|posix|sysv|self)$" <<<"$out" || fail "UCX's own transports are gone"
echo "PASS (refused: $(cut -c1-200 <<<"$line"))"
