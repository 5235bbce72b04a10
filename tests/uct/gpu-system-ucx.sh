#!/usr/bin/env bash
# The UCX module on a machine's *own* UCX when that is only a runtime (a distribution's libucx0: libraries, no
# ucx_info, no headers, no .so links; the GPU machine's Ubuntu 24.04 libucx0 1.16.0+ds-5ubuntu1), with its own
# Open MPI, nothing carried but the UCX release sources of that exact version:
#   1. reads the running UCX off its libraries (gdx_ucx_probe: version from ucp_get_version(), the configuration
#      from traces in libucs/libuct, each value with how it was read; dpkg and ucx_info, where there, cross-check);
#   2. builds libuct_gdx against <sources> (internal headers) + the system's libraries (GDX_UCX_LIBDIR) + the
#      reconstructed config.h, and UCX's own ucx_info from the same sources (the tests and gdx-run need one);
#   3. runs the uct.* CPU set, then the GPU set over gdx with CUDA buffers: UCP tag send/recv,
#      ucp_put_nbx/ucp_get_nbx (byte-exact), MPI_Send/Recv with checksums through the system Open MPI, with gdx_ipc
#      and staged through gdx_copy. Without a GPU the GPU tests skip, each with its reason.
#
#   tests/uct/gpu-system-ucx.sh UCX-SOURCES OUT-DIR
#     UCX-SOURCES  ucx-<v>.tar.gz or an unpacked tree of exactly the running UCX's version
#     OUT-DIR      logs: probe, cmake, build, ctest output, the machine (created)
# Exit status: 0 when both ctest runs (cpu, gpu) passed (skips with a reason count as passed); otherwise the
# first thing that failed is the last line printed.
# On the GPU machine: tests/uct/gpu-system-ucx.sh .carry/ucx-1.16.0.tar.gz $OUT/sysucx (.carry carried).
set -euo pipefail
[ $# -eq 2 ] || { sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
src_arg=$1 out=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
exec > >(tee "$out/run.log") 2>&1
t0=$(date +%s)
say() { echo "=== [$(date -u +%H:%M:%S) +$(( $(date +%s) - t0 ))s] $*"; }
die() { echo "gpu-system-ucx.sh: FAILED: $*"; exit 1; }
jobs=$(nproc)

say "machine"
# What it runs on, for the log only: nothing here may stop the run (a pipe head closes early, a tool is missing).
{ uname -srm; grep PRETTY_NAME /etc/os-release; command -v mpirun && mpirun --version 2>&1 | sed -n 1p
  nvidia-smi -L 2>&1; } 2>&1 | tee "$out/machine.txt" || true

say "the running UCX, read off its libraries (gdx_ucx_probe)"
probe_dir="$out/probe"
mkdir -p "$probe_dir"
cc -std=gnu11 -O1 -o "$probe_dir/gdx_ucx_probe" "$root/src/uct/gdx_ucx_probe.c" \
   "$root/src/uct/uct_gdx_ucxbuild.c" -ldl || die "compiling gdx_ucx_probe"
rc=0
"$probe_dir/gdx_ucx_probe" --config-h "$probe_dir/config.h" > "$probe_dir/probe.txt" 2> "$probe_dir/probe.err" || rc=$?
sed 's/\t/   <- /' "$probe_dir/probe.txt"
[ "$rc" = 0 ] || die "$(cat "$probe_dir/probe.err") (gdx_ucx_probe exit $rc)"
version=$(sed -n 's/^version=\([^\t]*\).*/\1/p' "$probe_dir/probe.txt")
libucp=$(sed -n 's/^libucp=\([^\t]*\).*/\1/p' "$probe_dir/probe.txt")
libdir=$(dirname "$libucp")
[ -n "$version" ] && [ -f "$libdir/libuct.so.0" ] || die "no version or no libuct.so.0 next to '$libucp'"
# Cross-checks of the version read from the library: the package that owns it, and ucx_info where there is one.
if pkg=$(dpkg-query -S "$(readlink -f "$libucp")" 2>/dev/null | head -1 | cut -d: -f1) && [ -n "$pkg" ]; then
  pkgver=$(dpkg-query -W -f='${Version}' "$pkg")
  upstream=$(sed -e 's/^[0-9]*://' -e 's/[+~-].*//' <<<"$pkgver")
  [ "$upstream" = "$version" ] || die "the library says UCX $version, its package $pkg says $pkgver"
  echo "cross-check: package $pkg $pkgver owns $libucp: upstream $upstream, agrees"
else
  echo "cross-check: $libucp belongs to no dpkg package: version from the library only"
fi
if command -v ucx_info >/dev/null; then
  v=$(ucx_info -v | sed -n 's/^# \(Library version:\|Version\) \([0-9.]*\).*/\2/p' | head -1)
  [ "$v" = "$version" ] || die "ucx_info on PATH runs UCX '$v', the library read is $version"
  echo "cross-check: ucx_info on PATH says $v (the build will use its config.h)"
else
  echo "no ucx_info on PATH: the build uses the config.h reconstructed above"
fi

say "UCX $version sources"
case "$src_arg" in
  *.tar.gz|*.tgz)
    tree_root="$out/ucx-src"
    rm -rf "$tree_root"; mkdir -p "$tree_root"
    tar -xzf "$src_arg" -C "$tree_root" || die "unpacking $src_arg"
    tree=$(find "$tree_root" -mindepth 1 -maxdepth 1 -type d | head -1) ;;
  *) tree=$(cd "$src_arg" && pwd) ;;
