# Helpers for the tests/uct shell tests (sourced). Every process gets a bounded timeout; results are asserted
# from exit codes and output, never from timings.
set -uo pipefail

# A script that needs longer sets its own default before sourcing this file (UCT_TEST_TIMEOUT=${UCT_TEST_TIMEOUT:-N}).
UCT_TEST_TIMEOUT=${UCT_TEST_TIMEOUT:-120}
SKIP=77

# The alarm a check (ucp_gpu_check, ucp_fail_check: -t) sets on itself: it ends before the test's timeout kills it,
# so that it says itself where it was (its phase) instead of dying silently.
check_alarm() { echo $((UCT_TEST_TIMEOUT > 30 ? UCT_TEST_TIMEOUT - 10 : UCT_TEST_TIMEOUT)); }
# When watch_hang (below) looks: before that alarm, so that the stacks are taken while the hang is still there.
hang_watch_after() { echo $((UCT_TEST_TIMEOUT > 30 ? UCT_TEST_TIMEOUT - 20 : UCT_TEST_TIMEOUT)); }

fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*"; exit "$SKIP"; }
note() { echo "# $*"; }

# A TCP port nobody listens on right now (released before use: a small race other tests cannot widen much).
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# The LD_PRELOAD list that loads module $1 (tools/gdx-run decides: a sanitizer runtime the module needs comes first).
preload_of() { "$(dirname "${BASH_SOURCE[0]}")/../../tools/gdx-run" --module "$1" --print-preload; }

# The VAR=value assignments that load module $1 into a process of the running UCX, one a line (tools/gdx-run
# decides: UCX_PLUGIN_PATH on UCX >= 1.22, the loader preloaded below that; README.md "Loading").
load_env_of() { "$(dirname "${BASH_SOURCE[0]}")/../../tools/gdx-run" --module "$1" --print-load-env; }

# with_loaded MODULE CMD...: CMD with the module loaded as above. (No process substitution: the soft-RoCE
# guest lacks /dev/fd.)
with_loaded() {
  local m="$1" envs=() line
  shift
  while IFS= read -r line; do [ -n "$line" ] && envs+=("$line"); done <<<"$(load_env_of "$m")"
  env "${envs[@]}" "$@"
}

# ucx_info_with MODULE ARGS...: ucx_info with the module loaded, bounded in time.
ucx_info_with() { local m="$1"; shift; with_loaded "$m" timeout 60 ucx_info "$@"; }

# Fails unless `ucx_info -d` (with the module preloaded) lists transport $2.
require_tl() {
  local module="$1" tl="$2" out
  out=$(ucx_info_with "$module" -d 2>&1) || fail "ucx_info -d with $module failed: $out"
  grep -q "Transport: $tl\$" <<<"$out" || fail "ucx_info -d does not list $tl (is it compiled into gdx?)"
}

# First device of transport $2 in `ucx_info -d`.
first_device() {
  local out
  out=$(ucx_info_with "$1" -d 2>/dev/null)
  awk -v tl="$2" '$0 ~ "Transport: "tl"$" {getline; sub(/.*Device: /, ""); print; exit}' <<<"$out"
}

# wait_listen PORT PID: until something listens on TCP PORT (read from /proc: no connection is made, so the
# server's one accept is not used up), PID exits, or UCT_TEST_TIMEOUT passes.
wait_listen() {
  local hex i
  hex=$(printf '%04X' "$1")
  for ((i = 0; i < UCT_TEST_TIMEOUT * 10; i++)); do
    awk -v p=":$hex" '$2 ~ p"$" && $4 == "0A" {found=1} END {exit !found}' /proc/net/tcp /proc/net/tcp6 2>/dev/null &&
      return 0
    kill -0 "$2" 2>/dev/null || return 0
    sleep 0.1
  done
}

# The processes under PID (itself included) that are not shells or wrappers: the programs a test runs.
programs_under() {
  local p c
  for p in "$@"; do
    [ -d "/proc/$p" ] || continue
    case "$(cat "/proc/$p/comm" 2>/dev/null)" in timeout|bash|sh|env|gdx-run) ;; *) echo "$p" ;; esac
    for c in $(awk -v pp="$p" '$4 == pp {print $1}' /proc/[0-9]*/stat 2>/dev/null); do programs_under "$c"; done
  done
}

# watch_hang SECONDS LOG PID...: if a PID still runs after SECONDS (shortly before the check's own alarm), appends
# the stack of every thread of every program under it to LOG, through gdb (or cuda-gdb, which the GPU machine has),
# where one is installed: a hang then says where it is. Runs in the background and ends with the PIDs.
watch_hang() {
  local secs="$1" log="$2"
  shift 2
  (
    for ((i = 0; i < secs * 10; i++)); do
      alive=0
      for p in "$@"; do kill -0 "$p" 2>/dev/null && alive=1; done
      [ "$alive" = 1 ] || exit 0
      sleep 0.1
    done
    dbg=$(command -v gdb || command -v cuda-gdb) || { echo "# hung; no gdb or cuda-gdb here for its stacks"; exit 0; }
    for p in $(programs_under "$@"); do
      echo "--- stacks of pid $p ($(tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | cut -c1-160)), still running after ${secs}s"
      timeout 60 "$dbg" -p "$p" -batch -nx -ex "set pagination off" -ex "thread apply all bt" 2>&1 |
        grep -E "^(Thread|#)" || echo "(no stack: $dbg could not attach)"
    done
  ) >>"$log" 2>&1 </dev/null &
}

