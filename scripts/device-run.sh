#!/usr/bin/env bash
# Everything a GPU machine must show for one tree, in one call, on a registry-only stack (the device tool's time
# is scarce, and each call starts a bare machine):
#   1. Debian 12's UCX 1.13.1, built there from Debian's source with the machine's CUDA (scripts/ucx-build.sh),
#      and Debian 12's Open MPI 4.1, unpacked into a folder (scripts/carry-debian.sh; both carried in --carry);
#   2. gdx with its UCX module built against that UCX (build-gpu);
#   3. the GPU test set (ctest -L gpu: the uct.gpu.* checks of UCP and Open MPI over gdx with CUDA buffers among
#      them), the module's host-memory checks (ctest -L cpu -R '^uct\.'), compute-sanitizer on --sanitize;
#   4. gdx-run on the machine's own UCX (1.16, a runtime gdx has no build for): one line, nothing run;
#   5. benches beside that UCX with CUDA: bench/intranode_staged_vs_ucx.sh, bench/uct_engine_vs_pipeline.sh, and
#      Open MPI with CUDA buffers on both ranks under MPS (bench/mpi/gdx_vs_ucx.sh: gdx-run's default against UCX's
#      default, and P2P off against UCX's sm,self,cuda_copy).
# On a warm machine (a call within 30 s of the last) the UCX built by the last call is reused.
#
#   scripts/device-run.sh --carry DIR [--rounds N] [--sanitize GTEST-FILTER] [--skip STEP,...]
#     --carry     what `scripts/carry-debian.sh download DIR` made here (carry it with the device tool)
#     --skip      any of: probes, tests, uct, sanitize, sysucx, bench, uct-bench, mpi-bench
#     --mpi LIST  the MPI benches (default default-cuda,p2p-off): default-cuda, default-host, pairs4-cuda (gdx-run's
#                 default vs UCX's), aa-cuda (UCX alone vs UCX alone), gdx-paths-cuda (gdx_shm,gdx_ipc vs sm,cuda_copy,cuda_ipc), p2p-off
# Writes $OUT/dev/: console.txt (this output), ctest-gpu.txt, ctest-uct.txt, sanitizer.txt, sysucx.txt,
# staged-vs-ucx.txt, uct-engine.txt, mpi-<name>.txt per --mpi entry (raw runs in mpi-<name>/). Every step is bounded; a failed step is reported and the next one still
# runs. Exit status: 0 when every step that ran passed.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
carry="" rounds=3 sanitize="" skip="" mpi="default-cuda,p2p-off"
while [ $# -gt 0 ]; do
  case "$1" in
    --carry) carry=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --sanitize) sanitize=$2; shift 2 ;;
    --skip) skip=$2; shift 2 ;;
    --mpi) mpi=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "device-run.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$carry" ] && [ -f "$carry/VERSION" ] || { echo "device-run.sh: --carry DIR (from carry-debian.sh download) is required" >&2; exit 2; }
out=${OUT:-/tmp/device-run}/dev
logs=/tmp/device-run-logs
mkdir -p "$out" "$logs"
exec > >(tee "$out/console.txt") 2>&1
t0=$(date +%s)
say() { echo "=== [$(( $(date +%s) - t0 ))s] $*"; }
skipped() { [[ ",$skip," == *",$1,"* ]]; }
rc=0
fail() { echo "FAILED: $*"; rc=1; }
jobs=$(nproc)
ucx=/tmp/ucx-deb ompi=/tmp/ompi-deb

say "machine"
echo "# tree: $(git rev-parse --short HEAD 2>/dev/null || echo "(no git)") $(git status --porcelain 2>/dev/null | wc -l) changed files"
echo "# date: $(date -u +%FT%TZ)  host: $(uname -srm)  cpus: $jobs  glibc: $(getconf GNU_LIBC_VERSION)"
nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id --format=csv,noheader 2>&1 | sed 's/^/# gpu: /'
echo "# carried: Debian's libucx0 $(cat "$carry/VERSION") source; $(ls "$carry"/debs/*.deb | wc -l) Debian packages"

# ---- 1. the registry-only stack ---------------------------------------------------------------------------------
say "Debian's UCX $(cat "$carry/VERSION") with CUDA (scripts/ucx-build.sh ucx), Open MPI unpacked"
src=$(ls -d "$carry"/ucx-*/ | head -1)
if timeout 900 scripts/ucx-build.sh ucx "$src" "$ucx" > "$logs/ucx-build.log" 2>&1; then
  grep -E "^# (Version|Git branch|Configured with)" "$logs/ucx-build.log" | head -3
  "$ucx/bin/ucx_info" -d 2>/dev/null | grep -E "^#\s+Transport:" | sort -u | tr -s ' ' | paste -sd' ' -
