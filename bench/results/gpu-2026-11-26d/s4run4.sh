#!/usr/bin/env bash
# session 4 device call 4: where UCP's memory-type lookup goes. tag_lat only, 7 alternating rounds, the final tree's
# module: with UCP's memory-type cache (UCX_MEMTYPE_CACHE=y, the default where libucm_cuda exists) and without it
# (UCP then asks the detecting memory domains, here gdx_shm's own detection), beside posix and posix,cuda_copy the same
# two ways. The CUDA bench (1 round) runs first because it builds the module against UCX 1.22.
set -uo pipefail
mkdir -p $OUT/dev
scripts/device-run.sh --ucx-src .carry/ucx-1.22.0.tar.gz --rounds 1 --skip probes,tests,sanitize,sysucx,bench,host-bench > $OUT/dev/console.txt 2>&1
grep -E "^=== |^bar |FAILED" $OUT/dev/console.txt | tail -12
m=build-uct-bench/src/uct/libuct_gdx.so.0
g=gdx_shm,gdx_aux:aux
timeout 240 bench/ucx_vs_gdx.sh --ucx-prefix /tmp/ucx-cuda --module $m --rounds 7 --sizes "" \
  --configs "ucx-posix=posix ucx-posix-cuda=posix,cuda_copy ucx-posix-cuda-nomtc=posix,cuda_copy+UCX_MEMTYPE_CACHE=n gdx-shm=$g gdx-shm-nomtc=$g+UCX_MEMTYPE_CACHE=n gdx-shm-nocuda=$g+GDX_CUDA=no" \
  --out $OUT/dev/lat-memtype.txt > /dev/null 2>&1
grep -E "^tag|^test" $OUT/dev/lat-memtype.txt
