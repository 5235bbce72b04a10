#!/bin/bash
# per-call inclusive cost of the progress chain from a --tree=calling dump
f=$1
for fn in "uct_gdx_iface_progress" "gdx_uct_iface_progress" "UctEngine::progress()" "fb::Engine::progress()" "ShmIface::progress()" "ShmEp::progress_work()" "Channel::poll(" "ShmEp::on_record(" "gdx_uct_glue_am" "uct_gdx_aux_iface_progress" "Engine::engine_quiet" "uct_gdx_ep_am_short" "ucp_worker_progress" "uct_mm_iface_progress" "uct_mm_ep_am_short" "ucp_eager_only_handler"; do
  line=$(grep -F -- "$fn" $f | grep -E "\(([0-9,]+)x\)" | head -1)
  [ -z "$line" ] && continue
  ir=$(echo "$line" | awk '{gsub(",","",$1); print $1}'); calls=$(echo "$line" | grep -oE "\(([0-9,]+)x\)" | tr -d '(),x')
  echo "$fn: $ir / $calls = $(( ir / calls ))"
done
