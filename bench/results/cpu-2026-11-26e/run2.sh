#!/usr/bin/env bash
# both sides under callgrind: each waits long for the other, so the client's progress calls are mostly idle
cd /work/main
U=/work/ci-check2/.ucx-matrix/ucx-1.22.0-install; export LD_LIBRARY_PATH=$U/lib PATH=$U/bin:$PATH
name=$1; shift
n=3000
env "$@" taskset -c 0 valgrind --tool=callgrind --callgrind-out-file=/tmp/cg/srv2.$name ucx_perftest -t tag_lat -s 8 -n $n -p 13377 > /tmp/cg/srv2.$name.log 2>&1 & sleep 4
env "$@" taskset -c 1 valgrind --tool=callgrind --callgrind-out-file=/tmp/cg/cg2.$name ucx_perftest -t tag_lat -s 8 -n $n -p 13377 127.0.0.1 > /tmp/cg/cli2.$name.log 2>&1
wait
