#!/usr/bin/env bash
# The two builds every device run against upstream UCX needs, in one place (scripts/device-run.sh,
# bench/uct_engine_vs_pipeline.sh, and a call's own script under bench/results/ call these rather than copy them):
#   scripts/ucx-build.sh ucx TARBALL [PREFIX [SRC]]           upstream UCX with CUDA from a release tarball, its
#                                                             sources unpacked in SRC (kept: the benches' --ucx-src),
#                                                             installed in PREFIX; a warm machine's build is reused
#   scripts/ucx-build.sh module TREE BUILD [PREFIX [SRC]]     gdx's UCX module (target uct_gdx) of the source tree
#                                                             TREE, built in BUILD against that UCX
# PREFIX defaults to /tmp/ucx-cuda, SRC to /tmp/ucx-build. Output goes to stdout/stderr (redirect it to a log); the
# exit status is 0 only when the build is there.
set -euo pipefail
jobs=$(nproc)
case "${1:-}" in
ucx)
  tarball=${2:?"ucx TARBALL [PREFIX [SRC]]"} prefix=${3:-/tmp/ucx-cuda} src=${4:-/tmp/ucx-build}
  if [ -x "$prefix/bin/ucx_perftest" ] && [ -f "$src/config.h" ]; then
    echo "ucx-build.sh: $prefix already built (sources in $src): reused"
    exit 0
  fi
  rm -rf "$src" && mkdir -p "$src" && tar -xzf "$tarball" -C "$src" --strip-components=1
  cd "$src"
  [ -x ./configure ] || ./autogen.sh
  # NVCC=/bin/false, --without-gda: no device-side code (1.22's perftest kernels include DOCA headers)
  ./contrib/configure-release --prefix="$prefix" --with-cuda=/usr/local/cuda --without-verbs --without-rdmacm \
    NVCC=/bin/false --without-java --without-go --without-gda
  make -j "$jobs" install
  ;;
module)
  tree=${2:?"module TREE BUILD [PREFIX [SRC]]"} build=${3:?"module TREE BUILD [PREFIX [SRC]]"}
  prefix=${4:-/tmp/ucx-cuda} src=${5:-/tmp/ucx-build}
  gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
  cmake -S "$tree" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGDX_BUILD_TESTS=OFF \
    -DGDX_UCX_PREFIX="$prefix" -DGDX_UCX_SRC_DIR="$src" -DGDX_UCX_INFO="$prefix/bin/ucx_info"
  cmake --build "$build" -j "$jobs" --target uct_gdx
  [ -f "$build/src/uct/libuct_gdx.so.0" ]
  ;;
*)
  sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
  ;;
esac
