#!/usr/bin/env bash
# both sides under callgrind; $1 name, $2 module path (LD_PRELOAD for UCX 1.13)
name=$1; mod=$2; shift 2
n=3000
p=$((13000 + RANDOM % 2000))
env LD_PRELOAD=$mod UCX_TLS=gdx_shm,self,gdx_aux:aux "$@" taskset -c 0 valgrind --tool=callgrind --callgrind-out-file=/tmp/cg/srv.$name ucx_perftest -t tag_lat -s 8 -n $n -p $p > /tmp/cg/srv.$name.log 2>&1 & sleep 4
env LD_PRELOAD=$mod UCX_TLS=gdx_shm,self,gdx_aux:aux "$@" taskset -c 1 valgrind --tool=callgrind --callgrind-out-file=/tmp/cg/cli.$name ucx_perftest -t tag_lat -s 8 -n $n -p $p 127.0.0.1 > /tmp/cg/cli.$name.log 2>&1
wait
