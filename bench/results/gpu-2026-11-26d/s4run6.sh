#!/usr/bin/env bash
# session 4 device call 6: the GPU test set on the final tree (b755fef: the membarrier fault knob after run3's tree).
set -uo pipefail
mkdir -p $OUT/dev
scripts/device-run.sh --skip probes,sanitize,sysucx,bench,uct-bench,host-bench > $OUT/dev/console.txt 2>&1
grep -E "^=== |tests passed|tests failed|\(Failed\)|\(Timeout\)|FAILED" $OUT/dev/console.txt | tail -12
