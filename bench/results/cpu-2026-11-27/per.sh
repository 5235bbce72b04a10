#!/bin/bash
f=$1
for fn in "uct_gdx_iface_progress" "gdx_uct_iface_idle" "gdx_uct_iface_progress" "ShmIface::progress_probed" "ShmEp::progress_probed" "UctEngine::progress()" "fb::Engine::progress()" "ShmIface::progress()" "ShmEp::progress_work()" "gdx_uct_glue_am" "uct_gdx_ep_am_short" "gdx_uct_ep_am_short" "ShmEp::am_short_hdr" "ucp_worker_progress" "ucp_eager_only_handler" "ucp_tag_send_nb" "ucp_tag_recv_nb"; do
  line=$(grep -F -- "$fn" $f | grep -E "\(([0-9,]+)x\)" | head -1)
  [ -z "$line" ] && continue
  ir=$(echo "$line" | awk '{gsub(",","",$1); print $1}'); calls=$(echo "$line" | grep -oE "\(([0-9,]+)x\)" | tr -d '(),x')
  echo "$fn: $ir / $calls = $(( ir / calls ))"
done
