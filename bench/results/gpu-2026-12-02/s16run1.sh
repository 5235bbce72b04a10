#!/usr/bin/env bash
# session 16, call 1: the registry-only stack (scripts/device-run.sh, .carry/ from scripts/carry-debian.sh download),
# the GPU test set and the module's host checks on the tree that finishes the connect handshake from the first
# operation (shm/cuda_ipc Channel::finish_connect), queues tcp's early active messages, and lets an interface flush
# pass over broken endpoints. No benches.
t0=$(date +%s)
timeout 580 scripts/device-run.sh --carry .carry --skip probes,sanitize,bench,uct-bench,mpi-bench
echo "device-run exit $? at $(( $(date +%s) - t0 )) s"
