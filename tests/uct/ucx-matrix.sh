#!/usr/bin/env bash
# The uct.* test set (ucx_info, ucx_perftest UCT and UCP rows, the Open MPI checksum test) against UCX releases
# other than the host's Debian 12 UCX 1.13.1, from the one glue source (src/transport/uct/uct_gdx_compat.h):
#
#   ucx-matrix.sh 1.22 WORK   UCX 1.22.0 built from the shared upstream release sources (../shared/ucx-src/ or
#                             $GDX_UCX_SRC_TARBALLS) into WORK/ucx-1.22.0-install; gdx built against it here; the
#                             module loaded by UCX itself through UCX_PLUGIN_PATH, nothing preloaded; the host's
#                             Open MPI 4.1 runs on it (its ranks load that libucp through LD_LIBRARY_PATH).
#   ucx-matrix.sh 1.18 WORK   a Debian 13 (trixie) root made by debootstrap from Debian's archive in WORK/trixie
#                             (binary packages: libucx0 1.18.1, Open MPI 5, the build tools); gdx built inside it
#                             against Debian 13's UCX with the ucx-1.18.1 release sources as internal headers;
#                             the tests run inside it (the checkout is bind-mounted at its own path).
# WORK keeps what is slow to make (the UCX install, the root) between runs; the build trees are
# <repo>/build-ucx<v>. Prints what each step costs. Exit status: ctest's.
set -euo pipefail
[ $# -eq 2 ] || { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
which=$1
mkdir -p "$2"
work=$(cd "$2" && pwd -P)
root=$(cd "$(dirname "$0")/../.." && pwd -P)
tarballs=${GDX_UCX_SRC_TARBALLS:-$root/../shared/ucx-src}
t0=$(date +%s)
step() { echo "=== ucx-matrix $which [$(( $(date +%s) - t0 ))s] $*"; }
die() { echo "ucx-matrix.sh: $*" >&2; exit 1; }
jobs=$(nproc)

unpack() {  # unpack VERSION -> WORK/ucx-VERSION (the release tree)
  local v=$1
  [ -f "$work/ucx-$v/src/uct/base/uct_iface.h" ] && return 0
  [ -f "$tarballs/ucx-$v.tar.gz" ] || die "no $tarballs/ucx-$v.tar.gz (set GDX_UCX_SRC_TARBALLS to the directory holding it)"
  tar -xzf "$tarballs/ucx-$v.tar.gz" -C "$work"
  [ -f "$work/ucx-$v/src/uct/base/uct_iface.h" ] || die "ucx-$v.tar.gz did not unpack to ucx-$v/"
}

targets=(uct_gdx uct_gdx_loader uct_gdx_fakever uct_loopback_check uct_loopback_check_linked ucp_gpu_check
         uct_mpi_check)

case "$which" in
1.22)
  v=1.22.0 prefix=$work/ucx-1.22.0-install
  step "UCX $v sources"
  unpack $v
  if [ ! -x "$prefix/bin/ucx_info" ]; then
    step "configure + build UCX $v into $prefix (the release's own configure; no verbs/CUDA: not needed here)"
    rm -rf "$work/ucx-$v-build"; mkdir -p "$work/ucx-$v-build"
    (cd "$work/ucx-$v-build" &&
     "$work/ucx-$v/configure" --prefix="$prefix" --disable-doxygen-doc --without-java --without-go --without-cuda \
       --without-rocm --without-verbs --without-rdmacm --without-knem --without-xpmem --without-ugni \
       --without-fuse3 --without-mad --without-gdrcopy > configure.log 2>&1 &&
     make -j"$jobs" install > make.log 2>&1) || { tail -30 "$work/ucx-$v-build"/*.log; die "building UCX $v failed"; }
  fi
  export PATH="$prefix/bin:$PATH" LD_LIBRARY_PATH="$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  ucx_info -v | head -1
  step "configure + build gdx against UCX $v (build-ucx1.22)"
  cmake -S "$root" -B "$root/build-ucx1.22" -G Ninja -DGDX_UCX_PREFIX="$prefix" -DGDX_UCX_SRC_DIR="$work/ucx-$v" \
        -DGDX_UCX_INFO="$prefix/bin/ucx_info" -DGDX_UCX_PERFTEST="$prefix/bin/ucx_perftest" > "$work/cmake-1.22.log" \
        || { cat "$work/cmake-1.22.log"; die "cmake failed"; }
  grep "gdx: libuct_gdx" "$work/cmake-1.22.log"
  cmake --build "$root/build-ucx1.22" -j "$jobs" --target "${targets[@]}" > "$work/build-1.22.log" 2>&1 ||
    { tail -40 "$work/build-1.22.log"; die "build failed"; }
  step "the bar: ucx_info -d lists the gdx transports with UCX_PLUGIN_PATH only (no LD_PRELOAD, no wrapper)"
  out=$(env -u LD_PRELOAD UCX_PLUGIN_PATH="$root/build-ucx1.22/src/transport/uct" timeout 60 ucx_info -d)
  grep -E "Transport: gdx_(shm|tcp|aux)$" <<<"$out" || die "ucx_info -d lists no gdx transport via UCX_PLUGIN_PATH"
  step "uct.* (cpu) on UCX $v"
  set +e
  ctest --test-dir "$root/build-ucx1.22" -R '^uct\.' -L cpu --output-on-failure -j2
  rc=$?
  set -e
  ;;
1.18)
  v=1.18.1 chroot_dir=$work/trixie
  step "UCX $v sources"
  unpack $v
  # automake: libltdl-dev (pulled by libopenmpi-dev) names automake-1.17, a virtual package debootstrap's resolver
  # does not follow.
  pkgs=(libucx0 libucx-dev ucx-utils openmpi-bin libopenmpi-dev automake gcc g++ libc6-dev cmake ninja-build
        pkg-config libhwloc-dev libibverbs-dev libboost-dev libgtest-dev libgmock-dev python3 procps hostname)
  if [ ! -x "$chroot_dir/usr/bin/ucx_info" ]; then
    step "debootstrap Debian 13 (trixie) into $chroot_dir"
    command -v debootstrap >/dev/null || { apt-get update -q && apt-get install -y -q debootstrap; }
    rm -rf "$chroot_dir"
    debootstrap --variant=minbase --include="$(IFS=,; echo "${pkgs[*]}")" trixie "$chroot_dir" \
      http://deb.debian.org/debian > "$work/debootstrap.log" 2>&1 || { tail -20 "$work/debootstrap.log"; die "debootstrap failed"; }
  fi
  # The checkout and the UCX sources at their own paths inside; /proc, /sys, /dev/shm for UCX and Open MPI.
  mounts=()
  cleanup() { local m; for m in "${mounts[@]}"; do umount -l "$m" 2>/dev/null || true; done; }
  trap cleanup EXIT
  mnt() { mkdir -p "$chroot_dir$2"; mount "${@:3}" "$1" "$chroot_dir$2"; mounts=("$chroot_dir$2" "${mounts[@]}"); }
  mnt "$root" "$root" --bind
  mnt "$work/ucx-$v" "$work/ucx-$v" --bind
  mnt proc /proc -t proc
  mnt sysfs /sys -t sysfs
  mnt tmpfs /dev/shm -t tmpfs
  in_root() { chroot "$chroot_dir" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TMPDIR=/tmp "$@"; }
  missing=""
  for p in "${pkgs[@]}"; do
    [ "$(in_root dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" = installed ] || missing+=" $p"
  done
  if [ -n "$missing" ]; then
    step "apt-get install in the Debian 13 root:$missing"
    cp /etc/resolv.conf "$chroot_dir/etc/resolv.conf"
    in_root sh -c "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends ${pkgs[*]}" \
      > "$work/apt-1.18.log" 2>&1 || { tail -20 "$work/apt-1.18.log"; die "apt-get install in the root failed"; }
  fi
  in_root ucx_info -v | head -1
  in_root mpirun --version | head -1
  step "configure + build gdx inside Debian 13 against its UCX $v (build-ucx1.18)"
  in_root cmake -S "$root" -B "$root/build-ucx1.18" -G Ninja -DGDX_UCX_SRC_DIR="$work/ucx-$v" > "$work/cmake-1.18.log" \
    2>&1 || { cat "$work/cmake-1.18.log"; die "cmake failed"; }
  grep "gdx: libuct_gdx" "$work/cmake-1.18.log" || { cat "$work/cmake-1.18.log"; die "the module is not configured"; }
  in_root cmake --build "$root/build-ucx1.18" -j "$jobs" --target "${targets[@]}" > "$work/build-1.18.log" 2>&1 ||
    { tail -40 "$work/build-1.18.log"; die "build failed"; }
  step "uct.* (cpu) on Debian 13's UCX $v and Open MPI 5"
  set +e
  in_root ctest --test-dir "$root/build-ucx1.18" -R '^uct\.' -L cpu --output-on-failure -j2
  rc=$?
  set -e
  ;;
*) die "unknown UCX '$which' (1.22 or 1.18)" ;;
esac
step "done, ctest exit $rc"
exit $rc
