#!/usr/bin/env bash
# Regenerates the README's GDX_* reference from the configuration table: scripts/gen-readme-config.sh [build-dir]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
info=${1:-$root/build}/tools/gdx_info
python3 - "$info" "$root/README.md" <<'PY'
import re, subprocess, sys
info, readme = sys.argv[1], sys.argv[2]
md = subprocess.run([info, "-m"], capture_output=True, text=True, check=True).stdout
s = open(readme).read()
s = re.sub(r"(<!-- gdx-config-reference:begin -->\n).*?(<!-- gdx-config-reference:end -->)",
           lambda m: m.group(1) + md + m.group(2), s, flags=re.S)
open(readme, "w").write(s)
PY
