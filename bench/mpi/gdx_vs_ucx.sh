#!/usr/bin/env bash
# gdx_mpi_bench with gdx loaded (tools/gdx-run: --tls LIST, or its default, UCX's transports plus gdx's for what UCX
# lacks) against UCX alone (pml ucx over UCX's own transports), in alternating rounds in one script, so both see the
# same machine load. Prints every
# run, the median per (test, size) over the rounds, then one line per bar:
#   bar <test> <size> ...: gdx <value> vs ucx <value> = <ratio>x (bar >= B: met|MISSED)
# higher ratio is better: gdx/ucx for bandwidth, ucx/gdx for latency (latency <= 1.03x of UCX's is ratio >= 0.971).
# Every mpirun runs under `timeout`. Raw logs and CSVs go to --out (default: a new directory under /tmp).
#
#   bench/mpi/gdx_vs_ucx.sh [options] [-- extra gdx_mpi_bench options]
#     --tls LIST        gdx transports (gdx-run --tls; default gdx_shm); "default": gdx-run's own choice (no --tls);
#                       "ucx-alone": the "gdx" side runs UCX alone too (an A/A run: what the bar lines read as
#                       noise on this machine)
#     --ucx-tls LIST    UCX_TLS of the UCX-alone runs (default sm,self; e.g. tcp,self or sm,self,cuda_copy)
#     -m, --mem KIND    host|cuda, buffers of ranks 0..N/2-1 (default host)
#     -M, --rmem KIND   host|cuda, buffers of ranks N/2..N-1 (default host)
#     -n, --np N        ranks (default 2; 8 = 4 pairs, 16 = 8 pairs)
#     -r, --rounds N    rounds, each one gdx run and one UCX run, order alternating (default 3)
#     --min SIZE, --max SIZE   message sizes (default 1 .. 4M)
#     -t, --tests LIST  lat,bw,bibw,mbw_mr (default all)
#     --gdx-env V=X     environment for the gdx runs only (repeatable; e.g. GDX_P2P=no for the P2P-off bar)
#     --ucx-env V=X     environment for the UCX-alone runs only (repeatable; e.g. UCX_NET_DEVICES=lo)
#     --bw-bar X        bandwidth bar, gdx/ucx (default 0.97; 1.3 for the P2P-off bar)
#     --lat-bar X       latency bar, gdx latency / ucx latency at most X (default 1.03)
#     --bar-from SIZE   bar lines only from this size up (default 1; 256K for the P2P-off bar)
#     --oversubscribe   pass --oversubscribe to mpirun (more ranks than cores: timings then mean nothing)
#     --build DIR       build tree (default build); --out DIR; --timeout SECONDS per mpirun (default 600)
# Examples:
#   bench/mpi/gdx_vs_ucx.sh --tls gdx_shm --ucx-tls sm,self --max 4M
#   bench/mpi/gdx_vs_ucx.sh --tls gdx_tcp --ucx-tls tcp,self
#   bench/mpi/gdx_vs_ucx.sh -m cuda -M cuda --tls gdx_ipc --gdx-env GDX_P2P=no --ucx-tls sm,self,cuda_copy \
#       --bw-bar 1.3 --bar-from 256K -t bw,bibw,mbw_mr
set -u
cd "$(dirname "$0")/../.."
TLS=gdx_shm UCXTLS=sm,self SMEM=host RMEM=host NP=2 ROUNDS=3 MIN=1 MAX=4M TESTS=all BWBAR=0.97 LATBAR=1.03
BARFROM=1 OVER=() BUILD=build OUT="" TMO=600 GDXENV=() UCXENV=() EXTRA=()
CMD="$0 $*"
while [ $# -gt 0 ]; do
  case "$1" in
    --tls) TLS=$2; shift ;;
    --ucx-tls) UCXTLS=$2; shift ;;
    -m|--mem) SMEM=$2; shift ;;
    -M|--rmem) RMEM=$2; shift ;;
    -n|--np) NP=$2; shift ;;
    -r|--rounds) ROUNDS=$2; shift ;;
    --min) MIN=$2; shift ;;
    --max) MAX=$2; shift ;;
    -t|--tests) TESTS=$2; shift ;;
    --gdx-env) GDXENV+=("$2"); shift ;;
    --ucx-env) UCXENV+=("$2"); shift ;;
    --bw-bar) BWBAR=$2; shift ;;
    --lat-bar) LATBAR=$2; shift ;;
    --bar-from) BARFROM=$2; shift ;;
    --oversubscribe) OVER=(--oversubscribe) ;;
    --build) BUILD=$2; shift ;;
    --out) OUT=$2; shift ;;
    --timeout) TMO=$2; shift ;;
    -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    --) shift; EXTRA=("$@"); break ;;
    *) echo "gdx_vs_ucx.sh: unknown option $1 (--help)" >&2; exit 2 ;;
  esac
  shift
