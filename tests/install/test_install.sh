#!/usr/bin/env bash
# `cmake --install` of this build tree into a fresh prefix, then the two ways a consumer finds gdx: pkg-config
# (gdx.pc) and CMake (find_package(gdx) -> gdx::gdx); both consumers must build and run. The installed gdx-run
# must reach the installed UCX module (ucx_info -d lists gdx_shm through it) when the module was built.
#   test_install.sh BUILD-DIR SOURCE-DIR
set -uo pipefail
build="$1" src="$2"
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gdx-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
p="$tmp/prefix"
cmake --install "$build" --prefix "$p" > "$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "cmake --install"; }
pc=$(find "$p" -name gdx.pc | head -1)
[ -n "$pc" ] || fail "no gdx.pc installed"
cat > "$tmp/app.c" <<'C'
#include <gdx/gdx.h>
#include <gdx/gdx_ext.h>
#include <stdio.h>
int main(void) {
    printf("consumer: gdx %d.%d\n", GDX_VERSION_MAJOR, GDX_VERSION_MINOR);
    /* The tools' extension header is installed with the others and is C; a NULL endpoint has no notifications. */
    return gdx_ext_config_count() > 0 && gdx_ep_notify_poll(NULL, NULL, 0) == 0 ? 0 : 1;
}
C
export PKG_CONFIG_PATH="$(dirname "$pc")"
flags=$(pkg-config --cflags --libs gdx) || fail "pkg-config --cflags --libs gdx"
echo "pkg-config: $flags"
cc "$tmp/app.c" $flags -Wl,-rpath,"$(pkg-config --variable=libdir gdx)" -o "$tmp/app-pc" || fail "pkg-config consumer build"
"$tmp/app-pc" | grep -q "consumer: gdx" || fail "pkg-config consumer run"
mkdir -p "$tmp/cm"
cat > "$tmp/cm/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.20)
project(consumer C)
find_package(gdx REQUIRED)
add_executable(app ../app.c)
target_link_libraries(app PRIVATE gdx::gdx)
CM
cmake -S "$tmp/cm" -B "$tmp/cm/b" -DCMAKE_PREFIX_PATH="$p" > "$tmp/cm.log" 2>&1 && cmake --build "$tmp/cm/b" \
  >> "$tmp/cm.log" 2>&1 || { cat "$tmp/cm.log"; fail "find_package(gdx) consumer build"; }
"$tmp/cm/b/app" | grep -q "consumer: gdx" || fail "find_package consumer run"
if [ -n "$(find "$p" -name 'libuct_gdx.so.0' | head -1)" ]; then
  out=$(env -u GDX_UCT_MODULE timeout 120 "$p/bin/gdx-run" ucx_info -d 2>&1) || fail "installed gdx-run ucx_info -d: $out"
  grep -q "Transport: gdx_shm$" <<<"$out" || fail "installed gdx-run: ucx_info -d lists no gdx_shm: $(head -5 <<<"$out")"
  echo "installed gdx-run: ucx_info -d lists $(grep -c 'Transport: gdx_' <<<"$out") gdx transports"
fi
echo "PASS"
