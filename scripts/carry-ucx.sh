#!/usr/bin/env bash
# Carries Debian 12's UCX 1.13.1 to a machine that has another UCX (e.g. the GPU machine's UCX 1.16 runtime), so
# the same libuct_gdx.so.0 — which is tied to UCX 1.13.1's internal structs — can be built and run there.
#
#   scripts/carry-ucx.sh download DIR        (on this Debian machine) the .debs of libucx0, libucx-dev and
#                                            ucx-utils at the installed version (apt-get download), plus the UCX
#                                            source tree of that version (internal headers) as a tarball
#   scripts/carry-ucx.sh unpack DIR PREFIX   (on the target) dpkg -x every .deb into PREFIX, point the CMake and
#                                            pkg-config files at PREFIX, unpack the sources, write PREFIX/env.sh
#   scripts/carry-ucx.sh check PREFIX        (on the target) run the carried ucx_info and show what it loads
#
# Then, on the target:  . PREFIX/env.sh  and build gdx with the cmake line env.sh prints. Nothing is installed
# system-wide: the carried UCX is found through PATH, LD_LIBRARY_PATH and UCX_MODULE_DIR only, and the system
# UCX stays untouched. Needs glibc >= 2.34 on the target (what Debian's UCX 1.13.1 binaries require).
set -euo pipefail

say() { echo "carry-ucx.sh: $*" >&2; }
die() { say "$*"; exit 1; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2; }

pkgs=(libucx0 libucx-dev ucx-utils)
multiarch=x86_64-linux-gnu

download() {
  local dir="$1" version src
  version=$(dpkg-query -W -f='${Version}' libucx0 2>/dev/null) || die "libucx0 is not installed here"
  mkdir -p "$dir" || die "cannot create $dir"
  dir=$(cd "$dir" && pwd)
  say "downloading ${pkgs[*]} = $version into $dir"
  # apt-get download writes into the current directory; _apt needs to be able to write there.
  chmod 0777 "$dir" 2>/dev/null || true
  (cd "$dir" && apt-get download -q "${pkgs[@]/%/=$version}") || die "apt-get download failed (apt-get update first?)"
  for p in "${pkgs[@]}"; do
    ls "$dir/${p}_"*.deb >/dev/null 2>&1 || die "no ${p}_*.deb in $dir after apt-get download"
  done
  src=$("$(dirname "$0")/fetch-ucx-src.sh" --print-dir) || die "scripts/fetch-ucx-src.sh failed"
  tar -C "$(dirname "$src")" -czf "$dir/ucx-src-$version.tar.gz" "$(basename "$src")" ||
    die "cannot pack the UCX sources from $src"
  echo "$version" > "$dir/VERSION"
  say "done: copy $dir to the target and run: scripts/carry-ucx.sh unpack <dir> <prefix>"
}

unpack() {
  local dir="$1" prefix="$2" version deb libdir need have
  [ -f "$dir/VERSION" ] || die "$dir has no VERSION file: not made by 'carry-ucx.sh download'"
  version=$(cat "$dir/VERSION")
  command -v dpkg >/dev/null || die "dpkg not found on this machine (needed for dpkg -x)"
  mkdir -p "$prefix" || die "cannot create $prefix"
  prefix=$(cd "$prefix" && pwd)
  for p in "${pkgs[@]}"; do
    deb=$(ls "$dir/${p}_"*.deb 2>/dev/null | head -1)
    [ -n "$deb" ] || die "no ${p}_*.deb in $dir"
    dpkg -x "$deb" "$prefix" || die "dpkg -x $deb failed"
  done
  libdir="$prefix/usr/lib/$multiarch"
  [ -f "$libdir/libucp.so.0" ] || die "libucp.so.0 missing under $libdir after unpacking"

  # The packages' CMake and pkg-config files name /usr: point them at the prefix, or a build would pick the
  # system UCX's libraries.
  sed -i "s|set(prefix \"/usr\")|set(prefix \"$prefix/usr\")|" "$libdir/cmake/ucx/ucx-targets.cmake" ||
    die "cannot rewrite $libdir/cmake/ucx/ucx-targets.cmake"
  sed -i "s|^prefix *= */usr\$|prefix = $prefix/usr|" "$libdir"/pkgconfig/ucx*.pc ||
    die "cannot rewrite the pkg-config files in $libdir/pkgconfig"

  mkdir -p "$prefix/src" && tar -C "$prefix/src" -xzf "$dir/ucx-src-$version.tar.gz" ||
    die "cannot unpack $dir/ucx-src-$version.tar.gz"

  # Debian 12's binaries need glibc 2.34; refuse early rather than fail with a loader error later.
  need=2.34
  have=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
  if [ -n "$have" ] && [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -1)" != "$need" ]; then
    die "this machine has glibc $have; Debian's UCX $version needs >= $need"
  fi

  cat > "$prefix/env.sh" <<EOF
# Carried UCX $version (scripts/carry-ucx.sh). Source this before building or running gdx's UCX module.
export PATH="$prefix/usr/bin:\$PATH"
export LD_LIBRARY_PATH="$libdir\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export UCX_MODULE_DIR="$libdir/ucx"
export PKG_CONFIG_PATH="$libdir/pkgconfig\${PKG_CONFIG_PATH:+:\$PKG_CONFIG_PATH}"
# (Not GDX_*: gdx warns about every GDX_* variable it does not know, a typo guard.)
export CARRIED_UCX_CMAKE_ARGS="-Ducx_DIR=$libdir/cmake/ucx -DGDX_UCX_SRC_DIR=$(ls -d "$prefix"/src/ucx-* | head -1)"
echo "carried UCX $version: build with  cmake -S <gdx> -B <build> -G Ninja \$CARRIED_UCX_CMAKE_ARGS" >&2
EOF
  say "unpacked UCX $version into $prefix; next:  . $prefix/env.sh && scripts/carry-ucx.sh check $prefix"
}

check() {
  local prefix="$1"
  [ -f "$prefix/env.sh" ] || die "$prefix/env.sh missing: run 'carry-ucx.sh unpack' first"
  # shellcheck disable=SC1091
  . "$prefix/env.sh"
  command -v ucx_info | grep -q "^$prefix" || die "ucx_info on PATH is not the carried one"
  timeout 60 ucx_info -v || die "the carried ucx_info does not run (missing libraries? try: ldd \$(command -v ucx_info))"
  say "libraries the carried ucx_info loads:"
  LD_DEBUG=libs timeout 60 ucx_info -v 2>&1 | sed -n 's/.*calling init: \(.*libuc[pmts].*\)/  \1/p' >&2
}

[ $# -ge 1 ] || usage
case "$1" in
  download) [ $# -eq 2 ] || usage; download "$2" ;;
  unpack) [ $# -eq 3 ] || usage; unpack "$2" "$3" ;;
  check) [ $# -eq 2 ] || usage; check "$2" ;;
  *) usage ;;
esac
