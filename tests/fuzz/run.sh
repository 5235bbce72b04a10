#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (-fsanitize=fuzzer,address,undefined) in their own build directory
# and runs them for a bounded time in all (CI): fuzz_wire (transport frames, rkeys, addresses) gets half of it,
# fuzz_ctrl (staging control messages) and fuzz_rkey (fallback key + transport rkeys) a quarter each.
#
#   tests/fuzz/run.sh [seconds]        (total, default 60, at least 12; build dir: $GDX_FUZZ_BUILD or build-fuzz)
#
# Exit status 0: no crash, leak or timeout found. Otherwise the reproducer is under <build>/fuzz-artifacts/
# (replay it with: <build>/tests/fuzz/<target> <file>). The corpora grow in <build>/fuzz-corpus/<target>/.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
seconds=${1:-60}
build=${GDX_FUZZ_BUILD:-$root/build-fuzz}
command -v clang++ >/dev/null || { echo "clang++ not found: libFuzzer needs clang" >&2; exit 2; }

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
      -DGDX_BUILD_FUZZERS=ON -DGDX_SANITIZE=address,undefined -DGDX_BUILD_UCT=OFF >/dev/null
ninja -C "$build" -j2 fuzz_wire fuzz_ctrl fuzz_rkey

corpus=$build/fuzz-corpus/wire
artifacts=$build/fuzz-artifacts
mkdir -p "$corpus" "$artifacts"
# Seeds: one well-formed message of each kind, a packed key and an address blob, so the fuzzer starts
# past the magic and version checks.
python3 - "$corpus" <<'PY'
import os, struct, sys
d = sys.argv[1]
def hdr(t, status=0, op=0, key=0, addr=0, length=0):
    return struct.pack('<HBBiQQQQ', 0x5844, 1, t, status, op, key, addr, length)
seeds = {
    'hello': hdr(1, 0, 7, 8, 9, 8) + struct.pack('<II', 64, 0),
    'put': hdr(3, 0, 1, 0x1234, 0x1000, 16) + bytes(range(16)),
    'put_ack': hdr(4, -11, 1),
    'get': hdr(5, 0, 2, 0x1234, 0x1000, 4096) + hdr(6, 0, 2, 0, 0, 4) + b'abcd',
    'am': hdr(7, 0, 0, 3, 0, 5) + b'hello' + hdr(8, 0, 3) + hdr(9, 0, 3),
    'rkey': struct.pack('<BBHIQQQ', 1, 1, 0, 12, 0xdeadbeef, 0x7f0000000000, 1 << 20) + struct.pack('<QQ', 0x7f0000000010, 64),
    'addr': struct.pack('<BBBBHH', 1, 1, 4, 0, 4242, 0) + bytes([127, 0, 0, 1]) + bytes(12) + struct.pack('<QQ', 5, 6),
}
for name, b in seeds.items():
    open(os.path.join(d, 'seed-' + name), 'wb').write(b)
PY
# Seeds for the staging control messages (one of each type) and the fallback key (a one-chunk host region
# wrapping a tcp rkey).
mkdir -p "$build/fuzz-corpus/ctrl" "$build/fuzz-corpus/rkey"
python3 - "$build/fuzz-corpus" <<'PY'
import os, struct, sys
d = sys.argv[1]
def c(t, body): return struct.pack('<BBH', 2, t, 0) + body  # kCtrlVersion
rk = struct.pack('<BBHIQQQ', 1, 1, 0, 12, 0xdeadbeef, 0x7f0000000000, 1 << 20)[:32].ljust(32, b'\0')
ctrl = {
    'want': c(1, struct.pack('<HH', 0, 4)),
    'grant': c(2, struct.pack('<HHiIHHQQ', 0, 2, 0, 16, len(rk), 0, 0x7f0000000000, 65536) + struct.pack('<HH', 3, 5) + rk),
    'filled': c(3, struct.pack('<HHIQQQQ', 0, 3, 0, 9, 0x1234, 0, 4096)),
    'done': c(4, struct.pack('<HHiB3xQ', 0, 3, 0, 1, 9)),
    'return': c(6, struct.pack('<HHHH', 0, 2, 3, 5)),
    'get_req': c(7, struct.pack('<HHQQQQQ', len(rk), 0, 9, 0x1234, 0, 4096, 0x7f0000001000) + rk),
    'get_done': c(8, struct.pack('<iQ', -11, 9)),
    'small_put': c(9, struct.pack('<IQQQ', 0, 9, 0x1234, 0) + b'data'),
    'ping': c(12, struct.pack('<IQ', 0, 77)),
    'pong': c(13, struct.pack('<IQ', 0, 77)),
    'old_version': struct.pack('<BBH', 1, 1, 0) + struct.pack('<HH', 0, 4),
    'bye': c(14, struct.pack('<i', -9)),
    'small_put_notify': c(15, struct.pack('<IQQQQ', 0, 9, 0x1234, 0, 0xfeed) + b'data'),
    'notify': c(16, struct.pack('<IQ', 0, 0xfeed)),
}
for n, b in ctrl.items():
    open(os.path.join(d, 'ctrl', 'seed-' + n), 'wb').write(b)
key = struct.pack('<IHHQQQQIBBhII', 0x4B584447, 1, 0, 0x1234, 0x7f0000000000, 1 << 20, 512 << 10, 12, 0, 0, -1, 1, 32)
key += struct.pack('<QQB', 0, 1 << 20, 1) + rk
open(os.path.join(d, 'rkey', 'seed-key'), 'wb').write(key)
open(os.path.join(d, 'rkey', 'seed-rkey'), 'wb').write(rk)
PY
[ "$seconds" -ge 12 ] || seconds=12
run_one() { # target corpus seconds
  echo "$1: ${3}s"
  "$build/tests/fuzz/$1" -max_total_time="$3" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix="$artifacts/" -print_final_stats=1 "$2"
  echo "$1: no crash in ${3}s"
}
run_one fuzz_wire "$corpus" $((seconds / 2))
run_one fuzz_ctrl "$build/fuzz-corpus/ctrl" $((seconds / 4))
run_one fuzz_rkey "$build/fuzz-corpus/rkey" $((seconds / 4))
