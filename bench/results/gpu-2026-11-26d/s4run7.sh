#!/usr/bin/env bash
# session 4 device call 7: the GPU test set after the review mend (48dac95: HubConfig::from, used by cuda_ipc too).
set -uo pipefail
mkdir -p $OUT/dev
scripts/device-run.sh --skip probes,sanitize,sysucx,bench,uct-bench,host-bench > $OUT/dev/console.txt 2>&1
grep -E "^=== |tests passed|tests failed|\(Failed\)|\(Timeout\)|FAILED" $OUT/dev/console.txt | tail -12
