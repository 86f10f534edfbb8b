#!/usr/bin/env bash
# gpu_check.sh: the GPU path of transport/ on a real GPU. Runs the GPU tests
# (device_gpu_tests: CUDA device, copy stage, pinned-buffer and device-memory
# lifetimes, the normalize kernel against the CPU reference bit for bit, NCCL), then
# bench_gpu, which prints JSON lines:
#   h2d        copy stage vs pipelined cudaMemcpyAsync, the real ceiling (target ≥ 0.9×;
#              the synchronous cudaMemcpy per batch is reported too)
#   overlap    share of the copy time hidden behind a busy training stream (target ≥ 80%)
#   normalize  the kernel's images/s vs the copy's; copy+normalize vs a float32 copy
#   nccl       broadcast bandwidth among the GPUs present; with one GPU, whether NCCL
#              takes two ranks on one GPU in one process
#   blocking   how long cudaFree/cudaFreeHost/cudaMalloc/cudaHostAlloc (and the
#              stream-ordered cudaMallocAsync/cudaFreeAsync) block while a kernel runs
#   events     event create+record+destroy per batch vs a pooled event's record, query
# First, alone in its process, the per-thread context probe (CudaContext.*, 2+ GPUs):
# a rank on cuda:1 must not create a context on GPU 0 from its fresh threads.
# One summary at the end. About two minutes on one H200 after the build (a build from a
# bare checkout: a few minutes on 16 cores); every step stops at 4 minutes.
# What to install first is printed as one line to paste, when something is missing.
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

