#!/usr/bin/env bash
# session 5 device call 2 (warm machine: UCX 1.22 with CUDA and this tree's module from call 1): what a CUDA-aware
# gdx_shm process does beyond a GDX_CUDA=no one on the host latency path (endpoints and interfaces UCP creates,
# protocols it selects), then the GPU test set and the CUDA bench (1 round).
set -uo pipefail
mkdir -p $OUT/dev
export LD_LIBRARY_PATH=/tmp/ucx-cuda/lib PATH=/tmp/ucx-cuda/bin:$PATH
m=$PWD/build-uct-bench/src/uct
for v in cuda nocuda; do
  e=(UCX_PLUGIN_PATH=$m UCX_TLS=gdx_shm,gdx_aux:aux UCX_PROTO_INFO=y GDX_LOG_LEVEL=debug)
  [ $v = nocuda ] && e+=(GDX_CUDA=no)
  env "${e[@]}" ucx_perftest -t tag_lat -s 8 -n 20000 -p 13399 > $OUT/dev/diag-$v-srv.txt 2>&1 & sleep 2
  env "${e[@]}" ucx_perftest -t tag_lat -s 8 -n 20000 -p 13399 127.0.0.1 > $OUT/dev/diag-$v-cli.txt 2>&1
  wait
  echo "== $v: client lines: ep/iface creations, protocols"
  grep -ciE "ep create|ep_create|connect" $OUT/dev/diag-$v-cli.txt
  grep -iE "iface open|interface.*open|md gdx|endpoint|ep .*creat" $OUT/dev/diag-$v-cli.txt | sed 's/^\[[^]]*\] //' | cut -c1-200 | sort | uniq -c | sort -rn | head -12
  grep -E "tag_send|eager|egr" $OUT/dev/diag-$v-cli.txt | cut -c1-160 | head -12
done
scripts/device-run.sh --ucx-src .carry/ucx-1.22.0.tar.gz --rounds 1 --skip probes,sanitize,sysucx,bench,host-bench > $OUT/dev/console.txt 2>&1
grep -E "^=== |tests passed|tests failed|\(Failed\)|\(Timeout\)|FAILED|^bar " $OUT/dev/console.txt | tail -16
