#!/usr/bin/env bash
# Builds UCX's own UCT gtest (test/gtest of Debian's source package of exactly the installed libucx0), patched to
# list gdx's transports, so that tests/uct/gtest/run.sh can run UCX's conformance tests on gdx_* beside UCX's own
# transports of the same class.
#
#   tests/uct/gtest/build.sh [--print-dir] [--cache DIR]
#     --print-dir  print only the path of the gtest binary on stdout (progress goes to stderr)
#     --cache DIR  cache root (default $GDX_UCX_GTEST_CACHE or /var/cache/gdx/ucx-gtest)
#
# What it does:
#   1. scripts/fetch-ucx-src.sh --print-dir gives the unpacked Debian source tree (cached; apt-get source once).
#   2. The tree is copied to <cache>/<version>-<hash>.tmp and ucx-<upstream>-gtest.patch (next to this script) is
#      applied to the copy (the cached source stays pristine). The patch (README.md here says why, in detail):
#        a. test/gtest/uct/uct_test.h: the transport lists name gdx_shm, gdx_tcp, gdx_rc (in place of the three
#           ugni_* entries, never built on Debian), gdx_ipc (added) and gdx_copy (in place of gdr_copy).
#           UCS_PP_FOREACH takes at most 20 names; the full list holds 19.
#        b. test/gtest/uct/uct_p2p_test.cc: 1.13.1 trims every p2p data test's message size by the sender MD's
#           max_alloc, which is 0 on an MD that cannot allocate (gdx's, UCX's tcp and cma), so those tests
#           skipped silently there. The trim now applies only to an MD with UCT_MD_FLAG_ALLOC.
#        c. test/gtest/Makefile.am: gtest_SOURCES keeps common/ and uct/ (not uct/ib/, ucs/, ucm/, ucp/).
#   3. autogen.sh, then configure with the flags the installed UCX was configured with (`ucx_info -b`,
#      UCX_CONFIGURE_FLAGS) plus --enable-gtest; the generated config.h must equal `ucx_info -b` but for
#      UCX_CONFIGURE_FLAGS, else it stops: gdx's module (built against the system UCX's config.h) is loaded into
#      this build's libuct/libucs, and their structs must have the same layout.
#   4. Builds the libraries the gtest links (src/ucm, src/ucs, src/uct with its modules, src/ucp,
#      src/tools/perf/lib) and test/gtest's gtest binary, under `nice -n 10` with -j2 (GDX_GTEST_JOBS).
#      CFLAGS -O1 -g0: no layout effect, about half the compile time of Debian's -O2 -g.
#   5. Renames the .tmp directory to <cache>/<version>-<hash>: <hash> is of this script and the patch, so a changed
#      patch builds afresh and an unchanged one is found at once.
#
# Needs: dpkg-dev, autoconf, automake, libtool, g++, libibverbs-dev, librdmacm-dev, libnuma-dev (Debian's build
# dependencies for the same config.h) and, for the first fetch, apt access to Debian's archive.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
cache="${GDX_UCX_GTEST_CACHE:-/var/cache/gdx/ucx-gtest}"
print_dir=0
while [ $# -gt 0 ]; do
  case "$1" in
    --print-dir) print_dir=1; shift ;;
    --cache) [ $# -ge 2 ] || { echo "build.sh: --cache needs a directory" >&2; exit 2; }; cache="$2"; shift 2 ;;
    *) echo "build.sh: unknown option '$1' (accepted: --print-dir --cache DIR)" >&2; exit 2 ;;
  esac
done

say() { echo "gtest/build.sh: $*" >&2; }
die() { say "$*"; exit 1; }

version=$(dpkg-query -W -f='${Version}' libucx0 2>/dev/null) || die "libucx0 is not installed"
upstream="${version#*:}"; upstream="${upstream%-*}"
patchfile="$here/ucx-$upstream-gtest.patch"
[ -f "$patchfile" ] || die "no gtest patch for UCX $upstream ($patchfile): write one for this version"
key=$(cat "$here/build.sh" "$patchfile" | sha256sum | cut -c1-12)
dest="$cache/$version-$key"
bin="$dest/build/test/gtest/gtest"

