#!/usr/bin/env bash
# check_includes.sh SOURCE_DIR [--self-test]
# The include views (cmake/GdxLayers.cmake) hold only where a quoted include is looked up in them. A quoted include
# is first looked up next to the including file, which no view controls, so in src/ a quoted include must be
# either a plain file name (same folder: "x.h") or a path that does not resolve from the including file's folder
# ("core/log.h", which only the view finds); never "../", nor a subfolder path ("tcp/tcp.h" from src/transport/).
# Exit 0 when every file of src/ follows that; 1 naming each offence. --self-test also plants one offence of each
# kind in a copy of src/ and checks both are named.
set -euo pipefail
root=${1:?usage: check_includes.sh SOURCE_DIR [--self-test]}

check() { # folder holding src/; prints offences, returns 1 when there is one
  local dir=$1 rc=0 f inc rest
  while IFS=: read -r f rest; do
    inc=${rest#*\"}; inc=${inc%%\"*}
    if [[ $inc == *..* ]]; then
      echo "${f#"$dir"/}: #include \"$inc\" climbs out of its folder (write it from src/: \"layer/x.h\")"; rc=1
    elif [[ $inc == */* && -e $(dirname "$f")/$inc ]]; then
      echo "${f#"$dir"/}: #include \"$inc\" resolves beside the file, past the include view (write it from src/)"
      rc=1
    fi
  done < <(grep -rE --include='*.h' --include='*.hpp' --include='*.inc' --include='*.c' --include='*.cpp' \
             '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$dir/src" || true)
  return $rc
}

check "$root"
if [ "${2:-}" = --self-test ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  cp -r "$root/src" "$tmp/"
  echo '#include "../fallback/engine.h"' >> "$tmp/src/transport/wire.cpp"
  echo '#include "tcp/tcp.h"' >> "$tmp/src/transport/transport.cpp"
  if out=$(check "$tmp"); then echo "self-test: a deliberate offence was not caught"; exit 1; fi
  for want in '"../fallback/engine.h"' '"tcp/tcp.h"'; do
    grep -qF "$want" <<<"$out" || { echo "self-test: '$want' not named in: $out"; exit 1; }
  done
fi
echo "src/: no quoted include climbs out of its folder or bypasses the include views"
