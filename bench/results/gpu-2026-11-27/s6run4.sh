#!/usr/bin/env bash
# session 6 device call 4: the GPU test set at this tree (probed delivery; no CUDA context in a host-only rank, with
# its new test uct.gpu.ucp_gpu_check.host_no_context), the system UCX 1.16 + Open MPI module tests, and the CUDA
# tag_bw bars (engine vs UCP's pipeline vs upstream sm,cuda_copy) 1 round.
set -uo pipefail
mkdir -p $OUT/dev
scripts/device-run.sh --ucx-src .carry/ucx-1.22.0.tar.gz --sysucx .carry/ucx-1.16.0.tar.gz --rounds 1 \
  --skip probes,sanitize,bench,host-bench > $OUT/dev/console.txt 2>&1
grep -E "^=== |tests passed|tests failed|\(Failed\)|\(Timeout\)|FAILED|^bar |host_no_context" $OUT/dev/console.txt | tail -30
