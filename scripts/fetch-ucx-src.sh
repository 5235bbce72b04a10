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
# network). Otherwise it adds deb-src twins of the machine's own deb entries (when apt has no deb-src entry), runs
# apt-get update once and `apt-get source ucx=<version>`. Needs root only for those two apt steps.
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

# apt-get source needs a deb-src line. Where none is configured, one is made from the machine's own deb entries
# (same URIs, suites, components and keyring, Types: deb-src), so the sources come from the archive this
# machine already installs from; no archive is named here.
src_known() { apt-cache showsrc ucx 2>/dev/null | grep -qx "Version: $version"; }
have_src() { grep -rqsE '^(Types:.*deb-src|deb-src )' /etc/apt/sources.list /etc/apt/sources.list.d/; }
deb_src_from_deb() {  # prints deb-src entries (deb822) mirroring every enabled deb entry
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    # deb822 stanzas: keep those whose Types has "deb", rewrite Types, drop comments.
    awk 'BEGIN{RS=""; ORS="\n\n"} /(^|\n)Types:[^\n]*(^|[ \t])deb([ \t]|\n|$)/ {
           n=split($0, l, "\n"); out="";
           for (i=1;i<=n;i++) { if (l[i] ~ /^#/) continue; if (l[i] ~ /^Types:/) l[i]="Types: deb-src"; out=out l[i] "\n" }
           printf "%s\n", out }' "$f"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    # one-line form: "deb [opts] URI suite comp..." -> the same as a deb822 stanza
    awk '$1 == "deb" { i=2; opts=""; if ($2 ~ /^\[/) { while ($i !~ /\]$/) { opts=opts " " $i; i++ } opts=opts " " $i; i++ }
           uri=$i; suite=$(i+1); comps=""; for (j=i+2;j<=NF;j++) comps=comps (comps==""?"":" ") $j;
           printf "Types: deb-src\nURIs: %s\nSuites: %s\nComponents: %s\n", uri, suite, comps;
           if (match(opts, /signed-by=[^] ]*/)) printf "Signed-By: %s\n", substr(opts, RSTART+10, RLENGTH-10);
           printf "\n" }' "$f"
  done
}
if ! have_src; then
  [ "$(id -u)" = 0 ] || die "no deb-src entry in /etc/apt and not root: add one, or run as root"
  entries=$(deb_src_from_deb)
  [ -n "$entries" ] || die "no deb entry in /etc/apt to derive a deb-src entry from: add a deb-src entry by hand"
  say "adding /etc/apt/sources.list.d/gdx-debian-src.sources (deb-src twins of this machine's deb entries)"
  printf '%s\n' "$entries" > /etc/apt/sources.list.d/gdx-debian-src.sources
  apt-get update -q >&2 || die "apt-get update failed after adding the deb-src entry"
elif ! src_known; then
  # A deb-src entry exists but its index may be stale or absent.
  [ "$(id -u)" = 0 ] && { apt-get update -q >&2 || die "apt-get update failed"; }
fi

src_known ||
  die "source package ucx=$version is not known to apt (apt-cache showsrc ucx): the archive this machine's deb-src" \
      "entries name no longer serves that version; point a deb-src entry at an archive that does"

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
