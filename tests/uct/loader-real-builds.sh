#!/usr/bin/env bash
# The loader and the module's guard against *real* UCX builds, not edited manifests (uct.loader does those in
# CI): UCX 1.16.0 from the shared release sources built four times,
#   A  default options (assertions on, no statistics, no debug data)          the build gdx is compiled against
#   D  the same options again, in another directory (another libucs build-id)  a distribution's same-options rebuild
#   B  contrib/configure-release's options (no assertions, no params check)   another configuration
#   C  --enable-stats --enable-debug-data                                      another configuration
# then gdx against A, and `ucx_info -d` under each with the loader preloaded (and with the module preloaded
# directly: its own guard). Expected: A and D list gdx_shm; B and C get one refusal line each, naming the
# differing keys, and list UCX's own transports. Also gdx_ucx_probe on each, against its ucx_info -b.
# Slow (four UCX builds, ~5 min each on 2 cores; kept in WORK) and not part of CI: the raw output is committed
# (bench/results/ucx-matrix-*/loader-real-builds.txt).
#   tests/uct/loader-real-builds.sh WORK
set -euo pipefail
[ $# -eq 1 ] || { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
mkdir -p "$1"
work=$(cd "$1" && pwd -P)/v116
root=$(cd "$(dirname "$0")/../.." && pwd -P)
tarballs=${GDX_UCX_SRC_TARBALLS:-$root/../shared/ucx-src}
die() { echo "loader-real-builds.sh: $*" >&2; exit 1; }
mkdir -p "$work"

if [ ! -x "$work/src/configure" ]; then
  command -v autoreconf >/dev/null && command -v libtoolize >/dev/null || die "needs autoconf, automake, libtool"
  rm -rf "$work/src"; mkdir -p "$work/src"
  tar -xzf "$tarballs/ucx-1.16.0.tar.gz" -C "$work/src" --strip-components=1
  (cd "$work/src" && ./autogen.sh > ../autogen.log 2>&1) || die "autogen.sh failed ($work/autogen.log)"
fi
variant() {  # variant NAME CONFIGURE-ARGS...
  local name=$1; shift
  [ -x "$work/$name-install/bin/ucx_info" ] && return 0
  rm -rf "$work/$name-build"; mkdir -p "$work/$name-build"
  (cd "$work/$name-build" &&
   ../src/configure --prefix="$work/$name-install" --disable-doxygen-doc --without-java --without-go --without-cuda \
     --without-rocm --without-verbs --without-rdmacm --without-knem --without-xpmem --without-ugni --without-fuse3 \
     --without-mad --without-gdrcopy "$@" > configure.log 2>&1 && make -j"$(nproc)" install > make.log 2>&1) ||
    die "building UCX variant $name failed ($work/$name-build)"
}
variant A
variant D
variant B --disable-logging --disable-debug --disable-assertions --disable-params-check
variant C --enable-stats --enable-debug-data

bdir=$root/build-ucx1.16-A
if [ ! -f "$bdir/src/uct/libuct_gdx.so.0" ]; then
  tree=$work/ucx-1.16.0
  [ -f "$tree/src/uct/base/uct_iface.h" ] || { mkdir -p "$tree"; tar -xzf "$tarballs/ucx-1.16.0.tar.gz" -C "$tree" --strip-components=1; }
  cmake -S "$root" -B "$bdir" -G Ninja -DGDX_UCX_PREFIX="$work/A-install" -DGDX_UCX_SRC_DIR="$tree" \
        -DGDX_UCX_INFO="$work/A-install/bin/ucx_info" > "$work/cmake-A.log" 2>&1 || die "cmake failed ($work/cmake-A.log)"
  cmake --build "$bdir" --target uct_gdx uct_gdx_loader gdx_ucx_probe > "$work/build-A.log" 2>&1 ||
    die "building gdx against A failed ($work/build-A.log)"
fi
moddir=$bdir/src/uct
echo "# gdx built against A: $(tr '\n' ' ' < "$moddir/libuct_gdx.ucx")"
fail=0
for v in A D B C; do
  inst=$work/$v-install
  echo "== UCX variant $v: $(grep -o 'Configured with: .*' <(LD_LIBRARY_PATH=$inst/lib "$inst/bin/ucx_info" -v) |
        sed 's/--prefix=[^ ]* //; s/--disable-doxygen-doc.*--without-gdrcopy//')"
  echo "   libucs build-id $(readelf -n "$inst/lib/libucs.so.0" | sed -n 's/.*Build ID: //p')"
  "$moddir/gdx_ucx_probe" --libdir "$inst/lib" | cut -f1 | grep -E '^(assert|stats|debug_data)=' | sed 's/^/   probe: /'
  out=$(LD_LIBRARY_PATH=$inst/lib LD_PRELOAD=$moddir/libuct_gdx_loader.so LIBUCT_GDX_PATH=$moddir \
        timeout 60 "$inst/bin/ucx_info" -d 2>&1) || { echo "   ucx_info -d with the loader FAILED: $out"; fail=1; }
  echo "   loader: $(grep -c 'Transport: gdx_shm$' <<<"$out") gdx_shm listed, $(grep -cE 'Transport: (posix|sysv|self)$' <<<"$out") of UCX's own"
  grep '^libuct_gdx' <<<"$out" | sort | uniq -c | sed 's/^/   /' || true
  out2=$(LD_LIBRARY_PATH=$inst/lib LD_PRELOAD=$moddir/libuct_gdx.so.0 timeout 60 "$inst/bin/ucx_info" -d 2>&1) ||
    { echo "   ucx_info -d with the module preloaded FAILED: $out2"; fail=1; }
  echo "   module preloaded: $(grep -c 'Transport: gdx_shm$' <<<"$out2") gdx_shm listed"
  grep '^libuct_gdx' <<<"$out2" | sort | uniq -c | sed 's/^/   /' || true
  case $v in
    A|D) grep -q 'Transport: gdx_shm$' <<<"$out" && ! grep -q '^libuct_gdx' <<<"$out" &&
         grep -q 'Transport: gdx_shm$' <<<"$out2" || { echo "   EXPECTED: loaded, silently"; fail=1; } ;;
    B|C) ! grep -q 'Transport: gdx_' <<<"$out" && grep -q '^libuct_gdx_loader: no libuct_gdx build' <<<"$out" &&
         ! grep -q 'Transport: gdx_' <<<"$out2" && grep -q '^libuct_gdx: built for UCX' <<<"$out2" &&
         grep -qE 'Transport: (posix|sysv|self)$' <<<"$out" || { echo "   EXPECTED: refused in one line"; fail=1; } ;;
  esac
done
[ "$fail" = 0 ] && echo "PASS" || { echo "FAIL"; exit 1; }
