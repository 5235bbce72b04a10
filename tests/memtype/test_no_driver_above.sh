#!/usr/bin/env bash
# Only src/memtype speaks to a GPU runtime (issue 17): the transports, the staging engine, the API, the topology
# layer and the UCX glue go through the memory ops table (src/memtype/memory_ops.h). Under src/transport,
# src/fallback, src/api, src/topo and src/uct no file includes memtype/cuda_driver.h (or cuda.h, a CUDA runtime
# header), names the loader's namespace (cuda::), or calls a cu* driver entry point; comments and string literals
# are not looked at. Usage: test_no_driver_above.sh SOURCE_DIR [--self-test]. Exit 0 when that holds, 1 naming
# each offence. --self-test also proves it can fail: planted offences in a copy must be caught, and a comment or
# a string that names an entry point must not be.
set -euo pipefail
root=${1:?usage: test_no_driver_above.sh SOURCE_DIR [--self-test]}

# The code of a C/C++ file without comments and string/char literals (line numbers kept).
code_of() {
  perl -0777 -pe 's{/\*.*?\*/}{ my $c = $&; $c =~ s/[^\n]//g; $c }gse; s{//[^\n]*}{}g; s{"(?:[^"\\\n]|\\.)*"}{""}g; s{'"'"'(?:[^'"'"'\\\n]|\\.)*'"'"'}{0}g' "$1"
}

check() { # source root; prints the offences, returns 1 when there is one
  local src=$1 rc=0 f hits
  local dirs=()
  for d in transport fallback api topo uct; do [ -d "$src/src/$d" ] && dirs+=("$src/src/$d"); done
  while IFS= read -r f; do
    hits=$(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"](memtype/cuda_driver\.h|cuda\.h|cuda_runtime[a-z_]*\.h|cudaTypedefs\.h)[>"]' "$f" || true)
    if [ -n "$hits" ]; then echo "$f: includes a GPU runtime header (use memtype/memory_ops.h):"; echo "$hits"; rc=1; fi
    hits=$(code_of "$f" | grep -nE '(^|[^A-Za-z0-9_])(cu[A-Z][A-Za-z0-9_]*[[:space:]]*\(|cuda::)' || true)
    if [ -n "$hits" ]; then echo "$f: calls the CUDA driver (use a slot of the ops table):"; echo "$hits"; rc=1; fi
  done < <(find "${dirs[@]}" -type f \( -name '*.cpp' -o -name '*.h' -o -name '*.c' -o -name '*.inc' \) | sort)
  return $rc
}

check "$root"
if [ "${2:-}" = --self-test ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/src"
  for d in transport fallback api topo uct; do [ -d "$root/src/$d" ] && cp -r "$root/src/$d" "$tmp/src/"; done
  cat > "$tmp/src/fallback/planted_include.cpp" <<'X'
#include "memtype/cuda_driver.h"
X
  cat > "$tmp/src/transport/planted_call.cpp" <<'X'
void f(const Api *api) { api->cuMemcpyAsync(0, 0, 1, nullptr); }
X
  cat > "$tmp/src/api/planted_harmless.cpp" <<'X'
// cuMemcpyAsync(dst, src) in a comment is no call
/* nor cuIpcOpenMemHandle( in a block
   comment */
const char *s = "cuMemHostRegister(p) failed";
X
  if out=$(check "$tmp"); then echo "self-test: deliberate offences were not caught"; exit 1; fi
  for want in "planted_include.cpp: includes" "planted_call.cpp: calls"; do
    grep -q "$want" <<<"$out" || { echo "self-test: '$want' not reported in: $out"; exit 1; }
  done
  if grep -q planted_harmless <<<"$out"; then echo "self-test: a comment or string was taken for a call: $out"; exit 1; fi
fi
echo "no GPU runtime header or driver call outside src/memtype"
