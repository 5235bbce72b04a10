#!/usr/bin/env bash
# expect_log.sh PATTERN CMD...: runs CMD, prints its output, and passes when CMD passes AND its output (stdout and
# stderr) has a line matching the extended regular expression PATTERN: a check that a fault was noticed and said.
. "$(dirname "$0")/lib.sh"
pattern="$1"; shift
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
[ "$rc" = 0 ] || exit "$rc"
grep -qE -- "$pattern" <<<"$out" || fail "no line of the output matches: $pattern"
