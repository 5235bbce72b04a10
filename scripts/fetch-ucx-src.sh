#!/usr/bin/env bash
# Fetches Debian's source package of exactly the installed UCX (libucx0) into a cache directory, so that
# libuct_gdx can be compiled against UCX's *internal* headers (uct/base/*.h, ucs/sys/*.h, ...), which libucx-dev
# does not ship. The headers must match the installed binary byte for byte: UCT's internal structs have no
# stable ABI, so the version is pinned to the installed package version (e.g. 1.13.1-1), never "latest".
#
#   scripts/fetch-ucx-src.sh [--cache DIR] [--print-dir]
#     --cache DIR    where to unpack (default $GDX_UCX_SRC_CACHE or /var/cache/gdx/ucx-src)
#     --print-dir    print only the source directory on stdout (for CMake); progress goes to stderr
#
# Idempotent: when <cache>/<version>/ucx-<upstream>/src/uct/base/uct_iface.h exists it does nothing (no
# network). Otherwise it adds a deb-src entry for Debian's archive (when apt has none), runs apt-get update
# once and `apt-get source ucx=<version>`. Needs root only for those two apt steps.
set -euo pipefail

cache="${GDX_UCX_SRC_CACHE:-/var/cache/gdx/ucx-src}"
print_dir=0
while [ $# -gt 0 ]; do
  case "$1" in
    --cache) [ $# -ge 2 ] || { echo "fetch-ucx-src.sh: --cache needs a directory" >&2; exit 2; }
             cache="$2"; shift 2 ;;
    --print-dir) print_dir=1; shift ;;
    *) echo "fetch-ucx-src.sh: unknown option '$1' (accepted: --cache DIR --print-dir)" >&2; exit 2 ;;
  esac
done

say() { echo "fetch-ucx-src.sh: $*" >&2; }
die() { say "$*"; exit 1; }

# The installed binary package decides the version; the source package ucx builds libucx0.
version=$(dpkg-query -W -f='${Version}' libucx0 2>/dev/null) ||
  die "libucx0 is not installed (dpkg-query -W libucx0 failed): install libucx-dev libucx0 ucx-utils first"
[ -n "$version" ] || die "dpkg-query reports an empty version for libucx0"
upstream="${version#*:}"     # drop an epoch, if any
upstream="${upstream%-*}"    # drop the Debian revision: 1.13.1-1 -> 1.13.1

dest="$cache/$version"
srcdir="$dest/ucx-$upstream"
if [ -f "$srcdir/src/uct/base/uct_iface.h" ]; then
  [ "$print_dir" = 1 ] && echo "$srcdir" || say "UCX $version sources already in $srcdir"
  exit 0
fi

command -v dpkg-source >/dev/null || die "dpkg-source not found: apt-get install dpkg-dev (scripts/setup.sh --ucx-src)"

# apt-get source needs a deb-src line. Add Debian's archive for this release only when none is configured.
# (apt-cache showsrc takes no =version; list every version apt knows and look for ours.)
src_known() { apt-cache showsrc ucx 2>/dev/null | grep -qx "Version: $version"; }
have_src() { grep -rqsE '^(Types:.*deb-src|deb-src )' /etc/apt/sources.list /etc/apt/sources.list.d/; }
if ! have_src; then
  [ "$(id -u)" = 0 ] || die "no deb-src entry in /etc/apt and not root: add one, or run as root"
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  [ -n "$codename" ] || die "cannot tell the Debian release from /etc/os-release (VERSION_CODENAME)"
  say "adding /etc/apt/sources.list.d/gdx-debian-src.sources (deb-src $codename)"
  cat > /etc/apt/sources.list.d/gdx-debian-src.sources <<EOF
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $codename $codename-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  apt-get update -q >&2 || die "apt-get update failed after adding the deb-src entry"
elif ! src_known; then
  # A deb-src entry exists but its index may be stale or absent.
  [ "$(id -u)" = 0 ] && { apt-get update -q >&2 || die "apt-get update failed"; }
fi

src_known ||
  die "source package ucx=$version is not known to apt (apt-cache showsrc ucx): the archive may have moved on;" \
      "point a deb-src entry at snapshot.debian.org for the date libucx0 $version was installed"

# Unpack into a temporary sibling and rename, so an interrupted run never leaves a half tree that passes the
# check above.
mkdir -p "$cache" || die "cannot create $cache"
tmp=$(mktemp -d "$cache/.fetch.XXXXXX") || die "mktemp in $cache failed"
chmod 0755 "$tmp" # lets apt-get source download as its unprivileged _apt user
trap 'rm -rf "$tmp"' EXIT
say "apt-get source ucx=$version into $dest"
(cd "$tmp" && apt-get source -q "ucx=$version" >&2) || die "apt-get source ucx=$version failed"
[ -f "$tmp/ucx-$upstream/src/uct/base/uct_iface.h" ] ||
  die "apt-get source did not produce ucx-$upstream/src/uct/base/uct_iface.h in $tmp"
rm -rf "$dest"
mv "$tmp" "$dest" || die "cannot move $tmp to $dest"
trap - EXIT
[ "$print_dir" = 1 ] && echo "$srcdir" || say "UCX $version sources in $srcdir"
