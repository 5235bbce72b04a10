#!/usr/bin/env bash
# gdx tcp put bandwidth against iperf3 over loopback, in the same run, one connection each.
#
#   bench/tcp_vs_iperf.sh [build-dir] [rounds]      (defaults: build, 3)
#
# iperf3: one stream (-P 1) for 10 s. gdx: gdx_tcp_peer perf-put, 20 puts of 256 MiB one after another on one
# endpoint (one TCP connection), both processes event-driven (--wakeup: they sleep on the interface's wakeup
# descriptor when idle, as iperf3 sleeps in select); the same run busy-polling is printed for information.
# They alternate for `rounds` rounds so a busy machine hurts all alike; the medians and the ratio are
# printed. The bar: gdx >= 80% of iperf3.
# Output goes to stdout and to bench/results/tcp-vs-iperf-<date>.txt.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
rounds=${2:-3}
peer=$build/tests/transport/gdx_tcp_peer
[ -x "$peer" ] || { echo "no $peer: build the gdx_tcp_peer target first" >&2; exit 2; }
command -v iperf3 >/dev/null || { echo "iperf3 not installed (apt-get install iperf3)" >&2; exit 2; }
out=$root/bench/results/tcp-vs-iperf-$(date -u +%Y-%m-%d).txt
tmp=$(mktemp -d)
# Every process started is recorded in a file (the report runs in a pipeline's subshell) and killed on exit.
started() { echo "$1" >>"$tmp/pids"; last_pid=$1; }
reaped() { sed -i "/^$1\$/d" "$tmp/pids"; } # waited for: its pid may be reused, never kill it later
cleanup() {
    [ -f "$tmp/pids" ] && while read -r p; do kill "$p" 2>/dev/null || true; done <"$tmp/pids"
    rm -rf "$tmp"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

iperf_once() { # sets bps: bits/s received
    local port; port=$(free_port)
    iperf3 -s -1 -B 127.0.0.1 -p "$port" >"$tmp/iperf-server.out" 2>&1 & started $!
    for _ in $(seq 100); do ss -ltn "sport = :$port" | grep -q LISTEN && break; sleep 0.05; done
    iperf3 -c 127.0.0.1 -p "$port" -t 10 -P 1 -J >"$tmp/iperf.json" 2>&1 || { cat "$tmp/iperf.json" >&2; exit 1; }
    wait "$last_pid" || true
    reaped "$last_pid"
    bps=$(python3 -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"]))' "$tmp/iperf.json")
}

gdx_once() { # [--wakeup]: sets bps: bits/s of 256 MiB puts
    rm -f "$tmp/target.out" "$tmp/gdx.out" # never read the previous round's port
    "$peer" target --listen --bootstrap 127.0.0.1:0 --bytes 256M "$@" >"$tmp/target.out" 2>"$tmp/target.err" & started $!
    local port=""
    for _ in $(seq 100); do port=$(sed -n 's/^BOOTSTRAP_PORT=//p' "$tmp/target.out"); [ -n "$port" ] && break; sleep 0.05; done
    [ -n "$port" ] || { echo "target did not start: $(cat "$tmp/target.err")" >&2; exit 1; }
    "$peer" perf-put --bootstrap "127.0.0.1:$port" --bytes 256M --iters 20 "$@" >"$tmp/gdx.out" ||
        { echo "gdx perf-put failed" >&2; exit 1; }
    wait "$last_pid"
    reaped "$last_pid"
    bps=$(sed -n 's/.*bandwidth_Bps=\([0-9]*\).*/\1/p' "$tmp/gdx.out")
    [ -n "$bps" ] || { echo "no bandwidth in: $(cat "$tmp/gdx.out")" >&2; exit 1; }
    bps=$(awk -v b="$bps" 'BEGIN { printf "%.0f\n", b * 8 }')
}

median() { sort -n | awk '{ v[NR] = $1 } END { printf "%.0f\n", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
gbit() { awk -v b="$1" 'BEGIN { printf "%.2f Gbit/s", b / 1e9 }'; }

report() {
    echo "# gdx tcp transport: 256 MiB put bandwidth vs iperf3, loopback, 1 connection each"
    echo "command: bench/tcp_vs_iperf.sh $*"
    echo "date:    $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "machine: $(uname -srvmo)"
    echo "nproc:   $(nproc)   load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "cpu:     $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
    echo "iperf3:  $(iperf3 --version | head -1)"
    local rev; rev=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')
    git -C "$root" diff --quiet HEAD -- src/transport/tcp src/transport/wire.cpp src/transport/rkey_table.cpp \
        tests/transport 2>/dev/null || rev="$rev+uncommitted"
    echo "gdx:     $rev ($peer)"
    echo
    : >"$tmp/i"; : >"$tmp/g"; : >"$tmp/s"
    for r in $(seq "$rounds"); do
        iperf_once; i=$bps; echo "$i" >>"$tmp/i"
        gdx_once --wakeup; g=$bps; echo "$g" >>"$tmp/g"
        gdx_once; s=$bps; echo "$s" >>"$tmp/s"
        echo "round $r: iperf3 $(gbit "$i")   gdx put 256M $(gbit "$g")   (busy-polling: $(gbit "$s"))"
    done
    mi=$(median <"$tmp/i"); mg=$(median <"$tmp/g"); ms=$(median <"$tmp/s")
    echo
    echo "median iperf3 (1 stream):        $(gbit "$mi")"
    echo "median gdx tcp put (256 MiB):    $(gbit "$mg")"
    echo "  (informational: both gdx processes busy-polling progress() instead of sleeping on the wakeup fd:"
    echo "   $(gbit "$ms"); on a loaded 2-core machine spinning processes take CPU from the copy work)"
    awk -v g="$mg" -v i="$mi" 'BEGIN { printf "ratio gdx/iperf3: %.0f%% (bar: 80%%) -> %s\n", 100 * g / i, (g >= 0.8 * i) ? "PASS" : "MISS" }'
}
report "$@" | tee "$out"
