#!/usr/bin/env bash
# tools/gdx-run builds the environment and the mpirun command line it documents, keeps its own variables to
# itself, prints the mpirun line it runs; a rank whose mpirun line was put together by hand without pml ucx is
# told so by the loader; a module built for another UCX version is refused in one line and nothing runs.
#   test_gdx_run.sh GDX_RUN MODULE [MPI_PROGRAM]
# MPI_PROGRAM (uct_mpi_check) is a process that calls MPI_Init: from UCX 1.22 on, nothing of gdx is in a rank until
# pml ucx opens UCX there, which `true` never does.
. "$(dirname "$0")/lib.sh"
gdx_run="$1" module="$2" mpi_prog="${3:-}"
ver=$(timeout 60 ucx_info -v | sed -n 's/^# \(Library version:\|Version\) \([0-9.]*\).*/\2/p' | head -1)
IFS=. read -r major minor _ <<<"$ver"
[ "$major" -gt 1 ] || [ "$minor" -ge 16 ] && aux_tls="gdx_aux:aux,tcp:aux" || aux_tls="gdx_aux:aux"

load=$(load_env_of "$module") || fail "gdx-run --print-load-env failed"
if [ "$major" -gt 1 ] || [ "$minor" -ge 22 ]; then
  grep -q "^UCX_PLUGIN_PATH=$(dirname "$module")" <<<"$load" || fail "UCX $ver: no UCX_PLUGIN_PATH: $load"
  grep -q "^LD_PRELOAD=.*libuct_gdx" <<<"$load" && fail "UCX $ver: something of gdx preloaded: $load"
else
  grep -q "^LD_PRELOAD=.*libuct_gdx_loader.so" <<<"$load" || fail "UCX $ver: the loader is not preloaded: $load"
  grep -q "^LIBUCT_GDX_PATH=$(dirname "$module")$" <<<"$load" || fail "UCX $ver: LIBUCT_GDX_PATH: $load"
fi

# A build for another UCX version: one line naming both versions, exit 2, the command never started.
other=$(mktemp -d) && cp "$module" "$(dirname "$module")/libuct_gdx_loader.so" "$other/" &&
  sed 's/^version=.*/version=0.0.1/' "$(dirname "$module")/libuct_gdx.ucx" > "$other/libuct_gdx.ucx" ||
  fail "cannot make a build for another UCX in $other"
err=$("$gdx_run" --module "$other/libuct_gdx.so.0" sh -c "echo RAN" 2>&1); st=$?
rm -rf "$other"
[ "$st" = 2 ] || fail "gdx-run with a build for another UCX exited $st, not 2: $err"
grep -q RAN <<<"$err" && fail "gdx-run ran the command with a build for another UCX: $err"
[ "$(grep -c '^gdx-run: the running UCX is .* built for UCX 0.0.1: nothing run' <<<"$err")" = 1 ] && [ "$(wc -l <<<"$err")" = 1 ] ||
  fail "not one line naming both versions: $err"

# --print-module: the module named, made absolute; without one, the checkout's build trees in their fixed order
# (build/ before a sanitizer tree, whose module cannot be preloaded alone, whatever the glob order: bench/ took
# build-asan/ first and every gdx run failed).
[ "$("$gdx_run" --module "$module" --print-module)" = "$(cd "$(dirname "$module")" && pwd)/$(basename "$module")" ] ||
  fail "gdx-run --print-module does not print the module it was given"
fake=$(mktemp -d) && trap 'rm -rf "$fake"' EXIT
mkdir -p "$fake/tools" "$fake/build-asan/src/uct" "$fake/build/src/uct" "$fake/build-dbg/src/uct"
cp "$gdx_run" "$fake/tools/gdx-run"
for t in build-asan build build-dbg; do : >"$fake/$t/src/uct/libuct_gdx.so.0"; done
got=$(env -u GDX_UCT_MODULE "$fake/tools/gdx-run" --print-module) || fail "gdx-run --print-module failed"
[ "$got" = "$fake/build/src/uct/libuct_gdx.so.0" ] || fail "gdx-run chose $got, not build/"
rm "$fake/build/src/uct/libuct_gdx.so.0"
got=$(env -u GDX_UCT_MODULE "$fake/tools/gdx-run" --print-module) || fail "gdx-run --print-module failed"
[ "$got" = "$fake/build-dbg/src/uct/libuct_gdx.so.0" ] || fail "gdx-run chose $got, not build-dbg/ before build-asan/"

# UCX's memory-type cache: off where this UCX has no CUDA module of its own (nothing would feed it), on where it has
ucx_libdir=$(dirname "$(ldd "$(command -v ucx_info)" | awk '$1 == "libucs.so.0" {print $3; exit}')")
memtype=n; [ -e "$ucx_libdir/ucx/libucm_cuda.so.0" ] && memtype=y
out=$(env -u UCX_TLS -u UCX_MEMTYPE_CACHE "$gdx_run" --module "$module" --tls gdx_shm --print ucx_info -v)
while IFS= read -r want; do
  grep -qF -- "$want" <<<"$out" || fail "gdx-run --print lacks '$want': $out"