done
BENCH=$BUILD/bench/mpi/gdx_mpi_bench
[ -x "$BENCH" ] || { echo "gdx_vs_ucx.sh: $BENCH not built (cmake --build $BUILD --target gdx_mpi_bench)" >&2; exit 2; }
command -v mpirun >/dev/null || { echo "gdx_vs_ucx.sh: no mpirun" >&2; exit 2; }
[ -n "$OUT" ] || OUT=$(mktemp -d /tmp/gdx_vs_ucx.XXXXXX)
mkdir -p "$OUT"
ARGS=(-t "$TESTS" -m "$SMEM" -M "$RMEM" --min "$MIN" --max "$MAX" "${EXTRA[@]}")
ENVX=() # -x NAME for every --gdx-env / --ucx-env variable (mpirun forwards it to the ranks)
first_tl=${TLS%%,*}
RUNTLS=(--tls "$TLS")
if [ "$TLS" = default ]; then RUNTLS=(); fi   # counted by gdx-run's decision line instead (run_one)

echo "# $CMD"
echo "# date $(date -u +%Y-%m-%dT%H:%M:%SZ); git $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet 2>/dev/null || echo ' (dirty tree)')"
echo "# uname: $(uname -a)"
echo "# nproc $(nproc); uptime before:$(uptime)"
echo "# UCX $(ucx_info -v 2>/dev/null | awk 'NR==1{print $NF}'); $(mpirun --version 2>/dev/null | head -1)"
echo "# gdx: tools/gdx-run --tls $TLS mpirun ... ${GDXENV[*]:+(env ${GDXENV[*]})}"
echo "# ucx: mpirun --mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any -x UCX_TLS=$UCXTLS ... ${UCXENV[*]:+(env ${UCXENV[*]})}"
echo "# ranks $NP, memory $SMEM -> $RMEM, sizes $MIN..$MAX, tests $TESTS, rounds $ROUNDS, bench args: ${ARGS[*]}"
echo "# raw logs and CSVs: $OUT"

run_one() { # run_one gdx|ucx ROUND -> prints one status line
  local who=$1 round=$2 log csv rc t0 tl env=() x=()
  log=$OUT/$who-r$round.log csv=$OUT/$who-r$round.csv
  if [ "$who" = gdx ]; then env=("${GDXENV[@]}"); else env=("${UCXENV[@]}"); fi
  for v in "${env[@]}"; do x+=(-x "${v%%=*}"); done
  t0=$(date +%s)
  (
    echo "# round $round, $who, uptime before:$(uptime)"
    if [ "$who" = gdx ] && [ "$TLS" != ucx-alone ]; then
      env UCX_LOG_LEVEL=info "${env[@]}" timeout "$TMO" tools/gdx-run "${RUNTLS[@]}" mpirun --allow-run-as-root \
        "${OVER[@]}" -np "$NP" -x UCX_LOG_LEVEL "${x[@]}" "$BENCH" "${ARGS[@]}" -l gdx --csv "$csv"
    else
      env UCX_LOG_LEVEL=info "${env[@]}" timeout "$TMO" mpirun --allow-run-as-root "${OVER[@]}" -np "$NP" \
        --mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any -x UCX_TLS="$UCXTLS" -x UCX_LOG_LEVEL \
        "${x[@]}" "$BENCH" "${ARGS[@]}" -l "$who" --csv "$csv"
    fi
    rc=$?
    echo "# exit $rc (124: timed out), uptime after:$(uptime)"
    exit $rc
  ) >"$log" 2>&1
  rc=$?
  tl=$(grep -o 'ep_cfg\[[0-9]*\]: tag([^)]*)' "$log" | sed 's/.*tag(//; s/)//' | tr ' ' '\n' | grep -v '^self/' |
       sort -u | tr '\n' ' ')
  local note=""
  [ "$rc" = 124 ] && note=" TIMED OUT (hang?)"
  [ "$rc" = 1 ] && note=" VALIDATION ERRORS: $(grep -E 'bytes wrong|VALIDATION' "$log" | head -1 | cut -c1-160)"
  if [ "$TLS" = ucx-alone ]; then
    [ "$who" = ucx ] || note="$note [A/A: UCX alone on both sides, the noise floor]"
  elif [ "$who" = gdx ] && [ "$TLS" = default ]; then
    # gdx-run's default may leave every lane to UCX's transports: what counts is that it ran and said what it chose.
    if ! grep -q "^gdx-run: UCX's own transports" "$log"; then
      note="$note NO gdx-run DECISION LINE (module not loaded?): not counted"
      rm -f "$csv"
    else
      note="$note [$(grep -m1 "^gdx-run: UCX's own transports" "$log" | cut -c10-)]"
    fi
  elif [ "$who" = gdx ] && ! grep -qE "tag\([^)]*$first_tl" "$log"; then
    note="$note NOT ON $first_tl (module not loaded?): not counted"
    rm -f "$csv"
  fi
  [ -s "$csv" ] || note="$note (no rows)"
  printf "round %s %-3s exit %-3s %4ss load %-5s lanes: %s%s\n" "$round" "$who" "$rc" $(( $(date +%s) - t0 )) \
    "$(cut -d' ' -f1 /proc/loadavg)" "$tl" "$note"
}

