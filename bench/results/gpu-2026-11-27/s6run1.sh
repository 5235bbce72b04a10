#!/usr/bin/env bash
# session 6 device call 1: (a) UCT-level am_lat 8 B, 9 alternating rounds: posix, the module at e88bab3 (session 5's
# final), and this tree's module (the probed delivery: the idle look's changed word delivers its messages under the
# lock without a full progress, and the probe stays valid); (b) a diagnosis copy that prints a backtrace where gdx
# retains a CUDA primary context, run in a host-only UCP process (ucx_info -e), to find what makes one at start.
set -uo pipefail
mkdir -p $OUT/dev
t0=$(date +%s)
scripts/ucx-build.sh ucx .carry/ucx-1.22.0.tar.gz > $OUT/dev/ucx-build.log 2>&1 || { tail -30 $OUT/dev/ucx-build.log; exit 1; }
echo "ucx: $(( $(date +%s) - t0 )) s"
rm -rf /tmp/base /tmp/diag && mkdir -p /tmp/base /tmp/diag && tar -xzf .carry/base-e88bab3.tar.gz -C /tmp/base
tar --exclude=./build* --exclude=./.carry --exclude=./.git -cf - . | tar -xf - -C /tmp/diag
python3 - <<'PY'
import re
p='/tmp/diag/src/memtype/cuda_driver.cpp'
s=open(p).read()
s='#include <execinfo.h>\n#include <cstdio>\n'+s
s=s.replace('if (r == CUDA_SUCCESS) r = api->cuDevicePrimaryCtxRetain(&ctxs[ordinal], dev);',
 '{ void *bt[40]; int k = backtrace(bt, 40); fprintf(stderr, "GDXDIAG primary ctx retain GPU %d pid %d\\n", ordinal, (int)getpid()); backtrace_symbols_fd(bt, k, 2); }\n            if (r == CUDA_SUCCESS) r = api->cuDevicePrimaryCtxRetain(&ctxs[ordinal], dev);')
open(p,'w').write(s)
p='/tmp/diag/src/memtype/cuda_ipc_ops.cpp'
s=open(p).read()
s='#include <execinfo.h>\n#include <cstdio>\n#include <unistd.h>\n'+s
s=s.replace('if ((r = api->cuDevicePrimaryCtxRetain(&peer_ctx, dt)) != CUDA_SUCCESS) {',
 '{ void *bt[40]; int k = backtrace(bt, 40); fprintf(stderr, "GDXDIAG ipc peer ctx retain pid %d\\n", (int)getpid()); backtrace_symbols_fd(bt, k, 2); }\n    if ((r = api->cuDevicePrimaryCtxRetain(&peer_ctx, dt)) != CUDA_SUCCESS) {')
open(p,'w').write(s)
PY
grep -n GDXDIAG /tmp/diag/src/memtype/*.cpp > $OUT/dev/diag-patch.txt
grep -q unistd /tmp/diag/src/memtype/cuda_driver.cpp || sed -i '1i #include <unistd.h>' /tmp/diag/src/memtype/cuda_driver.cpp
( scripts/ucx-build.sh module /tmp/base /tmp/base/build > $OUT/dev/base-build.log 2>&1 ) &
( scripts/ucx-build.sh module /tmp/diag /tmp/diag/build > $OUT/dev/diag-build.log 2>&1 ) &
scripts/ucx-build.sh module . build-uct-bench > $OUT/dev/build.log 2>&1 || { tail -30 $OUT/dev/build.log; exit 1; }
wait
for b in /tmp/base/build /tmp/diag/build; do [ -f $b/src/uct/libuct_gdx.so.0 ] || { echo "no module in $b"; tail -20 $OUT/dev/*build.log; exit 1; }; done
echo "built: $(( $(date +%s) - t0 )) s"
export LD_LIBRARY_PATH=/tmp/ucx-cuda/lib
pt=/tmp/ucx-cuda/bin/ucx_perftest
# (b) first: short
{
  echo "# UCX_TLS=gdx_shm,gdx_aux:aux ucx_info -e -u t with the diagnosis copy (backtrace at every primary-context retain)"
  env UCX_PLUGIN_PATH=/tmp/diag/build/src/uct UCX_TLS=gdx_shm,gdx_aux:aux timeout 60 /tmp/ucx-cuda/bin/ucx_info -e -u t 2>&1 | grep -v "^#" | head -80
  echo "# GDX_CUDA=no"
  env UCX_PLUGIN_PATH=/tmp/diag/build/src/uct UCX_TLS=gdx_shm,gdx_aux:aux GDX_CUDA=no timeout 60 /tmp/ucx-cuda/bin/ucx_info -e -u t 2>&1 | grep GDXDIAG
  echo "# UCX_TLS=gdx_shm,gdx_copy,gdx_aux:aux"
  env UCX_PLUGIN_PATH=/tmp/diag/build/src/uct UCX_TLS=gdx_shm,gdx_copy,gdx_aux:aux timeout 60 /tmp/ucx-cuda/bin/ucx_info -e -u t 2>&1 | grep -A30 GDXDIAG | head -40
} > $OUT/dev/ctx-backtrace.txt 2>&1
grep -oE "libuct_gdx.so.0\(\+0x[0-9a-f]+\)" $OUT/dev/ctx-backtrace.txt | grep -oE "0x[0-9a-f]+" | sort -u | head -40 |
  while read a; do echo "$a $(addr2line -f -C -i -e /tmp/diag/build/src/uct/libuct_gdx.so.0 $a | paste -sd' ' | cut -c1-300)"; done > $OUT/dev/ctx-backtrace-resolved.txt 2>&1
echo "diag: $(( $(date +%s) - t0 )) s"
{
echo "# ucx_perftest -t am_lat -s 8 -n 200000, UCT level, -d memory; server CPU 0, client CPU 1; 9 alternating rounds"
echo "# $(date -u '+%F %T UTC'), $(uname -sr), UCX 1.22.0 with CUDA; base = e88bab3's module, new = this tree's (probed delivery)"
for r in 1 2 3 4 5 6 7 8 9; do
  for c in posix:posix:$PWD/build-uct-bench/src/uct base:gdx_shm:/tmp/base/build/src/uct new:gdx_shm:$PWD/build-uct-bench/src/uct; do
    IFS=: read -r name tl m <<<"$c"
    p=$((13000 + RANDOM % 2000))
    env UCX_PLUGIN_PATH=$m taskset -c 0 $pt -p $p -t am_lat -x $tl -d memory -s 8 -n 200000 > /tmp/srv.txt 2>&1 & sleep 1
    v=$(env UCX_PLUGIN_PATH=$m taskset -c 1 $pt 127.0.0.1 -p $p -t am_lat -x $tl -d memory -s 8 -n 200000 2>&1 | awk '/^Final:/ {print $3}')
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
head -60 $OUT/dev/ctx-backtrace.txt; cat $OUT/dev/ctx-backtrace-resolved.txt | head -40
