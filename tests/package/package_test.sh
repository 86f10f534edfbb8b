#!/usr/bin/env bash
# The installed C++ package (cmake/BrigadeInstall.cmake), end to end:
#   1. `cmake --install` the build into a fresh prefix;
#   2. no third-party header (FFmpeg, CAF, Cap'n Proto, spdlog, CUDA) is installed, and
#      every installed header compiles alone with only the prefix's include folder;
#   3. the consumer project (tests/package/consumer) configures with find_package(Brigade)
#      from the prefix, builds (without linking FFmpeg) and runs, loading media's FFmpeg
#      plugin from the prefix;
#   4. the same program builds with `pkg-config --cflags --libs brigade` and runs.
# Usage: package_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null

third_party=$(find "$prefix/include" -path '*caf*' -o -path '*capnp*' -o -path '*kj/*' \
  -o -name 'libav*' -o -path '*spdlog*' -o -name 'cuda*' -o -name 'nccl*' | head -5)
if [ -n "$third_party" ]; then
  echo "package_test: third-party headers installed: $third_party" >&2
  exit 1
fi
headers=$(cd "$prefix/include/brigade" && find . -name '*.h' | sort)
# check_header H: compiles alone with only the prefix's include folder (a header missing
# from the package fails here); -H lists what it pulls in, and none of it may be a
# dependency's. One compiler per core: the headers are independent.
check_header() {
  local h=$1 one
  one=$(mktemp "$work/one.XXXXXX.cc")
  echo "#include \"${h#./}\"" >"$one"
  if ! g++ -std=c++20 -fsyntax-only -H -I"$prefix/include/brigade" "$one" 2>"$one.includes"; then
    echo "package_test: $h does not compile alone against the package:" >&2
    grep -v '^\.' "$one.includes" | head -5 >&2
    return 1
  fi
  local foreign
  foreign=$(grep -E '^\.+ ' "$one.includes" |
    grep -E '/(caf|capnp|kj|libav[a-z]*|libsw[a-z]*|spdlog|fmt|openssl|toml\+\+)/|cuda|nccl|turbojpeg' || true)
  if [ -n "$foreign" ]; then
    echo "package_test: $h includes a dependency's headers:" >&2
    echo "$foreign" | head -5 >&2
    return 1
  fi
}
export -f check_header
export work prefix
echo "$headers" | xargs -P "$(nproc)" -n 1 bash -c 'check_header "$0"' || exit 1
echo "package_test: $(echo "$headers" | wc -l) headers, each self-contained"

cmake -S "$src/tests/package/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/consumer" >/dev/null
# FFmpeg is the plugin's (lib/libbrigade_media_ffmpeg.so, dlopen'ed), never the program's.
if [ ! -f "$prefix/lib/libbrigade_media_ffmpeg.so" ]; then
  echo "package_test: media's FFmpeg plugin is not installed" >&2
  exit 1
fi
if readelf -d "$work/consumer/consumer" | grep -E 'NEEDED.*lib(av|sw)'; then
  echo "package_test: the consumer links FFmpeg (it should only load the plugin)" >&2
  exit 1
fi
[ "$("$work/consumer/consumer")" = ok ]
echo "package_test: find_package(Brigade) consumer: ok"

flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs brigade)
g++ -O1 "$src/tests/package/consumer/main.cc" -o "$work/consumer-pc" $flags
[ "$("$work/consumer-pc")" = ok ]
echo "package_test: pkg-config consumer: ok"
