#!/usr/bin/env bash
# both sides of UCT am_lat under callgrind; $1 name, $2 TL, $3 module path or -
name=$1; tl=$2; mod=$3; shift 3
n=3000
p=$((13000 + RANDOM % 2000))
pre=(); [ "$mod" != - ] && pre=(LD_PRELOAD=$mod)
env "${pre[@]}" "$@" taskset -c 0 valgrind --tool=callgrind --callgrind-out-file=/tmp/cg/srv.$name ucx_perftest -t am_lat -x $tl -d memory -s 8 -n $n -p $p > /tmp/cg/srv.$name.log 2>&1 & sleep 4
env "${pre[@]}" "$@" taskset -c 1 valgrind --tool=callgrind --callgrind-out-file=/tmp/cg/cli.$name ucx_perftest -t am_lat -x $tl -d memory -s 8 -n $n -p $p 127.0.0.1 > /tmp/cg/cli.$name.log 2>&1
wait
