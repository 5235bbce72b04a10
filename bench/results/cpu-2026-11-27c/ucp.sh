#!/usr/bin/env bash
# both sides of UCP tag_lat under callgrind, UCX 1.22 (no CUDA) here; $1 name, $2 TLS; rest env
name=$1; tls=$2; shift 2
P=/tmp/ucx-matrix/ucx-1.22.0-install
export PATH=$P/bin:$PATH LD_LIBRARY_PATH=$P/lib UCX_PLUGIN_PATH=/work/main/build-ucx1.22/src/uct
n=3000; p=$((13000 + RANDOM % 2000))
env UCX_TLS=$tls "$@" taskset -c 0 valgrind --tool=callgrind --callgrind-out-file=/tmp/cg/srv.$name ucx_perftest -t tag_lat -s 8 -n $n -p $p > /tmp/cg/srv.$name.log 2>&1 & sleep 5
env UCX_TLS=$tls "$@" taskset -c 1 valgrind --tool=callgrind --callgrind-out-file=/tmp/cg/cli.$name ucx_perftest -t tag_lat -s 8 -n $n -p $p 127.0.0.1 > /tmp/cg/cli.$name.log 2>&1
wait
