#!/usr/bin/env bash
# The GPU anchor: the same message sizes through NCCL (bench/nccl_anchor, the intranode harness) and through
# gdx_perftest, printed as one table, so gdx's GPU figures sit next to a reference every GPU user trusts.
# One non-interactive command, bounded in time: under 4 minutes once the two binaries exist (a first build of
# just those two targets is bounded separately by --build-timeout).
#
#   bench/anchor_gpu.sh [--out FILE] [--build DIR] [--gpus A,B] [--build-timeout S]
#     --out FILE   the report (default bench/results/anchor-gpu-<UTC time>.txt); also printed; raw output and
#                  gdx_perftest's JSON go to FILE's name with .d instead of .txt
#     --build DIR  build tree to use, or create (default build-gpu, as scripts/device-run.sh)
#     --gpus A,B   the GPU pair (default 0,1)
#
# Pairs of columns, GPU A -> GPU B, each NCCL mode next to the gdx path that does the same thing:
#   nccl p2p     | gdx cuda_ipc   NVLink / PCIe peer-to-peer         (gdx_perftest -x cuda_ipc)
#   nccl shm     | gdx staged     through pinned host memory         (gdx_perftest -x shm: GPU memory staged)
#   nccl socket  | gdx tcp        through the network stack, loopback (gdx_perftest -x tcp: GPU memory staged)
# Rows: the harness's sizes: latency at 1 KiB (half a round trip, us) and bandwidth 64 KiB..256 MiB (GB/s =
# 1e9 B/s, the receiver's view). gdx's cells carry the path gdx reported (direct / staged / mixed), and '!' when
# a figure is above that path's sanity limit. With one GPU only gdx's same-GPU figures are measured (NCCL
# needs two); without a GPU, host memory over shm, so the command still says what it could do. Every column
# that could not run says n/a, and why, under the table.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out="" build=build-gpu gpus=0,1 build_timeout=200
cmdline="$0 $*"
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --gpus) gpus="$2"; shift 2 ;;
    --build-timeout) build_timeout="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "anchor_gpu.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case "$gpus" in [0-9]*,[0-9]*) ;; *) echo "anchor_gpu.sh: --gpus takes A,B (e.g. 0,1), not '$gpus'" >&2; exit 2 ;; esac
