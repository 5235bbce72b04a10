#!/usr/bin/env bash
# The GPU anchor: the same message sizes through NCCL (bench/nccl_anchor, the intranode harness) and through
# gdx_perftest, printed as one table, so gdx's GPU figures sit next to a reference every GPU user trusts.
# One non-interactive command, bounded in time (under 4 minutes, build included when the binaries exist
# already; a first build of the two targets is bounded by --build-timeout).
#
#   bench/anchor_gpu.sh [--out FILE] [--build DIR] [--sizes LIST] [--build-timeout S]
#     --out FILE   where the report goes (default bench/results/anchor-gpu-<UTC date>.txt); also printed
#     --build DIR  build tree to use or create (default build-gpu, as scripts/test-gpu.sh)
#     --sizes LIST comma list with K/M/G (default 8,1K,64K,1M,4M,16M,64M,256M)
#
# Rows: one per size. Columns, when the machine has them:
#   nccl         NCCL send/recv between GPU0 and GPU1 (needs 2 GPUs), GB/s and us per message
#   gdx g0->g1   gdx_perftest put_bw / put_lat, cuda:0 -> cuda:1, -x auto (CUDA IPC), with the path gdx reports
#   gdx staged   the same pair with --path staged (every fragment through pinned host buffers)
#   gdx g0->g0   cuda:0 -> cuda:0 (one GPU), -x auto
#   gdx h->g0    host -> cuda:0 over shm (GPU memory staged by gdx)
# A column that cannot run here says n/a and why, under the table. Figures are medians of nothing: one run
# each, as printed by the tools; the JSON files next to the report hold every field (plot them with
# perftest/plot_results.py).
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out="" build=build-gpu sizes="8,1K,64K,1M,4M,16M,64M,256M" build_timeout=150
cmdline="$0 $*"
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --sizes) sizes="$2"; shift 2 ;;
    --build-timeout) build_timeout="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "anchor_gpu.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$out" ] || out="bench/results/anchor-gpu-$(date -u +%Y%m%d-%H%M%S).txt"
mkdir -p "$(dirname "$out")" || { echo "anchor_gpu.sh: cannot create $(dirname "$out")" >&2; exit 2; }
work="${out%.txt}.d"
mkdir -p "$work" || { echo "anchor_gpu.sh: cannot create $work" >&2; exit 2; }
start=$SECONDS
budget=230 # seconds for the whole script; every step gets what is left, at most its own cap
left() { local l=$((budget - (SECONDS - start))); [ $l -lt 5 ] && l=5; echo $l; }
cap() { local l; l=$(left); [ "$l" -gt "$1" ] && echo "$1" || echo "$l"; }
py=python3; [ -x /usr/bin/python3 ] && py=/usr/bin/python3

# ---- build (only what is missing) ------------------------------------------------------------------------
perftest="$build/perftest/gdx_perftest"
nccl_bin="$build/bench/nccl_anchor"
targets=(gdx_perftest)
grep -qs "nccl_anchor" bench/CMakeLists.txt && targets+=(nccl_anchor)
need_build=0
for t in "${targets[@]}"; do
  case "$t" in gdx_perftest) [ -x "$perftest" ] || need_build=1 ;; nccl_anchor) [ -x "$nccl_bin" ] || need_build=1 ;; esac
done
if [ $need_build = 1 ]; then
  gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
  echo "anchor_gpu.sh: building ${targets[*]} in $build (at most ${build_timeout}s)"
  if [ ! -f "$build/CMakeCache.txt" ]; then
    timeout "$build_timeout" cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGDX_BUILD_UCT=OFF \
      > "$work/build.log" 2>&1 || { tail -20 "$work/build.log"; echo "anchor_gpu.sh: configure failed" >&2; exit 1; }
  fi
  timeout "$build_timeout" cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" >> "$work/build.log" 2>&1 ||
    { tail -30 "$work/build.log"; echo "anchor_gpu.sh: build failed or took over ${build_timeout}s (log: $work/build.log)" >&2; exit 1; }
  start=$SECONDS # the run budget starts after the build
fi
[ -x "$perftest" ] || { echo "anchor_gpu.sh: $perftest missing after the build" >&2; exit 1; }

# ---- header ----------------------------------------------------------------------------------------------
ngpu=0
if command -v nvidia-smi >/dev/null; then
  ngpu=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | grep -c . || true)
fi
{
  echo "# anchor_gpu: NCCL and gdx_perftest, same sizes"
  echo "# command: $cmdline"
  echo "# date: $(date -u +%FT%TZ)"
  echo "# machine: $(uname -srm), $(nproc) cores, $(git rev-parse --short HEAD 2>/dev/null || echo '?') $(git diff --quiet 2>/dev/null || echo '(+ local changes)')"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id --format=csv,noheader 2>&1 | sed 's/^/# gpu: /'
    nvidia-smi topo -m 2>/dev/null | sed 's/^/# topo: /' | head -12
  else
    echo "# gpu: nvidia-smi not found"
  fi
  echo "# sizes: $sizes"
} > "$out"

# ---- runs --------------------------------------------------------------------------------------------------
notes="$work/notes.txt"
: > "$notes"
run_gdx() { # name, then gdx_perftest arguments
  local name=$1; shift
  local t; t=$(cap 60)
  if timeout -k 5 "$t" "$perftest" --loopback -t put_bw,put_lat -s "$sizes" --no-decisions --timeout 30 \
       --json "$work/$name.json" "$@" > "$work/$name.txt" 2>&1; then
    return 0
  fi
  echo "$name: n/a: gdx_perftest $* failed (exit $?): $(grep -m1 'gdx_perftest' "$work/$name.txt" || tail -1 "$work/$name.txt")" >> "$notes"
  rm -f "$work/$name.json"
  return 1
}

