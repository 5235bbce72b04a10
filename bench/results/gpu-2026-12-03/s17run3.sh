#!/usr/bin/env bash
# session 17, call 3: the tree with the busy-peer connection set-up (shm channel, which cuda_ipc shares, and tcp):
# the GPU test set and the module's host checks again. No benches.
t0=$(date +%s)
timeout 590 scripts/device-run.sh --carry .carry --skip probes,sanitize,sysucx,bench,uct-bench,mpi-bench
echo "device-run exit $? at $(( $(date +%s) - t0 )) s"