ga=${gpus%,*} gb=${gpus#*,}
[ -n "$out" ] || out="bench/results/anchor-gpu-$(date -u +%Y%m%d-%H%M%S).txt"
work="${out%.txt}.d"
mkdir -p "$(dirname "$out")" "$work" || { echo "anchor_gpu.sh: cannot create $work" >&2; exit 2; }
py=python3; [ -x /usr/bin/python3 ] && py=/usr/bin/python3

# ---- build (only what is missing) ------------------------------------------------------------------------
perftest="$build/perftest/gdx_perftest"
nccl_bin="$build/bench/nccl_anchor"
targets=()
[ -x "$perftest" ] || targets+=(gdx_perftest)
[ -x "$nccl_bin" ] || { grep -qs nccl_anchor bench/CMakeLists.txt && targets+=(nccl_anchor); }
if [ ${#targets[@]} -gt 0 ]; then
  gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
  echo "anchor_gpu.sh: building ${targets[*]} in $build (at most ${build_timeout}s; log $work/build.log)"
  if [ ! -f "$build/CMakeCache.txt" ]; then
    timeout "$build_timeout" cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGDX_BUILD_UCT=OFF \
      > "$work/build.log" 2>&1 || { tail -20 "$work/build.log"; echo "anchor_gpu.sh: configure failed" >&2; exit 1; }
  fi
  timeout "$build_timeout" cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" >> "$work/build.log" 2>&1 ||
    { tail -30 "$work/build.log"; echo "anchor_gpu.sh: build failed or took over ${build_timeout}s" >&2; exit 1; }
fi
[ -x "$perftest" ] || { echo "anchor_gpu.sh: $perftest missing after the build" >&2; exit 1; }

start=$SECONDS
budget=225 # the measurement, all steps together; each step gets at most what is left
cap() { local l=$((budget - (SECONDS - start))); [ $l -lt 5 ] && l=5; [ "$l" -gt "$1" ] && echo "$1" || echo "$l"; }

# ---- header ----------------------------------------------------------------------------------------------
ngpu=0
command -v nvidia-smi >/dev/null && ngpu=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | grep -c . || true)
{
  echo "# anchor_gpu: NCCL and gdx_perftest at the same sizes, GPU $ga -> GPU $gb"
  echo "# command: $cmdline"
  echo "# date: $(date -u +%FT%TZ)"
  echo "# machine: $(uname -n), $(uname -srm), $(nproc) cores; gdx $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD 2>/dev/null || echo ' + local changes')"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id --format=csv,noheader 2>&1 | sed 's/^/# gpu: /'
    nvidia-smi topo -m 2>/dev/null | head -8 | sed 's/^/# topo: /'
  else
    echo "# gpu: nvidia-smi not found"
  fi
} > "$out"
notes="$work/notes.txt"
: > "$notes"

# ---- NCCL first: its sizes are the table's ---------------------------------------------------------------
for m in p2p shm socket; do
  if [ "$ngpu" -lt 2 ]; then
    echo "nccl $m: n/a: NCCL send/recv needs 2 GPUs ($ngpu here)" >> "$notes"
  elif [ ! -x "$nccl_bin" ]; then
    echo "nccl $m: n/a: $nccl_bin not built (bench/nccl_anchor.cpp missing from this tree?)" >> "$notes"
  elif ! timeout -k 5 "$(cap 30)" "$nccl_bin" --mode "$m" --gpus "$gpus" > "$work/nccl-$m.txt" 2>&1; then
    echo "nccl $m: n/a: nccl_anchor --mode $m failed (exit $?): $(tail -1 "$work/nccl-$m.txt")" >> "$notes"
  elif grep -q "| skipped" "$work/nccl-$m.txt"; then
    echo "nccl $m: n/a: $(grep -m1 '| skipped' "$work/nccl-$m.txt" | awk -F'|' '{print $NF}' | sed 's/^ *//')" >> "$notes"
  fi
done
# Sizes NCCL printed ("64KiB" -> 64K), else the harness's own list.
bw_sizes=$(cat "$work"/nccl-*.txt 2>/dev/null | awk -F'|' '$3 ~ /bw/ {gsub(/ /,"",$4); print $4}' | sort -u |
           sed 's/KiB$/K/; s/MiB$/M/; s/GiB$/G/; s/B$//' | sort -h | paste -sd, -)
[ -n "$bw_sizes" ] || bw_sizes="64K,1M,16M,256M"
lat_size=1K

# ---- gdx_perftest: the same sizes, the matching paths ----------------------------------------------------
run_gdx() { # column name, then gdx_perftest arguments
  local name=$1; shift
  local args=(--loopback -t put_bw,put_lat -s "$lat_size,$bw_sizes" --no-decisions --timeout 30 --json "$work/$name.json" "$@")
  local rc=0
  timeout -k 5 "$(cap 60)" "$perftest" "${args[@]}" > "$work/$name.txt" 2>&1 || rc=$?
  [ $rc = 0 ] && return 0
  echo "$name: n/a: gdx_perftest ${args[*]} failed (exit $rc$([ $rc = 124 ] && echo ', timed out')): $(grep -m1 '^gdx_perftest' "$work/$name.txt" || tail -1 "$work/$name.txt")" >> "$notes"
  rm -f "$work/$name.json"
}
if [ "$ngpu" -ge 2 ]; then
  run_gdx cuda_ipc -m "cuda:$ga" -M "cuda:$gb" -x cuda_ipc
  run_gdx staged -m "cuda:$ga" -M "cuda:$gb" -x shm --path staged
  run_gdx tcp -m "cuda:$ga" -M "cuda:$gb" -x tcp
elif [ "$ngpu" -eq 1 ]; then
  echo "gdx GPU $ga -> GPU $gb: n/a: 1 GPU here; measured GPU 0 -> GPU 0 instead (columns marked g0->g0)" >> "$notes"
  run_gdx cuda_ipc -m cuda:0 -M cuda:0 -x cuda_ipc
  run_gdx staged -m cuda:0 -M cuda:0 -x shm --path staged
  run_gdx tcp -m cuda:0 -M cuda:0 -x tcp
else
  echo "gdx GPU columns: n/a: no GPU here; host -> host over shm measured instead (column 'gdx host', to 16M)" >> "$notes"
  bw_sizes=$(echo "$bw_sizes" | tr , '\n' | awk '{n=$0; m=1; if (n ~ /K$/) m=1024; if (n ~ /M$/) m=1048576; if (n ~ /G$/) m=1073741824; sub(/[KMG]$/,"",n); if (n*m <= 16777216) print $0}' | paste -sd, -)
  run_gdx host -m host -M host -x shm
fi

# ---- one table -------------------------------------------------------------------------------------------
"$py" - "$work" "$lat_size,$bw_sizes" "$ngpu" >> "$out" <<'PY'
import json, math, os, re, sys
work, sizes, ngpu = sys.argv[1], sys.argv[2], int(sys.argv[3])

def parse_size(s):
    s = s.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1]] if s and s[-1] in mult else int(s)

