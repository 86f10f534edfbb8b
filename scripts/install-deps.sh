#!/usr/bin/env bash
# Installs the Debian 12 packages Brigade needs to build, test and benchmark.
# Idempotent: installs only what is missing. Needs root (or sudo).
set -euo pipefail
pkgs=(
  build-essential cmake pkg-config ccache git clang-format
  libcaf-dev libssl-dev  # libssl-dev: CAF's openssl module in scripts/build-caf-tsan.sh
  libcapnp-dev capnproto
  libspdlog-dev libfmt-dev
  libavformat-dev libavcodec-dev libavfilter-dev libswscale-dev libswresample-dev libavutil-dev
  libturbojpeg0-dev libjpeg62-turbo-dev zlib1g-dev ffmpeg
  libgtest-dev libgmock-dev libbenchmark-dev
  libtomlplusplus-dev libcli11-dev nlohmann-json3-dev
  libcsv-dev libsimdjson-dev  # manifests: CSV/TSV and JSON Lines
  libarchive-dev  # tar shards' headers (launch/loader/shards.h)
  libfuse3-dev fuse3
  openssl iproute2  # the TLS test makes certificates; the netns test makes hosts
  # The statistics' outputs (tests/launch/stats_test.cc): a real Prometheus server scrapes
  # the metrics endpoint, headless Chromium opens `brigade stats`'s page.
  prometheus chromium
  # The Python front end (python/) and its tests: Debian's Python 3.11, torch 1.13.
  python3-dev pybind11-dev python3-numpy python3-pytest python3-torch python3-setuptools
  python3-pip
)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  echo "install-deps: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
