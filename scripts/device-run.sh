#!/usr/bin/env bash
# Everything a GPU machine must show for one tree, in one call (the device tool's time is scarce, and each call
# starts a bare machine):
#   1. builds gdx (build-gpu, RelWithDebInfo) and, in the background, upstream UCX with CUDA (the peer that the
#      staged intra-node bars name) and the baseline tree's gdx_perftest (for "within noise of before");
#   2. the UCX module on the machine's own UCX and Open MPI (tests/uct/gpu-system-ucx.sh), beside
#   3. the GPU test set (ctest -L gpu), then compute-sanitizer memcheck on the GPU test cases --sanitize names;
#   4. the staged intra-node bench beside upstream UCX and the baseline (bench/intranode_staged_vs_ucx.sh);
#   5. the UCX module built against that upstream UCX: ucx_perftest tag_bw of CUDA memory over gdx_shm through the
#      staging engine, through UCP's own pipeline (GDX_UCT_ENGINE=no) and upstream sm,cuda_copy
#      (bench/uct_engine_vs_pipeline.sh);
#   6. host memory through that module: UCP tag_lat/tag_bw over gdx_shm vs UCX posix and sysv (bench/ucx_vs_gdx.sh).
# On a warm machine (a call within 30 s of the last) an upstream UCX built by the last call is reused.
#
#   scripts/device-run.sh [--ucx-src TARBALL] [--sysucx TARBALL] [--baseline TARBALL] [--rounds N]
#                         [--sanitize GTEST-FILTER] [--ab-env "VAR=V ..."] [--skip STEP,...]
#     --ucx-src   upstream UCX release sources (a tarball whose top folder has configure or autogen.sh)
#     --sysucx    the release sources of the machine's own UCX version (gpu-system-ucx.sh builds the module there)
#     --baseline  `git archive` of the tree to compare gdx_perftest with (built for gdx_perftest only)
#     --ab-env    passed to the staged bench: its 8-byte latency once more with these variables (a diagnosis)
#     --host-rounds  alternating rounds of step 6 (default 5)
#     --skip      any of: probes, tests, sanitize, sysucx, bench, uct-bench, host-bench
# Before the tests, bench/probes/pcie_duplex.cpp (the GPU's D2H, H2D and both-at-once copy rates: the ceiling of
# any path that crosses PCIe twice, as staging between two processes does) prints into console.txt.
# Writes $OUT/dev/ (the device tool returns at most 8 files, two folders deep): console.txt (this output),
# ctest-gpu.txt, sanitizer.txt, sysucx.txt, staged-vs-ucx.txt, uct-engine.txt, host-vs-ucx.txt and raw.tgz (every log). Every step is bounded; a
# failed step is reported and the next one still runs. Exit status: 0 when every step that ran passed.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
ucx_src="" sysucx="" baseline="" rounds=3 host_rounds=5 sanitize="" skip="" ab_env=""
while [ $# -gt 0 ]; do
  case "$1" in
    --ucx-src) ucx_src=$2; shift 2 ;;
    --sysucx) sysucx=$2; shift 2 ;;
    --baseline) baseline=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --host-rounds) host_rounds=$2; shift 2 ;;
    --sanitize) sanitize=$2; shift 2 ;;
    --ab-env) ab_env=$2; shift 2 ;;
    --skip) skip=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "device-run.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
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

say "machine"
echo "# tree: $(git rev-parse --short HEAD 2>/dev/null || echo "(no git)") $(git status --porcelain 2>/dev/null | wc -l) changed files"
echo "# date: $(date -u +%FT%TZ)  host: $(uname -srm)  cpus: $jobs"
nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id --format=csv,noheader 2>&1 | sed 's/^/# gpu: /'

# ---- 1. builds --------------------------------------------------------------------------------------------------
ucx_pid="" base_pid=""
if [ -x /tmp/ucx-cuda/bin/ucx_perftest ] && [ -f /tmp/ucx-build/config.h ]; then
  say "upstream UCX with CUDA already built on this (warm) machine: /tmp/ucx-cuda, reused"
  ucx_src="" ucx_reused=1
