#!/usr/bin/env bash
# session 6 device call 3 (diagnosis): (a) is the UCT-level gap to posix the ring's footprint? am_lat 8 B, 9
# alternating rounds: posix (FIFO 256 x 128 B = 32 KiB), posix with a 1 MiB FIFO (UCX_POSIX_FIFO_SIZE=8192), gdx_shm
# with its default 1 MiB ring, with a 64 KiB ring, and with the wakeup fence on every send (GDX_SHM_MEMBARRIER=no).
# (b) after the lazy copy queue of cuda_ipc and the context-free hook self-test: does a host-only UCP process still
# retain a primary context (the backtrace diagnosis copy of this tree)?
set -uo pipefail
mkdir -p $OUT/dev
t0=$(date +%s)
scripts/ucx-build.sh ucx .carry/ucx-1.22.0.tar.gz > $OUT/dev/ucx-build.log 2>&1 || { tail -30 $OUT/dev/ucx-build.log; exit 1; }
rm -rf /tmp/diag && mkdir -p /tmp/diag && tar --exclude=./build* --exclude=./.carry --exclude=./.git -cf - . | tar -xf - -C /tmp/diag
sed -n '/^python3 - <<.PY.$/,/^PY$/p' .carry/s6run1.sh | sed '1d;$d' > /tmp/p.py && python3 /tmp/p.py
grep -q unistd /tmp/diag/src/memtype/cuda_driver.cpp || sed -i '1i #include <unistd.h>' /tmp/diag/src/memtype/cuda_driver.cpp
( scripts/ucx-build.sh module /tmp/diag /tmp/diag/build > $OUT/dev/diag-build.log 2>&1 ) &
scripts/ucx-build.sh module . build-uct-bench > $OUT/dev/build.log 2>&1 || { tail -30 $OUT/dev/build.log; exit 1; }
wait
echo "built: $(( $(date +%s) - t0 )) s"
export LD_LIBRARY_PATH=/tmp/ucx-cuda/lib
{
  for tls in gdx_shm,gdx_aux:aux gdx_shm,gdx_ipc,gdx_copy,gdx_aux:aux; do
    echo "# UCX_TLS=$tls ucx_info -e -u t, diagnosis copy of this tree (a line per primary-context retain)"
    env UCX_PLUGIN_PATH=/tmp/diag/build/src/uct UCX_TLS=$tls timeout 60 /tmp/ucx-cuda/bin/ucx_info -e -u t 2>&1 | grep -A20 GDXDIAG | head -24
    echo "# exit/lines: $(env UCX_PLUGIN_PATH=/tmp/diag/build/src/uct UCX_TLS=$tls timeout 60 /tmp/ucx-cuda/bin/ucx_info -e -u t 2>&1 | grep -c GDXDIAG) retains"
  done
} > $OUT/dev/ctx-backtrace.txt 2>&1
pt=/tmp/ucx-cuda/bin/ucx_perftest
m=$PWD/build-uct-bench/src/uct
{
echo "# ucx_perftest -t am_lat -s 8 -n 200000, UCT level, -d memory; server CPU 0, client CPU 1; 9 alternating rounds"
echo "# $(date -u '+%F %T UTC'), $(uname -sr), UCX 1.22.0 with CUDA; gdx = this tree's module"
for r in 1 2 3 4 5 6 7 8 9; do
  for c in "posix posix" "posix-fifo1M posix UCX_POSIX_FIFO_SIZE=8192" "gdx gdx_shm" "gdx-ring64K gdx_shm GDX_SHM_RING_SIZE=64K" "gdx-fence gdx_shm GDX_SHM_MEMBARRIER=no"; do
    read -r name tl var <<<"$c"
    p=$((13000 + RANDOM % 2000))
    env UCX_PLUGIN_PATH=$m $var taskset -c 0 $pt -p $p -t am_lat -x $tl -d memory -s 8 -n 200000 > /tmp/srv.txt 2>&1 & sleep 1
    v=$(env UCX_PLUGIN_PATH=$m $var taskset -c 1 $pt 127.0.0.1 -p $p -t am_lat -x $tl -d memory -s 8 -n 200000 2>&1 | awk '/^Final:/ {print $3}')
    wait
    echo "raw $name am_lat 8 $v"
  done
done
} > $OUT/dev/uct-am-lat.txt 2>&1
python3 - $OUT/dev/uct-am-lat.txt <<'PY' | tee -a $OUT/dev/uct-am-lat.txt
import sys,collections
d=collections.defaultdict(list)
for l in open(sys.argv[1]):
    f=l.split()
    if f and f[0]=='raw' and len(f)>4: d[f[1]].append(float(f[4]))
med=lambda v: sorted(v)[len(v)//2]
for k,v in d.items(): print('am_lat', k, 'median', med(v), v)
PY
echo "am_lat done: $(( $(date +%s) - t0 )) s"
cat $OUT/dev/ctx-backtrace.txt | head -60
