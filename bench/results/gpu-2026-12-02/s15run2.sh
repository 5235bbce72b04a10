#!/usr/bin/env bash
# session 15, call 2: the registry-only stack on the GPU machine (Debian 12's UCX 1.13.1 built there with CUDA from
# Debian's source, Debian 12's Open MPI 4.1.4 unpacked; .carry/ from scripts/carry-debian.sh download), then the GPU
# test set, the module's host checks and gdx-run on the machine's own UCX 1.16. The final tree: the shared pending rule (new operations wait behind parked requests) and the gtest fixes. No benches.
t0=$(date +%s)
timeout 580 scripts/device-run.sh --carry .carry --skip probes,sanitize,bench,uct-bench
echo "device-run exit $? at $(( $(date +%s) - t0 )) s"
