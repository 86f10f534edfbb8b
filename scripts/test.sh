#!/usr/bin/env bash
# README command 2: installs what is missing, builds everything with -Werror and runs
# every test, then the sanitizer builds (ThreadSanitizer over the engine's concurrency
# code, AddressSanitizer + UBSan over media/). `.ci/run` runs exactly this.
# Environment: JOBS (default: cores), BRIGADE_SKIP_SANITIZERS=1 to skip the sanitizer
# builds while iterating locally (CI never sets it).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
bash scripts/install-deps.sh
jobs=${JOBS:-$(nproc)}
# One compiler cache per user, shared by every checkout of the project on the machine
# (paths inside the checkout are hashed relative to it), like CAF's TSan build.
export CCACHE_DIR=${CCACHE_DIR:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/brigade/ccache}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}

log() { printf '\n== %s\n' "$*" >&2; }
log "Dependencies: $((SECONDS - start)) s"

# Unity builds (CMake batches ~8 sources of a target into one translation unit): each
# batch parses CAF, gtest and the standard library once instead of once per file, which
# cuts the compile time of every tree by more than half. Sources must therefore not
# define the same internal name twice within one target (a compile error says where).
unity=(-DCMAKE_UNITY_BUILD=ON)

log "Formatting (clang-format, .clang-format)"
bash scripts/check-format.sh

if [ "${BRIGADE_SKIP_SANITIZERS:-0}" != 1 ]; then
  # Line tables only (-g1): what a sanitizer report needs (file:line in every frame), at
  # a fraction of full debug information's compile and link time.
  sanitizer_flags=("-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG")
  # ThreadSanitizer over CAF as well (README, "Sanitizers"): CAF built instrumented once
  # per machine (cached), then every test labelled `tsan` (actors, transport, the race
  # canary; new ones join through their label) except those listed in tests/*/tsan-tests.txt.
  log "ThreadSanitizer build (CAF instrumented): every test labelled tsan"
  tsan_start=$SECONDS
  caf_root=$(bash scripts/build-caf-tsan.sh)
  cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo "${sanitizer_flags[@]}" "${unity[@]}" -DBRIGADE_SANITIZE=thread \
    -DBRIGADE_CAF_ROOT="$caf_root" -DBRIGADE_BUILD_BENCH=OFF >/dev/null
  cmake --build build-tsan -j"$jobs" --target tsan_tests
  tsan_skip=$(sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d' -e 's/[][\\.^$|?+(){}]/\\&/g' \
    -e 's/\*/.*/g' tests/*/tsan-tests.txt | paste -sd'|')
  tsan_supp=$PWD/tests/tsan.supp
  (cd build-tsan &&
    TSAN_OPTIONS="suppressions=$tsan_supp second_deadlock_stack=1 report_signal_unsafe=0" \
      ctest -L tsan ${tsan_skip:+-E "^($tsan_skip)\$"} -j"$jobs" --timeout 300 --output-on-failure)
  log "ThreadSanitizer: $((SECONDS - tsan_start)) s (CAF, build, tests)"

  log "AddressSanitizer + UBSan build (media, the remote protocol's, the decode operation's and the statistics report's decoders, the manifest parsers, the tar index): random mutations"
  asan_start=$SECONDS
  # -O1: what AddressSanitizer's documentation suggests for reasonable speed; the tests here
  # are decoders under mutation, which -O1 runs in seconds, and it compiles faster than -O2.
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" "${unity[@]}" -DBRIGADE_SANITIZE=address \
    -DBRIGADE_MODULES="actors;media;transport;launch" -DBRIGADE_BUILD_BENCH=OFF >/dev/null
  cmake --build build-asan -j"$jobs" --target media_tests checkpoint_tests wire_tests remote_wire_tests \
    decode_op_tests manifest_tests stats_report_tests shards_mutation_tests
  for t in media/media_tests transport/checkpoint/checkpoint_tests transport/wire/wire_tests \
    transport/remote/remote_wire_tests launch/loader/decode_op_tests \
    launch/loader/manifest_tests launch/loader/stats_report_tests launch/loader/shards_mutation_tests; do
    # shellcheck disable=SC2086  # the entry is the binary and its flags
    ASAN_OPTIONS="detect_leaks=1 abort_on_error=0" UBSAN_OPTIONS="print_stacktrace=1" \
      build-asan/tests/$t --gtest_brief=1
  done
  log "AddressSanitizer + UBSan: $((SECONDS - asan_start)) s (build, tests)"

fi

log "Release build (-O3, -Werror) and every test"
release_start=$SECONDS
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DBRIGADE_WERROR=ON "${unity[@]}" \
  -DBRIGADE_MODULES="actors;media;transport;launch" >/dev/null
cmake --build build -j"$jobs"
log "Release build: $((SECONDS - release_start)) s"
cd build
ctest --output-on-failure -j"$jobs" --timeout 600
log "Release tests: $((SECONDS - release_start)) s with the build; everything: $((SECONDS - start)) s"