done <<<"$load
UCX_MEMTYPE_CACHE=$memtype
ucx_info -v"
out=$(env -u UCX_TLS UCX_MEMTYPE_CACHE=y "$gdx_run" --module "$module" --tls gdx_shm --print true)
grep -qF "UCX_MEMTYPE_CACHE=y" <<<"$out" || fail "gdx-run overrode the user's UCX_MEMTYPE_CACHE: $out"
grep -qE "UCX_TLS=gdx_shm(,gdx_copy)?,self,$aux_tls " <<<"$out" || fail "gdx-run --print: UCX_TLS not as documented: $out"

out=$(env -u UCX_TLS GDX_LOG_LEVEL=info "$gdx_run" --module "$module" --tls gdx_tcp --aux gdx_aux --print \
      mpirun -np 2 ./app)
for want in "--mca pml ucx" "--mca pml_ucx_tls gdx_tcp,self" "--mca pml_ucx_devices any" "--mca osc ucx" \
            "-x GDX_LOG_LEVEL" "-np 2 ./app"; do
  grep -qF -- "$want" <<<"$out" || fail "gdx-run --print mpirun lacks '$want': $out"
done
while IFS= read -r want; do
  grep -qF -- "-x $want" <<<"$out" || fail "gdx-run --print mpirun lacks '-x $want': $out"
done <<<"$load"
grep -qE -- "-x UCX_TLS=gdx_tcp(,gdx_copy)?,self,gdx_aux:aux" <<<"$out" || fail "gdx-run --print mpirun: UCX_TLS: $out"
grep -q "^LD_PRELOAD" <<<"$out" && fail "mpirun itself got LD_PRELOAD: $out"

# gdx-run's own variables reach neither the command nor mpirun's ranks (gdx would warn about unknown GDX_*).
out=$(GDX_RUN_AUX=gdx_aux GDX_RUN_TLS=gdx_shm GDX_UCT_MODULE="$module" "$gdx_run" env)
grep -E "^GDX_(RUN_AUX|RUN_TLS|UCT_MODULE)=" <<<"$out" && fail "gdx-run passed its own variables on"
out=$(GDX_RUN_AUX=gdx_aux "$gdx_run" --module "$module" --tls gdx_shm --print mpirun -np 2 ./app)
grep -q "GDX_RUN_AUX" <<<"$out" && fail "gdx-run exported GDX_RUN_AUX to the ranks: $out"

# The default: UCX's own transports, gdx's only for a class this UCX has none of. ucx_info -d (module loaded) says
# what each has; every gdx transport whose class UCX covers is left out by name, the rest stay, and the one line
# on stderr says so.
listed=$(env $(load_env_of "$module") timeout 60 ucx_info -d | sed -n 's/^#[[:space:]]*Transport: //p' | sort -u)
has() { grep -qx "$1" <<<"$listed"; }
grep -q '^gdx_' <<<"$listed" || fail "ucx_info -d with the module loaded lists no gdx transport: $listed"
out=$(env -u UCX_TLS "$gdx_run" --module "$module" --print true 2>&1)
tls=$(sed -n 's/.*UCX_TLS=\([^ ]*\) .*/\1/p' <<<"$out")
[ -n "$tls" ] || fail "gdx-run --print: no UCX_TLS: $out"
[ "$tls" = all ] || [ "${tls#^}" != "$tls" ] || fail "default UCX_TLS is not 'all' or a list to leave out: $tls"
for row in "gdx_shm posix sysv" "gdx_tcp tcp" "gdx_ipc cuda_ipc" "gdx_copy cuda_copy"; do
  set -- $row; gtl=$1; shift
  has "$gtl" || continue
  covered=0; for p in "$@"; do has "$p" && covered=1; done
  left=0; [[ ",${tls#^}," == *",$gtl,"* ]] && left=1
  if [ "$covered" = 1 ] && [ "$left" = 0 ]; then fail "$gtl used by default though UCX has $*: UCX_TLS=$tls"; fi
  if [ "$covered" = 0 ] && [ "$gtl" != gdx_copy ] && [ "$left" = 1 ]; then
    fail "$gtl left out by default though UCX has none of $*: UCX_TLS=$tls"
  fi
