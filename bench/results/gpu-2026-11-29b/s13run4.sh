#!/usr/bin/env bash
# session 13, call 4: why UCP tag_lat 8 B over gdx_shm stays ~20 ns above posix on the H200 host although call 3's
# tree runs ~40 fewer instructions a message than the landed one (callgrind here; call 3: 0.99x of the landed
# module's latency). Two diagnoses in the same 8 alternating rounds, each config with UCT-level am_lat beside its
# UCP tag_lat (--uct-lat: the transport without UCP):
#   gdx-64k: GDX_SHM_RING_SIZE=64K, the smallest ring: its 1024 cells stay in the cores' caches, as UCX mm's
#            64-element FIFO does, where the default 1 MiB ring's cells are a lap (16384 messages) old when reused.
# Returns: lat.txt, logs.tgz.
set -x
root=$(pwd); t0=$(date +%s); L=/tmp/s13logs4; mkdir -p $L
tar -C /tmp -xJf .carry/ucx-cuda.tar.xz && tar -xzf .carry/ucx-1.22.0.tar.gz -C /tmp/ucx-build --strip-components=1 --skip-old-files || exit 1
scripts/ucx-build.sh module "$root" /tmp/bnew > $L/mod-new.log 2>&1 || { tail -30 $L/mod-new.log; exit 1; }
echo "module built at $(( $(date +%s) - t0 )) s"
{ lscpu; cat /sys/kernel/mm/transparent_hugepage/enabled; } > $L/topo.txt 2>&1
M=/tmp/bnew/src/uct/libuct_gdx.so.0
timeout 400 bench/ucx_vs_gdx.sh --ucx-prefix /tmp/ucx-cuda --module $M --rounds 8 --sizes "" --uct-lat \
  --configs "ucx-posix=posix gdx-shm=gdx_shm,gdx_aux:aux gdx-64k=gdx_shm,gdx_aux:aux+GDX_SHM_RING_SIZE=64K" \
  --out $OUT/lat.txt > $L/lat.console 2>&1
echo "lat done at $(( $(date +%s) - t0 )) s"
tar -czf $OUT/logs.tgz -C $L .
grep -E "^bar|^check|^tag_|^am_|^raw" $OUT/lat.txt