# run_pair LOGPREFIX CMD...: CMD as server, then CMD plus 127.0.0.1 as client (ucx_perftest style); both must
# exit 0 within UCT_TEST_TIMEOUT. Prints both logs on failure.
run_pair() {
  local log="$1"; shift
  local port spid cpid src crc
  port=$(free_port)
  timeout "$UCT_TEST_TIMEOUT" "$@" -p "$port" >"$log.server" 2>&1 &
  spid=$!
  # Start the client once the server listens: ucx_perftest 1.13 retries a refused connection, later ones fail at
  # once (a loaded host can take seconds to bring the server up).
  wait_listen "$port" "$spid"
  timeout "$UCT_TEST_TIMEOUT" "$@" -p "$port" 127.0.0.1 >"$log.client" 2>&1 &
  cpid=$!
  watch_hang "$(hang_watch_after)" "$log.stacks" "$spid" "$cpid"
  wait "$cpid"
  crc=$?
  wait "$spid"
  src=$?
  if [ "$crc" != 0 ] || [ "$src" != 0 ]; then
    echo "--- server ($log.server) ---"; tail -40 "$log.server"
    echo "--- client ($log.client) ---"; tail -40 "$log.client"
    [ -s "$log.stacks" ] && { echo "--- where they were ($log.stacks) ---"; cat "$log.stacks"; }
    fail "server exit $src, client exit $crc (124 = timed out)"
  fi
}

# run_mpi LOG GDX_RUN MODULE TLS PROGRAM ARGS...: 2 Open MPI ranks of PROGRAM through gdx-run over TLS, output in
# LOG; fails unless mpirun exits 0 and both ranks print "errors=0 (all ranks: checks=N errors=0)". Skips without
# mpirun. Open MPI refuses a node named "(none)", which is what the soft-RoCE guest (tests/rxe) is: the run then
# gets a name in a UTS namespace of its own (the machine's name is untouched).
run_mpi() {
  local log="$1" gdx_run="$2" module="$3" tls="$4" rc uts=() aux=(); shift 4
  [ -n "${GDX_RUN_AUX:-}" ] && aux=(--aux "$GDX_RUN_AUX")   # else gdx-run's default for this UCX
  command -v mpirun >/dev/null || skip "mpirun not installed"
  if [ "$(hostname)" = "(none)" ]; then
    command -v unshare >/dev/null || skip "no host name and no unshare: Open MPI cannot run here"
    uts=(unshare --uts sh -c 'hostname gdx-test && exec "$@"' sh)
  fi
  UCX_LOG_LEVEL=info timeout "${UCT_MPI_TIMEOUT:-300}" "${uts[@]}" "$gdx_run" --module "$module" --tls "$tls" "${aux[@]}" \
    mpirun --allow-run-as-root --oversubscribe -np 2 -x UCX_LOG_LEVEL "$@" >"$log" 2>&1
  rc=$?
  grep -E "^rank [01]:" "$log"
  if [ "$rc" != 0 ]; then tail -40 "$log"; fail "mpirun exit $rc (124 = timed out)"; fi
  [ "$(grep -c 'errors=0 (all ranks: checks=[0-9]* errors=0)' "$log")" = 2 ] || fail "not both ranks reported 0 errors"
}

# engine_totals TL FILES...: "direct staged" bytes of TL's path totals (the module's GDX_UCT_STATS line at exit),
# one line per process whose output is in FILES.
engine_totals() {
  local tl="$1"; shift
  sed -n "s/.* $tl path totals: direct \([0-9]*\) B .*, staged \([0-9]*\) B .*/\1 \2/p" "$@"
}

# check_engine_paths TL EXPECT NPROC FILES...: the staging engine carried TL's bytes as expected, summed over the
# NPROC processes whose output is in FILES: EXPECT=staged (GDX_FAULT_P2P_EVERY=1, or memory the transport does not
# reach) staged bytes only; EXPECT=mixed (GDX_FAULT_P2P_EVERY=3 on memory it reaches) staged and direct bytes, and
# at least one request whose path was both (its info line); EXPECT=direct (memory it reaches, no faults) direct
# bytes only. Fails with what was seen.
check_engine_paths() {
  local tl="$1" expect="$2" nproc="$3" direct staged mixed; shift 3
  [ "$(engine_totals "$tl" "$@" | wc -l)" = "$nproc" ] ||
    fail "expected $nproc $tl path totals lines (GDX_UCT_STATS), got: $(engine_totals "$tl" "$@")"
  read -r direct staged <<<"$(engine_totals "$tl" "$@" | awk '{d += $1; s += $2} END {printf "%.0f %.0f\n", d, s}')"
  note "$tl: direct $direct B, staged $staged B (GDX_FAULT_P2P_EVERY=${GDX_FAULT_P2P_EVERY:-0}, expected $expect)"
  if [ "$expect" = direct ]; then
    [ "$direct" -gt 0 ] || fail "nothing went direct through the engine on $tl"
    [ "$staged" = 0 ] || fail "$staged bytes were staged where every fragment could go direct"
    return 0
  fi
  [ "$staged" -gt 0 ] || fail "nothing was staged through the engine on $tl"
  if [ "$expect" = staged ]; then
    [ "$direct" = 0 ] || fail "$direct bytes went direct where every fragment had to be staged"
    return 0
  fi
  [ "$direct" -gt 0 ] || fail "nothing went direct on $tl"
  mixed=$(grep -hE "uct +INFO +$tl to peer .*: direct\[.*\] [^+]*% \+ staged" "$@" | head -1)
  [ -n "$mixed" ] || fail "no request on $tl mixed direct and staged fragments (no such path line at info)"
  note "a mixed message: ${mixed#*INFO  }"
}
