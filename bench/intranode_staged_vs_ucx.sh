#!/usr/bin/env bash
# Staged GPU memory between two processes of one host, through the product's own path, next to UCX built
# with CUDA, in one run (issue [intranode-staging]'s bars). One GPU, two processes on it, MPS on (without it the
# two contexts time-slice and every small operation costs ~150 us: a scheduler figure, not a software one).
#
#   bench/intranode_staged_vs_ucx.sh --out FILE [--build DIR] [--gpu N] [--rounds N]
#        [--ucx-prefix DIR] [--gdx-env "VAR=V ..."]
#        [--baseline-perftest PATH] [--ab-env "VAR=V ..."]
#
# Per round, alternating (so drift on the shared machine hits both alike):
#   gdx  gdx_perftest --loopback -x shm -m cuda:G -M cuda:G  put_bw 1M, 256M; put_lat 8 B  (gdx_put -> engine -> shm)
#   ucx  ucx_perftest, UCX_TLS=sm,cuda_copy, -m cuda,cuda     tag_bw 1M, 256M; tag_lat 8 B
#   ceil staging_bench --mode null --mem cuda --stage both    256M (the staging pipeline alone, both sides on one GPU)
#   base the same gdx rows from --baseline-perftest (another tree's gdx_perftest), when given: `check ...` lines
#        then compare this tree with it (a restructuring must stay within noise of before)
#   ab   with --ab-env: put_lat 8 B once more with those variables set (`diagnosis` lines: what a knob's path costs)
# Medians over the rounds make the table; the last lines are one `bar ...` line per bar of the issue.
# UCX: --ucx-prefix names an install with CUDA (bin/ucx_perftest): Debian's UCX 1.13.1 built with CUDA by
# scripts/ucx-build.sh (/tmp/ucx-deb).
# GB/s = 1e9 B/s everywhere (ucx_perftest's MB/s are MiB/s and are converted).
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out="" build=build-gpu gpu=0 rounds=3 ucx_prefix="" gdx_env="" base_perftest="" ab_env=""
cmdline="$0 $*"
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --gpu) gpu="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --ucx-prefix) ucx_prefix="$2"; shift 2 ;;
    --gdx-env) gdx_env="$2"; shift 2 ;;
    --baseline-perftest) base_perftest="$2"; shift 2 ;;
    --ab-env) ab_env="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "intranode_staged_vs_ucx.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$out" ] || { echo "intranode_staged_vs_ucx.sh: --out FILE is required" >&2; exit 2; }
work="${out%.txt}.d"
mkdir -p "$(dirname "$out")" "$work" || exit 2
exec > >(tee "$out") 2>&1

echo "# command: $cmdline"
echo "# date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')  host: $(hostname)  cpus: $(nproc)"
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/# gpu: /'

# ---- builds (gdx and UCX at once) ---------------------------------------------------------------------------
t0=$(date +%s)
(
  gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
  [ -f "$build/CMakeCache.txt" ] || cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGDX_BUILD_UCT=OFF
  cmake --build "$build" -j "$(nproc)" --target gdx_perftest staging_bench
) > "$work/gdx-build.log" 2>&1 &
gdx_build=$!
wait "$gdx_build" || { tail -30 "$work/gdx-build.log"; echo "# gdx build failed"; exit 1; }
echo "# builds: $(( $(date +%s) - t0 )) s; UCX: ${ucx_prefix:-none}"
perftest="$build/perftest/gdx_perftest" sbench="$build/bench/staging_bench"
ucxp=""; [ -n "$ucx_prefix" ] && [ -x "$ucx_prefix/bin/ucx_perftest" ] && ucxp="$ucx_prefix/bin/ucx_perftest"
[ -n "$ucxp" ] && LD_LIBRARY_PATH="$ucx_prefix/lib" "$ucx_prefix/bin/ucx_info" -v | sed 's/^/# ucx: /'

