#!/usr/bin/env bash
# UCP tag send/recv (and with -r ucp_put_nbx/ucp_get_nbx) between two processes over one gdx transport, through
# the staging engine: GDX_FAULT_P2P_EVERY=N denies the direct path to every Nth fragment (1: all of them, 3: a
# message mixes direct and staged fragments; 0: none, CUDA memory over shm or tcp is staged anyway). Byte-exact at
# every size (ucp_gpu_check), and the engine's path totals (GDX_UCT_STATS) must show what EXPECT says:
#   staged  staged bytes and no direct ones;
#   mixed   staged and direct bytes, and one request whose path was both (the info line of a mixed message).
# Skips (77) when the memory kind cannot be used here (cuda without a GPU).
#   test_ucp_xfer.sh GDX_RUN MODULE UCP_GPU_CHECK TLS MEM N EXPECT [CHECK-ARGS...]
#     TLS   gdx transports for UCX_TLS (the first one is the one checked), e.g. gdx_shm or gdx_tcp,gdx_copy
#     MEM   host | cuda
. "$(dirname "$0")/lib.sh"
gdx_run="$1" module="$2" check="$3" tls="$4" mem="$5" every="$6" expect="$7"
shift 7
tl="${tls%%,*}"
probe=$("$check" -m "$mem" -c 2>&1); rc=$?
[ "$rc" = 77 ] && skip "$probe"
[ "$rc" = 0 ] || fail "probe failed (exit $rc): $probe"
log="${TMPDIR:-/tmp}/uct-xfer-$tl-$mem-$$"
aux=(); [ -n "${GDX_RUN_AUX:-}" ] && aux=(--aux "$GDX_RUN_AUX")
export GDX_FAULT_P2P_EVERY="$every" GDX_UCT_STATS=yes GDX_LOG_LEVEL=info
UCT_TEST_TIMEOUT=${UCT_TEST_TIMEOUT:-500} run_pair "$log" "$gdx_run" --module "$module" --tls "$tls" "${aux[@]}" \
  "$check" -m "$mem" -t 480 "$@"
grep -hE "^(tag|put|get)|PASS|FAIL" "$log.server" "$log.client" | grep -v " OK$" || true
grep -q "ucp_gpu_check: PASS" "$log.client" && grep -q "ucp_gpu_check: PASS" "$log.server" ||
  fail "not both sides passed"

check_engine_paths "$tl" "$expect" 2 "$log.server" "$log.client"
rm -f "$log.server" "$log.client"
echo "PASS"