else
  tail -30 "$logs/ucx-build.log"; fail "UCX build"
fi
scripts/carry-debian.sh unpack "$carry" "$ompi" > "$logs/ompi.log" 2>&1 || { cat "$logs/ompi.log"; fail "Open MPI unpack"; }
export PATH="$ucx/bin:$PATH" LD_LIBRARY_PATH="$ucx/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# shellcheck disable=SC1091
. "$ompi/env.sh"
scripts/carry-debian.sh check "$ompi" 2>&1 | tail -1 || fail "the carried Open MPI does not start"

# ---- 2. gdx and its module --------------------------------------------------------------------------------------
say "gdx and its UCX module against $ucx (build-gpu)"
if timeout 900 scripts/ucx-build.sh module . build-gpu "$ucx" "$(cat "$ucx/.built-from" 2>/dev/null)" \
     -DMPI_C_COMPILER="$ompi/usr/bin/mpicc.openmpi" > "$logs/gdx-build.log" 2>&1; then
  grep -E "gdx: (UCX|the UCX module)" "$logs/gdx-build.log" | head -4
else
  tail -40 "$logs/gdx-build.log"; fail "gdx build"
fi

if ! skipped probes; then
  say "probe: PCIe copy rates, one direction and both at once (bench/probes/pcie_duplex.cpp)"
  if g++ -O2 -std=c++17 -I/usr/local/cuda/include bench/probes/pcie_duplex.cpp -o /tmp/pcie_duplex -lcuda \
       > "$logs/probe-build.log" 2>&1; then
    timeout 120 /tmp/pcie_duplex 0 2>&1 || fail "pcie_duplex probe"
  else
    tail -5 "$logs/probe-build.log"; fail "pcie_duplex probe build"
  fi
fi

# ---- 3. tests -----------------------------------------------------------------------------------------------------
if ! skipped tests && [ -d build-gpu ]; then
  say "GPU test set (ctest -L gpu)"
  timeout 1200 ctest --test-dir build-gpu -L gpu --output-on-failure -j4 --timeout 600 > "$out/ctest-gpu.txt" 2>&1 ||
    fail "GPU test set"
  grep -E "tests passed|Total Test time|\*\*\*Failed|\(Failed\)|\(Timeout\)" "$out/ctest-gpu.txt"
fi
if ! skipped uct && [ -d build-gpu ]; then
  say "the module's host-memory checks on this UCX and Open MPI (ctest -L cpu -R '^uct\.')"
  timeout 900 ctest --test-dir build-gpu -L cpu -R '^uct\.' --output-on-failure -j4 --timeout 300 > "$out/ctest-uct.txt" 2>&1 ||
    fail "uct.* host checks"
  grep -E "tests passed|Total Test time|\*\*\*Failed|\(Failed\)|\(Timeout\)" "$out/ctest-uct.txt"
fi
if ! skipped sanitize && [ -n "$sanitize" ]; then
  say "compute-sanitizer memcheck, every process: $sanitize"
  : > "$out/sanitizer.txt"
  for bin in build-gpu/tests/fallback/test_fallback_gpu build-gpu/tests/intranode/test_intranode_gpu \
             build-gpu/tests/memtype/test_memtype_gpu; do
    [ -x "$bin" ] || continue
    # a binary with no test under the filter never calls CUDA, which compute-sanitizer reports as an error
    "$bin" --gtest_list_tests --gtest_filter="$sanitize" 2>/dev/null | grep -q '^  ' || continue
    timeout 300 compute-sanitizer --tool memcheck --target-processes all --error-exitcode 9 \
      "$bin" --gtest_filter="$sanitize" >> "$out/sanitizer.txt" 2>&1 || fail "compute-sanitizer on $bin (exit $?)"
  done
  grep -E "ERROR SUMMARY|PASSED|FAILED|tests ran" "$out/sanitizer.txt"
fi

