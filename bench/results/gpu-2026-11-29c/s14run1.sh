#!/usr/bin/env bash
# session 14, call 1: what the remaining ~13 ns to UCX posix (UCT am_lat 8 B, H200 host) may be made of, and two
# candidate fixes measured through ucx_perftest beside posix in the same rounds:
#   probe:      bench/probes/c2c_cell_pingpong.cpp, two threads on CPUs 0,1 writing gdx's 64-byte ring cells
#               (diagnosis, not a product path): plain stores, +CLDEMOTE, two 16-byte stores, a receiver that
#               PAUSEs between looks, ...
#   gdx-shm:    this tree (GDX_UCT_IDLE_PAUSE=yes: an idle look that found nothing ends with PAUSE)
#   gdx-nopause GDX_UCT_IDLE_PAUSE=no (the session-13 behaviour)
#   gdx-demote: diagnosis build: the sender CLDEMOTEs a small message's ring cell after publishing it (no pause)
# Returns: probe.txt, lat.txt, handshake.txt, logs.tgz.
set -x
root=$(pwd); t0=$(date +%s); L=/tmp/s14logs1; mkdir -p $L
g++ -O2 -std=c++20 -pthread bench/probes/c2c_cell_pingpong.cpp -o /tmp/c2c && /tmp/c2c 0 1 200000 8 > $OUT/probe.txt 2>&1
tail -8 $OUT/probe.txt
tar -C /tmp -xJf .carry/ucx-cuda.tar.xz && tar -xzf .carry/ucx-1.22.0.tar.gz -C /tmp/ucx-build --strip-components=1 --skip-old-files || exit 1
rm -rf /tmp/t-dem; mkdir -p /tmp/t-dem; git ls-files -z | grep -zv '^bench/results/' | xargs -0 cp --parents -t /tmp/t-dem
cp bench/probes/c2c_cell_pingpong.cpp /tmp/t-dem/bench/probes/ 2>/dev/null
python3 - <<'PY'
p='/tmp/t-dem/src/transport/shm/ring.h'
s=open(p).read()
old='''        publish_at(tail_);
        tail_ += kRecAlign;'''
new='''        publish_at(tail_);
        asm volatile(".byte 0x0f, 0x1c, 0x00" : : "a"(data_ + (tail_ & (size_ - 1))) : "memory"); // cldemote (%rax)
        tail_ += kRecAlign;'''
assert s.count(old) == 1
open(p,'w').write(s.replace(old, new))
PY
grep -n "cldemote" /tmp/t-dem/src/transport/shm/ring.h || exit 1
scripts/ucx-build.sh module "$root" /tmp/bnew > $L/mod-new.log 2>&1 & a=$!
scripts/ucx-build.sh module /tmp/t-dem /tmp/bdem > $L/mod-dem.log 2>&1 & b=$!
wait $a && wait $b || { tail -20 $L/mod-*.log; tar -czf $OUT/logs.tgz -C $L .; exit 1; }
echo "modules built at $(( $(date +%s) - t0 )) s"
M=/tmp/bnew/src/uct/libuct_gdx.so.0
# Which wakeup handshake the endpoints use (membarrier: no fence on a send), from one short debug run.
mapfile -t LE < <(tools/gdx-run --module $M --print-load-env)
env "${LE[@]}" UCX_TLS=gdx_shm,gdx_aux:aux GDX_LOG_LEVEL=debug taskset -c 0 timeout 60 /tmp/ucx-cuda/bin/ucx_perftest -p 23456 > $L/hs-srv.txt 2>&1 &
sleep 2
env "${LE[@]}" UCX_TLS=gdx_shm,gdx_aux:aux GDX_LOG_LEVEL=debug taskset -c 1 timeout 60 /tmp/ucx-cuda/bin/ucx_perftest 127.0.0.1 -p 23456 -t tag_lat -n 1000 > $L/hs-cli.txt 2>&1
wait
grep -h "wakeup handshake\|lockfree\|membarrier" $L/hs-*.txt | sort | uniq -c > $OUT/handshake.txt; cat $OUT/handshake.txt
timeout 360 bench/ucx_vs_gdx.sh --ucx-prefix /tmp/ucx-cuda --module $M --rounds 10 --sizes "" --uct-lat \
  --configs "ucx-posix=posix gdx-shm=gdx_shm,gdx_aux:aux gdx-nopause=gdx_shm,gdx_aux:aux+GDX_UCT_IDLE_PAUSE=no gdx-demote=gdx_shm,gdx_aux:aux+GDX_UCT_IDLE_PAUSE=no+MODULE=/tmp/bdem/src/uct/libuct_gdx.so.0" \
  --out $OUT/lat.txt > $L/lat.console 2>&1
echo "lat done at $(( $(date +%s) - t0 )) s"
tar -czf $OUT/logs.tgz -C $L .
grep -E "^bar|^tag_|^am_" $OUT/lat.txt
