#!/usr/bin/env bash
# libuct_gdx_loader.so loads the build made for the running UCX's version and configuration, and refuses, in one
# line and without harming the process, a build for another version or another configuration (assertions,
# statistics, debug data); a rebuild of the same UCX with the same options (another libucs build-id, as a
# distribution's security update makes) is still accepted. The "other" builds are copies of this one whose
# manifest says so: the loader decides on the manifest against what it reads off the running libucs, so a real
# build for another UCX is refused the same way (checked by hand on 2026-11-25 with real builds of other UCX
# versions and options; src/uct/README.md, "Loading").
#   test_loader.sh LOADER MODULE
. "$(dirname "$0")/lib.sh"
loader="$1" module="$2"
manifest="$(dirname "$module")/libuct_gdx.ucx"
[ -f "$loader" ] && [ -f "$manifest" ] || fail "loader $loader or manifest $manifest missing"
ver=$(sed -n 's/^version=//p' "$manifest")
assert=$(sed -n 's/^assert=\([01]\)$/\1/p' "$manifest")
stats=$(sed -n 's/^stats=\([01]\)$/\1/p' "$manifest")
dd=$(sed -n 's/^debug_data=\([01]\)$/\1/p' "$manifest")
[ -n "$assert" ] && [ -n "$stats" ] && [ -n "$dd" ] || fail "manifest lacks the layout keys: $(cat "$manifest")"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/uct-loader.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# A sanitizer build of the loader needs its runtime first in the preload list (as tools/gdx-run arranges for
# the module): the ASan runtime refuses to start behind other libraries.
san=$(ldd "$loader" 2>/dev/null | awk '$1 ~ /^lib(asan|ubsan|tsan)\.so/ {print $3}' | paste -sd: -)
loader="${san:+$san:}$loader"

running=$(timeout 60 ucx_info -v | sed -n 's/^# \(Library version:\|Version\) \([0-9.]*\).*/\2/p' | head -1)
IFS=. read -r major minor _ <<<"$running"
if [ "$major" -gt 1 ] || [ "$minor" -ge 22 ]; then
  # UCX 1.22 loads the module itself: the loader must stand aside, or every component would be registered twice.
  out=$(LD_PRELOAD="$loader" LIBUCT_GDX_PATH="$(dirname "$module")" timeout 60 ucx_info -d 2>&1) || fail "$out"
  grep -q "Component: gdx_" <<<"$out" && fail "UCX $running: the loader loaded a module itself"
  out=$(LD_PRELOAD="$loader" UCX_PLUGIN_PATH="$(dirname "$module")" timeout 60 ucx_info -d 2>&1) || fail "$out"
  [ "$(grep -c 'Component: gdx_shm$' <<<"$out")" = 1 ] || fail "UCX $running: gdx_shm not registered exactly once"
  echo "PASS (UCX $running: the loader stands aside, UCX_PLUGIN_PATH loads the module once)"
  exit 0
fi

# loaded: ucx_info -d with the loader and the builds in $1 lists gdx_shm, and the loader says nothing
expect_loaded() {
  local out
  out=$(LD_PRELOAD="$loader" LIBUCT_GDX_PATH="$1" timeout 60 ucx_info -d 2>&1) || fail "$2: ucx_info -d failed: $out"
  grep -q "Transport: gdx_shm$" <<<"$out" || fail "$2: the build was not loaded: $(head -5 <<<"$out")"
  grep -q "^libuct_gdx" <<<"$out" && fail "$2: the loader or the module complained: $(grep '^libuct_gdx' <<<"$out")"
  echo "PASS ($2: loaded)"
}
# refused: one loader line per process naming the running UCX and what $3 matches, no gdx component, UCX's own
# transports listed, exit 0
expect_refused() {
  local out rc n
  out=$(LD_PRELOAD="$loader" LIBUCT_GDX_PATH="$1" timeout 60 ucx_info -d 2>&1); rc=$?
  [ "$rc" = 0 ] || fail "$2: ucx_info -d exit $rc (the process must go on): $out"
  # ucx_info starts a helper process, which inherits LD_PRELOAD: one line per process, nothing else of the loader.
  n=$(grep -c "^libuct_gdx_loader: no libuct_gdx build for the running UCX $ver \[" <<<"$out")
  [ "$n" -ge 1 ] || fail "$2: no refusal line: $(head -5 <<<"$out")"
  [ "$(grep -c '^libuct_gdx' <<<"$out")" = "$n" ] || fail "$2: other loader lines: $out"
  grep -q "^libuct_gdx_loader: .*on offer: .*$3" <<<"$out" || fail "$2: the line does not name '$3': $out"
  grep -q "Component: gdx_" <<<"$out" && fail "$2: a gdx component was registered"
  grep -qE "Transport: (tcp|posix|sysv|self)$" <<<"$out" || fail "$2: UCX's own transports are gone"
  echo "PASS ($2: $(grep -m1 '^libuct_gdx_loader' <<<"$out" | cut -c1-220))"
}
variant() {  # variant NAME SED-SCRIPT: $tmp/NAME, a copy of this build with its manifest edited
  mkdir -p "$tmp/$1"
  cp "$module" "$tmp/$1/libuct_gdx.so.0"
  sed "$2" "$manifest" > "$tmp/$1/libuct_gdx.ucx"
  cmp -s "$manifest" "$tmp/$1/libuct_gdx.ucx" && fail "variant $1 did not change the manifest"
}
# The same UCX rebuilt with the same options: another libucs build-id, same version and layout keys.
variant same-config-rebuild 's/^libucs_build_id=.*/libucs_build_id=00112233445566778899aabbccddeeff00112233/'
variant other-version 's/^version=.*/version=1.99.0/'
variant other-assert "s/^assert=.*/assert=$((1 - assert))/"
variant other-stats "s/^stats=.*/stats=$((1 - stats))/"
variant other-debug-data "s/^debug_data=.*/debug_data=$((1 - dd))/"
variant no-keys '/^\(assert\|stats\|debug_data\)=/d'

expect_loaded "$(dirname "$module")" "the matching build"
expect_loaded "$tmp/same-config-rebuild" "same options, other libucs build-id"
expect_refused "$tmp/other-version" "other version" "1.99.0 \[assert=$assert "
expect_refused "$tmp/other-assert" "other assertions" "$ver \[assert=$((1 - assert)) stats=$stats "
expect_refused "$tmp/other-stats" "other statistics" "$ver \[assert=$assert stats=$((1 - stats)) "
expect_refused "$tmp/other-debug-data" "other debug data" "$ver \[assert=$assert stats=$stats debug_data=$((1 - dd)),"
expect_refused "$tmp/no-keys" "a manifest without layout keys" "$ver \[assert=? stats=? debug_data=?,"
# With a matching build among refused ones, the matching one is taken wherever it is in the list.
expect_loaded "$tmp/other-version:$tmp/other-assert:$(dirname "$module")" "the match after two refusals"

# a process that is not UCX at all is not harmed either
LD_PRELOAD="$loader" LIBUCT_GDX_PATH="$tmp/other-version" true || fail "true failed with the loader preloaded"
echo "PASS"
