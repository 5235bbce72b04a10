#!/usr/bin/env bash
# Installs every Debian 12 package that gdx's build, tests and tools need. Idempotent: when everything is
# already installed it only runs dpkg-query and exits (no apt-get update).
#   scripts/setup.sh            build + unit tests + tools
#   scripts/setup.sh --rxe      also what the soft-RoCE (qemu guest) test set needs
#   scripts/setup.sh --ucx-src  also Debian's UCX source package (internal headers for libuct_gdx) and what builds
#                               it (UCX's own gtest, tests/uct/gtest/; the carry to the GPU machine)
set -euo pipefail

want_rxe=0 want_ucx_src=0
for a in "$@"; do
  case "$a" in
    --rxe) want_rxe=1 ;;
    --ucx-src) want_ucx_src=1 ;;
    --all) want_rxe=1; want_ucx_src=1 ;;
    *) echo "setup.sh: unknown option '$a' (accepted: --rxe --ucx-src --all)" >&2; exit 2 ;;
  esac
done

pkgs=(
  build-essential cmake pkg-config ninja-build git
  libibverbs-dev rdma-core ibverbs-providers ibverbs-utils
  libhwloc-dev hwloc
  libboost-dev
  libgtest-dev libgmock-dev googletest
  libucx-dev libucx0 ucx-utils
  openmpi-bin libopenmpi-dev
  clang libclang-rt-14-dev clang-format clang-tidy
  iproute2 iperf3 python3 python3-matplotlib
)
if [ "$want_rxe" = 1 ]; then
  pkgs+=(qemu-system-x86 perftest cpio busybox-static kmod xz-utils zstd rdmacm-utils)
fi
if [ "$want_ucx_src" = 1 ]; then
  pkgs+=(dpkg-dev autoconf automake libtool librdmacm-dev)
fi

missing=()
for p in "${pkgs[@]}"; do
  st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [ "$st" = installed ] || missing+=("$p")
done

if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "setup.sh: all ${#pkgs[@]} packages present"
fi

if [ "$want_ucx_src" = 1 ] && [ -x "$(dirname "$0")/fetch-ucx-src.sh" ]; then
  "$(dirname "$0")/fetch-ucx-src.sh"
fi