def label(n):
    for sh, u in ((30, "G"), (20, "M"), (10, "K")):
        if n >= 1 << sh and n % (1 << sh) == 0:
            return "%d%s" % (n >> sh, u)
    return str(n)

def nccl_rows(mode):
    rows = {}
    try:
        lines = open(os.path.join(work, "nccl-%s.txt" % mode)).read().splitlines()
    except OSError:
        return rows
    for l in lines:
        f = [x.strip() for x in l.split("|")]
        if len(f) < 5 or not f[1].startswith("nccl") or f[2] not in ("bw", "lat"):
            continue
        m = re.match(r"([\d.]+)", f[4])
        sz = re.match(r"(\d+)(KiB|MiB|GiB|B)$", f[3])
        if not m or not sz:
            continue
        n = int(sz.group(1)) * {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[sz.group(2)]
        rows[(f[2], n)] = float(m.group(1))
    return rows

def gdx_rows(name):
    try:
        doc = json.load(open(os.path.join(work, name + ".json")))
    except (OSError, ValueError):
        return None
    rows = {}
    for r in doc.get("rows", []):
        metric = "lat" if r["test"] == "put_lat" else "bw"
        v = r["lat_us"]["avg"] if metric == "lat" and isinstance(r.get("lat_us"), dict) else r.get("bw_GBps")
        if isinstance(v, (int, float)) and math.isfinite(v):
            rows[(metric, int(r["size"]))] = (v, r.get("path_kind", "?"), bool(r.get("warning")))
    return rows

pairs = [("p2p", "cuda_ipc"), ("shm", "staged"), ("socket", "tcp")] if ngpu >= 1 else [(None, "host")]
suffix = " g0->g0" if ngpu == 1 else ""
cols, data = [], {}
for nccl_mode, gdx_name in pairs:
    if nccl_mode is not None:
        cols.append(("nccl " + nccl_mode, "nccl", nccl_rows(nccl_mode)))
    cols.append(("gdx " + gdx_name + suffix, "gdx", gdx_rows(gdx_name)))

lat_size, *bw = [parse_size(x) for x in sizes.split(",") if x.strip()]
keys = [("lat", lat_size)] + [("bw", s) for s in bw]
hdr = ["metric", "size"] + [c[0] for c in cols]
table = []
for metric, size in keys:
    row = [("lat us" if metric == "lat" else "bw GB/s"), label(size)]
    for title, kind, rows in cols:
        if rows is None or (metric, size) not in rows:
            row.append("n/a")
        elif kind == "nccl":
            row.append("%.2f" % rows[(metric, size)])
        else:
            v, path, warned = rows[(metric, size)]
            row.append("%.2f %s%s" % (v, path, " !" if warned else ""))
    table.append(row)
w = [max(len(str(r[i])) for r in table + [hdr]) for i in range(len(hdr))]
print("#")
print("  ".join(h.rjust(x) for h, x in zip(hdr, w)))
for r in table:
    print("  ".join(str(c).rjust(x) for c, x in zip(r, w)))
print("#")
print("# lat: half a round trip at 1 KiB (nccl: send/recv ping-pong with stream sync, median; gdx: put + completion")
print("#      + notify, each way, average); bw: receiver's view (nccl: N sends then a 1-byte answer, median of 3;")
print("#      gdx: put_bw, every put complete at the destination, one run). gdx cells: value and the path gdx")
print("#      reported; '!' = above the path's sanity limit (the JSON's warning says which).")
PY
{
  if [ -s "$notes" ]; then echo "# not measured:"; sed 's/^/#   /' "$notes"; fi
  echo "# raw output and JSON: $work (measurement took $(( SECONDS - start ))s)"
} >> "$out"
cat "$out"