fi
if [ -n "$ucx_src" ] && { ! skipped bench || ! skipped uct-bench || ! skipped host-bench; }; then
  say "upstream UCX with CUDA from $ucx_src, in the background (/tmp/ucx-cuda)"
  scripts/ucx-build.sh ucx "$ucx_src" /tmp/ucx-cuda /tmp/ucx-build > "$logs/ucx-cuda-build.log" 2>&1 &
  ucx_pid=$!
fi
if [ -n "$baseline" ] && ! skipped bench; then
  say "baseline gdx_perftest from $baseline, in the background (/tmp/baseline)"
  (
    set -e
    rm -rf /tmp/baseline && mkdir -p /tmp/baseline && tar -xzf "$baseline" -C /tmp/baseline
    cmake -S /tmp/baseline -B /tmp/baseline/build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGDX_BUILD_UCT=OFF \
      -DGDX_BUILD_TESTS=OFF
    cmake --build /tmp/baseline/build -j "$jobs" --target gdx_perftest
  ) > "$logs/baseline-build.log" 2>&1 &
  base_pid=$!
fi
# ---- 2. the machine's own UCX (in the background from the start: its module build is its own CPU work) ---------
sys_pid=""
if ! skipped sysucx && [ -n "$sysucx" ]; then
  say "the UCX module on the machine's own UCX (tests/uct/gpu-system-ucx.sh), in the background"
  timeout 600 tests/uct/gpu-system-ucx.sh "$sysucx" "$logs/sysucx" > "$out/sysucx.txt" 2>&1 &
  sys_pid=$!
fi

say "gdx build (build-gpu)"
if cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGDX_BUILD_UCT=OFF > "$logs/gdx-build.log" 2>&1 &&
   timeout 900 cmake --build build-gpu -j "$jobs" >> "$logs/gdx-build.log" 2>&1; then
  say "gdx built"
else
  tail -40 "$logs/gdx-build.log"
  fail "gdx build"
fi

# ---- probes: the hardware's own limits, before anything else loads the GPU ------------------------------------
if ! skipped probes; then
  say "probe: PCIe copy rates, one direction and both at once (bench/probes/pcie_duplex.cpp)"
  if g++ -O2 -std=c++17 -I/usr/local/cuda/include bench/probes/pcie_duplex.cpp -o /tmp/pcie_duplex -lcuda \
       > "$logs/probe-build.log" 2>&1; then
    timeout 120 /tmp/pcie_duplex 0 2>&1 || fail "pcie_duplex probe" # into console.txt
  else
    tail -5 "$logs/probe-build.log"; fail "pcie_duplex probe build"
  fi
fi

# ---- 3. GPU tests and compute-sanitizer ---------------------------------------------------------------------------
if ! skipped tests && [ -d build-gpu ]; then
  say "GPU test set (ctest -L gpu)"
  timeout 900 ctest --test-dir build-gpu -L gpu --output-on-failure -j4 --timeout 600 > "$out/ctest-gpu.txt" 2>&1 ||
    fail "GPU test set"
  grep -E "tests passed|Total Test time|\*\*\*Failed|\(Failed\)|\(Timeout\)" "$out/ctest-gpu.txt"
fi
if ! skipped sanitize && [ -n "$sanitize" ] && [ -x build-gpu/tests/fallback/test_fallback_gpu ]; then
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

if [ -n "$sys_pid" ]; then
  say "waiting for gpu-system-ucx.sh"
  wait "$sys_pid" || fail "gpu-system-ucx.sh"
  grep -E "^=== |tests passed|\*\*\*Failed|\(Failed\)|gpu-system-ucx.sh:" "$out/sysucx.txt" | tail -20
fi

