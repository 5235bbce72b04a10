#!/usr/bin/env bash
# session 13, call 1: issue 18's CUDA-engine bars and host bars on the landed tree (db92a6d), which session 12 did
# not re-measure, in one device-run.sh call (no GPU tests: session 12 ran them on this code, s12run1), and upstream
# UCX 1.22 with CUDA packed for the session's later call (its install, stripped of debug info, and the headers and
# config.h of its build tree that the module's build reads), so that call need not rebuild it.
# Returns: dev/{console,uct-engine,host-vs-ucx}.txt, dev/raw.tgz, ucx-cuda.tar.xz.
set -x
t0=$(date +%s)
timeout 540 scripts/device-run.sh --ucx-src .carry/ucx-1.22.0.tar.gz --rounds 3 --host-rounds 5 \
  --skip probes,tests,sanitize,sysucx,bench
echo "device-run done at $(( $(date +%s) - t0 )) s"
if [ -x /tmp/ucx-cuda/bin/ucx_perftest ]; then
  rm -rf /tmp/pack && mkdir -p /tmp/pack && cp -a /tmp/ucx-cuda /tmp/pack/ucx-cuda
  find /tmp/pack/ucx-cuda -name '*.so*' -type f -exec strip --strip-debug {} + ; rm -f /tmp/pack/ucx-cuda/lib/*.a /tmp/pack/ucx-cuda/lib/ucx/*.a
  mkdir -p /tmp/pack/ucx-build && (cd /tmp/ucx-build && find . \( -name '*.h' -o -name '*.inl' \) -print0 | tar -cf - --null -T -) | tar -C /tmp/pack/ucx-build -xf -
  tar -C /tmp/pack -cf - ucx-cuda ucx-build | xz -T0 -6 > $OUT/ucx-cuda.tar.xz
  ls -la $OUT/ucx-cuda.tar.xz
fi
echo "all done at $(( $(date +%s) - t0 )) s"
