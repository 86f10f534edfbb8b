// A busy kernel for bench_gpu: every thread of `blocks` blocks spins for `cycles` SM
// clock cycles, standing in for a training step that keeps the multiprocessors busy.
#include <cuda_runtime.h>

#include "bench/bench_gpu_spin.h"

namespace {

__global__ void spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

}  // namespace

int launch_spin(long long cycles, int blocks, void* stream) {
  spin<<<blocks, 256, 0, static_cast<cudaStream_t>(stream)>>>(cycles);
  return cudaGetLastError();
}