done
out=$(env -u UCX_TLS "$gdx_run" --module "$module" --print mpirun -np 2 ./app 2>&1)
grep -qF -- "--mca pml_ucx_tls any" <<<"$out" || fail "default mpirun line: pml_ucx_tls is not any: $out"
err=$(env -u UCX_TLS "$gdx_run" --module "$module" true 2>&1 >/dev/null)
[ "$(grep -c "^gdx-run: UCX's own transports, and gdx for what this UCX has none of: " <<<"$err")" = 1 ] ||
  fail "gdx-run did not say once what it chose: $err"
err=$(env -u UCX_TLS "$gdx_run" --module "$module" --tls gdx_shm true 2>&1 >/dev/null)
grep -q "^gdx-run: gdx transports chosen: gdx_shm" <<<"$err" || fail "gdx-run --tls did not say what it chose: $err"
"$gdx_run" --module /nonexistent true 2>/dev/null && fail "a missing module was accepted"

if command -v mpirun >/dev/null && [ "$(hostname)" != "(none)" ]; then
  # gdx-run prints the exact mpirun line it runs.
  err=$(timeout 120 "$gdx_run" --module "$module" --tls gdx_shm mpirun --allow-run-as-root -np 1 true 2>&1 >/dev/null)
  grep -q "^gdx-run: mpirun --mca pml ucx --mca pml_ucx_tls gdx_shm,self" <<<"$err" ||
    fail "gdx-run did not print the mpirun line: $err"
  # By hand, without gdx-run (README "Open MPI by hand"): whatever loads gdx into a rank (the loader below 1.22,
  # UCX itself from 1.22) names the mpirun setting that is missing, in rank 0, once.
  handmade() { timeout 120 mpirun --allow-run-as-root -np 1 "$@" true 2>&1; }
  said() { grep -c "^libuct_gdx\(_loader\)\{0,1\}: this Open MPI rank loads gdx, but its mpirun line lacks $1" <<<"$2"; }
  moddir=$(dirname "$module")
  if [ "$major" -gt 1 ] || [ "$minor" -ge 22 ]; then
    [ -x "$mpi_prog" ] || fail "UCX $ver: no MPI program given (uct_mpi_check): the hand-made cases need MPI_Init"
    handmade() { timeout 120 mpirun --allow-run-as-root -np 1 "$@" "$mpi_prog" 10 2>&1; }
    # UCX_PLUGIN_PATH and UCX_TLS set by hand, pml ucx asked for but pml_ucx_tls left out: pml ucx opens UCX, UCX
    # loads the module, the module says what is missing (Open MPI itself only says "PML ucx cannot be selected").
    err=$(handmade --mca pml ucx -x UCX_PLUGIN_PATH="$moddir" -x UCX_TLS=gdx_shm,self,gdx_aux:aux)
    [ "$(said "--mca pml_ucx_tls" "$err")" = 1 ] || fail "UCX $ver: no one message for pml ucx without pml_ucx_tls: $err"
    # A rank that did not ask for gdx (UCX_TLS unset) is not told anything, though UCX loads the module.
    err=$(handmade --mca pml ucx -x UCX_PLUGIN_PATH="$moddir")
    grep -q "^libuct_gdx" <<<"$err" && fail "UCX $ver: a rank that did not ask for gdx was lectured: $err"
    # No pml ucx at all: an Open MPI whose configuration disables pml ucx (Debian's) never loads UCX, so only the
    # loader, preloaded as the README says for a hand-made line, can speak; it loads nothing on this UCX.
    san=$(ldd "$moddir/libuct_gdx_loader.so" 2>/dev/null | awk '$1 ~ /^lib(asan|ubsan|tsan)\.so/ {print $3}' | paste -sd: -)
    err=$(handmade -x LD_PRELOAD="${san:+$san:}$moddir/libuct_gdx_loader.so" -x UCX_PLUGIN_PATH="$moddir" \
                   -x UCX_TLS=gdx_shm,self,gdx_aux:aux)
    [ "$(said "--mca pml ucx" "$err")" = 1 ] || fail "UCX $ver: no one message for a line without pml ucx: $err"
  else
    # LD_PRELOAD and UCX_TLS but no pml ucx: Open MPI would pick ob1 without a word.
    envs=(); while IFS= read -r l; do envs+=(-x "$l"); done <<<"$load"
    err=$(handmade "${envs[@]}" -x UCX_TLS=gdx_shm,self,gdx_aux:aux)
    [ "$(said "--mca pml ucx" "$err")" = 1 ] || fail "no one message for a hand-made mpirun line without pml ucx: $err"
    # The loader preloaded means the rank wants gdx, UCX_TLS or not.
    err=$(handmade --mca pml ucx "${envs[@]}")
    [ "$(said "--mca pml_ucx_tls" "$err")" = 1 ] || fail "no one message for pml ucx without pml_ucx_tls: $err"
  fi
  # gdx-run's own line draws no message (MPI_Init with pml ucx over gdx, then the program's "needs 2 ranks").
  err=$(timeout 120 "$gdx_run" --module "$module" --tls gdx_shm mpirun --allow-run-as-root -np 1 \
        ${mpi_prog:-true} 10 2>&1)
  grep -q "^libuct_gdx.*this Open MPI rank" <<<"$err" && fail "gdx-run's mpirun line drew the message: $err"
fi
echo "PASS"
