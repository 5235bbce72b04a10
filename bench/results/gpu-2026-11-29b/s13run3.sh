#!/usr/bin/env bash
# session 13, call 3 (the warm machine of call 2, same tree): call 2's module builds failed on the carried UCX
# build tree (no configure.ac, where GdxUcx.cmake reads the version): the release sources go over it, then the
# CUDA-engine bars and the host bars of call 2's plan.
set -x
root=$(pwd); t0=$(date +%s); L=/tmp/s13logs; mkdir -p $L
tar -xzf .carry/ucx-1.22.0.tar.gz -C /tmp/ucx-build --strip-components=1 --skip-old-files || exit 1
ls /tmp/ucx-build/configure.ac /tmp/ucx-build/config.h || exit 1
(scripts/ucx-build.sh module /tmp/base /tmp/bbase > $L/mod-base.log 2>&1) & base=$!
timeout 200 bench/uct_engine_vs_pipeline.sh --out $OUT/uct-engine.txt --ucx-prefix /tmp/ucx-cuda --ucx-src /tmp/ucx-build \
  --rounds 3 > $L/uct-engine.console 2>&1
grep -E "^bar|^(engine|pipeline|ucx) " $OUT/uct-engine.txt
echo "engine done at $(( $(date +%s) - t0 )) s"
pack() { tar -czf $OUT/logs.tgz -C $L .; }
wait $base || { tail -30 $L/mod-base.log; pack; exit 1; }
M=$root/build-uct-bench/src/uct/libuct_gdx.so.0
timeout 110 bench/ucx_vs_gdx.sh --ucx-prefix /tmp/ucx-cuda --module $M --baseline-module /tmp/bbase/src/uct/libuct_gdx.so.0 \
  --rounds 10 --sizes "" --configs "ucx-posix=posix gdx-shm=gdx_shm,gdx_aux:aux" --out $OUT/lat.txt > $L/lat.console 2>&1
echo "lat done at $(( $(date +%s) - t0 )) s"
left=$(( 560 - ($(date +%s) - t0) ))
timeout $left bench/ucx_vs_gdx.sh --ucx-prefix /tmp/ucx-cuda --module $M --rounds 3 \
  --configs "ucx-posix=posix gdx-shm=gdx_shm,gdx_aux:aux" --out $OUT/bw.txt > $L/bw.console 2>&1
echo "bw done at $(( $(date +%s) - t0 )) s"
pack
grep -E "^bar|^check|^tag_" $OUT/lat.txt $OUT/bw.txt
