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
  libfuse3-dev fuse3
  openssl iproute2  # the TLS test makes certificates; the netns test makes hosts
  libcurl4-openssl-dev  # transport/storage/: HTTP(S) to object stores
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

# storage_tests' S3 server: moto's server with IAM authentication on (it verifies SigV4
# signatures), populated with boto3. Debian 12 packages boto3 (1.26) but not moto, so both
# come from PyPI for the python3 the tests run (or $BRIGADE_TEST_PYTHON).
test_python="${BRIGADE_TEST_PYTHON:-python3}"
if ! "$test_python" -c 'import moto.server, boto3' 2>/dev/null; then
  echo "install-deps: installing moto[server] and boto3 for $test_python (storage_tests)" >&2
  PIP_BREAK_SYSTEM_PACKAGES=1 "$test_python" -m pip install -q 'moto[server]>=5.1,<6' boto3
fi
