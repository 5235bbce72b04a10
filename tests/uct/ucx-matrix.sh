#!/usr/bin/env bash
# The uct.* test set (ucx_info, ucx_perftest UCT and UCP rows, the Open MPI checksum test) against UCX releases
# other than the host's Debian 12 UCX 1.13.1, from the one glue source (src/uct/uct_gdx_compat.h):
#
#   ucx-matrix.sh 1.22 WORK   UCX 1.22.0 built from the shared upstream release sources (../shared/ucx-src/ or
#                             $GDX_UCX_SRC_TARBALLS) into WORK/ucx-1.22.0-install; gdx built against it here; the
#                             module loaded by UCX itself through UCX_PLUGIN_PATH, nothing preloaded; the host's
#                             Open MPI 4.1 runs on it (its ranks load that libucp through LD_LIBRARY_PATH).
#   ucx-matrix.sh 1.18 WORK   a Debian 13 (trixie) root made by debootstrap from Debian's archive in WORK/trixie
#                             (binary packages: libucx0 1.18.1, Open MPI 5, the build tools); gdx built inside it
#                             against Debian 13's UCX with the ucx-1.18.1 release sources as internal headers;
#                             the tests run inside it (the checkout is bind-mounted at its own path).
#   ucx-matrix.sh 1.16 WORK   the GPU machine's UCX without its GPU: an Ubuntu 24.04 (noble) root made by debootstrap
#                             from Ubuntu's archive in WORK/noble, with libucx0 1.16.0+ds-5ubuntu1 and Open MPI 4.1.6
#                             but no ucx-utils (a runtime-only UCX: no ucx_info, no headers); inside it
#                             tests/uct/gpu-system-ucx.sh with the ucx-1.16.0 release sources, as on the GPU machine
#                             (GPU tests skip); then the config.h it reconstructed from the libraries is compared
#                             with Ubuntu's real one (saved from ucx-utils' ucx_info -b before removing it).
# WORK keeps what is slow to make (the UCX install, the roots) between runs; the build trees are
# <repo>/build-ucx<v> (build-sysucx for 1.16). Prints what each step costs. Exit status: ctest's.
set -euo pipefail
[ $# -eq 2 ] || { sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
which=$1
mkdir -p "$2"
work=$(cd "$2" && pwd -P)
root=$(cd "$(dirname "$0")/../.." && pwd -P)
tarballs=${GDX_UCX_SRC_TARBALLS:-$root/../shared/ucx-src}
t0=$(date +%s)
step() { echo "=== ucx-matrix $which [$(( $(date +%s) - t0 ))s] $*"; }
die() { echo "ucx-matrix.sh: $*" >&2; exit 1; }
# Bind mounts into a debootstrapped root ($chroot_dir, set by the stage that uses them), undone at exit. A mount left
# by an interrupted run is used as it is (sysfs refuses a second mount there).
mounts=()
cleanup() { local m; for m in "${mounts[@]}"; do umount -l "$m" 2>/dev/null || true; done; }
trap cleanup EXIT
mnt() { mkdir -p "$chroot_dir$2"; mountpoint -q "$chroot_dir$2" && return 0
        mount "${@:3}" "$1" "$chroot_dir$2"; mounts=("$chroot_dir$2" "${mounts[@]}"); }
jobs=$(nproc)

unpack() {  # unpack VERSION -> WORK/ucx-VERSION (the release tree)
  local v=$1
  [ -f "$work/ucx-$v/src/uct/base/uct_iface.h" ] && return 0
  [ -f "$tarballs/ucx-$v.tar.gz" ] || die "no $tarballs/ucx-$v.tar.gz (set GDX_UCX_SRC_TARBALLS to the directory holding it)"
  tar -xzf "$tarballs/ucx-$v.tar.gz" -C "$work"
  [ -f "$work/ucx-$v/src/uct/base/uct_iface.h" ] || die "ucx-$v.tar.gz did not unpack to ucx-$v/"
}

# Everything the uct.* set runs, the install set included (uct.deb_install packs it).
targets=(uct_test_programs gdx gdx_info gdx_perftest)

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
  out=$(env -u LD_PRELOAD UCX_PLUGIN_PATH="$root/build-ucx1.22/src/uct" timeout 60 ucx_info -d)
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
        pkg-config libhwloc-dev libibverbs-dev libboost-dev libgtest-dev libgmock-dev python3 procps hostname
        dpkg-dev file)
  if [ ! -x "$chroot_dir/usr/bin/ucx_info" ]; then
    step "debootstrap Debian 13 (trixie) into $chroot_dir"
    command -v debootstrap >/dev/null || { apt-get update -q && apt-get install -y -q debootstrap; }
    rm -rf "$chroot_dir"
    debootstrap --variant=minbase --include="$(IFS=,; echo "${pkgs[*]}")" trixie "$chroot_dir" \
      http://deb.debian.org/debian > "$work/debootstrap.log" 2>&1 || { tail -20 "$work/debootstrap.log"; die "debootstrap failed"; }
  fi
  # The checkout and the UCX sources at their own paths inside; /proc, /sys, /dev/shm for UCX and Open MPI.
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
  # The root is disposable: uct.deb_install installs the .deb into it for real (dpkg -i, dpkg -r).
  in_root env GDX_TEST_DPKG_SYSTEM=1 ctest --test-dir "$root/build-ucx1.18" -R '^uct\.' -L cpu --output-on-failure -j2
  rc=$?
  set -e
  ;;
