#!/usr/bin/env bash
# Builds CAF 0.17.6 (libcaf_core, libcaf_io, libcaf_openssl) with -fsanitize=thread from
# Debian's own source package and prints the install prefix on stdout (logs go to stderr).
# The ThreadSanitizer build links it through -DBRIGADE_CAF_ROOT=<prefix> (README,
# "Sanitizers"): with CAF instrumented, TSan sees the synchronization inside mailboxes and
# scheduler queues and so can check what two actors do to shared memory.
#
# The result is cached in ${XDG_CACHE_HOME:-~/.cache}/brigade/caf-tsan-<sha256 of the
# source tarball, 16 digits>-<compiler and version>-<hash of the build settings>: a second
# run on the same machine reuses it (no network), a fresh machine builds it once. A build is published by renaming
# a finished prefix, so an interrupted run leaves no half cache; concurrent runs wait on a
# lock. Environment: CXX (default c++, must be the compiler of the TSan build), JOBS
# (default: cores).
set -euo pipefail

# The upstream tarball of Debian 12's actor-framework 0.17.6-2.1 (its .dsc lists this
# checksum). Pinned so that a cache hit needs no network and a changed source is noticed.
orig=actor-framework_0.17.6.orig.tar.gz
orig_sha256=e2bf5bd243f08bb7d8adde197cfe3e6d71314ed3378fe0692f8932f4c3b3928c

log() { printf 'build-caf-tsan: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

cxx=${CXX:-c++}
cxx_id=$(printf '#ifdef __clang__\nclang\n#else\ngcc\n#endif\n' | "$cxx" -E -P -x c++ - | tr -d '[:space:]')
cxx_version=$("$cxx" -dumpfullversion -dumpversion)
cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/brigade

# Debian's build configuration (its caf/detail/build_config.hpp: log level quiet, memory
# management and exceptions on), plus TSan; C++11 as CAF's own default. Examples, tests,
# tools, Python and OpenCL are not built. A prefix built with other settings is rebuilt.
cxx_flags="-std=c++11 -Wall -Wextra -pedantic -fsanitize=thread"
# Line tables only (-g1): every frame of a TSan report still has file:line, and CAF
# compiles ~40% faster than with full debug information (-g, CMake's default).
cmake_args=(
  -DCMAKE_BUILD_TYPE=RelWithDebInfo
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG"
  "-DCMAKE_CXX_FLAGS=$cxx_flags"
  -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread
  -DCMAKE_INSTALL_LIBDIR=lib
  '-DCMAKE_INSTALL_RPATH=$ORIGIN' # libcaf_io and libcaf_openssl find this libcaf_core
  -DCAF_LOG_LEVEL=QUIET
  -DCAF_NO_EXAMPLES=yes -DCAF_NO_UNIT_TESTS=yes -DCAF_NO_TOOLS=yes
  -DCAF_NO_PYTHON=yes -DCAF_NO_OPENCL=yes -DCAF_NO_SUMMARY=yes
)
recipe="$cxx_id $cxx_version | ${cmake_args[*]}"
# One prefix per recipe: checkouts whose scripts differ (branches) keep their own builds
# instead of rebuilding each other's.
recipe_hash=$(printf '%s' "$recipe" | sha256sum | cut -c1-8)
prefix=$cache_root/caf-tsan-${orig_sha256:0:16}-$cxx_id-$cxx_version-$recipe_hash
libs=(libcaf_core.so.0.17.6 libcaf_io.so.0.17.6 libcaf_openssl.so.0.17.6)

cached() {
  [ -f "$prefix/brigade-recipe" ] && [ "$(cat "$prefix/brigade-recipe")" = "$recipe" ] || return 1
  for lib in "${libs[@]}"; do [ -f "$prefix/lib/$lib" ] || return 1; done
}

mkdir -p "$cache_root"
exec 9>"$cache_root/caf-tsan.lock"
flock 9
if cached; then
  log "cached: $prefix"
  echo "$prefix"
  exit 0
fi

work=$(mktemp -d "$cache_root/caf-tsan-build.XXXXXX")
src_list=$(mktemp)
stage=$prefix.tmp.$$
trap 'rm -rf "$work" "$src_list" "$stage"' EXIT
start=$SECONDS

# The deb-src entry lives in a private sources file and list directory for this run only:
# the system's apt configuration and package lists are left as they are. The mirror is the
# one libcaf-core0.17 is installed from.
mirror=$(apt-cache policy libcaf-core0.17 | awk '$1 ~ /^[0-9]+$/ && $2 ~ /^https?:/ {print $2; exit}')
[ -n "$mirror" ] || mirror=http://deb.debian.org/debian
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
echo "deb-src $mirror $codename main" >"$src_list"
mkdir -p "$work/lists/partial" "$work/apt-cache/archives/partial" "$work/src"
apt_opts=(-o "Dir::Etc::SourceList=$src_list" -o Dir::Etc::SourceParts=/dev/null
  -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/apt-cache"
  -o APT::Sandbox::User=root -qq)
log "downloading Debian's actor-framework source from $mirror ($codename)"
apt-get "${apt_opts[@]}" update >&2 || die "apt-get update for deb-src $mirror $codename failed"
# The .orig.tar.gz is what we need; the Debian patch tarball is not fetched on every
# machine (it may answer 404), so apt-get's exit status is not trusted: the tarball is.
(cd "$work/src" && apt-get "${apt_opts[@]}" source --download-only actor-framework >&2) ||
  log "apt-get source reported an error (the Debian patch tarball is not needed)"
[ -f "$work/src/$orig" ] || die "apt-get source did not download $orig"
echo "$orig_sha256  $work/src/$orig" | sha256sum --check --quiet - >&2 ||
  die "$orig does not have the pinned checksum $orig_sha256 (did Debian's source change?)"

tar -xzf "$work/src/$orig" -C "$work/src"
srcdir=$work/src/actor-framework-0.17.6
# Debian's only header change: GCC 12 needs <limits> in receive_buffer.hpp.
header=$srcdir/libcaf_io/caf/io/network/receive_buffer.hpp
sed -i 's|^#include <cstring>$|&\n#include <limits>|' "$header"
grep -q '^#include <limits>$' "$header" || die "could not add <limits> to $header"

log "configuring ($cxx_id $cxx_version, -fsanitize=thread)"
CXX=$cxx cmake -S "$srcdir" -B "$work/build" "${cmake_args[@]}" \
  -DCMAKE_INSTALL_PREFIX="$stage" >"$work/configure.log" 2>&1 ||
  { cat "$work/configure.log" >&2; die "CAF's configure failed"; }
[ -d "$work/build/libcaf_openssl" ] || die "CAF's configure left out libcaf_openssl (is libssl-dev installed?)"
log "building libcaf_core, libcaf_io, libcaf_openssl with -j${JOBS:-$(nproc)}"
cmake --build "$work/build" -j"${JOBS:-$(nproc)}" >"$work/build.log" 2>&1 ||
  { tail -n 60 "$work/build.log" >&2; die "CAF's build failed (log above)"; }
cmake --install "$work/build" >/dev/null
for lib in "${libs[@]}"; do
  [ -f "$stage/lib/$lib" ] || die "the build did not install $lib"
  nm -D "$stage/lib/$lib" | grep -q ' U __tsan_func_entry' || die "$lib is not instrumented"
done
echo "$recipe" >"$stage/brigade-recipe"
rm -rf "$prefix"
mv "$stage" "$prefix"
log "built in $((SECONDS - start)) s: $prefix"
echo "$prefix"
