#!/usr/bin/env bash
# The UCX module on a GPU machine's *own* UCX (a runtime only: libraries and ucx_info, no headers, no .so
# links), with its own Open MPI, nothing carried but the UCX release sources of that exact version:
#   1. builds libuct_gdx against <sources> (internal headers) + the system's libuct.so.0 (GDX_UCX_LIBDIR) + the
#      system's `ucx_info -b` (config.h), i.e. the runtime-only path of cmake/GdxUcx.cmake;
#   2. runs, over gdx with CUDA buffers: UCP tag send/recv, ucp_put_nbx/ucp_get_nbx (byte-exact, ucp_gpu_check
#      -r), and MPI_Send/Recv with checksums through the system Open MPI (mpi_gpu_check), with gdx_ipc and
#      staged through gdx_copy; plus the CPU uct.* set on the same UCX.
#
#   tests/uct/gpu-system-ucx.sh UCX-SOURCES OUT-DIR
#     UCX-SOURCES  ucx-<v>.tar.gz or an unpacked tree of exactly the running UCX's version (ucx_info -v)
#     OUT-DIR      logs: cmake, build, ctest output, the UCX/Open MPI/GPU description (created)
# Exit status: 0 when both ctest runs (cpu, gpu) passed (skips with a reason count as passed).
# On the device: run(command="tests/uct/gpu-system-ucx.sh .carry/ucx-1.16.0.tar.gz $OUT/sysucx", carry=[".carry"]).
set -euo pipefail
[ $# -eq 2 ] || { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
src_arg=$1 out=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
exec > >(tee "$out/run.log") 2>&1
say() { echo "=== [$(date -u +%H:%M:%S)] $*"; }
die() { echo "gpu-system-ucx.sh: $*" >&2; exit 1; }

say "machine"
command -v ucx_info >/dev/null || die "ucx_info not on PATH: the system UCX's tools are needed (ucx-utils)"
ucx_info -v | tee "$out/ucx_info-v.txt"
version=$(sed -n 's/^# \(Library version:\|Version\) \([0-9.]*\).*/\2/p' "$out/ucx_info-v.txt" | head -1)
[ -n "$version" ] || die "cannot read the UCX version from 'ucx_info -v'"
ucx_info -b > "$out/ucx_info-b.h"
# Where the running libuct.so.0 lives: "# Library path:" (1.14+), else the dynamic linker's view of ucx_info.
libdir=$(sed -n 's/^# Library path: \(.*\)\/libucs\.so.*/\1/p' "$out/ucx_info-v.txt" | head -1)
[ -n "$libdir" ] || libdir=$(dirname "$(ldd "$(command -v ucx_info)" | awk '$1 == "libuct.so.0" {print $3}')")
[ -f "$libdir/libuct.so.0" ] || die "cannot find the running UCX's libuct.so.0 (looked in '$libdir')"
{ command -v mpirun && mpirun --version | head -1; nvidia-smi -L || true; } | tee "$out/machine.txt"

say "UCX $version sources"
case "$src_arg" in
  *.tar.gz|*.tgz)
    tree_root="$out/ucx-src"
    rm -rf "$tree_root"; mkdir -p "$tree_root"
    tar -xzf "$src_arg" -C "$tree_root"
    tree=$(find "$tree_root" -mindepth 1 -maxdepth 1 -type d | head -1) ;;
  *) tree=$(cd "$src_arg" && pwd) ;;
esac
[ -f "$tree/src/uct/base/uct_iface.h" ] || die "$src_arg holds no UCX source tree (src/uct/base/uct_iface.h)"

say "configure + build against UCX $version in $libdir (build-sysucx/)"
bdir="$root/build-sysucx"
cmake -S "$root" -B "$bdir" -DGDX_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DGDX_UCX_SRC_DIR="$tree" -DGDX_UCX_LIBDIR="$libdir" -DGDX_UCX_INFO="$(command -v ucx_info)" \
      > "$out/cmake.log" 2>&1 || { cat "$out/cmake.log"; die "cmake failed"; }
grep "gdx: libuct_gdx" "$out/cmake.log"
grep -q "gdx: libuct_gdx.so.0 for UCX" "$out/cmake.log" || die "the module is not configured (cmake.log above)"
cmake --build "$bdir" -j "$(nproc)" --target uct_gdx uct_gdx_loader uct_gdx_fakever uct_loopback_check uct_loopback_check_linked \
      ucp_gpu_check uct_mpi_check uct_mpi_gpu_check > "$out/build.log" 2>&1 ||
  { tail -50 "$out/build.log"; die "build failed"; }

say "uct.* tests (CPU and GPU) on the system UCX $version and Open MPI"
# CPU tests in parallel; GPU tests one at a time (two processes per test already share the one GPU).
set +e
ctest --test-dir "$bdir" -R '^uct\.' -L cpu -j 8 --output-on-failure --timeout 300 2>&1 | tee "$out/ctest-cpu.log"
rc_cpu=${PIPESTATUS[0]}
ctest --test-dir "$bdir" -R '^uct\.' -L gpu --output-on-failure --timeout 600 2>&1 | tee "$out/ctest-gpu.log"
rc_gpu=${PIPESTATUS[0]}
set -e
say "summary"
for f in "$out/ctest-cpu.log" "$out/ctest-gpu.log"; do echo "$(basename "$f"): $(grep -E 'tests passed' "$f")"; done
[ "$rc_cpu" = 0 ] && [ "$rc_gpu" = 0 ]
