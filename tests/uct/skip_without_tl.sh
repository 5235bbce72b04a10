#!/usr/bin/env bash
# skip_without_tl.sh MODULE TL CMD...: runs CMD when `ucx_info -d` lists TL (with the module preloaded), else
# exits 77 (skipped) saying why. For tests that need hardware this host may lack (gdx_rc needs an RDMA device).
. "$(dirname "$0")/lib.sh"
module="$1" tl="$2"; shift 2
out=$(ucx_info_with "$module" -d 2>/dev/null)
grep -q "Transport: $tl\$" <<<"$out" ||
  skip "$tl is not available here (no device for it; run inside the soft-RoCE guest: tests/rxe/)"
exec "$@"
