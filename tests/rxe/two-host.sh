#!/usr/bin/env bash
# two-host.sh <build-dir>: gdx rc between two soft-RoCE guests joined by a qemu stream link (a real wire:
# two rxe devices, two GIDs, two MACs), then one guest killed mid-transfer.
#
#   1. boots a server guest and a client guest (RXE_VM_NIC=server:SOCK / client:SOCK, one vCPU each);
#   2. rc_two_host exchanges endpoint addresses and keys over TCP on eth0 (IPv6 link-local, %eth0 scope),
#      checks put/get byte-exact across the link, then streams puts and prints STREAMING;
#   3. this script then kills the server's guest (its qemu, like a power cut);
#   4. the client must see its operations fail with GDX_ERR_CONNECTION_RESET within the bound that
#      GDX_PEER_TIMEOUT (default here 4s) gives the queue pair.
# Exit status: the client's (0 = pass). Wall time about 40-60 s on the 2-core dev host.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ $# -eq 1 ] || { echo "usage: $0 <build-dir>" >&2; exit 2; }
build=$(cd -- "$1" && pwd -P)
bin=$build/tests/rc/rc_two_host
[ -x "$bin" ] || { echo "two-host: $bin not built" >&2; exit 2; }
# The guests see the host's / read-only but have a /tmp, /var/tmp and /dev/shm of their own (RXE_VM_RW_CWD=0
# below): a build tree there (a clone under /tmp) would be invisible ("command not found"). It is shared with
# both guests at its path instead (run-in-rxe-vm.sh mounts shares over those private directories).
case "$build/" in /tmp/*|/var/tmp/*|/dev/shm/*) export RXE_VM_RW="${RXE_VM_RW:-} $build" ;; esac

work=$(mktemp -d /tmp/gdx-two-host.XXXXXX)
sock=$work/link.sock
spid= cpid=
cleanup() {
  local p
  for p in $cpid $spid; do kill -TERM "$p" 2>/dev/null || true; done
  for p in $cpid $spid; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

export RXE_VM_SMP=1 RXE_VM_TIMEOUT=${RXE_VM_TIMEOUT:-240} RXE_VM_RW_CWD=0 RXE_VM_MEM=512M
export GDX_PEER_TIMEOUT=${GDX_PEER_TIMEOUT:-4s}
cd /
t0=$(date +%s)
RXE_VM_NIC=server:$sock "$here/run-in-rxe-vm.sh" "$bin" server 7471 > "$work/server.out" 2>&1 &
spid=$!
RXE_VM_NIC=client:$sock "$here/run-in-rxe-vm.sh" "$bin" client 'fe80::5054:ff:fe00:1%eth0' 7471 > "$work/client.out" 2>&1 &
cpid=$!

# Kill the server's guest once the client streams (or give up when the client ends first).
for ((i = 0; i < 1800; i++)); do
  grep -q '^STREAMING' "$work/client.out" 2>/dev/null && break
  kill -0 "$cpid" 2>/dev/null || break
  sleep 0.1
done
if grep -q '^STREAMING' "$work/client.out"; then
  sleep 1 # some puts complete first: "mid-transfer"
  echo "two-host: killing the server guest at $(( $(date +%s) - t0 )) s"
  kill -TERM "$spid" # the harness kills its qemu at once (TERM, then KILL)
  wait "$spid" 2>/dev/null || true
  spid=
fi
rc=0
wait "$cpid" || rc=$?
cpid=
echo "---- server guest ----"
sed 's/^/  /' "$work/server.out"
echo "---- client guest ----"
sed 's/^/  /' "$work/client.out"
echo "two-host: $( [ $rc = 0 ] && echo PASS || echo "FAIL (client exit $rc)" ) in $(( $(date +%s) - t0 )) s"
exit "$rc"
