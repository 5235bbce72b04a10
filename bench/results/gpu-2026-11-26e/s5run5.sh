#!/usr/bin/env bash
# session 5 device call 5: the GPU test set at de9e683 (the idle look, gdx_aux's adaptive progress, the progress
# restructure), the system UCX 1.16 + Open MPI module tests (wire-up through gdx_aux on 1.16), the CUDA bench 1 round.
set -uo pipefail
mkdir -p $OUT/dev
scripts/device-run.sh --ucx-src .carry/ucx-1.22.0.tar.gz --sysucx .carry/ucx-1.16.0.tar.gz --rounds 1 \
  --skip probes,sanitize,bench,host-bench > $OUT/dev/console.txt 2>&1
grep -E "^=== |tests passed|tests failed|\(Failed\)|\(Timeout\)|FAILED|^bar " $OUT/dev/console.txt | tail -24
