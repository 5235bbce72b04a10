#!/usr/bin/env bash
# session 14, call 4: this session's tree on the GPU machine, with upstream UCX 1.22 + CUDA carried
# (.carry/ucx-cuda.tar.xz; the release sources over its build tree for GdxUcx.cmake): scripts/device-run.sh runs the
# GPU test set, the module on the machine's UCX 1.16 + Open MPI 4.1.6, and the CUDA-engine bars (3 rounds).
# Returns: dev/{console,ctest-gpu,sysucx,uct-engine}.txt, dev/raw.tgz.
set -x
t0=$(date +%s)
[ -x /tmp/ucx-cuda/bin/ucx_perftest ] || tar -C /tmp -xJf .carry/ucx-cuda.tar.xz || exit 1
tar -xzf .carry/ucx-1.22.0.tar.gz -C /tmp/ucx-build --strip-components=1 --skip-old-files || exit 1
ls /tmp/ucx-build/configure.ac /tmp/ucx-build/config.h || exit 1
timeout 560 scripts/device-run.sh --sysucx .carry/ucx-1.16.0.tar.gz --rounds 3 --skip probes,sanitize,bench,host-bench
echo "device-run done at $(( $(date +%s) - t0 )) s"