# ---- 4. the staged intra-node bench (once UCX is built) ---------------------------------------------------------------------------------
ucx_ok=${ucx_reused:-0}
if [ -n "$ucx_pid" ]; then
  say "waiting for the UCX build"
  if wait "$ucx_pid" && [ -x /tmp/ucx-cuda/bin/ucx_perftest ]; then ucx_ok=1
  else tail -30 "$logs/ucx-cuda-build.log"; fail "UCX with CUDA did not build: the benches run without it"; fi
fi
if ! skipped bench; then
  ucx_args=() base_args=()
  [ "$ucx_ok" = 1 ] && ucx_args=(--ucx-prefix /tmp/ucx-cuda)
  if [ -n "$base_pid" ]; then
    if wait "$base_pid" && [ -x /tmp/baseline/build/perftest/gdx_perftest ]; then
      base_args=(--baseline-perftest /tmp/baseline/build/perftest/gdx_perftest)
    else tail -20 "$logs/baseline-build.log"; fail "the baseline gdx_perftest did not build"; fi
  fi
  say "staged intra-node bench (bench/intranode_staged_vs_ucx.sh, $rounds rounds)"
  ab_args=(); [ -n "$ab_env" ] && ab_args=(--ab-env "$ab_env")
  timeout 900 bench/intranode_staged_vs_ucx.sh --out "$logs/bench/staged-vs-ucx.txt" --build build-gpu \
    --rounds "$rounds" "${ucx_args[@]}" "${base_args[@]}" "${ab_args[@]}" > /dev/null 2>&1 || fail "the staged bench"
  cp "$logs/bench/staged-vs-ucx.txt" "$out/" 2>/dev/null
  grep -E "^bar |^check |^diagnosis |^# medians|^validated" "$out/staged-vs-ucx.txt"
fi

# ---- 5. the UCX module's engine path vs UCP's own pipeline vs upstream (needs the UCX with CUDA) ----------------
if ! skipped uct-bench && [ "$ucx_ok" = 1 ]; then
  say "the UCX module over upstream UCX with CUDA (bench/uct_engine_vs_pipeline.sh, $rounds rounds)"
  timeout 900 bench/uct_engine_vs_pipeline.sh --out "$logs/bench/uct-engine.txt" --ucx-prefix /tmp/ucx-cuda \
    --ucx-src /tmp/ucx-build --rounds "$rounds" > /dev/null 2>&1 || fail "the UCX module bench"
  cp "$logs/bench/uct-engine.txt" "$out/" 2>/dev/null
  grep -E "^bar |^# medians|^# module|^n/a|^(engine|pipeline|ucx) " "$out/uct-engine.txt" | tail -30
elif ! skipped uct-bench; then
  echo "# the UCX module bench needs upstream UCX with CUDA (--ucx-src): not run"
fi

# ---- 6. host memory through the module vs UCX's own shared memory, alternating rounds (issue 18's host bars) ------
if ! skipped host-bench && [ "$ucx_ok" = 1 ] && [ -f build-uct-bench/src/uct/libuct_gdx.so.0 ]; then
  say "host memory: UCP over gdx_shm vs posix and sysv through upstream UCX (bench/ucx_vs_gdx.sh, $host_rounds rounds)"
  timeout 600 bench/ucx_vs_gdx.sh --ucx-prefix /tmp/ucx-cuda --module build-uct-bench/src/uct/libuct_gdx.so.0 \
    --rounds "$host_rounds" --out "$out/host-vs-ucx.txt" > "$logs/host-vs-ucx.console" 2>&1 || fail "the host bench"
  grep -E "^bar |^# medians" "$out/host-vs-ucx.txt" 2>/dev/null | tail -8
elif ! skipped host-bench; then
  echo "# the host bench needs upstream UCX and the module built by the UCX module bench (step 5): not run"
fi

say "packing logs"
tar -C /tmp -czf "$out/raw.tgz" "$(basename "$logs")" 2>/dev/null
ls -la "$out"
say "done, exit $rc"
exit $rc
