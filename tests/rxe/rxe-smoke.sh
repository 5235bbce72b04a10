#!/usr/bin/env bash
# rxe-smoke.sh: a short self-check of the soft-RoCE guest (one boot, about 10 s under TCG).
#   tests/rxe/rxe-smoke.sh                     from the host: re-runs itself via run-in-rxe-vm.sh
#   tests/rxe/run-in-rxe-vm.sh tests/rxe/rxe-smoke.sh   the same, spelled out
# Checks: ulimit -l, ibv_devinfo shows rxe0 PORT_ACTIVE on Ethernet, GID 0 is RoCE v2, an
# ibv_rc_pingpong and an ibv_ud_pingpong server+client pair over rxe0 (-g 0), and an rdma_cm rping
# pair on the link-local address. Prints one line per check and closes with "N passed, N failed";
# exits 0 only if nothing failed. Forks are expensive under TCG (~35 ms each), so it keeps them few.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ "${RXE_VM_GUEST:-}" != 1 ]; then
  exec "$here/run-in-rxe-vm.sh" "$here/rxe-smoke.sh" "$@"
fi

dev=rxe0
port=/sys/class/infiniband/$dev/ports/1
logs=$(mktemp -d /tmp/rxe-smoke.XXXXXX)
trap 'rm -rf "$logs"' EXIT
passed=0 failed=0

pass() { passed=$((passed + 1)); echo "PASS $1"; }
fail() {  # fail NAME [LOGFILE...]
  local name=$1 f
  shift
  failed=$((failed + 1))
  echo "FAIL $name"
  for f in "$@"; do
    [ -s "$f" ] || continue
    sed 's/^/    | /' "$f"
  done
}

# pair NAME SERVER_CMD... -- CLIENT_CMD...: start the server, then the client; the client is retried
# (up to 40 times, 0.25 s apart) while the server still runs, since the server needs a moment to listen.
pair() {
  local name=$1 i srv=() cli=() spid rc_s rc_c=1
  shift
  while [ "$1" != -- ]; do srv+=("$1"); shift; done
  shift
  cli=("$@")
  timeout 60 "${srv[@]}" > "$logs/$name.server" 2>&1 &
  spid=$!
  sleep 0.3
  for ((i = 0; i < 40; i++)); do
    if timeout 60 "${cli[@]}" > "$logs/$name.client" 2>&1; then rc_c=0; break; else rc_c=$?; fi
    kill -0 "$spid" 2>/dev/null || break
    sleep 0.25
  done
  if [ "$rc_c" != 0 ]; then kill "$spid" 2>/dev/null || true; fi
  rc_s=0
  wait "$spid" || rc_s=$?
  if [ "$rc_c" = 0 ] && [ "$rc_s" = 0 ]; then
    pass "$name"
  else
    fail "$name (server rc $rc_s, client rc $rc_c)" "$logs/$name.server" "$logs/$name.client"
  fi
}

# 1. locked-memory limit (tests that drop privileges need it)
lim=$(ulimit -l)
if [ "$lim" = unlimited ]; then pass "ulimit -l unlimited"; else fail "ulimit -l is $lim, not unlimited"; fi

# 2. ibv_devinfo
if timeout 30 ibv_devinfo -d "$dev" > "$logs/devinfo" 2>&1 &&
   grep -q 'state:[[:space:]]*PORT_ACTIVE' "$logs/devinfo" &&
   grep -q 'link_layer:[[:space:]]*Ethernet' "$logs/devinfo"; then
  pass "ibv_devinfo: $dev PORT_ACTIVE, link_layer Ethernet"
else
  fail "ibv_devinfo: $dev PORT_ACTIVE, link_layer Ethernet" "$logs/devinfo"
fi

# 3. GID 0 is RoCE v2 (what -g 0 below uses); bash builtins only
gid='' gtype='' ndev=''
read -r gid 2>/dev/null < "$port/gids/0" || true
read -r gtype 2>/dev/null < "$port/gid_attrs/types/0" || true
read -r ndev 2>/dev/null < "$port/gid_attrs/ndevs/0" || true
if [ "$gtype" = "RoCE v2" ] && [ -n "$ndev" ] && [[ $gid == fe80:* ]]; then
  pass "GID 0 is RoCE v2 $gid on $ndev"
else
  fail "GID 0 is a RoCE v2 link-local GID (got gid='$gid' type='$gtype' ndev='$ndev')"
fi

# 4. RC and UD ping-pong over rxe0 (out-of-band exchange over TCP to localhost)
pair ibv_rc_pingpong ibv_rc_pingpong -d "$dev" -g 0 -p 18515 -n 500 -c -- \
  ibv_rc_pingpong -d "$dev" -g 0 -p 18515 -n 500 -c localhost
pair ibv_ud_pingpong ibv_ud_pingpong -d "$dev" -g 0 -p 18516 -n 500 -s 1024 -c -- \
  ibv_ud_pingpong -d "$dev" -g 0 -p 18516 -n 500 -s 1024 -c localhost

# 5. rdma_cm: rping to the link-local address of rxe0's netdev
if [ -n "$ndev" ] && [[ $gid == fe80:* ]]; then
  addr="$gid%$ndev"
  pair rping rping -s -a "$addr" -p 7174 -C 20 -S 4096 -V -- \
    rping -c -a "$addr" -p 7174 -C 20 -S 4096 -V
else
  fail "rping (no link-local GID to use)"
fi

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
