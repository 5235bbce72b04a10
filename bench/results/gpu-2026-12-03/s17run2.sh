#!/usr/bin/env bash
# session 17, call 2 (same tree as call 1 plus the A/A mode of gdx_vs_ucx.sh): Open MPI with CUDA buffers under MPS,
# 5 alternating rounds: gdx-run's default vs UCX's default, and UCX alone vs UCX alone (A/A: the noise floor) in the
# same call; then 3 rounds of 4 pairs (default), P2P off (gdx staging vs sm,self,cuda_copy) and gdx's own paths
# (gdx_shm,gdx_ipc vs sm,self,cuda_copy,cuda_ipc) as diagnosis.
t0=$(date +%s)
timeout 590 scripts/device-run.sh --carry .carry --rounds 5 --skip probes,tests,uct,sanitize,sysucx,bench,uct-bench \
  --mpi default-cuda,aa-cuda,pairs4-cuda,p2p-off,gdx-paths-cuda
echo "device-run exit $? at $(( $(date +%s) - t0 )) s"