if [ -f "$dest/.complete" ] && [ -x "$bin" ]; then
  [ "$print_dir" = 1 ] && echo "$bin" || say "cached: $bin"
  exit 0
fi

for t in autoreconf automake libtoolize g++ patch; do
  command -v "$t" >/dev/null || die "$t not found (apt-get install autoconf automake libtool g++ patch)"
done
src=$("$root/scripts/fetch-ucx-src.sh" --print-dir) || die "scripts/fetch-ucx-src.sh failed"
debcfg=$(timeout 60 ucx_info -b) || die "ucx_info -b failed (ucx-utils installed?)"
flags_line=$(sed -n 's/^#define UCX_CONFIGURE_FLAGS *"\(.*\)"$/\1/p' <<<"$debcfg")
[ -n "$flags_line" ] || die "ucx_info -b has no UCX_CONFIGURE_FLAGS"
read -ra flags <<<"$flags_line"   # no expansion: ${prefix} stays literal, as Debian passed it

start=$(date +%s)
tmp="$dest.tmp"
rm -rf "$tmp"
mkdir -p "$tmp"
say "copying $src to $tmp/src"
cp -a "$src" "$tmp/src"
(cd "$tmp/src" && patch -p1 --forward --quiet <"$patchfile") || die "$patchfile does not apply to $src"
say "autogen.sh"
(cd "$tmp/src" && nice -n 10 ./autogen.sh >"$tmp/autogen.log" 2>&1) || { tail -20 "$tmp/autogen.log" >&2; die "autogen.sh failed"; }
mkdir -p "$tmp/build"
say "configure ${flags[*]} --without-java --enable-gtest"
# --without-java: Debian's build had no JDK (its config.h has no HAVE_JNI_H); a JDK installed here would add it.
(cd "$tmp/build" && nice -n 10 "$tmp/src/configure" "${flags[@]}" --without-java --enable-gtest \
    CFLAGS="-O1 -g0" CXXFLAGS="-O1 -g0" >"$tmp/configure.log" 2>&1) ||
  { tail -30 "$tmp/configure.log" >&2; die "configure failed (log $tmp/configure.log)"; }

# The same config.h as the installed UCX, but for the configure flags themselves. `ucx_info -b` prints the
# #define lines only, aligned: compare "NAME VALUE" pairs.
norm() {
  grep -E '^#define [A-Za-z_]' | grep -vE '^#define (UCX_CONFIGURE_FLAGS|UCX_CONFIG_H)\b' |
    awk '{n = $2; $1 = ""; $2 = ""; v = $0; gsub(/^ +| +$/, "", v); print n " " v}' | sort
}
if ! diff <(norm <<<"$debcfg") <(norm <"$tmp/build/config.h") >"$tmp/config.diff"; then
  cat "$tmp/config.diff" >&2
  die "config.h of this build differs from the installed UCX's (ucx_info -b): install the missing build dependencies"
fi
say "config.h matches ucx_info -b"

jobs="${GDX_GTEST_JOBS:-2}"
mk() { nice -n 10 make -j"$jobs" -s "$@" >>"$tmp/make.log" 2>&1 || { tail -40 "$tmp/make.log" >&2; die "make $* failed (log $tmp/make.log)"; }; }
say "building UCX libraries and modules (log $tmp/make.log)"
mk -C "$tmp/build/src/ucm"
mk -C "$tmp/build/src/ucs"
mk -C "$tmp/build/src/uct"
mk -C "$tmp/build/src/ucp"
mk -C "$tmp/build/src/tools/perf/lib"
say "building the UCT gtest"
mk -C "$tmp/build/test/gtest/common/googletest"
mk -C "$tmp/build/test/gtest" gtest
[ -x "$tmp/build/test/gtest/gtest" ] || die "no gtest binary after make"

# Absolute paths inside the build (libtool wrappers, rpaths, module symlinks) name $tmp: the finished tree keeps
# the name $tmp and $dest is a symlink to it, so nothing has to be rewritten.
rm -f "$dest"
ln -s "$(basename "$tmp")" "$dest"
echo "UCX $version, patch $(basename "$patchfile"), key $key, built in $(( $(date +%s) - start )) s" >"$tmp/.complete"
say "built in $(( $(date +%s) - start )) s: $bin"
[ "$print_dir" = 1 ] && echo "$bin"
exit 0
