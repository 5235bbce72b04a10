#!/usr/bin/env bash
# ucx_perftest between two processes over a gdx transport.
#   test_perftest.sh MODULE TL uct TEST [ucx_perftest args]   UCT level: -x TL -d <its first device>
#   test_perftest.sh MODULE TL ucp TEST [ucx_perftest args]   UCP level: UCX_TLS=TL,gdx_aux:aux
# Passes when both processes exit 0 and the client prints its Final line (ucx_perftest checks completions;
# UCP tag tests also match every message).
. "$(dirname "$0")/lib.sh"
module="$1" tl="$2" level="$3" test="$4"; shift 4
require_tl "$module" "$tl"
log="${TMPDIR:-/tmp}/uct-perftest-$tl-$level-$test-$$"
# A ucx_perftest built with MPI (Debian 13's) takes its peer from MPI unless told -P 0; one without rejects -P.
# (The help text is read whole first: grep -q closing the pipe early would fail the pipeline under pipefail.)
help=$(timeout 30 ucx_perftest -h 2>&1 || true)
if grep -q "disable/enable MPI mode" <<<"$help"; then set -- "$@" -P 0; fi
# Only ucx_perftest gets the module (and, in sanitizer builds, its runtime): not this shell's helpers.
if [ "$level" = uct ]; then
  dev=$(first_device "$module" "$tl")
  [ -n "$dev" ] || fail "no device for $tl"
  run_pair "$log" "$(dirname "$0")/with_module.sh" "$module" ucx_perftest -t "$test" -x "$tl" -d "$dev" "$@"
else
  export UCX_TLS="$tl,gdx_aux:aux" UCX_LOG_LEVEL=info
  run_pair "$log" "$(dirname "$0")/with_module.sh" "$module" ucx_perftest -t "$test" "$@"
  # UCP must have put its lanes on the gdx transport, not on anything else
  # UCX 1.13 logs "ep_cfg[0]: tag(gdx_shm/...)", 1.16 and later "... cfg#0 tag(gdx_shm/...)"
  grep -qE "(ep_cfg\[[0-9]+\]:|cfg#[0-9]+) .*\($tl/" "$log.client" ||
    fail "client: no UCP lane on $tl: $(grep -E 'ep_cfg|cfg#' "$log.client")"
fi
grep "Final:" "$log.client" || fail "client printed no Final line"
rm -f "$log.server" "$log.client"
echo "PASS"
