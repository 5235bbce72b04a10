#!/usr/bin/env bash
# The UCX UCT conformance stage: UCX's own UCT gtest (1.13.1, built by build.sh beside this file) on gdx's
# transports and, in the same run and with the same settings, on UCX's own transports of the same class, so that
# an environmental failure shows on both.
#
#   tests/uct/gtest/run.sh [--module PATH] [--logdir DIR] [--test-timeout S] [--tls a,b] [--classes c,d]
#     --module PATH     gdx's module (default build/src/uct/libuct_gdx.so.0), loaded as the running UCX needs
#                       (tests/uct/lib.sh with_loaded: for 1.13 the loader preloaded)
#     --logdir DIR      where per-transport logs and results.tsv go (default build/gtest-uct)
#     --test-timeout S  a test running longer than S seconds is reported "hung" (default 60)
#     --tls LIST        only these transports (default: all below that exist here)
#     --classes LIST    only these gtest classes (default: the suites below)
#
# Transports: gdx_shm, gdx_tcp, gdx_copy, gdx_rc, gdx_ipc against posix, tcp, cma, rc_verbs, cuda_copy; a
# transport absent here (no RDMA device, no GPU) has no tests and is reported so.
# Output: one line per transport "gtest <tl>: P passed, F failed, S skipped (H hung)"; the known gdx failures by
# class; "now passes: remove it from known-failures.txt" for an entry none of whose tests failed; wall time.
# Exit status: non-zero when a gdx test not listed in known-failures.txt fails or hangs, or when any test of a
# UCX transport fails or hangs.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
module="$root/build/src/uct/libuct_gdx.so.0"
logdir="$root/build/gtest-uct"
test_timeout=60
tls=""
# The issue's suites, by their 1.13.1 gtest class names:
#   p2p_rma      uct_p2p_rma_test, test_p2p_rma_madvise     p2p_am     uct_p2p_am_test, uct_p2p_am_misc,
#                                                                      uct_p2p_am_tx_bufs, uct_p2p_am_alignment
#   p2p_mix      uct_p2p_mix_test                           iface      test_uct_query (v2 iface attributes),
#   ep           test_uct_ep                                           test_uct_loopback
#   pending      test_uct_pending                           flush      uct_flush_test
#   peer_failure test_uct_peer_failure, _multiple, _keepalive p2p_err  uct_p2p_err_test
#   test_md      test_md (per component)                    many2one_am test_many2one_am
#   event        test_uct_event                             progress   test_uct_progress
#   zcopy_comp   test_zcopy_comp                            (and fence: uct_fence_test)
classes="uct_p2p_rma_test,test_p2p_rma_madvise,uct_p2p_am_test,uct_p2p_am_misc,uct_p2p_am_tx_bufs"
classes+=",uct_p2p_am_alignment,uct_p2p_mix_test,test_uct_query,test_uct_loopback,test_uct_ep,test_uct_pending"
classes+=",uct_flush_test,test_uct_peer_failure,test_uct_peer_failure_multiple,test_uct_peer_failure_keepalive"
classes+=",uct_p2p_err_test,test_md,test_many2one_am,test_uct_event,test_uct_progress,test_zcopy_comp"
classes+=",uct_fence_test"
gdx_all="gdx_shm,gdx_tcp,gdx_copy,gdx_rc,gdx_ipc,gdx_aux"  # gdx_aux: test_md only (not in the TL lists)
ucx_all="posix,tcp,cma,rc_verbs,cuda_copy"

while [ $# -gt 0 ]; do
  case "$1" in
    --module) module="$2"; shift 2 ;;
    --logdir) logdir="$2"; shift 2 ;;
    --test-timeout) test_timeout="$2"; shift 2 ;;
    --tls) tls="$2"; shift 2 ;;
    --classes) classes="$2"; shift 2 ;;
    *) echo "run.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done

start=$(date +%s)
gtest=$("$here/build.sh" --print-dir) || { echo "run.sh: building UCX's gtest failed" >&2; exit 1; }
[ -e "$module" ] || { echo "run.sh: no gdx module at $module (cmake --build build)" >&2; exit 1; }
pick() { # the members of list $1 that are in $tls (all of them without --tls)
  local out="" t
  for t in ${1//,/ }; do
    if [ -z "$tls" ] || [[ ",$tls," == *",$t,"* ]]; then out+="$t,"; fi
  done
  echo "${out%,}"
}

. "$root/tests/uct/lib.sh"
mkdir -p "$logdir"
echo "# UCX $(dpkg-query -W -f='${Version}' libucx0), gtest $gtest, module $module"
echo "# per-test timeout (hang detection only): ${test_timeout} s"
# The gtest's own defaults (test/gtest/Makefile.am), but errors print a backtrace instead of freezing.
export UCX_HANDLE_ERRORS=bt UCX_LOG_LEVEL=warn UCX_LOG_PRINT_ENABLE=y
with_loaded "$module" python3 "$here/gtest_driver.py" --gtest "$gtest" \
  --gdx-tls "$(pick "$gdx_all")" --ucx-tls "$(pick "$ucx_all")" --classes "$classes" \
  --known "$here/known-failures.txt" --logdir "$logdir" --test-timeout "$test_timeout"
rc=$?
echo "wall time: $(( $(date +%s) - start )) s (build included)"
exit $rc
