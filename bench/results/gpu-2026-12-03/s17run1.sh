#!/usr/bin/env bash
# session 17, call 1: tree with gdx-run's new default (UCX's transports, gdx's for what UCX lacks) and the busy-peer
# change (GDX_PEER_SILENCE_TIMEOUT). Debian's UCX 1.13.1 built with CUDA, gdx against it, the GPU test set, the
# module's host checks, then Open MPI with CUDA and host buffers: gdx-run's default vs UCX's default (3 rounds).
t0=$(date +%s)
timeout 590 scripts/device-run.sh --carry .carry --skip probes,sanitize,sysucx,bench,uct-bench \
  --mpi default-cuda,default-host
echo "device-run exit $? at $(( $(date +%s) - t0 )) s"
