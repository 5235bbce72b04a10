#!/usr/bin/env bash
# A peer that dies mid-transfer or before wire-up completed, and bad input, through UCP over a gdx transport
# (ucp_fail_check.c): the survivor's request must end with an error status, gdx's reason must be in its log, and
# nothing may hang (every process is bounded; a hang is a failure, its duration is never asserted). The environment
# says how the engine runs (ctest sets GDX_FAULT_P2P_EVERY=1: every fragment staged, so the engine's own protocol is
# what the death interrupts; GDX_PEER_TIMEOUT=5s: the silence clock that notices a stopped peer, long enough that a
# peer merely starved of CPU on a loaded CI host (2 s seen, with 5 staged tests on 2 cores) is not declared dead;
# GDX_CONN_TIMEOUT=5s: how long a connection to a peer that never answers may take to come up).
# wireup-*: gdx_aux is the only auxiliary transport (the check needs UCP to handle wire-up messages in its async
# thread, as it does for gdx_aux, and finds that socket). wireup-*, idle-*: the survivor logs at UCX's diag level,
# where the module's report of the broken endpoint goes (the level UCX's tcp gives a peer that reset the
# connection), and that line must be there. CHECK-ARGS -e: error mode PEER, whose handler the check expects called.
#   test_ucp_fail.sh GDX_RUN MODULE UCP_FAIL_CHECK TL SCENARIO [CHECK-ARGS...]
. "$(dirname "$0")/lib.sh"
gdx_run="$1" module="$2" check="$3" tl="$4" scenario="$5"
shift 5
require_tl "$module" "$tl"
log="${TMPDIR:-/tmp}/uct-fail-$tl-$scenario-$$"
aux=(); [ -n "${GDX_RUN_AUX:-}" ] && aux=(--aux "$GDX_RUN_AUX")
survivor_env=()
case "$scenario" in
  wireup-*|idle-*) aux=(--aux gdx_aux); survivor_env=(UCX_LOG_LEVEL=diag) ;;
  idle-*) survivor_env=(UCX_LOG_LEVEL=diag) ;;
esac
run=("$gdx_run" --module "$module" --tls "$tl" "${aux[@]}" "$check" -s "$scenario" -t "$(check_alarm)" "$@")
port=$(free_port)
timeout "$UCT_TEST_TIMEOUT" "${run[@]}" -p "$port" >"$log.victim" 2>&1 &
vpid=$!
wait_listen "$port" "$vpid"
env "${survivor_env[@]}" timeout "$UCT_TEST_TIMEOUT" "${run[@]}" -p "$port" 127.0.0.1 >"$log.survivor" 2>&1 &
spid=$!
watch_hang "$(hang_watch_after)" "$log.stacks" "$spid"
wait "$spid"
src=$?
wait "$vpid"
vrc=$?
show() {
  echo "--- victim (exit $vrc) ---"; tail -20 "$log.victim"; echo "--- survivor (exit $src) ---"; tail -30 "$log.survivor"
  [ -s "$log.stacks" ] && { echo "--- where the survivor was ---"; cat "$log.stacks"; }
}
grep -h "^ucp_fail_check:" "$log.survivor"
[ "$src" = 0 ] || { show; fail "survivor exit $src (1: wrong outcome, 3 or 124: it hung)"; }
case "$scenario" in
  wireup-*|idle-*)
    [ "$vrc" = 137 ] || { show; fail "the victim was not killed (exit $vrc)"; }
    # The module reported the broken gdx endpoint to UCP (which is what failed the get it held for wire-up)
    grep -qE "UCX +(DIAG|ERROR) +$tl: endpoint 0x[0-9a-f]+ to peer [0-9a-f]+ failed: .*; reporting it to UCP as" \
      "$log.survivor" || { show; fail "no report of the broken $tl endpoint to UCP in the survivor's log"; }
    grep -hE "UCX +(DIAG|ERROR) +$tl: endpoint" "$log.survivor" | head -1 | sed -E "s/^.*(DIAG|ERROR)  /# /" ;;
  *-kill|*-stop)
    # killed: by itself (kill) or by the survivor once it gave up (stop); 137 = 128 + SIGKILL, through timeout
    [ "$vrc" = 137 ] || { show; fail "the victim was not killed (exit $vrc)"; }
    # gdx's reason for the failed request, where a UCX user looks (the module's log, once per peer and status)
    grep -qE "uct +WARN +$tl to peer [0-9a-f]+: a (get|put) of [0-9]+ bytes failed" "$log.survivor" ||
      { show; fail "no line of gdx's saying why the request failed"; }
    grep -hE "uct +WARN +$tl to peer" "$log.survivor" | head -1 | sed 's/^.*WARN  /# /' ;;
  *)
    [ "$vrc" = 0 ] || { show; fail "victim exit $vrc"; }
    # UCX's error carries gdx's reason (the glue repeats it in UCX's log)
    if [ "$scenario" = badkey ]; then
      grep -qE "$tl: rkey_unpack failed: invalid parameter \(rkey_unpack \($tl\)" "$log.survivor" ||
        { show; fail "UCX's log does not say why gdx refused the key"; }
    fi ;;
esac
rm -f "$log.victim" "$log.survivor" "$log.stacks"
echo "PASS"
