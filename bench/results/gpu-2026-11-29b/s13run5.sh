#!/usr/bin/env bash
# session 13, call 5: call 4 left the ~13 ns gap to posix at the UCT level (am_lat) and no effect of the ring's
# size. Two diagnosis builds of this tree (not products), same 8 alternating rounds, tag_lat and am_lat:
#   gdx-a128:  kRecAlign 128 (src/transport/shm/ring.h): each small message takes a 128-byte line pair, as UCX mm's
#              128-byte FIFO elements do, so the L2's adjacent-line prefetcher never pairs two messages' cells;
#   gdx-nopf:  without RingReader's software prefetch of the next cell.
# Returns: lat.txt, logs.tgz.
set -x
root=$(pwd); t0=$(date +%s); L=/tmp/s13logs5; mkdir -p $L
tar -C /tmp -xJf .carry/ucx-cuda.tar.xz && tar -xzf .carry/ucx-1.22.0.tar.gz -C /tmp/ucx-build --strip-components=1 --skip-old-files || exit 1
for v in a128 nopf; do rm -rf /tmp/t-$v; mkdir -p /tmp/t-$v; git ls-files -z | grep -zv '^bench/results/' | xargs -0 cp --parents -t /tmp/t-$v; done
sed -i 's/inline constexpr size_t kRecAlign = 64;/inline constexpr size_t kRecAlign = 128;/' /tmp/t-a128/src/transport/shm/ring.h
sed -i 's/^\( *\)__builtin_prefetch(data_ + ((pos + span)/\1if (false) __builtin_prefetch(data_ + ((pos + span)/' /tmp/t-nopf/src/transport/shm/ring.h
grep -n "kRecAlign = " /tmp/t-a128/src/transport/shm/ring.h; grep -n "if (false) __builtin_prefetch" /tmp/t-nopf/src/transport/shm/ring.h
scripts/ucx-build.sh module "$root" /tmp/bnew > $L/mod-new.log 2>&1 & a=$!
scripts/ucx-build.sh module /tmp/t-a128 /tmp/ba128 > $L/mod-a128.log 2>&1 & b=$!
scripts/ucx-build.sh module /tmp/t-nopf /tmp/bnopf > $L/mod-nopf.log 2>&1 & c=$!
wait $a && wait $b && wait $c || { tail -20 $L/mod-*.log; tar -czf $OUT/logs.tgz -C $L .; exit 1; }
echo "modules built at $(( $(date +%s) - t0 )) s"
timeout 330 bench/ucx_vs_gdx.sh --ucx-prefix /tmp/ucx-cuda --module /tmp/bnew/src/uct/libuct_gdx.so.0 --rounds 8 --sizes "" --uct-lat \
  --configs "ucx-posix=posix gdx-shm=gdx_shm,gdx_aux:aux gdx-a128=gdx_shm,gdx_aux:aux+MODULE=/tmp/ba128/src/uct/libuct_gdx.so.0 gdx-nopf=gdx_shm,gdx_aux:aux+MODULE=/tmp/bnopf/src/uct/libuct_gdx.so.0" \
  --out $OUT/lat.txt > $L/lat.console 2>&1
echo "lat done at $(( $(date +%s) - t0 )) s"
tar -czf $OUT/logs.tgz -C $L .
grep -E "^bar|^tag_|^am_|^#.*config" $OUT/lat.txt
