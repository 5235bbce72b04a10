#!/usr/bin/env bash
# session 4 device call 3: the final tree (f9df64b + docs). GPU test set, system UCX 1.16 + Open MPI 4.1.6 module set
# (CPU and GPU uct.*), the CUDA bench through UCX 1.22 (3 rounds).
set -uo pipefail
mkdir -p $OUT/dev
scripts/device-run.sh --ucx-src .carry/ucx-1.22.0.tar.gz --sysucx .carry/ucx-1.16.0.tar.gz --rounds 3 --skip probes,sanitize,bench,host-bench > $OUT/dev/console.txt 2>&1
grep -E "^=== |^bar |^also |tests passed|tests failed|\(Failed\)|\(Timeout\)|FAILED" $OUT/dev/console.txt | tail -30
grep -E "^(size|1M|256M) " $OUT/dev/uct-engine.txt
