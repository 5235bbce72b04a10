#!/usr/bin/env bash
# run-in-rxe-vm.sh CMD [ARGS...]
#
# Boots a Debian stock kernel (Debian 12's, or RXE_VM_KERNEL's) under qemu (TCG), loads rdma_rxe, creates
# rxe0 on dummy0 and runs CMD as root in a chroot of the host's / (shared read-only over virtio-9p), in the
# same working directory and with the caller's environment (HOME=/tmp, stdin /dev/null). CMD's stdout and
# stderr stream back separately. Exit status: CMD's; 124 on timeout; 125 when the VM or the harness itself
# failed (the guest console log is printed then). See tests/rxe/README.md.
#
# Environment knobs (defaults in brackets):
#   RXE_VM_TIMEOUT  [600]   seconds for the whole VM run (boot included); then qemu is killed, exit 124
#   RXE_VM_MEM      [1G]    guest memory (qemu -m)
#   RXE_VM_SMP      [2]     guest vCPUs (use 1 per guest when two guests share 2 host cores)
#   RXE_VM_MTU      [1500]  MTU of the rxe netdev (1500 -> RoCE active_mtu 1024; 9000 -> 4096)
#   RXE_VM_RW_CWD   [1]     share the current directory read-write at its path (else it is read-only)
#   RXE_VM_RW       []      more directories to share read-write at their paths (space separated)
#   RXE_VM_VERBOSE  [0]     1: print the guest console log after the run
#   RXE_VM_NETDEV   [dummy0, eth0 with RXE_VM_NIC]  netdev rxe0 is created on (dummy0, eth0 or lo)
#   RXE_VM_NIC      []      server:SOCK | client:SOCK: add a virtio NIC (eth0) linked to another guest
#                           through a qemu -netdev stream over the unix socket SOCK (two-guest tests)
#   RXE_VM_MAC      [52:54:00:00:00:01 server, :02 client]  MAC of eth0 in NIC mode
#   RXE_VM_IPV4     []      e.g. 10.0.0.1/24: also add this IPv4 address to the netdev
#   RXE_VM_RXE      [1]     0: do not create rxe0 (still loads the modules)
#   RXE_VM_ACCEL    [tcg]   kvm only on hosts with real VT-x/AMD-V (untested; not on the PVM dev hosts)
#   RXE_VM_CACHE    [/var/tmp/gdx-rxe-vm]  where build-rxe-vm.sh keeps vmlinux + initramfs.cpio
#   RXE_VM_KERNEL   [system]  guest kernel: 'system' = linux-image-amd64 of this machine's apt sources (Debian
#                           12's 6.1); a Debian suite name (sid, trixie) = that suite's (build-rxe-vm.sh)
set -euo pipefail

prog=run-in-rxe-vm
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

die() { echo "$prog: error: $*" >&2; exit 125; }

if [ $# -lt 1 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 125
fi

# ---- knobs -----------------------------------------------------------------------------------------
timeout_s=${RXE_VM_TIMEOUT:-600}
mem=${RXE_VM_MEM:-1G}
smp=${RXE_VM_SMP:-2}
mtu=${RXE_VM_MTU:-1500}
rw_cwd=${RXE_VM_RW_CWD:-1}
verbose=${RXE_VM_VERBOSE:-0}
nic=${RXE_VM_NIC:-}
ipv4=${RXE_VM_IPV4:-}
use_rxe=${RXE_VM_RXE:-1}
accel=${RXE_VM_ACCEL:-tcg}
cache=${RXE_VM_CACHE:-/var/tmp/gdx-rxe-vm}

[[ $timeout_s =~ ^[1-9][0-9]*$ ]] || die "RXE_VM_TIMEOUT='$timeout_s' is not a positive number of seconds"
[[ $mem =~ ^[1-9][0-9]*[MG]?$ ]] || die "RXE_VM_MEM='$mem' is not like 512M or 1G"
[[ $smp =~ ^[1-9][0-9]*$ ]] || die "RXE_VM_SMP='$smp' is not a positive number"
if ! [[ $mtu =~ ^[0-9]+$ ]] || [ "$mtu" -lt 1280 ] || [ "$mtu" -gt 65535 ]; then
  die "RXE_VM_MTU='$mtu' is not in 1280..65535 (IPv6 needs at least 1280)"
fi
[[ $rw_cwd =~ ^[01]$ ]] || die "RXE_VM_RW_CWD='$rw_cwd' is not 0 or 1"
[[ $verbose =~ ^[01]$ ]] || die "RXE_VM_VERBOSE='$verbose' is not 0 or 1"
[[ $use_rxe =~ ^[01]$ ]] || die "RXE_VM_RXE='$use_rxe' is not 0 or 1"
[ -z "$ipv4" ] || [[ $ipv4 =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+(/[0-9]+)?$ ]] ||
  die "RXE_VM_IPV4='$ipv4' is not like 10.0.0.1/24"
case "$accel" in
  tcg) accel_opt=tcg,thread=multi cpu=max ;;
  kvm) accel_opt=kvm cpu=host ;;
  *) die "RXE_VM_ACCEL='$accel' is not tcg or kvm" ;;
