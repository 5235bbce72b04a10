#!/usr/bin/env bash
# session 16, call 2 (same tree as call 1): Open MPI 4.1.4 over Debian's UCX 1.13.1 built with CUDA, CUDA buffers on
# both ranks, MPS on, gdx-run's default against UCX's default (UCX_TLS=all) and P2P off (GDX_P2P=no against UCX's
# sm,self,cuda_copy); bench/mpi/gdx_vs_ucx.sh, 3 alternating rounds, 8 B .. 4 MiB.
t0=$(date +%s)
timeout 590 scripts/device-run.sh --carry .carry --skip probes,tests,uct,sanitize,sysucx,bench,uct-bench
echo "device-run exit $? at $(( $(date +%s) - t0 )) s"