if [ "$ngpu" -ge 2 ]; then
  run_gdx g0g1 -m cuda:0 -M cuda:1
  run_gdx staged -m cuda:0 -M cuda:1 --path staged
else
  echo "g0g1, staged: n/a: $ngpu GPU(s) here, these need 2" >> "$notes"
fi
if [ "$ngpu" -ge 1 ]; then
  run_gdx g0g0 -m cuda:0 -M cuda:0
  run_gdx h2g0 -m host -M cuda:0 -x shm
else
  echo "g0g0, h2g0: n/a: no GPU here ($("$perftest" --loopback -m cuda:0 -s 8 2>&1 | head -1))" >> "$notes"
  run_gdx host -m host -M host # so the table is never empty: host memory over shm
fi

# NCCL: the intranode harness, same sizes, GPU0 <-> GPU1.
if [ "$ngpu" -lt 2 ]; then
  echo "nccl: n/a: NCCL send/recv needs 2 GPUs ($ngpu here)" >> "$notes"
elif [ ! -x "$nccl_bin" ]; then
  echo "nccl: n/a: $nccl_bin not built (bench/nccl_anchor.cpp not in this tree, or NCCL not found at build time)" >> "$notes"
else
  t=$(cap 90)
  if ! timeout -k 5 "$t" "$nccl_bin" --sizes "$sizes" --json "$work/nccl.json" > "$work/nccl.txt" 2>&1; then
    echo "nccl: n/a: $nccl_bin failed (exit $?): $(tail -1 "$work/nccl.txt")" >> "$notes"
    rm -f "$work/nccl.json"
  fi
fi

# ---- one table ----------------------------------------------------------------------------------------------
"$py" - "$work" "$sizes" >> "$out" <<'PY'
import json, math, os, sys
work, sizes = sys.argv[1], sys.argv[2]

def parse_size(s):
    s = s.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1]] if s and s[-1] in mult else int(s)

def label(n):
    for sh, u in ((30, "G"), (20, "M"), (10, "K")):
        if n >= 1 << sh and n % (1 << sh) == 0:
            return "%d%s" % (n >> sh, u)
    return str(n)

def load(name):
    p = os.path.join(work, name + ".json")
    try:
        with open(p) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None

cols = [("gdx g0->g1", "g0g1"), ("gdx staged", "staged"), ("gdx g0->g0", "g0g0"), ("gdx h->g0", "h2g0"),
        ("gdx host", "host")]
data = {}
for title, name in cols:
    doc = load(name)
    if doc is None:
        continue
    for r in doc.get("rows", []):
        key = (title, r["test"], int(r["size"]))
        data[key] = r
nccl = load("nccl")
nccl_rows = {}
if nccl is not None:
    # Accepts {"rows": [{"size": N, "bw_GBps": x, "time_us": y}, ...]} (bench/nccl_anchor --json).
    for r in nccl.get("rows", []):
        try:
            nccl_rows[int(r["size"])] = r
        except (KeyError, ValueError, TypeError):
            pass
present = [t for t, n in cols if any(k[0] == t for k in data)]
hdr = ["size", "nccl GB/s", "nccl us"]
for t in present:
    hdr += [t + " GB/s", t + " lat us", t + " path"]
rows = []
for s in [parse_size(x) for x in sizes.split(",") if x.strip()]:
    row = [label(s)]
    n = nccl_rows.get(s)
    fmt = lambda v, p=2: ("%.*f" % (p, v)) if isinstance(v, (int, float)) and math.isfinite(v) else "n/a"
    row += [fmt(n.get("bw_GBps")) if n else "n/a", fmt(n.get("time_us")) if n else "n/a"]
    for t in present:
        bw = data.get((t, "put_bw", s))
        lat = data.get((t, "put_lat", s))
        row += [fmt(bw["bw_GBps"]) if bw else "n/a",
                fmt(lat["lat_us"]["avg"]) if lat and isinstance(lat.get("lat_us"), dict) else "n/a",
                ((bw or lat or {}).get("transport", "?") + ":" + (bw or lat or {}).get("path_kind", "n/a")
                 if (bw or lat) else "n/a") + (" !" if (bw and bw.get("warning")) else "")]
    rows.append(row)
widths = [max(len(str(r[i])) for r in rows + [hdr]) for i in range(len(hdr))]
print("#")
print("  ".join(h.rjust(w) for h, w in zip(hdr, widths)))
for r in rows:
    print("  ".join(str(c).rjust(w) for c, w in zip(r, widths)))
print("# GB/s = 1e9 bytes/s; gdx lat = one-way (half the put+notify round trip); path = transport:what gdx")
print("# reported (direct / staged / mixed; '!' = above the path's sanity limit, see the JSON's warning).")
PY
{
  if [ -s "$notes" ]; then echo "# not measured:"; sed 's/^/#   /' "$notes"; fi
  for f in "$work"/*.txt; do
    [ "$(basename "$f")" = notes.txt ] || [ "$(basename "$f")" = build.log ] && continue
    grep -h "^# decision\|WARNING\|warning" "$f" 2>/dev/null | head -5 | sed "s|^|# $(basename "$f" .txt): |"
  done
  echo "# raw output and JSON: $work ($(( SECONDS - start ))s)"
} >> "$out"
cat "$out"