esac

nic_mode='' sock=''
if [ -n "$nic" ]; then
  case "$nic" in
    server:?*) nic_mode=server sock=${nic#server:}; def_mac=52:54:00:00:00:01 ;;
    client:?*) nic_mode=client sock=${nic#client:}; def_mac=52:54:00:00:00:02 ;;
    *) die "RXE_VM_NIC='$nic' is not server:SOCKET or client:SOCKET" ;;
  esac
  [[ $sock == /* ]] || sock=$PWD/$sock
  mac=${RXE_VM_MAC:-$def_mac}
  [[ $mac =~ ^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$ ]] || die "RXE_VM_MAC='$mac' is not a MAC address"
  netdev=${RXE_VM_NETDEV:-eth0}
else
  [ -z "${RXE_VM_MAC:-}" ] || die "RXE_VM_MAC is set but RXE_VM_NIC is not (there is no NIC without it)"
  netdev=${RXE_VM_NETDEV:-dummy0}
fi
[[ $netdev =~ ^[A-Za-z0-9_.-]{1,15}$ ]] || die "RXE_VM_NETDEV='$netdev' is not a netdev name"
if [ "$netdev" = eth0 ] && [ -z "$nic_mode" ]; then
  die "RXE_VM_NETDEV=eth0 needs RXE_VM_NIC=server:SOCK or client:SOCK (the guest has no NIC otherwise)"
fi

qemu_bin='qemu-system-x86_64'
command -v "$qemu_bin" >/dev/null || die "$qemu_bin not found; run scripts/setup.sh --rxe"

# ---- the VM image (built once, cached) -------------------------------------------------------------
RXE_VM_CACHE=$cache "$here/build-rxe-vm.sh" --quiet || die "building the VM image failed (build-rxe-vm.sh, see above)"
cache=$(RXE_VM_CACHE=$cache "$here/build-rxe-vm.sh" --print-dir) || die "build-rxe-vm.sh --print-dir failed"
kernel=$cache/vmlinux initrd=$cache/initramfs.cpio
if [ ! -s "$kernel" ] || [ ! -s "$initrd" ]; then die "$kernel or $initrd missing after build-rxe-vm.sh"; fi

# ---- read-write shares -----------------------------------------------------------------------------
rw_paths=()
add_rw() {  # add_rw DIR WHAT
  local p
  p=$(cd -- "$1" 2>/dev/null && pwd -P) || die "$2 '$1' is not an accessible directory"
  [ "$p" != / ] || die "$2 is /; refusing to share the whole host root read-write"
  local q
  for q in "${rw_paths[@]}"; do [ "$q" != "$p" ] || return 0; done
  rw_paths+=("$p")
}
if [ "$rw_cwd" = 1 ]; then
  [ "$PWD" != / ] || die "the current directory is /; cd elsewhere or set RXE_VM_RW_CWD=0"
  add_rw "$PWD" "the current directory"
fi
for d in ${RXE_VM_RW:-}; do add_rw "$d" "RXE_VM_RW entry"; done

# ---- per-run directory, FIFOs, cleanup -------------------------------------------------------------
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gdx-rxe.XXXXXX") || die "mktemp -d in ${TMPDIR:-/tmp} failed"
res=$tmp/res              # shared with the guest (9p tag res, also visible at the same path inside)
qpid='' spid='' cat_out='' cat_err='' wout='' werr=''

stop_pid() {  # stop_pid PID: TERM, up to 3 s grace, then KILL; reaps it
  local pid=$1 i
  kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 30; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
# shellcheck disable=SC2317  # invoked through trap
cleanup() {
  local rc=$?
  trap - EXIT INT TERM HUP
  [ -z "$qpid" ] || stop_pid "$qpid"
  [ -z "$spid" ] || { kill -PIPE "$spid" 2>/dev/null || true; wait "$spid" 2>/dev/null || true; }
  # qemu is gone: drop our holder fds so the readers see EOF after draining the FIFOs.
  [ -z "$wout" ] || exec {wout}>&-
  [ -z "$werr" ] || exec {werr}>&-
  local p i
  for p in $cat_out $cat_err; do
    for ((i = 0; i < 50; i++)); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    stop_pid "$p"
  done
  [ "$nic_mode" != server ] || rm -f -- "$sock"
  rm -rf -- "$tmp"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

mkdir "$res" || die "mkdir $res failed"
mkfifo "$tmp/out" "$tmp/err" || die "mkfifo in $tmp failed"

# ---- vm.conf (sourced by the guest's busybox /init) and cmd.sh (run by bash in the chroot) ---------
shq() { local s=${1//\'/\'\\\'\'}; printf "'%s'" "$s"; }   # single-quote for busybox sh
{
  echo "RES=$(shq "$res")"
  tags=
  for i in "${!rw_paths[@]}"; do
    echo "rw$i=$(shq "${rw_paths[$i]}")"
    tags+=" rw$i"
  done
  echo "RW_TAGS='${tags# }'"
} > "$res/vm.conf" || die "cannot write $res/vm.conf"

{
  echo "# generated by $prog for one run"
  # The caller's environment, re-exported (bash-only quoting, fine: this runs under bash).
  while IFS= read -r name; do
    case "$name" in
      HOME|PWD|OLDPWD|SHLVL|_|SHELLOPTS|BASHOPTS|BASH_*|EUID|UID|PPID|GROUPS) continue ;;
    esac
    [[ -v $name ]] || continue
    printf 'export %s=%q\n' "$name" "${!name}"
  done < <(compgen -e)
  echo 'export HOME=/tmp RXE_VM_GUEST=1'
  printf 'RES=%q NETDEV=%q MTU=%q IPV4=%q USE_RXE=%q CWD=%q\n' "$res" "$netdev" "$mtu" "$ipv4" "$use_rxe" "$PWD"
  cat <<'EOF'
fail() { printf 'run-in-rxe-vm (guest): %s\n' "$*" >&2; printf '%s\n' "$*" > "$RES/vmfail"; exit 125; }
ulimit -l unlimited || fail "ulimit -l unlimited failed"
batch="link set dev lo up"
if [[ $USE_RXE == 1 ]]; then
  [[ -d /sys/class/net/$NETDEV ]] || fail "netdev $NETDEV does not exist in the guest"
  # No duplicate address detection: the link-local address (GID 0) is usable at once.
  [[ ! -e /proc/sys/net/ipv6/conf/$NETDEV/accept_dad ]] ||
    echo 0 > "/proc/sys/net/ipv6/conf/$NETDEV/accept_dad" || fail "cannot disable DAD on $NETDEV"
  [[ $NETDEV == lo ]] || batch+=$'\n'"link set dev $NETDEV mtu $MTU up"
  [[ -z $IPV4 ]] || batch+=$'\n'"address add $IPV4 dev $NETDEV"
fi
ip -batch - <<< "$batch" || fail "ip -batch failed: ${batch//$'\n'/; }"
if [[ $USE_RXE == 1 ]]; then
  rdma link add rxe0 type rxe netdev "$NETDEV" || fail "rdma link add rxe0 type rxe netdev $NETDEV failed"
  # Wait until the port is ACTIVE with a RoCE v2 GID, the netdev is operationally up, and (except on lo)
  # it has its IPv6 link-local address (rdma_cm needs it; on eth0 it comes ~0.5 s after "up").
  # Bash builtins only: a fork costs ~35 ms under TCG.
  port=/sys/class/infiniband/rxe0/ports/1 ok=0 why=
  for ((try = 0; try < 200 && !ok; try++)); do
    st= ops= why=
    read -r st 2>/dev/null < "$port/state" || true
    read -r ops 2>/dev/null < "/sys/class/net/$NETDEV/operstate" || true
    if [[ $st != *ACTIVE* ]]; then
      why="port state '$st'"
    elif [[ $ops != up && $ops != unknown ]]; then
      why="$NETDEV operstate '$ops'"
    else
      why="no RoCE v2 GID"
      for ((g = 0; g < 16; g++)); do
        gid= ty=
        read -r gid 2>/dev/null < "$port/gids/$g" || continue
        [[ $gid != 0000:0000:0000:0000:0000:0000:0000:0000 ]] || continue
        read -r ty 2>/dev/null < "$port/gid_attrs/types/$g" || continue
        if [[ $ty == "RoCE v2" ]]; then why=; break; fi
      done
      if [[ -z $why && $NETDEV != lo && -r /proc/net/if_inet6 ]]; then
        why="no IPv6 link-local address on $NETDEV"
        while read -r a _ _ scope _ name; do
          if [[ $name == "$NETDEV" && $scope == 20 && $a == fe80* ]]; then why=; break; fi
        done < /proc/net/if_inet6
      fi
      [[ -n $why ]] || ok=1
    fi
    ((ok)) || sleep 0.05
  done
  ((ok)) || fail "rxe0 on $NETDEV not ready after 10 s: $why"
fi
if [[ -n ${TMPDIR:-} && ! -d $TMPDIR ]]; then mkdir -p -- "$TMPDIR" || fail "mkdir TMPDIR=$TMPDIR failed"; fi
cd -- "$CWD" 2>/dev/null || fail "cannot cd to $CWD in the guest (under /tmp and RXE_VM_RW_CWD=0?)"
unset batch port ok why try st ops g gid ty a scope name RES NETDEV MTU IPV4 USE_RXE CWD
unset -f fail
EOF
  printf 'command -v -- %q >/dev/null || { echo "run-in-rxe-vm: "%q": command not found" >&2; exit 127; }\n' "$1" "$1"
  printf 'exec'
  printf ' %q' "$@"
  echo
} > "$res/cmd.sh" || die "cannot write $res/cmd.sh"

# ---- qemu ------------------------------------------------------------------------------------------
loglevel="quiet loglevel=4"
[ "$verbose" = 0 ] || loglevel="loglevel=7"   # the whole boot log, for debugging
qesc() { printf '%s' "${1//,/,,}"; }   # qemu option values: ',' is doubled
# shellcheck disable=SC2054  # commas belong to qemu option values
qemu=("$qemu_bin" -name gdx-rxe -accel "$accel_opt" -cpu "$cpu" -m "$mem" -smp "$smp"
  -machine pc -display none -vga none -no-reboot -monitor none
  -kernel "$kernel" -initrd "$initrd"
  -append "console=ttyS0 panic=-1 $loglevel mitigations=off acpi=noirq"
  -chardev "file,id=con,path=$(qesc "$tmp/console.log")" -serial chardev:con
  -fsdev local,id=fsroot,path=/,security_model=none,readonly=on,multidevs=remap
  -device virtio-9p-pci,fsdev=fsroot,mount_tag=hostroot
  -fsdev "local,id=fsres,path=$(qesc "$res"),security_model=none,multidevs=remap"
  -device virtio-9p-pci,fsdev=fsres,mount_tag=res)
for i in "${!rw_paths[@]}"; do
  qemu+=(-fsdev "local,id=fsrw$i,path=$(qesc "${rw_paths[$i]}"),security_model=none,multidevs=remap"
    -device "virtio-9p-pci,fsdev=fsrw$i,mount_tag=rw$i")
done
# shellcheck disable=SC2054
qemu+=(-device virtio-serial-pci
  -chardev "file,id=cout,path=$(qesc "$tmp/out")" -device virtserialport,chardev=cout,name=gdx.stdout
  -chardev "file,id=cerr,path=$(qesc "$tmp/err")" -device virtserialport,chardev=cerr,name=gdx.stderr)
if [ -n "$nic_mode" ]; then
  server=off
  [ "$nic_mode" = client ] || server=on
  qemu+=(-netdev "stream,id=n0,server=$server,addr.type=unix,addr.path=$(qesc "$sock")"
    -device "virtio-net-pci,netdev=n0,mac=$mac")
else
  qemu+=(-nic none)
fi

# A client needs the server's socket to exist (qemu 7.2's stream client does not retry).
if [ "$nic_mode" = client ]; then
  for ((i = 0; i < 10 * (timeout_s < 60 ? timeout_s : 60); i++)); do
    [ -S "$sock" ] && break
    sleep 0.1
  done
  [ -S "$sock" ] || die "RXE_VM_NIC=client: socket $sock did not appear (is the server guest running?)"
fi

# qemu (and the watchdog) die with this script even if it is SIGKILLed.
reaper=()
if setpriv --help 2>/dev/null | grep -q -- --pdeathsig; then reaper=(setpriv --pdeathsig KILL --); fi

# Hold both FIFOs open read-write so that neither the readers' nor qemu's open() can block; the readers
# get EOF once qemu has exited and cleanup has closed these.
exec {wout}<>"$tmp/out" {werr}<>"$tmp/err"
cat < "$tmp/out" {wout}>&- {werr}>&- &
cat_out=$!
cat < "$tmp/err" >&2 {wout}>&- {werr}>&- &
cat_err=$!

"${reaper[@]}" "${qemu[@]}" < /dev/null > "$tmp/qemu.log" 2>&1 {wout}>&- {werr}>&- &
qpid=$!
# The watchdog is stopped with SIGPIPE, the one signal bash prints no "Killed" job notice for here.
"${reaper[@]}" sleep "$timeout_s" {wout}>&- {werr}>&- &
spid=$!

which=''
qst=0
wait -n -p which "$qpid" "$spid" || qst=$?
timed_out=0
if [ "$which" = "$spid" ]; then
  timed_out=1
  spid=''
  stop_pid "$qpid"
fi
wait "$qpid" 2>/dev/null || true
qpid=''
[ -z "$spid" ] || { kill -PIPE "$spid" 2>/dev/null || true; wait "$spid" 2>/dev/null || true; }
spid=''
# Let the readers drain the FIFOs before deciding (cleanup would do it too, but output must come
# before our own messages).
exec {wout}>&- {werr}>&-
wout='' werr=''
wait "$cat_out" "$cat_err" 2>/dev/null || true
cat_out='' cat_err=''

show_console() {
  echo "---- $prog: guest console log ----" >&2
  cat "$tmp/console.log" >&2 2>/dev/null || true
  if [ -s "$tmp/qemu.log" ]; then
    echo "---- $prog: qemu output ----" >&2
    cat "$tmp/qemu.log" >&2
  fi
  echo "---- $prog: end ----" >&2
}

if [ -e "$res/vmfail" ]; then
  echo "$prog: the VM failed: $(cat "$res/vmfail")" >&2
  show_console
  exit 125
fi
rc=''
if [ -r "$res/rc" ]; then read -r rc < "$res/rc" || true; fi
if [[ $rc =~ ^[0-9]+$ ]]; then
  [ "$verbose" = 0 ] || show_console
  exit "$rc"
fi
if [ "$timed_out" = 1 ]; then
  echo "$prog: timed out after ${timeout_s} s (RXE_VM_TIMEOUT); qemu killed" >&2
  if [ "$verbose" = 1 ]; then
    show_console
  else
    echo "$prog: last guest console lines:" >&2
    if [ -s "$tmp/console.log" ]; then tail -n 10 "$tmp/console.log" >&2; else echo "(none)" >&2; fi
  fi
  exit 124
fi
echo "$prog: the VM ended (qemu exit status $qst) without reporting the command's exit status" \
  "(qemu failed, or the guest panicked)" >&2
show_console
exit 125
