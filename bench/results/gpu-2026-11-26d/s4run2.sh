#!/usr/bin/env bash
# session 4 device call 2: the message-path trims (am_short_hdr, inline record writes, inline idle guards). The CUDA
# bench (1 round, builds build-uct-bench against UCX 1.22); d2be992's module and a DIAGNOSIS module (this tree with
# the worker-async block taken out of uct_gdx_iface_progress: unsafe while UCP wires up from its async thread, so
# never a product build) against the same UCX; a tag_lat-only diagnosis in alternating rounds; then the host bars
# A/B against d2be992.
set -uo pipefail
mkdir -p $OUT/dev
scripts/device-run.sh --ucx-src .carry/ucx-1.22.0.tar.gz --rounds 1 --skip probes,tests,sanitize,sysucx,bench,host-bench > $OUT/dev/console.txt 2>&1
grep -E "^=== |^bar |FAILED" $OUT/dev/console.txt | tail -12
cfg="-G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGDX_BUILD_TESTS=OFF -DGDX_UCX_PREFIX=/tmp/ucx-cuda -DGDX_UCX_SRC_DIR=/tmp/ucx-build -DGDX_UCX_INFO=/tmp/ucx-cuda/bin/ucx_info"
rm -rf /tmp/base /tmp/diag && mkdir -p /tmp/base /tmp/diag && tar -xzf .carry/baseline-d2be992.tar.gz -C /tmp/base
tar --exclude="./build*" --exclude=./.git --exclude=./.carry -cf - . | tar -xf - -C /tmp/diag
sed -i '/^static unsigned uct_gdx_iface_progress/,/^}/{/UCT_GDX_ASYNC_\(UN\)\{0,1\}BLOCK/d}' /tmp/diag/src/uct/uct_gdx_iface.c
grep -A12 '^static unsigned uct_gdx_iface_progress' /tmp/diag/src/uct/uct_gdx_iface.c > $OUT/dev/diag-patch.txt
( cmake -S /tmp/base -B /tmp/base/build $cfg && cmake --build /tmp/base/build -j 8 --target uct_gdx ) > $OUT/dev/base-build.log 2>&1 &
( cmake -S /tmp/diag -B /tmp/diag/build $cfg && cmake --build /tmp/diag/build -j 8 --target uct_gdx ) > $OUT/dev/diag-build.log 2>&1
wait
ls /tmp/base/build/src/uct/libuct_gdx.so.0 /tmp/diag/build/src/uct/libuct_gdx.so.0 || { tail -5 $OUT/dev/*-build.log; }
m=build-uct-bench/src/uct/libuct_gdx.so.0
g=gdx_shm,gdx_aux:aux
D=/tmp/diag/build/src/uct/libuct_gdx.so.0
B=/tmp/base/build/src/uct/libuct_gdx.so.0
timeout 200 bench/ucx_vs_gdx.sh --ucx-prefix /tmp/ucx-cuda --module $m --rounds 7 --sizes "" \
  --configs "ucx-posix=posix ucx-posix-cuda=posix,cuda_copy gdx-shm=$g gdx-shm-nocuda=$g+GDX_CUDA=no gdx-nolock=$g+MODULE=$D gdx-nolock-nocuda=$g+MODULE=$D+GDX_CUDA=no gdx-d2be992=$g+MODULE=$B" \
  --out $OUT/dev/lat-diag.txt > /dev/null 2>&1
grep -E "^tag|^test" $OUT/dev/lat-diag.txt
timeout 250 bench/ucx_vs_gdx.sh --ucx-prefix /tmp/ucx-cuda --module $m --baseline-module $B --rounds 5 \
  --out $OUT/dev/host-vs-ucx-ab.txt > /dev/null 2>&1
grep -E "^bar |^check |^tag|^test" $OUT/dev/host-vs-ucx-ab.txt
