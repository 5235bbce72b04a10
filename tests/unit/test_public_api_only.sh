#!/usr/bin/env bash
# gdx_perftest and gdx_info are built on the public API (gdx.h) and the tools' extension header (gdx_ext.h) only
# (issue 17): their sources include no header of src/, and their CMake targets link libgdx.so (`gdx`), never
# gdx_internal nor a layer's target (gdx_core ... gdx_api, cmake/GdxLayers.cmake). Usage: test_public_api_only.sh
# SOURCE_DIR. Exit 0 when that holds; 1 naming each offence.
# With --self-test it also proves it can fail: a copy of the two folders with one offence of each kind must fail.
set -euo pipefail
root=${1:?usage: test_public_api_only.sh SOURCE_DIR [--self-test]}

check() { # folder holding perftest/ and tools/; prints the offences, returns 1 when there is one
  local dir=$1 rc=0 hits
  local src_dirs='(core|memtype|transport|fallback|api|topo|config)'
  hits=$(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]'"$src_dirs"/ \
           "$dir"/perftest/*.cpp "$dir"/perftest/*.h "$dir"/tools/*.cpp 2>/dev/null || true)
  if [ -n "$hits" ]; then echo "includes a header of src/ (use <gdx/gdx.h>, <gdx/gdx_ext.h>):"; echo "$hits"; rc=1; fi
  local internals='gdx_internal|gdx_(core|mem|topo|transports?|tcp|shm|cuda_ipc|rc|staging|config|api)\b'
  hits=$(grep -nE "$internals"'|\$\{CMAKE_SOURCE_DIR\}/src' "$dir"/perftest/CMakeLists.txt \
           "$dir"/tools/CMakeLists.txt 2>/dev/null || true)
  if [ -n "$hits" ]; then echo "links or compiles gdx internals (link the gdx target):"; echo "$hits"; rc=1; fi
  return $rc
}

check "$root"
if [ "${2:-}" = --self-test ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  cp -r "$root/perftest" "$root/tools" "$tmp/"
  echo '#include "fallback/engine.h"' >> "$tmp/perftest/bench.cpp"
  echo 'target_link_libraries(gdx_info PRIVATE gdx_internal)' >> "$tmp/tools/CMakeLists.txt"
  echo 'target_link_libraries(gdx_perftest PRIVATE gdx_staging)' >> "$tmp/perftest/CMakeLists.txt"
  if out=$(check "$tmp"); then echo "self-test: a deliberate offence was not caught"; exit 1; fi
  for want in "fallback/engine.h" "gdx_internal" "gdx_staging"; do
    grep -q "$want" <<<"$out" || { echo "self-test: '$want' not named in: $out"; exit 1; }
  done
fi
echo "perftest/ and tools/ use gdx.h and gdx_ext.h only"
