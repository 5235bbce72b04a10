#!/usr/bin/env bash
# The two builds a device run needs, in one place (scripts/device-run.sh and the benches call these rather than
# copy them):
#   scripts/ucx-build.sh ucx SRC [PREFIX]            Debian's UCX source tree SRC (scripts/carry-debian.sh
#                                                    download prepares it: configure already generated) built
#                                                    with Debian's own configure options, plus --with-cuda where
#                                                    /usr/local/cuda exists, installed in PREFIX; a warm
#                                                    machine's build is reused
#   scripts/ucx-build.sh module TREE BUILD [PREFIX [SRC]]   gdx's UCX module (target uct_gdx and the uct.* test
#                                                    programs) of the source tree TREE, built in BUILD against it
# PREFIX defaults to /tmp/ucx-deb. Output goes to stdout/stderr (redirect it to a log); the exit status is 0 only
# when the build is there.
set -euo pipefail
jobs=$(nproc)
case "${1:-}" in
ucx)
  src=${2:?"ucx SRC [PREFIX]"} prefix=${3:-/tmp/ucx-deb}
  src=$(cd "$src" && pwd)
  if [ -x "$prefix/bin/ucx_perftest" ] && [ -f "$prefix/.built-from" ] && [ "$(cat "$prefix/.built-from")" = "$src" ]; then
    echo "ucx-build.sh: $prefix already built from $src: reused"
    exit 0
  fi
  [ -x "$src/configure" ] || { echo "ucx-build.sh: $src has no configure (run autogen.sh, or carry-debian.sh download)"; exit 1; }
  # debian/rules' options (the build Debian ships), so the result differs from Debian's libucx0 only by CUDA.
  opts=(--prefix="$prefix" --enable-mt --disable-backtrace-detail --disable-logging --enable-devel-headers
        --enable-examples --enable-cma --without-java --without-go --disable-doxygen-doc)
  if [ -d /usr/local/cuda/include ]; then opts+=(--with-cuda=/usr/local/cuda); else opts+=(--without-cuda); fi
  if [ -f /usr/include/infiniband/verbs.h ]; then opts+=(--with-verbs); else opts+=(--without-verbs); fi
  b="$prefix.build"
  rm -rf "$b" && mkdir -p "$b"
  cd "$b"
  # Newer compilers than Debian 12's GCC 12 warn where 1.13.1 did not expect it (GCC 13: enum-int-mismatch in
  # uct_md.c): warnings stay warnings.
  "$src/configure" "${opts[@]}" CFLAGS="-O3 -g -Wno-error" CXXFLAGS="-O3 -g -Wno-error"
  # The libraries, their modules, ucx_info, ucx_perftest and the CMake/pkg-config files; test/apps does not build
  # with newer compilers and is not needed.
  for d in src/ucm src/ucs src/uct src/ucp src/tools/info src/tools/perf cmake; do make -j "$jobs" -C "$d" install; done
  make install-data-am # the top level's own files: the pkg-config files
  echo "$src" > "$prefix/.built-from"
  "$prefix/bin/ucx_info" -v
  ;;
module)
  tree=${2:?"module TREE BUILD [PREFIX [SRC]]"} build=${3:?"module TREE BUILD [PREFIX [SRC]]"}
  prefix=${4:-/tmp/ucx-deb} src=${5:-$(cat "${4:-/tmp/ucx-deb}/.built-from")}
  gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
  cmake -S "$tree" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DGDX_UCX_PREFIX="$prefix" -DGDX_UCX_SRC_DIR="$src" -DGDX_UCX_INFO="$prefix/bin/ucx_info" "${@:6}"
  cmake --build "$build" -j "$jobs"
  [ -f "$build/src/uct/libuct_gdx.so.0" ]
  ;;
*)
  sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
  ;;
esac
