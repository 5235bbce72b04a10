#!/usr/bin/env bash
# libuct_gdx_loader.so loads the build made for the running UCX, and refuses, in one line and without harming the
# process, a build for another UCX version or for another build of the same version (same version, other
# libucs: another configuration). The "other" builds are copies of this one whose manifest says so: what the
# loader reads is the manifest, and a real build for another UCX would be refused the same way.
#   test_loader.sh LOADER MODULE
. "$(dirname "$0")/lib.sh"
loader="$1" module="$2"
manifest="$(dirname "$module")/libuct_gdx.ucx"
[ -f "$loader" ] && [ -f "$manifest" ] || fail "loader $loader or manifest $manifest missing"
ver=$(sed -n 's/^version=//p' "$manifest")
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

# the matching build: gdx transports listed
out=$(LD_PRELOAD="$loader" LIBUCT_GDX_PATH="$(dirname "$module")" timeout 60 ucx_info -d 2>&1) ||
  fail "ucx_info -d with the loader failed: $out"
grep -q "Transport: gdx_shm$" <<<"$out" || fail "the matching build was not loaded: $(head -5 <<<"$out")"

for case in other-version other-build; do
  mkdir -p "$tmp/$case"
  cp "$module" "$tmp/$case/libuct_gdx.so.0"
  case $case in
    other-version) sed 's/^version=.*/version=1.99.0/' "$manifest" > "$tmp/$case/libuct_gdx.ucx" ;;
    other-build)   sed 's/^libucs_build_id=.*/libucs_build_id=00112233445566778899aabbccddeeff00112233/' \
                     "$manifest" > "$tmp/$case/libuct_gdx.ucx" ;;
  esac
  out=$(LD_PRELOAD="$loader" LIBUCT_GDX_PATH="$tmp/$case" timeout 60 ucx_info -d 2>&1); rc=$?
  [ "$rc" = 0 ] || fail "$case: ucx_info -d exit $rc (the process must go on): $out"
  # One line per process (ucx_info starts a helper process, which inherits LD_PRELOAD): nothing else of the loader.
  n=$(grep -c "^libuct_gdx_loader: no libuct_gdx build for the running UCX $ver" <<<"$out")
  [ "$n" -ge 1 ] || fail "$case: no refusal line: $(head -5 <<<"$out")"
  [ "$(grep -c '^libuct_gdx_loader' <<<"$out")" = "$n" ] || fail "$case: other loader lines: $out"
  grep -q "Component: gdx_" <<<"$out" && fail "$case: a gdx component was registered"
  grep -qE "Transport: (tcp|posix|sysv|self)$" <<<"$out" || fail "$case: UCX's own transports are gone"
  echo "PASS ($case): $(grep '^libuct_gdx_loader' <<<"$out" | cut -c1-200)"
done
# a process that is not UCX at all is not harmed either
LD_PRELOAD="$loader" LIBUCT_GDX_PATH="$tmp/other-version" true || fail "true failed with the loader preloaded"
echo "PASS"
