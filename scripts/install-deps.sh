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
  libcurl4-openssl-dev  # transport/storage/: HTTP(S) to object stores
  python3-boto3  # storage_tests: fills the S3 server's bucket
  # The statistics' outputs (tests/launch/stats_test.cc): a real Prometheus server scrapes
  # the metrics endpoint, headless Chromium opens `brigade stats`'s page.
  prometheus chromium
  # The Python front end (python/) and its tests: Debian's Python 3.11, torch 1.13.
  python3-dev pybind11-dev python3-numpy python3-pytest python3-torch python3-setuptools
  python3-pil python3-torchvision  # labels' tests: ImageFolder's listing, images in its formats
  python3-pip
)
# npm for storage_tests' s3rver (below): Debian's, unless an npm is there already (a
# NodeSource nodejs carries its own and conflicts with Debian's npm package).
command -v npm >/dev/null || pkgs+=(npm)
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

# storage_tests' S3 server: s3rver from npm (Debian 12 packages no S3 server that runs
# alone: radosgw needs a Ceph cluster; no moto, no minio), pinned, into a fixed prefix under
# Brigade's cache, only when missing. The tests find it there (or at $BRIGADE_S3RVER) and
# download nothing; without it they skip saying so. Buckets are filled with Debian's boto3.
s3rver_prefix="${XDG_CACHE_HOME:-$HOME/.cache}/brigade/npm"
if [ ! -x "$s3rver_prefix/node_modules/.bin/s3rver" ] ||
  ! grep -q '"version": "3.7.1"' "$s3rver_prefix/node_modules/s3rver/package.json" 2>/dev/null; then
  echo "install-deps: installing s3rver@3.7.1 under $s3rver_prefix (storage_tests)" >&2
  mkdir -p "$s3rver_prefix"
  # The npm registry is the one download here that is not Debian's: where it cannot be
  # reached (no network, or a TLS proxy whose CA this root does not trust), everything
  # else still installs and the S3 tests skip, saying why.
  if ! npm install --prefix "$s3rver_prefix" --no-audit --no-fund s3rver@3.7.1 >/dev/null; then
    echo "install-deps: WARNING: s3rver could not be installed from npm: storage_tests' S3 server tests will skip" >&2
  fi
fi
