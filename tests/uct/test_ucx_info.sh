#!/usr/bin/env bash
# ucx_info sees libuct_gdx: `ucx_info -d` lists every expected gdx transport (with a device) and gdx_aux,
# `ucx_info -c` lists the GDX_* settings as UCX_GDX_* plus per-transport UCX_GDX_<TL>_*, and an invalid
# UCX_GDX_* value is refused with a message naming the variable.
#   test_ucx_info.sh MODULE TL...
. "$(dirname "$0")/lib.sh"
module="$1"; shift
[ -f "$module" ] || fail "module $module missing"

out=$(ucx_info_with "$module" -d 2>&1) || fail "ucx_info -d failed: $out"
for tl in "$@" gdx_aux; do
  grep -q "Memory domain: $tl\$" <<<"$out" || fail "ucx_info -d lists no memory domain $tl"
  grep -q "Transport: $tl\$" <<<"$out" || fail "ucx_info -d lists no transport $tl"
  note "listed: $tl"
done
for tl in "$@"; do
  # connect-to-ep with a padded endpoint address, never to-iface
  block=$(awk -v tl="$tl" '$0 ~ "Transport: "tl"$" {f=1} f && /error handling/ {print; exit} f' <<<"$out")
  grep -q "connection: to ep" <<<"$block" || fail "$tl does not connect to ep: $block"
  grep -q "ep address: 120 bytes" <<<"$block" || fail "$tl ep address is not 120 bytes: $block"
done

cfg=$(ucx_info_with "$module" -c 2>&1) || fail "ucx_info -c failed: $cfg"
for v in UCX_GDX_LOG_LEVEL UCX_GDX_TLS UCX_GDX_CUDA UCX_GDX_TCP_ADDR UCX_GDX_FRAG_SIZE; do
  grep -q "^$v=" <<<"$cfg" || fail "ucx_info -c does not list $v"
done
n=$(grep -c "^UCX_GDX_LOG_LEVEL=" <<<"$cfg")
[ "$n" = 1 ] || fail "UCX_GDX_LOG_LEVEL listed $n times (expected once)"
for tl in "$@"; do
  up=$(tr '[:lower:]' '[:upper:]' <<<"$tl")
  grep -q "^UCX_${up}_MAX_NUM_EPS=" <<<"$cfg" || fail "ucx_info -c does not list UCX_${up}_MAX_NUM_EPS"
done
# The effective default shows GDX_* from the environment.
cfg=$(GDX_LOG_LEVEL=info ucx_info_with "$module" -c 2>/dev/null)
grep -q "^UCX_GDX_LOG_LEVEL=info$" <<<"$cfg" ||
  fail "UCX_GDX_LOG_LEVEL does not show GDX_LOG_LEVEL=info from the environment"

# A bad value: the MD refuses to open and says which variable, which value, what is accepted.
bad=$(UCX_GDX_LOG_LEVEL=loud ucx_info_with "$module" -d 2>&1)
grep -q "GDX_LOG_LEVEL=loud is invalid" <<<"$bad" || fail "UCX_GDX_LOG_LEVEL=loud not reported: $bad"
grep -q "Transport: $1\$" <<<"$bad" && fail "$1 still listed with an invalid UCX_GDX_LOG_LEVEL"
# An out-of-range value is refused at md_open too, with the accepted range (issue 16: it used to open and fail
# at the first endpoint).
bad=$(UCX_GDX_SHM_RING_SIZE=3K ucx_info_with "$module" -d 2>&1)
grep -q "GDX_SHM_RING_SIZE=3K is out of range; accepted: a power of two in 64K..1G" <<<"$bad" ||
  fail "UCX_GDX_SHM_RING_SIZE=3K not reported with its range: $bad"
grep -q "Transport: $1\$" <<<"$bad" && fail "$1 still listed with UCX_GDX_SHM_RING_SIZE=3K"
# Protocol v1 (UCX before 1.16) chooses host eager zero-copy from the md's registration cost; gdx_shm's am_zcopy
# copies as am_bcopy does, so host messages must go by am_bcopy up to the rendezvous (uct_gdx_md.c). v1 prints
# its thresholds as "tag_send: 0..<egr/short>..N..<egr/bcopy>..": v2 prints none (and selects by estimate).
if [[ " $* " == *" gdx_shm "* ]]; then
  ep=$(UCX_TLS=gdx_shm,gdx_aux:aux ucx_info_with "$module" -e -u t -P intra 2>&1)
  line=$(grep -E '^#[[:space:]]+tag_send:' <<<"$ep")
  if [ -n "$line" ]; then
    grep -q "egr/bcopy" <<<"$line" || fail "v1 sends no host message over gdx_shm by eager bcopy: $line"
    grep -q "egr/zcopy" <<<"$line" && fail "v1 sends host messages over gdx_shm by eager zero-copy: $line"
    note "protocol v1 over gdx_shm:${line#*tag_send:}"
  else
    note "protocol v2: no v1 thresholds to check"
  fi
fi
echo "PASS"
