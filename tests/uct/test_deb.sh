#!/usr/bin/env bash
# The .deb a build makes (cpack -G DEB) installs with dpkg -i, its gdx-run lists the gdx transports through the
# installed loader and module (`gdx-run ucx_info -d`), and dpkg -r takes away every file it brought.
#
# Where it installs: by default into a throwaway root (dpkg --root=<tmp>), never onto the machine running the
# test (a shared CI host, whose other builds would then find an installed gdx). That root's package database holds
# the status of the packages the .deb depends on, copied from this machine, so dpkg checks the real Depends (the
# exact libucx0 among them) against what is really installed here; the maintainer scripts run outside the root
# (--force-script-chrootless: the root has no shell) with an `ldconfig` that only records that it was called.
# dpkg -P then drops what dpkg -r keeps (the maintainer scripts). With GDX_TEST_DPKG_SYSTEM=1 it installs into the
# system itself, with the real postinst and ldconfig: for a disposable root or machine only.
#   test_deb.sh BUILD_DIR FILES-THE-INSTALL-NEEDS...
. "$(dirname "$0")/lib.sh"
bdir="$1"; shift
for f in "$@"; do [ -e "$f" ] || skip "$f is not built (the .deb holds the whole install set: build all targets)"; done
command -v dpkg >/dev/null && command -v cpack >/dev/null || skip "no dpkg or cpack here"
# The .deb depends on exactly the libucx0 the module was built against: a UCX that no package owns (one built from
# source into a prefix, as on the GPU machine) has no such package, and dpkg would check the wrong one.
libucp=$(ldd "$bdir/src/uct/libuct_gdx.so.0" 2>/dev/null | awk '$1 == "libuct.so.0" {print $3; exit}')
[ -n "$libucp" ] && dpkg -S "$(readlink -f "$libucp")" >/dev/null 2>&1 ||
  skip "the UCX the module links ($libucp) belongs to no Debian package: no libucx0 for the .deb to depend on"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/uct-deb.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

timeout 600 cpack --config "$bdir/CPackConfig.cmake" -G DEB -B "$tmp/pkg" > "$tmp/cpack.log" 2>&1 ||
  { tail -20 "$tmp/cpack.log"; fail "cpack -G DEB failed"; }
deb=$(ls "$tmp"/pkg/*.deb) || fail "cpack made no .deb: $(tail -5 "$tmp/cpack.log")"
pkg=$(dpkg-deb -f "$deb" Package)
note "$(basename "$deb"): Depends: $(dpkg-deb -f "$deb" Depends)"

if [ "${GDX_TEST_DPKG_SYSTEM:-0}" = 1 ]; then
  [ "$(id -u)" = 0 ] || skip "GDX_TEST_DPKG_SYSTEM=1 needs root"
  dpkg-query -W "$pkg" >/dev/null 2>&1 && [ "$(dpkg-query -W -f='${db:Status-Status}' "$pkg")" = installed ] &&
    fail "$pkg is already installed here: not touching it"
  dp=(dpkg) prefix="" where="this system"
else
  prefix=$tmp/root
  mkdir -p "$prefix/var/lib/dpkg/info" "$prefix/var/lib/dpkg/updates" "$prefix/var/lib/dpkg/triggers" "$tmp/bin"
  touch "$prefix/var/lib/dpkg/available"
  # The status of every package the .deb names in Depends, as this machine has it.
  for name in $(dpkg-deb -f "$deb" Depends | tr ',|' '\n\n' | sed 's/(.*)//; s/:any//' | awk 'NF {print $1}' | sort -u); do
    dpkg-query -s "$name" >> "$prefix/var/lib/dpkg/status" 2>/dev/null || fail "dependency $name is not installed here"
    echo >> "$prefix/var/lib/dpkg/status"
    touch "$prefix/var/lib/dpkg/info/$(dpkg-query -W -f='${binary:Package}' "$name").list"
  done
  printf '#!/bin/sh\necho "ldconfig $*" >> "%s/ldconfig.calls"\n' "$tmp" > "$tmp/bin/ldconfig"
  chmod +x "$tmp/bin/ldconfig"
  dp=(env PATH="$tmp/bin:$PATH" dpkg --root="$prefix" --force-script-chrootless) where="a throwaway root"
fi

"${dp[@]}" -i "$deb" > "$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "dpkg -i $(basename "$deb") failed"; }
[ "$("${dp[@]}" -s "$pkg" 2>/dev/null | sed -n 's/^Status: //p')" = "install ok installed" ] ||
  fail "dpkg does not report $pkg as installed"
[ -z "$prefix" ] || [ -s "$tmp/ldconfig.calls" ] || fail "the postinst did not run (no ldconfig call)"
"${dp[@]}" -L "$pkg" > "$tmp/files" || fail "dpkg -L $pkg failed"
note "installed into $where: $(wc -l < "$tmp/files") paths"

# The installed gdx-run finds the installed loader/module (UCX < 1.22) or module (>= 1.22) next to itself.
out=$(timeout 120 "$prefix/usr/bin/gdx-run" ucx_info -d 2>&1) || fail "installed gdx-run ucx_info -d failed: $out"
for tl in gdx_shm gdx_tcp gdx_aux; do
  grep -q "Transport: $tl\$" <<<"$out" || fail "installed gdx-run ucx_info -d lists no $tl: $(grep -i 'gdx\|error' <<<"$out" | head)"
done
grep -q "^libuct_gdx" <<<"$out" && fail "the installed loader or module complained: $(grep '^libuct_gdx' <<<"$out")"
note "installed gdx-run ucx_info -d lists gdx_shm, gdx_tcp, gdx_aux"

"${dp[@]}" -r "$pkg" > "$tmp/remove.log" 2>&1 || { cat "$tmp/remove.log"; fail "dpkg -r $pkg failed"; }
status=$("${dp[@]}" -s "$pkg" 2>/dev/null | sed -n 's/^Status: //p')
case "$status" in ""|"deinstall ok not-installed"|"deinstall ok config-files") ;;
  *) fail "after dpkg -r, $pkg has status '$status'" ;; esac
left=()
while IFS= read -r p; do
  [ -e "$prefix$p" ] || continue
  [ -d "$prefix$p" ] && [ -n "$(ls -A "$prefix$p")" ] && continue   # a directory others still fill
  [ -d "$prefix$p" ] && [ -z "$prefix" ] && continue                  # an empty system directory dpkg keeps
  left+=("$p")
done < "$tmp/files"
[ ${#left[@]} = 0 ] || fail "dpkg -r left: ${left[*]}"
if [ -n "$prefix" ]; then
  # Nothing at all besides dpkg's own database: every directory the package made went with it.
  extra=$(cd "$prefix" && find . -mindepth 1 -path ./var -prune -o -print | head)
  [ -z "$extra" ] || fail "dpkg -r left in the root: $extra"
fi
note "dpkg -r removed all $(grep -c . "$tmp/files") paths"
# dpkg -r keeps the package's maintainer scripts for a later purge (state config-files): purge, and dpkg no longer
# knows the package at all.
"${dp[@]}" -P "$pkg" > "$tmp/purge.log" 2>&1 || { cat "$tmp/purge.log"; fail "dpkg -P $pkg failed"; }
status=$("${dp[@]}" -s "$pkg" 2>/dev/null | sed -n 's/^Status: //p')
case "$status" in ""|"deinstall ok not-installed"|"purge ok not-installed") ;;
  *) fail "after dpkg -P, $pkg has status '$status'" ;; esac
echo "PASS"
