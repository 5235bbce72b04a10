#!/usr/bin/env bash
# UCP over gdx with GPU memory, the three ways a UCX user can get it, in one run (issue 18's first bar): one GPU, two
# processes on it, MPS on (without it the two contexts time-slice: a scheduler figure, not a transport's).
#
#   bench/uct_engine_vs_pipeline.sh --out FILE [--ucx-prefix DIR] [--ucx-src DIR] [--build DIR] [--mem cuda|host]
#        [--gpu N] [--rounds N] [--sizes "1M 256M"] [--cpus A,B] [--no-build]
#
# Per round, alternating (drift on a shared machine hits all alike), ucx_perftest tag_bw -m MEM,MEM:
#   engine    libuct_gdx over gdx_shm and gdx_ipc, the gdx transports a user on one host gets (tools/gdx-run with no
#             --tls lists every gdx transport with a device): UCP hands the CUDA buffers' rendezvous to gdx_ipc,
#             whose staging engine moves each fragment by CUDA IPC where the peer maps the buffer and through
#             peer-mapped pools where it cannot (host memory stays on gdx_shm);
#   staged    the same module over gdx_shm alone: gdx_shm does not reach device memory, so its engine stages every
#             fragment through its bounce pools (what a host without CUDA IPC between the two processes gets);
#   pipeline  the same module with GDX_UCT_ENGINE=no over gdx_shm: CUDA stays out of gdx_shm's reg_mem_types, so UCP
#             stages it itself (its rendezvous pipeline, copies through gdx_copy, host fragments over gdx_shm);
#   ucx       UCX with CUDA alone, UCX_TLS=sm,cuda_copy (sm with host memory): the issue's named peer;
#   ucx_ipc   UCX with UCX_TLS=sm,cuda_copy,cuda_ipc: UCX's own direct path, printed beside it (with
#             host memory: not run).
# The module is built against the UCX under test (--ucx-prefix, its source tree --ucx-src; default /tmp/ucx-deb,
# Debian's UCX 1.13.1 built with CUDA by scripts/ucx-build.sh, and the tree it was built from) and loaded as
# tools/gdx-run loads it. Every engine run's path totals (GDX_UCT_STATS) are printed beside its figure, so a
# number that did not go through the engine shows. Medians over the rounds make the table; the output ends with one
# line per bar: `bar <what>: gdx <value> vs <peer> <value> = <ratio>x` (GB/s = 1e9 B/s; ucx_perftest's MB/s are MiB/s
# and are converted). --mem host runs the same on a machine without a GPU (the script's own test: no bar is met or
# missed there, the figures are host memory's).
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out="" prefix=/tmp/ucx-deb src="" build="" mem=cuda gpu=0 rounds=3 sizes="1M 256M" cpus="" nobuild=0
cmdline="$0 $*"
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --ucx-prefix) prefix="$2"; shift 2 ;;
    --ucx-src) src="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --mem) mem="$2"; shift 2 ;;
    --gpu) gpu="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --sizes) sizes="$2"; shift 2 ;;
    --cpus) cpus="$2"; shift 2 ;;
    --no-build) nobuild=1; shift ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "uct_engine_vs_pipeline.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
die() { echo "uct_engine_vs_pipeline.sh: $*" >&2; exit 2; }
[ -n "$out" ] || die "--out FILE is required"
case "$mem" in cuda|host) ;; *) die "--mem takes cuda or host, not '$mem'" ;; esac
[ -x "$prefix/bin/ucx_perftest" ] && [ -x "$prefix/bin/ucx_info" ] || die "no UCX install at $prefix (--ucx-prefix)"
[ -n "$src" ] || src=$(cat "$prefix/.built-from" 2>/dev/null)
[ -f "$src/src/uct/base/uct_iface.h" ] || die "no UCX source tree at '$src' (--ucx-src)"
build=${build:-$root/build-uct-bench}
work="${out%.txt}.d"
mkdir -p "$(dirname "$out")" "$work" || exit 2
exec > >(tee "$out") 2>&1
export PATH="$prefix/bin:$PATH" LD_LIBRARY_PATH="$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

