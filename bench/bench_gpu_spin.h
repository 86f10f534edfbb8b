#pragma once
// See bench_gpu_spin.cu. Returns the launch's cudaError_t.
int launch_spin(long long cycles, int blocks, void* stream);
