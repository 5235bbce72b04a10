#!/usr/bin/env bash
# guest-caps.sh CMD [ARGS...]: run inside the soft-RoCE guest (run-in-rxe-vm.sh); prints the guest kernel and the
# ODP capabilities of rxe0 as `ibv_devinfo -v` reports them (they decide which ODP tests run), then execs CMD.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 CMD [ARGS...]" >&2; exit 2; }
[ "${RXE_VM_GUEST:-0}" = 1 ] || { echo "guest-caps.sh: runs inside the soft-RoCE guest (run-in-rxe-vm.sh)" >&2; exit 2; }
read -r kver < /proc/sys/kernel/osrelease
echo "guest: kernel $kver; ibv_devinfo -v -d rxe0, ODP capabilities:"
# From general_odp_caps to the line before the next non-ODP field (the caps are tab-indented lists).
ibv_devinfo -v -d rxe0 | awk '/^\t[a-z_]*odp_caps:/ {on=1; print; next} on && /^\t\t/ {print; next} {on=0}'
exec "$@"