echo "# command: $cmdline"
echo "# date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')  host: $(hostname)  cpus: $(nproc)  load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# gdx: $(git rev-parse --short HEAD 2>/dev/null || echo unknown) ($(git status --porcelain 2>/dev/null | wc -l) files changed)"
ucx_info -v | sed 's/^/# ucx: /'
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/# gpu: /'

# ---- the module, built against this UCX ------------------------------------------------------------------------
if [ "$nobuild" = 0 ]; then
  t0=$(date +%s)
  if ! "$root/scripts/ucx-build.sh" module "$root" "$build" "$prefix" "$src" -DGDX_BUILD_TESTS=OFF > "$work/build.log" 2>&1; then
    tail -30 "$work/build.log"; die "building libuct_gdx against $prefix failed ($work/build.log)"
  fi
  grep "gdx: libuct_gdx" "$work/build.log" | sed 's/ (.*//; s/^-- /# /'
  echo "# module built in $(( $(date +%s) - t0 )) s"
fi
module="$build/src/uct/libuct_gdx.so.0"
[ -f "$module" ] || die "no module at $module (built without --no-build?)"

# ---- MPS (two processes on one GPU) ----------------------------------------------------------------------------
mps_started=0
if [ "$mem" = cuda ]; then
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log CUDA_VISIBLE_DEVICES="$gpu"
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  mpsctl=$(command -v nvidia-cuda-mps-control || echo /usr/local/nvidia/bin/nvidia-cuda-mps-control)
  if [ -x "$mpsctl" ] && "$mpsctl" -d; then mps_started=1; echo "# MPS daemon started by this script"; sleep 1
  else echo "# MPS could not be started: the two processes time-slice the GPU; figures are not representative"; fi
fi
stop_mps() { [ "$mps_started" = 1 ] && echo quit | "$mpsctl" && echo "# MPS daemon stopped"; }
trap stop_mps EXIT

# ---- one measurement ---------------------------------------------------------------------------------------------
pin=(); pin_cli=()
if [ -n "$cpus" ]; then pin=(taskset -c "${cpus%%,*}"); pin_cli=(taskset -c "${cpus#*,}"); fi
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# measure CONFIG BYTES -> "GB/s<TAB>path" (n/a when a side failed); raw output appended to $work/CONFIG.log
measure() {
  local config="$1" size="$2" iters=1000 port spid crc src line path=""
  local -a run=(ucx_perftest -t tag_bw -m "$mem,$mem" -s "$size")
  local -a envs=(env UCX_TLS="sm,cuda_copy")
  [ "$mem" = host ] && envs=(env UCX_TLS=sm)
  [ "$size" -ge 100000000 ] && iters=20
  case "$config" in
    # UCX_TLS as gdx-run sets it (gdx_shm, gdx_copy where a GPU is, self, gdx_aux for wire-up) plus cuda_copy: from 1.22
    # ucx_perftest allocates its buffers with ucp_mem_map(UCP_MEM_MAP_ALLOCATE, CUDA), which needs an MD that can
    # allocate CUDA memory; gdx's MDs cannot (they register it), so without cuda_copy both gdx rows failed with
    # "ucp test failed to allocate memory" (UCX 1.22, H200, 2026-11-25). The bulk still goes where UCP puts it:
    # gdx_shm's zcopy through the engine, or UCP's pipeline over a memory-type endpoint (gdx_copy or cuda_copy).
    engine) envs=(env GDX_UCT_STATS=yes tools/gdx-run --module "$module" --tls gdx_shm,gdx_ipc,cuda_copy)
            [ "$mem" = host ] && envs=(env GDX_UCT_STATS=yes tools/gdx-run --module "$module" --tls gdx_shm) ;;
    staged) envs=(env GDX_UCT_STATS=yes tools/gdx-run --module "$module" --tls gdx_shm,cuda_copy) ;;
    ucx_ipc) envs=(env UCX_TLS="sm,cuda_copy,cuda_ipc") ;;
    pipeline) envs=(env GDX_UCT_ENGINE=no GDX_UCT_STATS=yes tools/gdx-run --module "$module" --tls gdx_shm,cuda_copy) ;;
  esac
  port=$(free_port)
  timeout 300 "${envs[@]}" "${pin[@]}" "${run[@]}" -n "$iters" -p "$port" > "$work/srv.log" 2>&1 &
  spid=$!
  sleep 1
  timeout 300 "${envs[@]}" "${pin_cli[@]}" "${run[@]}" -n "$iters" -p "$port" 127.0.0.1 > "$work/cli.log" 2>&1
  crc=$?
  wait "$spid"; src=$?
  cat "$work/srv.log" "$work/cli.log" >> "$work/$config.log"
  line=$(sed -n 's/^Final:[[:space:]]*//p' "$work/cli.log" | tail -1)
  case "$config" in ucx*) ;; *) # what each gdx engine carried, summed over both processes ("engine off": none ran)
    path=$(sed -n 's/.* \(gdx_[a-z]*\) path totals: direct \([0-9]*\) B .*, staged \([0-9]*\) B .*/\1 \2 \3/p' \
             "$work/srv.log" "$work/cli.log" | awk '{d[$1] += $2; s[$1] += $3; n++}
             END {if (n == 0) { print "engine off"; exit }
                  for (t in d) { printf "%s%s: direct %.0f MB, staged %.0f MB", sep, t, d[t] / 1e6, s[t] / 1e6;
                                 sep = "; " } }')
  esac
  if [ "$crc" != 0 ] || [ "$src" != 0 ] || [ -z "$line" ]; then
    printf 'n/a\tclient exit %s, server exit %s (%s.log)\n' "$crc" "$src" "$config"
    return
  fi
  awk -v p="$path" '{printf "%.2f\t%s\n", $6 * 1048576 / 1e9, p}' <<<"$line"
}

