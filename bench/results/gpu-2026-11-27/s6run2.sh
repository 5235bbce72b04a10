#!/usr/bin/env bash
# session 6 device call 2 (warm after call 1): UCP tag_lat 8 B only, 9 alternating rounds, this tree's module against
# e88bab3's (session 5's final), each CUDA-aware and with GDX_CUDA=no, beside posix and posix,cuda_copy.
set -uo pipefail
mkdir -p $OUT/dev
t0=$(date +%s)
[ -x /tmp/ucx-cuda/bin/ucx_perftest ] && [ -f build-uct-bench/src/uct/libuct_gdx.so.0 ] && [ -f /tmp/base/build/src/uct/libuct_gdx.so.0 ] || { echo "not warm"; exit 1; }
g=gdx_shm,gdx_aux:aux
timeout 560 bench/ucx_vs_gdx.sh --ucx-prefix /tmp/ucx-cuda --module build-uct-bench/src/uct/libuct_gdx.so.0 \
  --baseline-module /tmp/base/build/src/uct/libuct_gdx.so.0 --rounds 9 --sizes "" \
  --configs "ucx-posix=posix ucx-posix-cuda=posix,cuda_copy gdx-shm=$g gdx-shm-nocuda=$g+GDX_CUDA=no" \
  --out $OUT/dev/lat-ab-9.txt > /dev/null 2>&1
echo "bench done: $(( $(date +%s) - t0 )) s"
grep -E "^bar |^also |^check |^tag|^test" $OUT/dev/lat-ab-9.txt