esac
[ -f "$tree/src/uct/base/uct_iface.h" ] || die "$src_arg holds no UCX source tree (src/uct/base/uct_iface.h)"

say "configure + build against UCX $version in $libdir (build-sysucx/)"
bdir="$root/build-sysucx"
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S "$root" -B "$bdir" "${gen[@]}" -DGDX_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DGDX_UCX_SRC_DIR="$tree" -DGDX_UCX_LIBDIR="$libdir" > "$out/cmake.log" 2>&1 ||
  { tail -30 "$out/cmake.log"; die "cmake (cmake.log above)"; }
grep "gdx: " "$out/cmake.log" | grep -E "libuct_gdx|gdx_ucx_probe|gdx:   |ucx_info" || true
grep -q "gdx: libuct_gdx.so.0 for UCX $version" "$out/cmake.log" || die "the module is not configured (cmake.log)"
targets=(uct_test_programs) # tests/uct/CMakeLists.txt: every program the uct.* tests run
cmake --build "$bdir" -j "$jobs" --target "${targets[@]}" > "$out/build.log" 2>&1 ||
  { tail -50 "$out/build.log"; die "build (build.log above)"; }
[ -x "$bdir/ucx-tools/ucx_info" ] && "$bdir/ucx-tools/ucx_info" -v | head -2

say "uct.* tests (CPU and GPU) on the system UCX $version and Open MPI"
# GPU tests one at a time (two processes per test already share the one GPU), first: where a GPU is, they are what
# this machine is for; then the CPU tests in parallel.
set +e
rc_cpu=0 rc_gpu=0
for set in gpu cpu; do
  [ "$set" = gpu ] && par=1 || par=8
  ctest --test-dir "$bdir" -R '^uct\.' -L "$set" -j "$par" --output-on-failure --timeout 120 2>&1 |
    tee "$out/ctest-$set.log"
  [ "${PIPESTATUS[0]}" = 0 ] || eval "rc_$set=1"
  cp "$bdir/Testing/Temporary/LastTest.log" "$out/ctest-$set-full.log"
done
set -e
say "summary (UCX $version at $libdir, config.h $(grep -q "config.h from gdx_ucx_probe" "$out/cmake.log" &&
    echo "reconstructed from the libraries" || echo "from ucx_info -b"))"
for set in cpu gpu; do
  echo "ctest-$set.log: $(grep -E 'tests passed' "$out/ctest-$set.log" || echo 'no summary')"
  # Each skip with the reason its test printed (ctest's own summary names the test only).
  grep -h "^SKIP: " "$out/ctest-$set-full.log" | sort | uniq -c | sed 's/^/  /' || true
done
[ "$rc_cpu" = 0 ] || die "uct.* CPU tests (ctest-cpu.log)"
[ "$rc_gpu" = 0 ] || die "uct.* GPU tests (ctest-gpu.log)"
echo "gpu-system-ucx.sh: PASSED (+$(( $(date +%s) - t0 ))s)"