# ---- MPS ----------------------------------------------------------------------------------------------------
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
mpsctl=$(command -v nvidia-cuda-mps-control || echo /usr/local/nvidia/bin/nvidia-cuda-mps-control)
mps_started=0
if [ -x "$mpsctl" ] && "$mpsctl" -d; then mps_started=1; echo "# MPS daemon started by this script ($mpsctl -d)"; sleep 1
else echo "# MPS could not be started: two processes on one GPU time-slice; figures are not representative"; fi
stop_mps() { [ $mps_started = 1 ] && echo quit | "$mpsctl" && echo "# MPS daemon stopped"; }
trap stop_mps EXIT

# ---- runs ---------------------------------------------------------------------------------------------------
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# gdx TEST SIZE [PERFTEST] -> "GBps" (bw) or "p50_us" (lat) and the path, from gdx_perftest's CSV
gdx_run() {
  local test="$1" size="$2" bin="${3:-$perftest}" line
  # Timed without --validate (its per-iteration fill and check would be timed too; ucx_perftest checks nothing);
  # the bytes are checked by the validated pass after the rounds.
  line=$(env $gdx_env timeout 120 "$bin" --loopback -x shm -m "cuda:$gpu" -M "cuda:$gpu" -t "$test" -s "$size" \
         --csv --no-decisions 2>>"$work/gdx-stderr.log" | tee -a "$work/gdx-raw.csv" | grep "^$test,")
  [ -n "$line" ] || { echo "n/a"; return; }
  # csv: test,size,iterations,warmup,window,local_mem,remote_mem,transport,device,"path",staged_share,bw,...,p50 (16)
  python3 - "$line" "$test" <<'EOF'
import csv, sys
r = next(csv.reader([sys.argv[1]]))
print((r[15] if sys.argv[2].endswith("lat") else r[11]) + "\t" + r[9])
EOF
}
# ucx TEST SIZE -> GB/s (bw) or p50 latency us (lat)
ucx_run() {
  local test="$1" size="$2" port spid line iters=2000
  [ -n "$ucxp" ] || { echo "n/a"; return; }
  [ "$size" -ge 100000000 ] && iters=40
  [ "$size" -ge 1000000 ] && [ "$size" -lt 100000000 ] && iters=1000
  port=$(free_port)
  env LD_LIBRARY_PATH="$ucx_prefix/lib" UCX_TLS=sm,cuda_copy timeout 120 "$ucxp" -p "$port" \
    >"$work/ucx-srv.log" 2>&1 &
  spid=$!
  sleep 0.5
  line=$(env LD_LIBRARY_PATH="$ucx_prefix/lib" UCX_TLS=sm,cuda_copy timeout 120 "$ucxp" 127.0.0.1 -p "$port" \
         -t "$test" -m cuda,cuda -s "$size" -n "$iters" 2>&1 | tee -a "$work/ucx-raw.log" | sed -n 's/^Final:[[:space:]]*//p' | tail -1)
  wait "$spid" 2>/dev/null
  [ -n "$line" ] || { echo "n/a"; return; }
  if [[ "$test" == *lat ]]; then awk '{print $2}' <<<"$line"; else awk '{printf "%.2f\n", $6*1048576/1e9}' <<<"$line"; fi
}
ceil_run() {
  timeout 120 "$sbench" --mode null --mem cuda --stage both --sizes "$1" --seconds 2 --gpu "$gpu" 2>&1 |
    tee -a "$work/staging-bench.log" | awk '$1=="null"{print $8}' | tail -1
}