# ---- 4. the machine's own UCX: gdx has no build for it, and says so ----------------------------------------------
if ! skipped sysucx; then
  say "gdx-run on the machine's own UCX (no gdx build for it): one line, nothing run"
  (
    export PATH=${PATH#"$ompi/usr/bin:"}; PATH=${PATH//"$ucx/bin:"/}
    unset LD_LIBRARY_PATH
    ls /usr/lib/x86_64-linux-gnu/libucp.so.0* 2>&1 | head -2
    timeout 60 tools/gdx-run --module build-gpu/src/uct/libuct_gdx.so.0 sh -c 'echo RAN'; echo "exit $?"
  ) > "$out/sysucx.txt" 2>&1
  cat "$out/sysucx.txt"
  if grep -q '^RAN' "$out/sysucx.txt" || ! grep -q '^gdx-run: ' "$out/sysucx.txt"; then
    fail "gdx-run on the machine's UCX ran the command or gave no reason"
  fi
fi

# ---- 5. benches beside Debian's UCX with CUDA ------------------------------------------------------------------------
if ! skipped bench && [ -x "$ucx/bin/ucx_perftest" ]; then
  say "staged intra-node bench (bench/intranode_staged_vs_ucx.sh, $rounds rounds)"
  timeout 900 bench/intranode_staged_vs_ucx.sh --out "$out/staged-vs-ucx.txt" --build build-gpu \
    --rounds "$rounds" --ucx-prefix "$ucx" > /dev/null 2>&1 || fail "the staged bench"
  grep -E "^bar |^check |^# medians|^validated" "$out/staged-vs-ucx.txt"
fi
if ! skipped uct-bench && [ -x "$ucx/bin/ucx_perftest" ]; then
  say "the UCX module's engine vs UCP's own pipeline vs UCX's transports (bench/uct_engine_vs_pipeline.sh, $rounds rounds)"
  timeout 900 bench/uct_engine_vs_pipeline.sh --out "$out/uct-engine.txt" --ucx-prefix "$ucx" --build build-gpu \
    --no-build --rounds "$rounds" > /dev/null 2>&1 || fail "the UCX module bench"
  grep -E "^bar |^# medians|^n/a|^(engine|pipeline|staged|ucx|ucx_ipc) " "$out/uct-engine.txt" | tail -30
fi

if ! skipped mpi-bench && [ -x build-gpu/bench/mpi/gdx_mpi_bench ]; then
  # Two ranks on one GPU time-slice it without MPS (~150 us an operation), for UCX and gdx alike.
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d 2>&1 || fail "MPS daemon"
  mpi_bench() { # NAME TIMEOUT gdx_vs_ucx.sh-ARGS...
    local name=$1 tmo=$2; shift 2
    say "MPI $name (MPS): bench/mpi/gdx_vs_ucx.sh $*"
    timeout "$tmo" bench/mpi/gdx_vs_ucx.sh --build build-gpu -r "$rounds" --timeout 60 --out "$out/mpi-$name" "$@" \
      > "$out/mpi-$name.txt" 2>&1 || fail "MPI bench $name"
    grep -E "^round|^bar |^noise |VALIDATION" "$out/mpi-$name.txt" | tail -40
  }
  for m in ${mpi//,/ }; do
    case "$m" in
      # gdx-run's default (UCX's transports, gdx's for what UCX lacks) against UCX's default (UCX_TLS=all)
      default-cuda) mpi_bench "$m" 200 --tls default --ucx-tls all -m cuda -M cuda -t lat,bw,bibw --min 8 --max 4M ;;
      # A/A: UCX alone on both sides, the same script: how far two identical runs differ (the noise floor)
      aa-cuda) mpi_bench "$m" 200 --tls ucx-alone --ucx-tls all -m cuda -M cuda -t lat,bw,bibw --min 8 --max 4M ;;
      default-host) mpi_bench "$m" 150 --tls default --ucx-tls all -t lat,bw --min 8 --max 4M ;;
      pairs4-cuda) mpi_bench "$m" 200 --tls default --ucx-tls all -n 8 -m cuda -M cuda -t bw,mbw_mr --min 8 --max 4M -r 3 ;;
      # gdx's own paths against UCX's, like for like (diagnosis of #36 mean (a)): gdx_shm + gdx_ipc vs sm + cuda_ipc
      gdx-paths-cuda) mpi_bench "$m" 200 --tls gdx_shm,gdx_ipc --ucx-tls sm,self,cuda_copy,cuda_ipc -m cuda -M cuda \
                        -t lat,bw --min 8 --max 4M -r 3 ;;
      # P2P off: gdx staging (GDX_P2P=no) against UCX's sm + cuda_copy
      p2p-off) mpi_bench "$m" 200 --tls gdx_shm,gdx_ipc --gdx-env GDX_P2P=no --ucx-tls sm,self,cuda_copy -m cuda \
                 -M cuda -t lat,bw --min 8 --max 4M --bw-bar 1.3 --bar-from 256K -r 3 ;;
      *) fail "unknown --mpi entry '$m'" ;;
    esac
  done
  echo quit | nvidia-cuda-mps-control 2>&1
fi

say "done, exit $rc"
exit $rc
