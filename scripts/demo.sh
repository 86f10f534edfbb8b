#!/usr/bin/env bash
# README command 1: installs what is missing, builds, and runs the main job — the image
# pipeline over the demo dataset (generated once under ~/.cache/brigade/demo), with its
# labels (10 class folders) and the samples delivered per class.
# Extra arguments go to `brigade run` (see `build/launch/brigade run --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
# One compiler cache per user, shared by every checkout of the project on the machine
# (paths inside the checkout are hashed relative to it), like CAF's TSan build.
export CCACHE_DIR=${CCACHE_DIR:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/brigade/ccache}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DBRIGADE_MODULES="actors;media;transport;launch" >/dev/null
cmake --build build -j"${JOBS:-$(nproc)}" --target brigade
# The demo images are 10 class folders: labelled (ImageFolder's way) unless the
# arguments name other data.
labels=(--labels folder)
for arg in "$@"; do
  case "$arg" in --data* | --list* | --labels* | *.toml) labels=() ;; esac
done
exec build/launch/brigade run "${labels[@]}" "$@"