declare -A res
for r in $(seq "$rounds"); do
  echo "# round $r"
  for s in 1M 256M; do
    read -r v p < <(gdx_run put_bw "$s"); res[gdx_bw_$s]+=" $v"; echo "gdx put_bw $s: $v GB/s  [$p]"
    v=$(ucx_run tag_bw "$(numfmt --from=iec "$s")"); res[ucx_bw_$s]+=" $v"; echo "ucx tag_bw $s: $v GB/s"
  done
  read -r v p < <(gdx_run put_lat 8); res[gdx_lat]+=" $v"; echo "gdx put_lat 8: $v us  [$p]"
  v=$(ucx_run tag_lat 8); res[ucx_lat]+=" $v"; echo "ucx tag_lat 8: $v us"
  if [ -n "$ab_env" ]; then
    read -r v p < <(gdx_env="$gdx_env $ab_env" gdx_run put_lat 8); res[ab_lat]+=" $v"
    echo "gdx[$ab_env] put_lat 8: $v us  [$p]"
  fi
  v=$(ceil_run 256M); res[ceil]+=" $v"; echo "staging_bench null both 256M: $v GB/s"
  if [ -n "$base_perftest" ]; then
    for s in 1M 256M; do
      read -r v p < <(gdx_run put_bw "$s" "$base_perftest"); res[base_bw_$s]+=" $v"; echo "baseline put_bw $s: $v GB/s  [$p]"
    done
    read -r v p < <(gdx_run put_lat 8 "$base_perftest"); res[base_lat]+=" $v"; echo "baseline put_lat 8: $v us  [$p]"
  fi
done

echo "# validated pass (every byte checked at the receiver; exit status 3 on a mismatch)"
for t in put_bw get_bw put_lat; do
  timeout 120 "$perftest" --loopback -x shm -m "cuda:$gpu" -M "cuda:$gpu" -t "$t" -s 1,8191,1M,64M --validate \
    --csv --no-decisions > "$work/validated-$t.csv" 2>&1
  echo "validated $t 1 B..64 MiB: exit $? ($(grep -c "^$t," "$work/validated-$t.csv") rows)"
done

median() { tr ' ' '\n' | grep -E '^[0-9.]+$' | sort -g | awk '{v[NR]=$1} END {if (NR==0) print "n/a"; else print v[int((NR+1)/2)]}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a+0 > 0 && b+0 > 0) printf "%.2f", a/b; else print "n/a" }'; }
g1=$(median <<<"${res[gdx_bw_1M]}") u1=$(median <<<"${res[ucx_bw_1M]}")
g2=$(median <<<"${res[gdx_bw_256M]}") u2=$(median <<<"${res[ucx_bw_256M]}")
gl=$(median <<<"${res[gdx_lat]}") ul=$(median <<<"${res[ucx_lat]}") c=$(median <<<"${res[ceil]}")
echo
echo "# medians over $rounds rounds (GB/s; latency us, one way)"
printf '%-28s %10s %10s\n' "" gdx ucx
printf '%-28s %10s %10s\n' "bw 1 MiB" "$g1" "$u1" "bw 256 MiB" "$g2" "$u2" "lat 8 B" "$gl" "$ul"
printf '%-28s %10s\n' "staging ceiling 256 MiB" "$c"
echo "bar staged 1MiB >= 1.3x ucx sm,cuda_copy: gdx $g1 vs ucx $u1 = $(ratio "$g1" "$u1")x"
echo "bar staged 256MiB >= 1.3x ucx sm,cuda_copy: gdx $g2 vs ucx $u2 = $(ratio "$g2" "$u2")x"
echo "bar staged 256MiB >= 0.9x staging_bench null both: gdx $g2 vs ceiling $c = $(ratio "$g2" "$c")x"
echo "bar 8B latency <= ucx (ratio = ucx/gdx, >= 1 meets): gdx $gl vs ucx $ul = $(ratio "$ul" "$gl")x"
if [ -n "$ab_env" ]; then
  al=$(median <<<"${res[ab_lat]}")
  echo "diagnosis put_lat 8B with $ab_env (ratio = that/default): default $gl vs that $al = $(ratio "$al" "$gl")x"
fi
if [ -n "$base_perftest" ]; then
  b1=$(median <<<"${res[base_bw_1M]}") b2=$(median <<<"${res[base_bw_256M]}") bl=$(median <<<"${res[base_lat]}")
  echo "check put_bw 1MiB vs the baseline tree (within noise: ~1): this $g1 vs baseline $b1 = $(ratio "$g1" "$b1")x"
  echo "check put_bw 256MiB vs the baseline tree (within noise: ~1): this $g2 vs baseline $b2 = $(ratio "$g2" "$b2")x"
  echo "check put_lat 8B vs the baseline tree (ratio = baseline/this): this $gl vs baseline $bl = $(ratio "$bl" "$gl")x"
fi
