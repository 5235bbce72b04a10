#!/usr/bin/env bash
# gdx_ucx_probe reads the running UCX's configuration off its libraries (what the loader and the module's guard
# rely on, and what a runtime-only UCX's build uses instead of ucx_info -b): its values must be those of the
# config.h the module was built with, and the config.h it reconstructs must compile the glue exactly as the real
# one does (same preprocessed code: no macro UCX's headers read is missing or different). The one macro it leaves
# unset (HAVE_CACHE_LINE_SIZE) must not matter. Where the build's config.h is itself reconstructed (no ucx_info),
# the comparison is with itself.
#   test_ucx_config.sh PROBE LIBDIR BUILD_CONFIG_DIR -- CC FLAGS... -- GLUE_SOURCES...
. "$(dirname "$0")/lib.sh"
probe="$1" libdir="$2" cfgdir="$3"; shift 3
[ "${1:-}" = "--" ] || fail "usage: PROBE LIBDIR BUILD_CONFIG_DIR -- CC FLAGS... -- SOURCES..."
shift
cc=(); while [ $# -gt 0 ] && [ "$1" != "--" ]; do cc+=("$1"); shift; done
shift
[ $# -gt 0 ] || fail "no glue sources given"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/uct-config.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

cp -r "$cfgdir" "$tmp/rec"
timeout 60 "$probe" --libdir "$libdir" --config-h "$tmp/rec/config.h" > "$tmp/probe.txt" 2> "$tmp/probe.err" ||
  fail "gdx_ucx_probe failed: $(cat "$tmp/probe.err" "$tmp/probe.txt")"
sed 's/^/# /' "$tmp/probe.txt"
real="$cfgdir/config.h"
grep -q "GDX_UCX_CONFIG_RECONSTRUCTED" "$real" && note "the build's config.h is itself reconstructed (no ucx_info)"

# value of macro $1 in config.h $2: its definition, or "undef"
val() { local v
        v=$(awk -v m="$1" '$1 == "#define" && $2 == m {$1 = $2 = ""; gsub(/^ +| +$/, ""); print ($0 == "" ? "(empty)" : $0); exit}' "$2")
        echo "${v:-undef}"; }
bad=0
for m in ENABLE_ASSERT ENABLE_STATS ENABLE_DEBUG_DATA ENABLE_PARAMS_CHECK ENABLE_BUILTIN_MEMCPY UCS_MAX_LOG_LEVEL \
         IBV_HW_TM NVALGRIND HAVE_CACHE_LINE_SIZE; do
  a=$(val "$m" "$real") b=$(val "$m" "$tmp/rec/config.h")
  [ "$a" = "$b" ] && note "$m: $a" || { echo "MISMATCH $m: build's config.h $a, read off the libraries $b"; bad=1; }
done
[ "$bad" = 0 ] || fail "the libraries were read differently from the build's config.h (see above)"

srcs=("$@")
pp() {  # pp CONFIG_DIR OUT: the glue preprocessed with that config.h first on the include path
  local f
  for f in "${srcs[@]}"; do
    "${cc[0]}" -E -P -DHAVE_CONFIG_H -I"$1" "${cc[@]:1}" "$f" || return 1
  done > "$2"
}
pp "$cfgdir" "$tmp/real.i" || fail "preprocessing with the build's config.h failed"
pp "$tmp/rec" "$tmp/rec.i" || fail "preprocessing with the reconstructed config.h failed"
cmp -s "$tmp/real.i" "$tmp/rec.i" || { diff "$tmp/real.i" "$tmp/rec.i" | head -20
  fail "the reconstructed config.h compiles the glue differently"; }
note "the glue preprocesses identically with both ($(wc -l < "$tmp/real.i") lines, ${#srcs[@]} sources)"
# Must be able to fail: a layout key the other way round changes the preprocessed glue.
cp -r "$tmp/rec" "$tmp/flip"
if grep -q "^#define ENABLE_ASSERT" "$tmp/rec/config.h"; then sed -i '/^#define ENABLE_ASSERT/d' "$tmp/flip/config.h"
else echo "#define ENABLE_ASSERT 1" >> "$tmp/flip/config.h"; fi
sed -i '/^#endif/d' "$tmp/flip/config.h"; echo "#endif" >> "$tmp/flip/config.h"
pp "$tmp/flip" "$tmp/flip.i" || fail "preprocessing with ENABLE_ASSERT flipped failed"
cmp -s "$tmp/rec.i" "$tmp/flip.i" && fail "ENABLE_ASSERT the other way round changes nothing: this comparison proves nothing"
# The macro left unset does not matter for the glue.
cp -r "$tmp/rec" "$tmp/cls"
sed -i '0,/^#define UCX_CONFIG_H/s//#define UCX_CONFIG_H\n#define HAVE_CACHE_LINE_SIZE 128/' "$tmp/cls/config.h"
grep -q "^#define HAVE_CACHE_LINE_SIZE 128" "$tmp/cls/config.h" || fail "could not set HAVE_CACHE_LINE_SIZE"
pp "$tmp/cls" "$tmp/cls.i" || fail "preprocessing with HAVE_CACHE_LINE_SIZE failed"
cmp -s "$tmp/rec.i" "$tmp/cls.i" || fail "HAVE_CACHE_LINE_SIZE, left unset by the probe, changes the glue"
echo "PASS"
