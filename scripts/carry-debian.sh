#!/usr/bin/env bash
# Carries a registry-only MPI stack to a machine without a package registry (the GPU machine): Debian 12's UCX
# source package, prepared here so that it builds there with the machine's CUDA (scripts/ucx-build.sh), and Debian
# 12's Open MPI 4.1 binary packages, unpacked there into a folder. Everything comes from this machine's apt
# configuration (apt-get source, apt-get download); nothing is installed on the target system-wide.
#
#   scripts/carry-debian.sh download DIR     (here) DIR/ucx-<v>/: the UCX source of exactly the installed libucx0,
#                                            autogen.sh already run (the GPU machine has no libtool); DIR/debs/:
#                                            Open MPI and the libraries it needs that a CUDA machine may lack
#   scripts/carry-debian.sh unpack DIR PREFIX  (there) dpkg -x every .deb into PREFIX and write PREFIX/env.sh,
#                                            which points PATH, LD_LIBRARY_PATH and Open MPI's installation
#                                            directories (OPAL_*) at PREFIX
#   scripts/carry-debian.sh check PREFIX     (there) the carried mpirun starts two ranks
# DIR is what the device tool carries (a folder, not a tarball: .carry/ is git-ignored). Needs glibc >= 2.36 on
# the target (Debian 12's binaries).
set -euo pipefail

say() { echo "carry-debian.sh: $*" >&2; }
die() { say "$*"; exit 1; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2; }

# Open MPI 4.1 (pml ucx, osc ucx) and every library its components link that is not in a minimal C runtime;
# libucx0 is not carried: the UCX built from the carried source takes its place (LD_LIBRARY_PATH).
debs=(openmpi-bin libopenmpi3 libopenmpi-dev openmpi-common libpmix2 libevent-core-2.1-7 libevent-pthreads-2.1-7
      libhwloc15 libmunge2 libfabric1 libpsm-infinipath1 libpsm2-2 libnl-3-200 libnl-route-3-200 libnuma1
      libibverbs1 librdmacm1)
multiarch=x86_64-linux-gnu

download() {
  local dir="$1" src v
  mkdir -p "$dir/debs" || die "cannot create $dir/debs"
  dir=$(cd "$dir" && pwd)
  src=$("$(dirname "$0")/fetch-ucx-src.sh" --print-dir) || die "scripts/fetch-ucx-src.sh failed"
  v=$(basename "$src")
  for t in autoconf automake libtoolize; do
    command -v "$t" >/dev/null || die "$t not found: apt-get install autoconf automake libtool"
  done
  if [ ! -x "$dir/$v/configure" ]; then
    rm -rf "${dir:?}/$v" && cp -a "$src" "$dir/$v" || die "cannot copy $src"
    (cd "$dir/$v" && ./autogen.sh > "$dir/autogen.log" 2>&1) || { tail -20 "$dir/autogen.log"; die "autogen.sh failed"; }
    rm -rf "$dir/$v/autom4te.cache"
  fi
  say "apt-get download ${debs[*]}"
  chmod 0777 "$dir/debs" 2>/dev/null || true # apt-get download runs as _apt
  (cd "$dir/debs" && apt-get download -q "${debs[@]}" >&2) || die "apt-get download failed (apt-get update first?)"
  dpkg-query -W -f='${Version}\n' libucx0 > "$dir/VERSION"
  say "done: $(du -sh "$dir" | cut -f1) in $dir (carry it; there: scripts/carry-debian.sh unpack $dir PREFIX)"
}

unpack() {
  local dir="$1" prefix="$2" deb lib have
  [ -f "$dir/VERSION" ] && [ -d "$dir/debs" ] || die "$dir was not made by 'carry-debian.sh download'"
  have=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
  if [ -n "$have" ] && [ "$(printf '2.36\n%s\n' "$have" | sort -V | head -1)" != 2.36 ]; then
    die "this machine has glibc $have; Debian 12's binaries need >= 2.36"
  fi
  command -v dpkg >/dev/null || die "dpkg not found (needed for dpkg -x)"
  mkdir -p "$prefix" && prefix=$(cd "$prefix" && pwd) || die "cannot create $prefix"
  for deb in "$dir"/debs/*.deb; do dpkg -x "$deb" "$prefix" || die "dpkg -x $deb failed"; done
  lib="$prefix/usr/lib/$multiarch"
  [ -x "$prefix/usr/bin/orterun" ] && [ -f "$lib/libmpi.so.40" ] || die "no orterun or libmpi.so.40 under $prefix"
  ln -sf orterun "$prefix/usr/bin/mpirun"
  ln -sf mpicc.openmpi "$prefix/usr/bin/mpicc"
  # Open MPI finds its components, help texts and MCA defaults through its installation directories, which
  # Debian configured as absolute /usr paths: OPAL_* moves each of them (opal's installdirs env component).
  cat > "$prefix/env.sh" <<ENV
# Debian 12's Open MPI, carried by scripts/carry-debian.sh; source after the UCX it is to run on is on the path.
export PATH="$prefix/usr/bin:\$PATH"
export LD_LIBRARY_PATH="\${LD_LIBRARY_PATH:+\$LD_LIBRARY_PATH:}$lib:$lib/openmpi/lib"
export OPAL_PREFIX="$prefix/usr" OPAL_EXEC_PREFIX="$prefix/usr" OPAL_BINDIR="$prefix/usr/bin"
export OPAL_LIBDIR="$lib/openmpi/lib" OPAL_PKGLIBDIR="$lib/openmpi/lib/openmpi3"
export OPAL_INCLUDEDIR="$lib/openmpi/include" OPAL_DATAROOTDIR="$prefix/usr/share" OPAL_DATADIR="$prefix/usr/share"
export OPAL_PKGDATADIR="$prefix/usr/share/openmpi" OPAL_SYSCONFDIR="$prefix/etc/openmpi"
ENV
  say "Open MPI unpacked into $prefix; next:  . $prefix/env.sh"
}

check() {
  local prefix="$1"
  [ -f "$prefix/env.sh" ] || die "$prefix/env.sh missing: run 'carry-debian.sh unpack' first"
  # shellcheck disable=SC1091
  . "$prefix/env.sh"
  command -v mpirun | grep -q "^$prefix" || die "mpirun on PATH is not the carried one"
  timeout 60 mpirun --allow-run-as-root --oversubscribe -np 2 true || die "the carried mpirun cannot start 2 ranks"
  timeout 60 ompi_info --version | head -1 >&2
}

[ $# -ge 1 ] || usage
case "$1" in
  download) [ $# -eq 2 ] || usage; download "$2" ;;
  unpack) [ $# -eq 3 ] || usage; unpack "$2" "$3" ;;
  check) [ $# -eq 2 ] || usage; check "$2" ;;
  *) usage ;;
esac
