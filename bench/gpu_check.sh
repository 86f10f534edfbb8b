#!/usr/bin/env bash
# gpu_check.sh: the GPU path of transport/ on a real GPU. Runs the GPU tests
# (transport_gpu_tests: CUDA device, copy stage, pinned-buffer and device-memory
# lifetimes, the normalize kernel against the CPU reference bit for bit, NCCL), then
# bench_gpu, which prints JSON lines:
#   h2d        copy stage vs a plain pinned cudaMemcpy of the same bytes (target ≥ 0.9×)
#   overlap    share of the copy time hidden behind a busy training stream (target ≥ 80%)
#   normalize  the kernel's images/s vs the copy's; copy+normalize vs a float32 copy
#   nccl       broadcast bandwidth among the GPUs present; with one GPU, whether NCCL
#              takes two ranks on one GPU in one process
# About a minute on one H200 (the tests and the bench each stop at 4 minutes).
#
# Three modes:
#   bench/gpu_check.sh [--build-dir DIR]     build here (the README's packages plus the
#                                            CUDA toolkit), then run. Default DIR: build-gpu
#   bench/gpu_check.sh --package DIR         build here, then put the two binaries (debug
#                                            info stripped) and this script into DIR
#   DIR/gpu_check.sh --prebuilt DIR          run the binaries in DIR: for a GPU machine that
#                                            has the driver but none of the build's packages
# The binaries need only glibc ≥ 2.36 and the NVIDIA driver (the CUDA runtime, Cap'n
# Proto and libstdc++ are linked in). NCCL is loaded at run time: this script looks for
# libnccl.so.2 on the loader's path, under the CUDA toolkit, and in Python's nvidia-nccl
# package (PyTorch's), and puts its folder on LD_LIBRARY_PATH; BRIGADE_NCCL_LIBRARY names
# the file directly. Without NCCL the NCCL tests skip and the nccl lines carry the error.
#
# Options: --out FILE also writes the JSON lines to FILE. Exit status: 0 when every test
# passed or skipped and every bench section ran (targets missed are reported in the JSON
# lines and the summary, not in the status), 1 otherwise, 2 on bad usage.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
mode=build
build_dir=
dir=
out=
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir=$2; shift 2 ;;
    --package) mode=package; dir=$2; shift 2 ;;
    --prebuilt) mode=prebuilt; dir=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_check.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
log() { printf '\n== %s\n' "$*" >&2; }

build() {
  local src=$here/..
  build_dir=${build_dir:-$src/build-gpu}
  log "Building transport_gpu_tests and bench_gpu in $build_dir (CUDA architectures ${CUDA_ARCHITECTURES:-80;90})"
  cmake -S "$src" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DBRIGADE_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHITECTURES:-80;90}" >/dev/null
  cmake --build "$build_dir" -j"${JOBS:-$(nproc)}" --target transport_gpu_tests bench_gpu
  tests=$build_dir/tests/transport/transport_gpu_tests
  bench=$build_dir/bench/bench_gpu
  if [ ! -x "$tests" ] || [ ! -x "$bench" ]; then
    echo "gpu_check.sh: the GPU binaries were not built: CMake did not find the CUDA toolkit" >&2
    exit 1
  fi
}

find_nccl() {
  if [ -n "${BRIGADE_NCCL_LIBRARY:-}" ]; then echo "NCCL: $BRIGADE_NCCL_LIBRARY (BRIGADE_NCCL_LIBRARY)" >&2; return; fi
  if ldconfig -p 2>/dev/null | grep -q 'libnccl\.so\.2 '; then echo "NCCL: on the loader's path" >&2; return; fi
  local d path=${LD_LIBRARY_PATH:-}
  for d in ${path//:/ } /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/lib/x86_64-linux-gnu \
      $(python3 -c 'import nvidia.nccl as m; print(*[p + "/lib" for p in m.__path__])' 2>/dev/null); do
    if [ -e "$d/libnccl.so.2" ]; then
      export LD_LIBRARY_PATH=$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
      echo "NCCL: $d/libnccl.so.2" >&2
      return
    fi
  done
  echo "NCCL: libnccl.so.2 not found (NCCL tests will skip)" >&2
}

run() {
  log "Machine"
  { nvidia-smi -L 2>/dev/null || echo "nvidia-smi: not available"; } >&2
  ldd --version 2>/dev/null | head -1 >&2 || true
  find_nccl
  local status=0 json
  json=$(mktemp)
  log "GPU tests ($tests)"
  timeout 240 "$tests" --gtest_color=no >&2 || status=1
  log "bench_gpu ($bench)"
  timeout 240 "$bench" | tee "$json" || status=1
  [ -n "$out" ] && cp "$json" "$out"
  log "Summary"
  python3 - "$json" >&2 <<'EOF' || true
import json, sys
for line in open(sys.argv[1]):
    line = line.strip()
    if not line.startswith("{"):
        continue
    r = json.loads(line)
    if "pass" in r:
        print(f"{r['bench']:<10} {'meets' if r['pass'] else 'MISSES'} its target "
              f"({r.get('ratio', r.get('hidden'))} vs {r['target']})")
    elif "error" in r:
        print(f"{r['bench']:<10} ERROR {r['error']}")
EOF
  rm -f "$json"
  return $status
}

case $mode in
  build)
    build
    run
    ;;
  package)
    build
    mkdir -p "$dir"
    objcopy --strip-debug "$tests" "$dir/transport_gpu_tests"
    objcopy --strip-debug "$bench" "$dir/bench_gpu"
    cp "$here/gpu_check.sh" "$dir/gpu_check.sh"
    log "Packaged into $dir: $(du -sh "$dir" | cut -f1) to copy to the GPU machine"
    ls -l "$dir" >&2
    ;;
  prebuilt)
    tests=$dir/transport_gpu_tests
    bench=$dir/bench_gpu
    [ -x "$tests" ] && [ -x "$bench" ] || { echo "gpu_check.sh: no binaries in $dir (make them with --package)" >&2; exit 2; }
    run
    ;;
esac
