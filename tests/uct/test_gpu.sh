#!/usr/bin/env bash
# ucp_gpu_check (CUDA device buffers through UCP over gdx) between two processes; exits 77 (skipped) without a GPU.
#   test_gpu.sh GDX_RUN MODULE UCP_GPU_CHECK TLS [CHECK-ARGS...]   (-r: also ucp_put_nbx/ucp_get_nbx)
. "$(dirname "$0")/lib.sh"
gdx_run="$1" module="$2" check="$3" tls="$4"
shift 4
probe=$("$check" -c 2>&1); rc=$?
[ "$rc" = 77 ] && skip "$probe"
[ "$rc" = 0 ] || fail "probe failed (exit $rc): $probe"
log="${TMPDIR:-/tmp}/uct-gpu-$$"
aux=(); [ -n "${GDX_RUN_AUX:-}" ] && aux=(--aux "$GDX_RUN_AUX")
run_pair "$log" "$gdx_run" --module "$module" --tls "$tls" "${aux[@]}" "$check" -t "$(check_alarm)" "$@"
cat "$log.server" "$log.client" | grep -E "OK|FAIL|PASS"
grep -q "ucp_gpu_check: PASS" "$log.client" && grep -q "ucp_gpu_check: PASS" "$log.server" || fail "not both sides passed"
echo "PASS"