declare -A res
configs="engine staged pipeline ucx ucx_ipc"
[ "$mem" = host ] && configs="engine pipeline ucx"
for r in $(seq "$rounds"); do
  echo "# round $r"
  for s in $sizes; do
    bytes=$(numfmt --from=iec "$s")
    for c in $configs; do
      IFS=$'\t' read -r v p < <(measure "$c" "$bytes")
      res[$c,$s]+=" $v"
      printf '%-9s tag_bw %-5s %8s GB/s  %s\n' "$c" "$s" "$v" "${p:+[$p]}"
    done
  done
done

median() { tr ' ' '\n' | grep -E '^[0-9.]+$' | sort -g | awk '{v[NR]=$1} END {if (NR==0) print "n/a"; else print v[int((NR+1)/2)]}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a+0 > 0 && b+0 > 0) printf "%.2f", a/b; else print "n/a" }'; }
echo
echo "# medians over $rounds rounds, tag_bw GB/s, $mem memory on both sides"
printf '%-10s' size; for c in $configs; do printf ' %10s' "$c"; done; echo
for s in $sizes; do
  printf '%-10s' "$s"; for c in $configs; do printf ' %10s' "$(median <<<"${res[$c,$s]}")"; done; echo
done
# Like for like only: direct against direct, staged against staged (a default-path figure of gdx against UCX's
# staged path would compare two path classes).
for s in $sizes; do
  p=$(median <<<"${res[pipeline,$s]}") u=$(median <<<"${res[ucx,$s]}")
  if [ "$mem" = cuda ]; then
    st=$(median <<<"${res[staged,$s]}") g=$(median <<<"${res[engine,$s]}") ui=$(median <<<"${res[ucx_ipc,$s]}")
    echo "bar tag_bw $s cuda staged, gdx engine over gdx_shm >= 1.3x UCP's own pipeline (GDX_UCT_ENGINE=no): gdx $st vs pipeline $p = $(ratio "$st" "$p")x"
    echo "bar tag_bw $s cuda staged, gdx engine over gdx_shm >= 1.3x UCX sm,cuda_copy: gdx $st vs ucx $u = $(ratio "$st" "$u")x"
    echo "bar tag_bw $s cuda direct, gdx default (gdx_shm,gdx_ipc) >= 0.97x UCX sm,cuda_copy,cuda_ipc: gdx $g vs ucx_ipc $ui = $(ratio "$g" "$ui")x"
  else
    g=$(median <<<"${res[engine,$s]}")
    echo "bar tag_bw $s host, gdx_shm >= 0.97x UCX sm: gdx $g vs ucx $u = $(ratio "$g" "$u")x"
  fi
done
