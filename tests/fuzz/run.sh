#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (-fsanitize=fuzzer,address,undefined) in their own build directory
# and runs each for a bounded time (CI).
#
#   tests/fuzz/run.sh [seconds-per-target]        (default 60; build dir: $GDX_FUZZ_BUILD or build-fuzz)
#
# Exit status 0: no crash, leak or timeout found. Otherwise the reproducer is under <build>/fuzz-artifacts/
# (replay it with: <build>/tests/fuzz/fuzz_wire <file>). The corpus grows in <build>/fuzz-corpus/.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
seconds=${1:-60}
build=${GDX_FUZZ_BUILD:-$root/build-fuzz}
command -v clang++ >/dev/null || { echo "clang++ not found: libFuzzer needs clang" >&2; exit 2; }

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
      -DGDX_BUILD_FUZZERS=ON -DGDX_SANITIZE=address,undefined -DGDX_BUILD_UCT=OFF >/dev/null
ninja -C "$build" -j2 fuzz_wire

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
echo "fuzz_wire: ${seconds}s"
"$build/tests/fuzz/fuzz_wire" -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$artifacts/" -print_final_stats=1 "$corpus"
echo "fuzz_wire: no crash in ${seconds}s"