for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then run_one gdx "$r"; run_one ucx "$r"; else run_one ucx "$r"; run_one gdx "$r"; fi
done
echo "# uptime after:$(uptime)"

AA=$([ "$TLS" = ucx-alone ] && echo 1 || echo 0) python3 - "$OUT" "$BWBAR" "$LATBAR" "$BARFROM" "$NP" "$SMEM" "$RMEM" <<'EOF'
import csv, glob, os, statistics, sys
out, bwbar, latbar, barfrom, np_, smem, rmem = sys.argv[1:8]
bwbar, latbar = float(bwbar), float(latbar)
def size_of(s):
    m = {'K': 1 << 10, 'M': 1 << 20, 'G': 1 << 30}
    s = s.rstrip('B').rstrip('i')
    return int(s[:-1]) * m[s[-1].upper()] if s[-1].upper() in m else int(s)
barfrom = size_of(barfrom)
vals, errs = {}, {}
for f in sorted(glob.glob(os.path.join(out, '*-r*.csv'))):
    who = os.path.basename(f).split('-')[0]
    for row in csv.DictReader(open(f)):
        k = (row['test'], int(row['size']))
        vals.setdefault((who,) + k, []).append(float(row['value']))
        if int(row['errors']) or int(row['bad_msgs']):
            errs.setdefault(who, []).append('%s %s B (%s)' % (row['test'], row['size'], os.path.basename(f)))
order = {'lat': 0, 'bw': 1, 'bibw': 2, 'mbw_mr': 3}
keys = sorted({k[1:] for k in vals}, key=lambda k: (order.get(k[0], 9), k[1]))
print('\n# medians over the rounds (lat: us, lower is better; others MB/s, higher is better); n = runs counted')
print('%-7s %10s %12s %12s %8s %5s' % ('test', 'size', 'gdx', 'ucx', 'ratio', 'n'))
bars = []
for t, s in keys:
    g, u = vals.get(('gdx', t, s)), vals.get(('ucx', t, s))
    gm = statistics.median(g) if g else None
    um = statistics.median(u) if u else None
    ratio = None
    if gm and um:
        ratio = um / gm if t == 'lat' else gm / um
    print('%-7s %10d %12s %12s %8s %2d/%-2d' % (t, s, '%.3f' % gm if gm is not None else '-',
          '%.3f' % um if um is not None else '-', '%.3fx' % ratio if ratio else '-', len(g or []), len(u or [])))
    if ratio is not None and s >= barfrom:
        need = 1.0 / latbar if t == 'lat' else bwbar
        unit = 'us' if t == 'lat' else 'MB/s'
        # an A/A run (--tls ucx-alone) has no bar: its lines say how far two UCX-alone runs differ here
        tag = 'noise' if os.environ.get('AA') == '1' else 'bar'
        bars.append('%s %s %d B np%s %s->%s: gdx %.3f vs ucx %.3f = %.3fx (%s, bar >= %.3fx: %s)' % (
            tag, t, s, np_, smem, rmem, gm, um, ratio, unit, need, 'met' if ratio >= need else 'MISSED'))
print()
for b in bars:
    print(b)
missed = sum('MISSED' in b for b in bars)
print('\n# bars: %d of %d met' % (len(bars) - missed, len(bars)))
for who in ('gdx', 'ucx'):
    if who in errs:
        print('# VALIDATION ERRORS with %s: %s' % (who, '; '.join(errs[who])))
    else:
        print('# validation with %s: no errors in the runs counted' % who)
EOF
