// CUDA device queries: how many GPUs, what they are, how much memory is free (for the memory plan).
#pragma once
#include <cstddef>
#include <string>

namespace gs {

// Number of usable CUDA devices (0 when there is no driver or no GPU; never throws).
int cuda_device_count();

struct CudaDeviceInfo {
  std::string name;
  int sm_count = 0;
  int cc_major = 0;
  int cc_minor = 0;
  size_t l2_bytes = 0;
  size_t total_memory = 0;
  size_t free_memory = 0;
};

// Throws gs::Error when `device` does not exist.
CudaDeviceInfo cuda_device_info(int device = 0);
// SMs of the device current on this thread (one attribute query: cheap enough for a launch
// path), or `fallback` when the query fails.
int cuda_current_sm_count(int fallback);
// Blocks of `kernel` (a __global__ function's address; blocks of `threads`, `smem` bytes of dynamic
// shared memory, which its attributes must already allow) the current device holds at once: its
// SMs times the blocks an SM takes; 0 when the query fails.
int cuda_kernel_wave(const void* kernel, int threads, size_t smem);
// Free / total device memory in bytes right now (cudaMemGetInfo on `device`).
size_t cuda_free_memory(int device = 0);
size_t cuda_total_memory(int device = 0);

}  // namespace gs