# What a build needs (the GPU binaries: no CAF, no FFmpeg), as one line to paste.
check_build_tools() {
  local missing=() nvcc
  command -v cmake >/dev/null || missing+=(cmake)
  command -v g++ >/dev/null || missing+=(build-essential)
  command -v pkg-config >/dev/null || missing+=(pkg-config)
  command -v capnp >/dev/null || missing+=(capnproto)
  [ -e /usr/include/capnp/message.h ] || missing+=(libcapnp-dev)
  [ -e /usr/include/gtest/gtest.h ] || missing+=(libgtest-dev)
  nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
  if [ ${#missing[@]} -gt 0 ] || [ -z "$nvcc" ]; then
    echo "gpu_check.sh: missing what the build needs. Install first (Debian 12 / Ubuntu), then rerun:" >&2
    [ ${#missing[@]} -gt 0 ] && echo "  apt-get update && apt-get install -y --no-install-recommends ${missing[*]}" >&2
    [ -z "$nvcc" ] && echo "  the CUDA toolkit (nvcc; e.g. apt-get install -y cuda-toolkit from NVIDIA's repository), then: export PATH=/usr/local/cuda/bin:\$PATH" >&2
    echo "  (or build elsewhere with --package DIR and run DIR/gpu_check.sh --prebuilt DIR here)" >&2
    exit 1
  fi
  case ":$PATH:" in *":$(dirname "$nvcc"):"*) ;; *) export PATH=$(dirname "$nvcc"):$PATH ;; esac
}

build() {
  local src=$here/..
  build_dir=${build_dir:-$src/build-gpu}
  check_build_tools
  local arch=${CUDA_ARCHITECTURES:-${CUDAARCHS:-}}
  log "Building device_gpu_tests and bench_gpu in $build_dir (CUDA architectures ${arch:-project default})"
  if ! cmake -S "$src" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DBRIGADE_CUDA=ON \
    ${arch:+-DCMAKE_CUDA_ARCHITECTURES="$arch"} >"$build_dir.configure.log" 2>&1; then
    tail -20 "$build_dir.configure.log" >&2
    echo "gpu_check.sh: configure failed. Install first, then rerun: sudo bash $src/scripts/install-deps.sh" >&2
    exit 1
  fi
  cmake --build "$build_dir" -j"${JOBS:-$(nproc)}" --target device_gpu_tests bench_gpu
  tests=$build_dir/tests/transport/device/device_gpu_tests
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

# FAILED, PASSED (some test ran) or SKIPPED (with gtest's reason) from a gtest log.
verdict() {
  if grep -q '^\[  FAILED  \]' "$1"; then echo FAILED
  elif grep -q '^\[       OK \]' "$1"; then echo PASSED
  elif grep -q '^\[  SKIPPED \] [A-Z]' "$1"; then echo "SKIPPED: $(grep -m1 -B1 '^\[  SKIPPED \] [A-Z]' "$1" | head -1)"
  else echo "DID NOT FINISH"; fi
}

run() {
  log "Machine"
  { nvidia-smi -L 2>/dev/null || echo "nvidia-smi: not available"; } >&2
  ldd --version 2>/dev/null | head -1 >&2 || true
  find_nccl
  # The NCCL that torch brings (loaded first, it is the one a dlopen of libnccl.so.2 in
  # the same process returns): compare with bench_gpu's "device" line.
  # With torch imported first, what does a dlopen of libnccl.so.2 (Brigade's, without
  # BRIGADE_NCCL_LIBRARY) return in the same process? Both versions, side by side.
  python3 - >&2 2>/dev/null <<'EOF' || echo "NCCL in torch: (no torch with CUDA here)" >&2
import ctypes, torch
print("NCCL in torch:", torch.cuda.nccl.version())
try:
    lib = ctypes.CDLL("libnccl.so.2", mode=ctypes.RTLD_LOCAL)
    v = ctypes.c_int()
    lib.ncclGetVersion(ctypes.byref(v))
    print("NCCL a dlopen of libnccl.so.2 returns after import torch:", v.value)
except OSError as e:
    print("NCCL a dlopen of libnccl.so.2 returns after import torch: none (%s)" % e)
EOF
  local status=0 json logs
  json=$(mktemp)
  logs=$(mktemp -d)
  log "Per-thread context probe (alone in its process; needs 2+ GPUs)"
  timeout 240 "$tests" --gtest_color=no --gtest_filter='CudaContext.*' >"$logs/context" 2>&1 || status=1
  cat "$logs/context" >&2
  log "GPU tests ($tests)"
  timeout 240 "$tests" --gtest_color=no --gtest_filter='-CudaContext.*' >"$logs/tests" 2>&1 || status=1
  cat "$logs/tests" >&2
  log "bench_gpu ($bench)"
  timeout 240 "$bench" | tee "$json" || status=1
  [ -n "$out" ] && cp "$json" "$out"
  log "Summary"
  {
    echo "gpu tests  $(verdict "$logs/tests") ($(grep -c '^\[       OK \]' "$logs/tests" || true) ok, $(grep -c '^\[  SKIPPED \] [A-Z]' "$logs/tests" || true) skipped)"
    echo "context    $(verdict "$logs/context")"
  } >&2
  python3 - "$json" >&2 <<'EOF' || true
import json, sys
for line in open(sys.argv[1]):
    line = line.strip()
    if not line.startswith("{"):
        continue
    r = json.loads(line)
    b = r["bench"]
    if "error" in r and "pass" not in r and "supported" not in r:
        print(f"{b:<10} ERROR {r['error']}")
    elif "pass" in r:
        extra = ""
        if b == "h2d":
            extra = (f"; {r['bytes']} B: sync cudaMemcpy {r['sync_cudamemcpy_gbps']:.1f} GB/s, "
                     f"pipelined {r['pipelined_cudamemcpyasync_gbps']:.1f}, "
                     f"copy stage {r['copy_stage_gbps']:.1f}")
        print(f"{b:<10} {'meets' if r['pass'] else 'MISSES'} its target "
              f"({r.get('ratio', r.get('hidden'))} vs {r['target']}){extra}")
    elif b == "blocking":
        waits = [k[:-6] for k, v in r.items() if k.endswith("_waits") and v]
        calls = ", ".join(f"{k[:-3]} {v:.2f} ms" for k, v in r.items()
                          if k.endswith("_ms") and k != "kernel_ms")
        print(f"{b:<10} wait for a running kernel: {', '.join(waits) or 'none'} ({calls})")
    elif b == "staging":
        print(f"{b:<10} pinned staging ring {r['staged_gbps']:.1f} GB/s vs direct "
              f"{r['direct_gbps']:.1f} GB/s (ratio {r['ratio']:.2f})")
    elif b == "events":
        print(f"{b:<10} create+record+destroy {r['create_record_destroy_us']:.2f} us, "
              f"pooled record {r['record_pooled_us']:.2f} us, query {r['query_us']:.2f} us")
    elif b == "device":
        print(f"{b:<10} " + ", ".join(f"{k} {v}" for k, v in r.items() if k != "bench"))
EOF
  rm -rf "$json" "$logs"
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
    objcopy --strip-debug "$tests" "$dir/device_gpu_tests"
    objcopy --strip-debug "$bench" "$dir/bench_gpu"
    cp "$here/gpu_check.sh" "$dir/gpu_check.sh"
    log "Packaged into $dir: $(du -sh "$dir" | cut -f1) to copy to the GPU machine"
    ls -l "$dir" >&2
    ;;
  prebuilt)
    tests=$dir/device_gpu_tests
    bench=$dir/bench_gpu
    [ -x "$tests" ] && [ -x "$bench" ] || { echo "gpu_check.sh: no binaries in $dir (make them with --package)" >&2; exit 2; }
    run
    ;;
esac