1.16)
  v=1.16.0 chroot_dir=$work/noble
  [ -f "$tarballs/ucx-$v.tar.gz" ] || die "no $tarballs/ucx-$v.tar.gz (set GDX_UCX_SRC_TARBALLS to the directory holding it)"
  pkgs=(libucx0 openmpi-bin libopenmpi-dev g++ cmake ninja-build pkg-config libhwloc-dev libibverbs-dev libboost-dev
        libgtest-dev libgmock-dev python3 procps hostname binutils)
  if [ ! -f "$chroot_dir/etc/gdx-noble-ready" ]; then
    step "debootstrap Ubuntu 24.04 (noble) into $chroot_dir"
    command -v debootstrap >/dev/null || { apt-get update -q && apt-get install -y -q debootstrap; }
    # Debian has no Ubuntu keyring package: take noble's ubuntu-keyring .deb and check its keyring against the
    # SHA-256 pinned here (what noble's package ships), so the archive's signatures are verified from there on.
    kr=$work/ubuntu-keyring
    rm -rf "$kr"; mkdir -p "$kr"
    curl -fsS -o "$kr/k.deb" http://archive.ubuntu.com/ubuntu/pool/main/u/ubuntu-keyring/ubuntu-keyring_2023.11.28.1_all.deb ||
      die "downloading ubuntu-keyring failed"
    dpkg-deb -x "$kr/k.deb" "$kr/x"
    echo "80a36b0a6de2f69f49d2df75ef473ccde121e9e190b9ea01d20a4f63778d5c31  $kr/x/usr/share/keyrings/ubuntu-archive-keyring.gpg" |
      sha256sum -c --quiet || die "ubuntu-archive-keyring.gpg is not the pinned one"
    rm -rf "$chroot_dir"
    # debootstrap's resolver does not follow virtual packages (noble's automake-1.16, libllvm17): base system
    # first, the packages with apt inside.
    debootstrap --variant=minbase --components=main,universe --keyring="$kr/x/usr/share/keyrings/ubuntu-archive-keyring.gpg" \
      noble "$chroot_dir" http://archive.ubuntu.com/ubuntu /usr/share/debootstrap/scripts/gutsy > "$work/debootstrap-noble.log" 2>&1 ||
      { tail -20 "$work/debootstrap-noble.log"; die "debootstrap failed"; }
    echo "deb http://archive.ubuntu.com/ubuntu noble main universe" > "$chroot_dir/etc/apt/sources.list"
    cp /etc/resolv.conf "$chroot_dir/etc/resolv.conf"
    nr() { chroot "$chroot_dir" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root DEBIAN_FRONTEND=noninteractive "$@"; }
    step "apt-get install in the noble root: ${pkgs[*]} (+ ucx-utils, for the reference config.h only)"
    nr sh -c "apt-get update -q && apt-get install -y -q --no-install-recommends ${pkgs[*]} ucx-utils" \
      > "$work/apt-noble.log" 2>&1 || { tail -20 "$work/apt-noble.log"; die "apt-get install in the noble root failed"; }
    # Ubuntu's own config.h and version of this build, then the tools go: runtime-only, as on the GPU machine.
    nr ucx_info -b > "$work/noble-ucx_info-b.h" 2>/dev/null && nr ucx_info -v > "$work/noble-ucx_info-v.txt" 2>/dev/null ||
      die "ucx_info of the noble root failed"
    sed -i '/UCX  *ERROR/d' "$work/noble-ucx_info-b.h"
    nr apt-get purge -y -q ucx-utils > /dev/null 2>&1 || die "removing ucx-utils failed"
    touch "$chroot_dir/etc/gdx-noble-ready"
  fi
  mnt "$root" "$root" --bind
  tarballs=$(cd "$tarballs" && pwd -P)
  mnt "$tarballs" "$tarballs" --bind
  mnt proc /proc -t proc
  mnt sysfs /sys -t sysfs
  mnt tmpfs /dev/shm -t tmpfs
  in_root() { chroot "$chroot_dir" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TMPDIR=/tmp "$@"; }
  in_root sh -c 'command -v ucx_info' && die "the noble root has a ucx_info: it must be runtime-only"
  in_root dpkg-query -W libucx0 openmpi-bin
  step "tests/uct/gpu-system-ucx.sh in the noble root (runtime-only UCX $v, its Open MPI; GPU tests skip)"
  set +e
  in_root "$root/tests/uct/gpu-system-ucx.sh" "$tarballs/ucx-$v.tar.gz" "$work/noble-out"
  rc=$?
  set -e
  [ "$rc" = 0 ] || die "gpu-system-ucx.sh failed in the noble root (exit $rc)"
  step "the config.h read off Ubuntu's libraries against Ubuntu's own (ucx_info -b of ucx-utils, saved above)"
  cfg=$root/build-sysucx/ucx-build-config/config.h
  grep -q GDX_UCX_CONFIG_RECONSTRUCTED "$cfg" || die "the build did not use a reconstructed config.h"
  cp -p "$cfg" "$work/noble-reconstructed-config.h"
  # uct.ucx_config compares the probe with the build's config dir: run it once with Ubuntu's config.h there.
  cp "$work/noble-ucx_info-b.h" "$cfg"
  set +e
  in_root ctest --test-dir "$root/build-sysucx" -R '^uct\.ucx_config$' --output-on-failure
  rc2=$?
  set -e
  cp -p "$work/noble-reconstructed-config.h" "$cfg"
  [ "$rc2" = 0 ] || rc=$rc2
  ;;
*) die "unknown UCX '$which' (1.22, 1.18 or 1.16)" ;;
esac
step "done, ctest exit $rc"
exit $rc
