#!/usr/bin/env bash
# /tmp/cg2.sh NAME TLS MODULE(or -) ITERS : both sides under callgrind, tag_lat 8 B; prints client total Ir
name=$1 tls=$2 mod=$3 iters=${4:-20000}
cd /work/main
envs=(UCX_TLS=$tls)
if [ "$mod" != - ]; then mapfile -t l < <(tools/gdx-run --module "$mod" --print-load-env); envs+=("${l[@]}"); fi
port=$((20000 + RANDOM % 20000))
env "${envs[@]}" taskset -c 0 timeout 600 valgrind --tool=callgrind --callgrind-out-file=/tmp/cg2-$name-$iters.srv.out ucx_perftest -p $port >/tmp/cg2-$name.srv 2>&1 &
sleep 3
env "${envs[@]}" taskset -c 1 timeout 600 valgrind --tool=callgrind --callgrind-out-file=/tmp/cg2-$name-$iters.out \
  ucx_perftest 127.0.0.1 -p $port -t tag_lat -s 8 -n $iters >/tmp/cg2-$name.cli 2>&1
wait
echo "$name $iters cli $(grep -E "^totals" /tmp/cg2-$name-$iters.out) srv $(grep -E "^totals" /tmp/cg2-$name-$iters.srv.out)"
